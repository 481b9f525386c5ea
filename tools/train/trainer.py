"""The training loop shared by the three models: random windows of the token stream, AdamW with a
linear warm-up and cosine decay, bf16 autocast on the GPU, and for the hybrid the MTP head's
next-next-token loss added to the next-token loss (both flow into the shared trunk).

Step count: `steps` when given (reproduces a recorded run exactly); otherwise measured: steps
5..25 are timed and the count is set so the run ends near `budget_s` (at most `max_steps`,
rounded down to a multiple of 10; the cosine schedule uses that count from step 25 on, the
warm-up is fixed). A run past 1.25 x budget stops early and says so.
"""
import math
import time

import torch
import torch.nn.functional as F

WARMUP = 50
TIMED_FROM, TIMED_TO = 5, 25


def lr_at(step, total, peak, floor_frac=0.1):
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    t = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def forward_losses(model, head, x, mtp_weight):
    """x [B, T+1]: next-token loss over T positions; with `head`, the MTP loss over T-1 pairs
    (h_t, x_{t+1}) -> x_{t+2}. Returns (total, main, mtp or None)."""
    h = model.model(input_ids=x[:, :-1], use_cache=False).last_hidden_state
    logits = model.lm_head(h)
    V = logits.shape[-1]
    main = F.cross_entropy(logits.float().reshape(-1, V), x[:, 1:].reshape(-1))
    if head is None:
        return main, main, None
    out = head(h[:, :-1], x[:, 1:-1], model.model.embed_tokens.weight)
    mlog = model.lm_head(out)
    mtp = F.cross_entropy(mlog.float().reshape(-1, V), x[:, 2:].reshape(-1))
    return main + mtp_weight * mtp, main, mtp


def train(model, head, data, *, seq, batch, lr, budget_s, max_steps, steps, mtp_weight, seed,
          device, log, weight_decay=0.1):
    """data: 1-D int64 tensor of the train token stream, on `device`. Returns the run's stats."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters()] + ([p for p in head.parameters()] if head else [])
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8,
                                fused=device.type == "cuda")
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)
    amp = device.type == "cuda"
    model.train()
    if head is not None:
        head.train()
    n = data.numel()
    span = torch.arange(seq + 1, device=device)
    total = steps if steps else max_steps
    fixed = bool(steps)
    start = time.time()
    t_from = None
    acc_main = torch.zeros((), device=device)
    acc_mtp = torch.zeros((), device=device)
    acc_n, history, stopped_early = 0, [], False
    step = 0
    while step < total:
        offsets = torch.randint(0, n - seq - 1, (batch,), generator=gen).to(device)
        x = data[offsets[:, None] + span[None, :]]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, lr)
        if amp:
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss, main, mtp = forward_losses(model, head, x, mtp_weight)
        else:
            loss, main, mtp = forward_losses(model, head, x, mtp_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc_main += main.detach()
        if mtp is not None:
            acc_mtp += mtp.detach()
        acc_n += 1
        step += 1
        if step in (TIMED_FROM, TIMED_TO) and device.type == "cuda":
            torch.cuda.synchronize()
        if step == TIMED_FROM:
            t_from = time.time()
        if step == TIMED_TO and not fixed:
            per_step = (time.time() - t_from) / (TIMED_TO - TIMED_FROM)
            left = budget_s - (time.time() - start)
            total = max(TIMED_TO + 10, min(max_steps, TIMED_TO + int(left / per_step)))
            total -= total % 10
            log(f"    {per_step * 1e3:.1f} ms/step ({batch * seq / per_step / 1e3:.0f}k tok/s): "
                f"{total} steps to fit {budget_s:.0f} s")
        if step % 50 == 0 or step == total:
            m = float(acc_main) / acc_n
            entry = {"step": step, "loss": round(m, 4), "seconds": round(time.time() - start, 1)}
            if head is not None:
                entry["mtp_loss"] = round(float(acc_mtp) / acc_n, 4)
            history.append(entry)
            log(f"    step {step}/{total} loss {m:.3f}" +
                (f" mtp {entry['mtp_loss']:.3f}" if head is not None else "") +
                f" lr {lr_at(step - 1, total, lr):.2e} {entry['seconds']:.0f} s")
            acc_main.zero_()
            acc_mtp.zero_()
            acc_n = 0
        if not fixed and time.time() - start > 1.25 * budget_s:
            stopped_early = True
            log(f"    stopping at step {step}: past 1.25 x the {budget_s:.0f} s budget")
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.time() - start
    model.eval()
    if head is not None:
        head.eval()
    return {"steps": step, "planned_steps": total, "batch": batch, "seq_len": seq,
            "tokens_seen": step * batch * seq, "seconds": round(seconds, 1),
            "steps_per_s": round(step / seconds, 2), "peak_lr": lr, "warmup": WARMUP,
            "mtp_weight": mtp_weight if head is not None else None, "seed": seed,
            "stopped_early": stopped_early, "history": history}
