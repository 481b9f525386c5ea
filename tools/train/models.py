"""The three tiny models: their shapes, config.json, construction (transformers, or the dry-run
stand-in), export to a model folder and reload.

Sizes (vocab 8192, tied embeddings, bf16; parameters counted with the MTP head):
  tiny-draft   qwen3         H 128, 2 layers, 2 heads x 64 (1 KV), MLP 384      ~1.44 M  ~2.9 MB
  tiny-dense   qwen3         H 256, 4 layers, 4 heads x 64 (2 KV), MLP 768      ~5.24 M  ~10.5 MB
  tiny-hybrid  qwen3_5_text  H 192, layers L L L F (Gated DeltaNet x3, gated attention x1),
               2 heads x 64 (1 KV), partial rotary 0.25, GDN 2 key / 4 value heads x 64,
               MLP 512, + MTP head (fc 2H->H + one gated-attention layer)     ~3.91 M  ~7.8 MB
Head dims of 64 keep syv's fast CUDA paths (wgmma prefill, chunked delta rule) in play.
"""
import json
import os

import torch

import st_io

LIN, FULL = "linear_attention", "full_attention"
COMMON = dict(vocab=8192, eps=1e-6, theta=10000.0, max_pos=4096)
SPECS = {
    "tiny-draft": dict(kind="qwen3", hidden=128, inter=384, layers=2, heads=2, kv=1, head_dim=64),
    "tiny-dense": dict(kind="qwen3", hidden=256, inter=768, layers=4, heads=4, kv=2, head_dim=64),
    "tiny-hybrid": dict(kind="qwen3_5_text", hidden=192, inter=512, layer_types=[LIN, LIN, LIN, FULL],
                        heads=2, kv=1, head_dim=64, prf=0.25, hk=2, hv=4, dk=64, dv=64, conv=4,
                        mtp=True),
}
# The dry run shrinks every model (and the vocabulary is the stand-in tokenizer's).
DRY_SHRINK = dict(hidden=64, inter=96, heads=2, kv=1, head_dim=32, dk=16, dv=16)


