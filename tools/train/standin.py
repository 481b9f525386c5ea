"""DRY-RUN STAND-INS ONLY: pure-torch Qwen3 / Qwen3.5-text models and a bytes-only tokenizer, used
by `train_all.py --dry-run` where transformers / tokenizers are missing (the development
machine). They exist so the pipeline (corpus, MTP head, training loop, export, fixture dumping)
can be exercised without the GPU machine. NEVER used for committed output: train_all.py refuses
to run them without --dry-run, and everything a dry run writes is marked "dry_run": true.

The models keep transformers' parameter names and math (Gated DeltaNet in its recurrent form,
which is slow but exact), and mimic the small part of its API the pipeline calls:
model.model(input_ids=..., use_cache=False).last_hidden_state, model.lm_head,
model.model.embed_tokens. The tokenizer maps bytes through the ByteLevel alphabet with no merges
(vocab = 256 bytes + the added tokens), written as a tokenizer.json syv can load.
"""
import json
import os
import unicodedata

import torch
import torch.nn.functional as F
from torch import nn

import mtp as blocks


class _Output:
    def __init__(self, h):
        self.last_hidden_state = h


class GatedDeltaNet(nn.Module):
    """transformers' Qwen3_5GatedDeltaNet (no cache), recurrent form."""

    def __init__(self, c):
        super().__init__()
        H, self.hk, self.hv = c["hidden_size"], c["linear_num_key_heads"], c["linear_num_value_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        kd, vd = self.hk * self.dk, self.hv * self.dv
        C, K = 2 * kd + vd, c["linear_conv_kernel_dim"]
        self.in_proj_qkv = nn.Linear(H, C, bias=False)
        self.in_proj_z = nn.Linear(H, vd, bias=False)
        self.in_proj_b = nn.Linear(H, self.hv, bias=False)
        self.in_proj_a = nn.Linear(H, self.hv, bias=False)
        self.conv1d = nn.Conv1d(C, C, K, groups=C, bias=False, padding=K - 1)
        self.dt_bias = nn.Parameter(torch.ones(self.hv))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.hv).uniform_(1.0, 16.0)))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(self.dv))
        self.out_proj = nn.Linear(vd, H, bias=False)
        self.eps = c["rms_norm_eps"]

    def forward(self, x):
        B, T, _ = x.shape
        kd = self.hk * self.dk
        qkv = F.silu(self.conv1d(self.in_proj_qkv(x).transpose(1, 2))[..., :T]).transpose(1, 2)
        q, k, v = qkv[..., :kd], qkv[..., kd:2 * kd], qkv[..., 2 * kd:]
        q = q.reshape(B, T, self.hk, self.dk).float()
        k = k.reshape(B, T, self.hk, self.dk).float()
        v = v.reshape(B, T, self.hv, self.dv).float()
        rep = self.hv // self.hk
        q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
        beta = torch.sigmoid(self.in_proj_b(x)).float()
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias)
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * self.dk ** -0.5
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        S = torch.zeros(B, self.hv, self.dk, self.dv, device=x.device)
        outs = []
        for t in range(T):
            S = S * g[:, t].exp()[..., None, None]
            kv = (S * k[:, t, :, :, None]).sum(-2)
            delta = (v[:, t] - kv) * beta[:, t, :, None]
            S = S + k[:, t, :, :, None] * delta[:, :, None, :]
            outs.append((S * q[:, t, :, :, None]).sum(-2))
        o = torch.stack(outs, dim=1).to(x.dtype)  # [B, T, Hv, dv]
        z = self.in_proj_z(x).reshape(B, T, self.hv, self.dv)
        of = o.float()
        of = of * torch.rsqrt(of.pow(2).mean(-1, keepdim=True) + self.eps)
        o = (self.norm.weight * of.to(x.dtype)) * F.silu(z.float())
        return self.out_proj(o.to(x.dtype).reshape(B, T, -1))


class HybridLayer(nn.Module):
    def __init__(self, c, layer_type):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = blocks.ZeroCentredRMSNorm(H, eps)
        self.post_attention_layernorm = blocks.ZeroCentredRMSNorm(H, eps)
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(c)
        else:
            rot = int(c["head_dim"] * c["partial_rotary_factor"])
            self.self_attn = blocks.Attention(H, c["num_attention_heads"], c["num_key_value_heads"],
                                              c["head_dim"], rot, c["rope_parameters"]["rope_theta"],
                                              eps, gated=True, norm_cls=blocks.ZeroCentredRMSNorm)
        self.mlp = blocks.SwiGLU(H, c["intermediate_size"])

    def forward(self, x, positions):
        y = self.input_layernorm(x)
        y = self.linear_attn(y) if hasattr(self, "linear_attn") else self.self_attn(y, positions)
        x = x + y
        return x + self.mlp(self.post_attention_layernorm(x))


class TextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], H)
        if c["model_type"] == "qwen3":
            self.layers = nn.ModuleList([
                blocks.FullAttentionLayer(H, c["intermediate_size"], c["num_attention_heads"],
                                          c["num_key_value_heads"], c["head_dim"], c["head_dim"],
                                          c["rope_parameters"]["rope_theta"], eps, gated=False,
                                          norm_cls=blocks.PlainRMSNorm)
                for _ in range(c["num_hidden_layers"])])
            self.norm = blocks.PlainRMSNorm(H, eps)
        else:
            self.layers = nn.ModuleList([HybridLayer(c, t) for t in c["layer_types"]])
            self.norm = blocks.ZeroCentredRMSNorm(H, eps)

    def forward(self, input_ids, use_cache=False):
        del use_cache
        x = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        for layer in self.layers:
            x = layer(x, positions)
        return _Output(self.norm(x))


class ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config_dict = c
        self.model = TextModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied
        std = c.get("initializer_range", 0.02)
        for name, p in self.named_parameters():
            if p.ndim == 2 or name.endswith("embed_tokens.weight"):
                nn.init.normal_(p, std=std)


def build(config_dict):
    assert config_dict["tie_word_embeddings"], "the stand-in ties embeddings only"
    return ForCausalLM(config_dict)


def load(folder, load_tensors):
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    m = ForCausalLM(c)
    sd = {k: v for k, v in load_tensors(os.path.join(folder, "model.safetensors")).items()
          if not k.startswith("mtp.")}
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    m.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return m


# ---------------------------------------------------------------------------------- tokenizer

def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class BytesTokenizer:
    """Bytes through the ByteLevel alphabet, no merges: id = byte; added tokens from 256 on.
    Added-token text inside documents is NOT recognised (the dry run does not need it)."""

    def __init__(self, added):
        self.b2u = _bytes_to_unicode()
        self.vocab = {self.b2u[b]: b for b in range(256)}
        self.added = [dict(a, id=256 + i) for i, a in enumerate(added)]

    def encode_batch(self, texts):
        return [list(unicodedata.normalize("NFC", t).encode("utf-8")) for t in texts]

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def token_to_id(self, s):
        for a in self.added:
            if a["content"] == s:
                return a["id"]
        return None

    def model_vocab_size(self):
        return 256

    def to_json(self):
        return {"version": "1.0", "truncation": None, "padding": None,
                "added_tokens": self.added,
                "model": {"type": "BPE", "dropout": None, "unk_token": None,
                          "continuing_subword_prefix": "", "end_of_word_suffix": "",
                          "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                          "vocab": self.vocab, "merges": []}}
