"""Evaluation of a saved model folder (run by train_all.py right after each model is exported;
also runnable alone on a finished output folder). Everything is computed from the folder as
saved (bf16 weights reloaded in fp32, eager attention, TF32 off), so the numbers are what syv
must reproduce.

Perplexity, as `syv eval-ppl` defines it: the token stream is cut into non-overlapping windows of
`context` tokens; in each window every token but the first is scored given the tokens before it
in that window; ppl = exp(sum of -log p / number scored). The unigram baseline scores the same
tokens with add-one-smoothed train-split token frequencies.

Fixtures written per model under <out>/fixtures/<model>/ (read by tests/golden/tiny_models_test.cpp):
  meta.json      sequences (2 held-out windows of 96 tokens), rows ([sequence, position] of each
                 row of logits.bin), greedy (4 prompts of 32 tokens, 64 greedy tokens each,
                 recomputed without a cache; per-step top-2 margins), the held-out sample's ppl
  logits.bin     float32 little-endian [rows, vocab]
  greedy256.json 20 held-out prompts of 32 tokens, 256 greedy tokens each (for agreement rates)
tiny-hybrid also (the MTP head from the training script's own forward, mtp.py):
  mtp.json       tokens (48), positions p whose rows are kept (row of p = the head on
                 (h_p, x_{p+1}), run over every p = 0..46 in order), second_draft (the head on its
                 own argmax at p = 46 and its own `out`, at position 47)
  mtp_logits.bin float32 [len(positions) + 1, vocab]; mtp_out.bin float32 [len(positions) + 1, H]
Shared: <out>/fixtures/heldout_sample.txt and heldout_sample_tokens.json (its token ids).
"""
import json
import math
import os

import torch
import torch.nn.functional as F

ROW_POSITIONS = [0, 5, 31, 63, 64, 65, 80, 95]
SEQ_LEN, NUM_SEQS = 96, 2
PROMPT_LEN, GREEDY_STEPS, GREEDY_KEEP, GREEDY_CANDIDATES = 32, 64, 4, 12
AGREE_PROMPTS, AGREE_STEPS = 20, 256
MTP_LEN, MTP_POSITIONS = 48, [0, 1, 10, 23, 40, 46]
SAMPLE_BYTES, SAMPLE_CONTEXT = 24_000, 256


def logits_of(model, ids):
    h = model.model(input_ids=ids, use_cache=False).last_hidden_state
    return model.lm_head(h).float(), h


@torch.no_grad()
def window_nll(model, tokens, context, device, batch=32, want_argmax=False):
    """(sum of -log p, tokens scored[, argmax of every scored row]) over non-overlapping windows."""
    n = tokens.numel()
    starts = list(range(0, n - 1, context))
    total, count, preds = 0.0, 0, []
    full = [s for s in starts if s + context <= n]
    tail = [s for s in starts if s + context > n]
    for i in range(0, len(full), batch):
        idx = torch.tensor(full[i:i + batch])[:, None] + torch.arange(context)[None, :]
        w = tokens[idx].to(device)
        lg, _ = logits_of(model, w)
        lp = F.log_softmax(lg[:, :-1], dim=-1)
        total += float(-lp.gather(-1, w[:, 1:, None]).sum())
        count += w[:, 1:].numel()
        if want_argmax:
            preds.append(lg[:, :-1].argmax(-1).reshape(-1).cpu())
    for s in tail:
        w = tokens[s:].to(device)[None]
        if w.shape[1] < 2:
            continue
        lg, _ = logits_of(model, w)
        lp = F.log_softmax(lg[:, :-1], dim=-1)
        total += float(-lp.gather(-1, w[:, 1:, None]).sum())
        count += w.shape[1] - 1
        if want_argmax:
            preds.append(lg[:, :-1].argmax(-1).reshape(-1).cpu())
    if want_argmax:
        return total, count, torch.cat(preds)
    return total, count


def scored_targets(tokens, context):
    """The token ids window_nll scores, in its order."""
    n = tokens.numel()
    out = []
    starts = list(range(0, n - 1, context))
    for s in [s for s in starts if s + context <= n] + [s for s in starts if s + context > n]:
        w = tokens[s:s + context]
        if w.numel() >= 2:
            out.append(w[1:])
    return torch.cat(out)