def config_dict(spec, vocab, ids):
    """config.json as written: the fields transformers writes for these classes and syv reads
    (tests/fixtures/{qwen3,hybrid}/*/config.json are the models)."""
    s = dict(COMMON, **spec)
    c = {
        "architectures": ["Qwen3ForCausalLM" if s["kind"] == "qwen3" else "Qwen3_5ForCausalLM"],
        "model_type": s["kind"],
        "vocab_size": vocab,
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv"],
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": s["max_pos"],
        "rms_norm_eps": s["eps"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "use_cache": True,
        "bos_token_id": None,
        "eos_token_id": ids["im_end"],
        "pad_token_id": ids["eot"],
        "torch_dtype": "bfloat16",
    }
    if s["kind"] == "qwen3":
        c.update(num_hidden_layers=s["layers"],
                 rope_parameters={"rope_type": "default", "rope_theta": s["theta"]},
                 use_sliding_window=False)
    else:
        c.update(num_hidden_layers=len(s["layer_types"]), layer_types=list(s["layer_types"]),
                 partial_rotary_factor=s["prf"],
                 rope_parameters={"rope_type": "default", "rope_theta": s["theta"],
                                  "partial_rotary_factor": s["prf"]},
                 linear_conv_kernel_dim=s["conv"], linear_key_head_dim=s["dk"],
                 linear_value_head_dim=s["dv"], linear_num_key_heads=s["hk"],
                 linear_num_value_heads=s["hv"])
        if s.get("mtp"):
            c.update(mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False)
    return c


def generation_config(ids):
    return {"bos_token_id": None, "eos_token_id": [ids["im_end"], ids["eot"]],
            "pad_token_id": ids["eot"], "do_sample": False}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def _hf_classes(kind):
    import transformers as T
    if kind == "qwen3":
        return T.Qwen3Config, T.Qwen3ForCausalLM
    return T.Qwen3_5TextConfig, T.Qwen3_5ForCausalLM


def build(cfg, folder_for_config, dry_run, attn="sdpa"):
    """A fresh model from config.json (written to folder_for_config first and read back the way
    transformers reads a checkpoint's)."""
    os.makedirs(folder_for_config, exist_ok=True)
    write_json(os.path.join(folder_for_config, "config.json"), cfg)
    if dry_run:
        import standin
        return standin.build(cfg)
    cfg_cls, model_cls = _hf_classes(cfg["model_type"])
    hf_cfg = load_hf_config(folder_for_config, cfg_cls)
    hf_cfg._attn_implementation = attn
    model = model_cls(hf_cfg).to(torch.float32)
    check_structure(model, cfg)
    return model


def load_hf_config(folder, cfg_cls):
    """transformers' config of a folder; should it refuse the MTP fields (real Qwen3.5 configs
    carry them, so it should not), the same config without them."""
    try:
        return cfg_cls.from_pretrained(folder)
    except Exception as e:  # noqa: BLE001
        with open(os.path.join(folder, "config.json")) as f:
            d = json.load(f)
        print(f"  note: {cfg_cls.__name__}.from_pretrained refused config.json ({e}); "
              "retrying without the mtp_* fields", flush=True)
        for k in ("mtp_num_hidden_layers", "mtp_use_dedicated_embeddings", "architectures",
                  "model_type", "torch_dtype"):
            d.pop(k, None)
        return cfg_cls(**d)


def check_structure(model, cfg):
    """What transformers built is what config.json says: tied head, rotary lanes and theta."""
    emb, head = model.model.embed_tokens.weight, model.lm_head.weight
    assert emb.data_ptr() == head.data_ptr(), "lm_head is not tied to the embedding"
    rope = cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    rot = int(cfg["head_dim"] * cfg.get("partial_rotary_factor", 1.0))
    inv = model.model.rotary_emb.inv_freq.float().cpu()
    want = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    assert inv.numel() == rot // 2 and torch.allclose(inv, want, rtol=1e-5), \
        f"rotary: {inv.numel() * 2} lanes, want {rot}; inv_freq[:3] {inv[:3].tolist()}"
    if cfg["model_type"] != "qwen3":
        types = list(model.model.config.layer_types)
        assert types == cfg["layer_types"], types


def export(model, mtp_head, cfg, ids, folder):
    """config.json, generation_config.json, model.safetensors (bf16; the tied lm_head omitted;
    mtp.* appended when there is a head). Returns {name: [shape]}."""
    os.makedirs(folder, exist_ok=True)
    tensors = {k: v.detach().to(torch.bfloat16) for k, v in model.state_dict().items()
               if k != "lm_head.weight"}
    if mtp_head is not None:
        tensors.update(mtp_head.checkpoint_tensors(torch.bfloat16))
    st_io.save(tensors, os.path.join(folder, "model.safetensors"))
    write_json(os.path.join(folder, "config.json"), cfg)
    write_json(os.path.join(folder, "generation_config.json"), generation_config(ids))
    return {k: list(v.shape) for k, v in tensors.items()}


def reload(folder, dry_run, device):
    """The saved folder in fp32 with eager attention: what every reference is computed from.
    Also checks that the reloaded weights are the saved bf16 values."""
    saved = st_io.load(os.path.join(folder, "model.safetensors"))
    if dry_run:
        import standin
        m = standin.load(folder, st_io.load)
    else:
        with open(os.path.join(folder, "config.json")) as f:
            kind = json.load(f)["model_type"]
        cfg_cls, model_cls = _hf_classes(kind)
        hf_cfg = load_hf_config(folder, cfg_cls)
        m = None
        for kw in (dict(dtype=torch.float32), dict(torch_dtype=torch.float32)):
            try:
                m = model_cls.from_pretrained(folder, config=hf_cfg, attn_implementation="eager",
                                              **kw)
                break
            except TypeError:
                continue
        assert m is not None, "from_pretrained refused both dtype spellings"
    m = m.to(device=device, dtype=torch.float32).eval()
    sd = m.state_dict()
    bad = [k for k, v in saved.items() if not k.startswith("mtp.") and
           (k not in sd or not torch.equal(sd[k].float().cpu(), v.float()))]
    assert not bad, f"reloaded weights differ from the saved ones: {bad[:4]}"
    return m, saved


def count_params(model, mtp_head=None):
    n = sum(p.numel() for p in model.parameters())  # tied weights counted once
    return n + (sum(p.numel() for p in mtp_head.parameters()) if mtp_head is not None else 0)
