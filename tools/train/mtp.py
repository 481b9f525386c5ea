"""The multi-token-prediction (MTP) head of Qwen3.5 / Qwen3-Next checkpoints, in plain torch.

transformers does not run MTP heads (it drops `mtp.*` tensors on load), so the training script
carries its own, written from the published layout (vLLM's qwen3_5_mtp.py / qwen3_next_mtp.py;
/work/shared/reference/WAVE2-SPECS.md B.2) and computing exactly what syv's head computes
(src/model/mtp_head.h):

  e   = pre_fc_norm_embedding(embed[x_{t+1}])     shared embedding, zero-centred norms (1 + w)
  h   = pre_fc_norm_hidden(h_t)                   h_t: the trunk's POST-final-norm hidden state
  u   = fc([e ; h])                               2H -> H, embedding first, no bias
  u   = layers.0(u) at position t                 gated full attention (own K/V) + dense MLP
  out = norm(u);  logits = lm_head(out)           shared lm_head (the embedding when tied)

The pair (h_t, x_{t+1}) predicts x_{t+2}. Its rotary position is t (syv's choice; vLLM writes
t + 1: the head attends only to its own K/V, and RoPE scores depend on position differences
alone, so both give the same logits). A second draft runs the same layer on (its own argmax,
its own `out`) at position t + 1.

State-dict names (prefix with "mtp." for the checkpoint): fc.weight [H, 2H],
pre_fc_norm_embedding.weight, pre_fc_norm_hidden.weight, norm.weight [H],
layers.0.{input_layernorm, post_attention_layernorm}.weight [H],
layers.0.self_attn.{q_proj [2*Hq*D, H] (per head: query rows then gate rows), k_proj, v_proj
[Hk*D, H], o_proj [H, Hq*D], q_norm, k_norm [D]}, layers.0.mlp.{gate_proj, up_proj [I, H],
down_proj [H, I]}.

The building blocks (zero-centred RMSNorm, gated attention with partial rotary, SwiGLU MLP) are
also what the dry-run stand-in of Qwen3.5 (standin.py) is made of.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ZeroCentredRMSNorm(nn.Module):
    """x / rms(x) * (1 + w), in fp32, cast back (transformers' Qwen3_5RMSNorm)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


class PlainRMSNorm(nn.Module):
    """w * (x / rms(x)) (transformers' Qwen3RMSNorm; the weight multiplies after the cast)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        dtype = x.dtype
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.to(dtype)


def rope_cos_sin(positions, rotary_dim, theta, dtype):
    """cos, sin [T, rotary_dim] (rotate-half layout: the frequencies twice), computed in fp32."""
    inv = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32,
                                        device=positions.device) / rotary_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_partial_rope(x, cos, sin):
    """x [B, heads, T, D]: rotate the first cos.shape[-1] lanes of every head."""
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    return torch.cat([xr * cos + _rotate_half(xr) * sin, xp], dim=-1)


def causal_attention(q, k, v):
    """q [B, Hq, T, D], k/v [B, Hk, T, D]; softmax(q k^T / sqrt(D)) v with a causal mask."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch < 2.0 (the dry run on Debian's torch): the same thing written out.
    T = q.shape[2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    s = s.float().masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


class Attention(nn.Module):
    """Qwen3 / Qwen3.5 attention: q_norm/k_norm per head, (partial) rotary, GQA; with `gated`,
    q_proj also produces a per-head sigmoid gate on the attention output (Qwen3.5)."""

    def __init__(self, hidden, heads, kv_heads, head_dim, rotary_dim, theta, eps, gated, norm_cls):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.rotary_dim, self.theta, self.gated = rotary_dim, theta, gated
        self.q_proj = nn.Linear(hidden, heads * head_dim * (2 if gated else 1), bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm = norm_cls(head_dim, eps)
        self.k_norm = norm_cls(head_dim, eps)

    def forward(self, x, positions):
        B, T, _ = x.shape
        D = self.head_dim
        if self.gated:
            qg = self.q_proj(x).view(B, T, self.heads, 2 * D)
            q, gate = qg[..., :D], qg[..., D:].reshape(B, T, self.heads * D)
        else:
            q, gate = self.q_proj(x).view(B, T, self.heads, D), None
        q = self.q_norm(q).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.kv_heads, D)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, D).transpose(1, 2)
        cos, sin = rope_cos_sin(positions, self.rotary_dim, self.theta, q.dtype)
        q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
        o = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, self.heads * D)
        if gate is not None:
            o = o * torch.sigmoid(gate)
        return self.o_proj(o)