def unigram_ppl(train_counts, targets):
    """add-one smoothed unigram model of the train split, on `targets`."""
    counts = train_counts.double() + 1.0
    logp = torch.log(counts / counts.sum())
    return math.exp(float(-logp[targets].mean()))


@torch.no_grad()
def mtp_metrics(model, head, tokens, context, device, batch=32):
    """The head's next-next-token ppl and two accuracies over windows: top-1 = x_{t+2}, and
    'accept' = equal to the trunk's own argmax at t+1 (greedy MTP speculation's acceptance)."""
    n = tokens.numel() // context
    nll, cnt, hit, acc = 0.0, 0, 0, 0
    for i in range(0, n, batch):
        idx = torch.arange(i, min(n, i + batch))[:, None] * context + torch.arange(context)[None]
        w = tokens[idx].to(device)
        lg, h = logits_of(model, w)
        out = head(h[:, :-2], w[:, 1:-1], model.model.embed_tokens.weight)
        ml = model.lm_head(out).float()
        tgt = w[:, 2:]
        nll += float(-F.log_softmax(ml, -1).gather(-1, tgt[..., None]).sum())
        cnt += tgt.numel()
        am = ml.argmax(-1)
        hit += int((am == tgt).sum())
        acc += int((am == lg[:, 1:-1].argmax(-1)).sum())
    return {"mtp_ppl": math.exp(nll / cnt), "mtp_top1": hit / cnt, "mtp_accept_vs_trunk": acc / cnt,
            "mtp_scored": cnt}


@torch.no_grad()
def greedy_nocache(model, prompts, steps, device):
    """prompts [N, P]: each step reruns the whole sequences (no cache). Returns tokens [N, steps]
    and the top-2 logit margins [N, steps]."""
    seq = prompts.to(device)
    toks, margins = [], []
    for _ in range(steps):
        lg, _ = logits_of(model, seq)
        last = lg[:, -1]
        top2 = torch.topk(last, 2, dim=-1).values
        margins.append((top2[:, 0] - top2[:, 1]).cpu())
        nxt = last.argmax(-1)
        toks.append(nxt.cpu())
        seq = torch.cat([seq, nxt[:, None]], dim=1)
    return torch.stack(toks, 1), torch.stack(margins, 1)


def pick_windows(tokens, count, length, seed, eot):
    """`count` windows of `length` held-out tokens at seeded offsets, without an <|endoftext|>."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(10000):
        if len(out) == count:
            break
        s = int(torch.randint(0, tokens.numel() - length, (1,), generator=g))
        w = tokens[s:s + length]
        if not bool((w == eot).any()):
            out.append(w.clone())
    assert len(out) == count, "held-out text too short for the fixture windows"
    return torch.stack(out)


def write_f32(path, t):
    t.detach().float().cpu().contiguous().numpy().astype("<f4").tofile(path)


@torch.no_grad()
def model_fixtures(name, model, heldout, eot, out_dir, device, seed=1234):
    d = os.path.join(out_dir, "fixtures", name)
    os.makedirs(d, exist_ok=True)
    V = model.lm_head.weight.shape[0]
    seqs = pick_windows(heldout, NUM_SEQS, SEQ_LEN, seed, eot)
    lg, _ = logits_of(model, seqs.to(device))
    rows = [[s, p] for s in range(NUM_SEQS) for p in ROW_POSITIONS]
    write_f32(os.path.join(d, "logits.bin"), torch.stack([lg[s, p] for s, p in rows]))
    row_top2 = torch.topk(lg, 2, dim=-1).values
    cands = pick_windows(heldout, GREEDY_CANDIDATES, PROMPT_LEN, seed + 1, eot)
    toks, margins = greedy_nocache(model, cands, GREEDY_STEPS, device)
    order = sorted(range(GREEDY_CANDIDATES), key=lambda i: -float(margins[i].min()))[:GREEDY_KEEP]
    order.sort()
    agree_prompts = pick_windows(heldout, AGREE_PROMPTS, PROMPT_LEN, seed + 2, eot)
    atoks, amargins = greedy_nocache(model, agree_prompts, AGREE_STEPS, device)
    meta = {
        "model": name, "vocab_size": V,
        "sequences": seqs.tolist(), "rows": rows,
        "min_row_top2_margin": float((row_top2[..., 0] - row_top2[..., 1]).min()),
        "greedy": {"prompts": cands[order].tolist(), "tokens": toks[order].tolist(),
                   "min_margins": [float(margins[i].min()) for i in order],
                   "margins": [[round(float(x), 5) for x in margins[i]] for i in order],
                   "recomputed_without_cache": True},
    }
    with open(os.path.join(d, "greedy256.json"), "w") as f:
        json.dump({"prompts": agree_prompts.tolist(), "tokens": atoks.tolist(),
                   "min_margins": [float(m.min()) for m in amargins],
                   "recomputed_without_cache": True}, f)
    return d, meta


@torch.no_grad()
def mtp_fixture(model, head, heldout, eot, d, device, seed=1234):
    toks = pick_windows(heldout, 1, MTP_LEN, seed + 3, eot).to(device)
    _, h = logits_of(model, toks)
    T = MTP_LEN
    out = head(h[:, :T - 1], toks[:, 1:T], model.model.embed_tokens.weight)  # p = 0 .. T-2
    ml = model.lm_head(out).float()[0]
    draft = int(ml[T - 2].argmax())
    # Second draft: the head's own argmax and own `out` at position T - 1, after the K/V of
    # positions 0 .. T-2 (rerun the whole sequence of head inputs, the last one appended).
    hid2 = torch.cat([h[:, :T - 1], out[:, T - 2:T - 1]], dim=1)
    nxt2 = torch.cat([toks[:, 1:T], torch.tensor([[draft]], device=device)], dim=1)
    out2 = head(hid2, nxt2, model.model.embed_tokens.weight)
    ml2 = model.lm_head(out2).float()[0]
    rows = [ml[p] for p in MTP_POSITIONS] + [ml2[T - 1]]
    outs = [out[0, p] for p in MTP_POSITIONS] + [out2[0, T - 1]]
    write_f32(os.path.join(d, "mtp_logits.bin"), torch.stack(rows))
    write_f32(os.path.join(d, "mtp_out.bin"), torch.stack(outs))
    meta = {"tokens": toks[0].tolist(), "positions": MTP_POSITIONS,
            "second_draft": {"position": T - 1, "token": draft, "hidden_from_position": T - 2},
            "hidden_size": h.shape[-1], "vocab_size": ml.shape[-1],
            "note": "row i: the head on (h_p, x_{p+1}) at position p = positions[i], run over "
                    "every p = 0..46 in order; last row: the second draft"}
    with open(os.path.join(d, "mtp.json"), "w") as f:
        json.dump(meta, f)
    return meta


@torch.no_grad()
def crosscheck_mtp_layer(model, head, device):
    """max |mine - transformers| / max |transformers| of the head's decoder layer against
    transformers' own Qwen3_5DecoderLayer (full attention) holding the same weights."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as q
    cfg = model.model.config
    idx = list(cfg.layer_types).index("full_attention")
    ref = q.Qwen3_5DecoderLayer(cfg, idx).to(device=device, dtype=torch.float32).eval()
    ref.load_state_dict(head.layers[0].state_dict(), strict=True)
    g = torch.Generator().manual_seed(7)
    T = 40
    x = torch.randn(2, T, cfg.hidden_size, generator=g).to(device)
    pos = torch.arange(T, device=device)
    mine = head.layers[0](x, pos)
    pos3 = pos[None, None, :].expand(3, 2, T)
    cos, sin = model.model.rotary_emb(x, pos3)
    mask = torch.full((T, T), torch.finfo(torch.float32).min, device=device).triu(1)[None, None]
    theirs = ref(x, position_embeddings=(cos, sin), attention_mask=mask,
                 position_ids=pos[None].expand(2, T))
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    return float((mine - theirs).abs().max() / theirs.abs().max())


def sample_text(heldout_docs, limit=SAMPLE_BYTES):
    """Held-out files with no added-token text in them, joined, up to `limit` bytes."""
    parts, size = [], 0
    for doc in heldout_docs:
        if any(s in doc for s in ("<|", "|>", "<think>", "</think>", "<tool_")):
            continue
        if size + len(doc.encode()) > limit:
            if parts:
                break
            continue
        parts.append(doc)
        size += len(doc.encode())
    return "\n".join(parts)