class SwiGLU(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class FullAttentionLayer(nn.Module):
    """A pre-norm decoder layer: x + attn(norm(x)), then + mlp(norm(.))."""

    def __init__(self, hidden, inter, heads, kv_heads, head_dim, rotary_dim, theta, eps, gated,
                 norm_cls):
        super().__init__()
        self.input_layernorm = norm_cls(hidden, eps)
        self.self_attn = Attention(hidden, heads, kv_heads, head_dim, rotary_dim, theta, eps,
                                   gated, norm_cls)
        self.post_attention_layernorm = norm_cls(hidden, eps)
        self.mlp = SwiGLU(hidden, inter)

    def forward(self, x, positions):
        x = x + self.self_attn(self.input_layernorm(x), positions)
        return x + self.mlp(self.post_attention_layernorm(x))


class MtpHead(nn.Module):
    """The head of the module docstring; `cfg` holds the trunk's text-config fields."""

    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.rotary_dim = int(cfg["head_dim"] * cfg["partial_rotary_factor"])
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.pre_fc_norm_embedding = ZeroCentredRMSNorm(H, eps)
        self.pre_fc_norm_hidden = ZeroCentredRMSNorm(H, eps)
        self.layers = nn.ModuleList([
            FullAttentionLayer(H, cfg["intermediate_size"], cfg["num_attention_heads"],
                               cfg["num_key_value_heads"], cfg["head_dim"], self.rotary_dim,
                               cfg["rope_theta"], eps, gated=True, norm_cls=ZeroCentredRMSNorm)
        ])
        self.norm = ZeroCentredRMSNorm(H, eps)
        init_std = cfg.get("initializer_range", 0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=init_std)

    def forward(self, hidden, next_ids, embed_weight, start_position=0):
        """hidden [B, T, H] = h_t at positions start..start+T-1, next_ids [B, T] = x_{t+1};
        returns `out` [B, T, H] (post mtp.norm); logits = lm_head(out)."""
        e = self.pre_fc_norm_embedding(F.embedding(next_ids, embed_weight))
        h = self.pre_fc_norm_hidden(hidden)
        u = self.fc(torch.cat([e, h], dim=-1))
        positions = torch.arange(start_position, start_position + hidden.shape[1],
                                 device=hidden.device)
        for layer in self.layers:
            u = layer(u, positions)
        return self.norm(u)

    def checkpoint_tensors(self, dtype=torch.bfloat16):
        """{"mtp.<name>": tensor} as real checkpoints name them."""
        return {"mtp." + k: v.detach().to(dtype).contiguous().cpu()
                for k, v in self.state_dict().items()}

    def load_checkpoint_tensors(self, tensors):
        """Loads {"mtp.<name>": tensor} (every name must match; values are cast to the module's
        dtype)."""
        sd = {k[len("mtp."):]: v for k, v in tensors.items() if k.startswith("mtp.")}
        self.load_state_dict(sd, strict=True)


def mtp_config_fields(text_cfg):
    """The MTP-relevant fields of a transformers text config (or a plain dict)."""
    get = (lambda k, d=None: text_cfg.get(k, d)) if isinstance(text_cfg, dict) else \
        (lambda k, d=None: getattr(text_cfg, k, d))
    rope = get("rope_parameters") or {}
    theta = rope.get("rope_theta", get("rope_theta", 10000.0))
    prf = rope.get("partial_rotary_factor", get("partial_rotary_factor", 0.25))
    return dict(hidden_size=get("hidden_size"), intermediate_size=get("intermediate_size"),
                num_attention_heads=get("num_attention_heads"),
                num_key_value_heads=get("num_key_value_heads"), head_dim=get("head_dim"),
                partial_rotary_factor=prf, rope_theta=theta, rms_norm_eps=get("rms_norm_eps"),
                initializer_range=get("initializer_range", 0.02))
