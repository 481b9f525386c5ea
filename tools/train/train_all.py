#!/usr/bin/env python3
"""Trains syv's three small measuring-stick models in one command, on the GPU machine:

  corpus     Python sources of the installed packages, split by a hash of the path (corpus.py)
  tokenizer  byte-level BPE, vocab 8192, Qwen3's pipeline and chat template (tok.py)
  models     tiny-draft, tiny-dense (Qwen3), tiny-hybrid (Qwen3.5 text + MTP head), each trained
             (trainer.py), exported as a Hugging Face folder (models.py) and evaluated (eval.py)
  report     <out>/report.json, rewritten after every stage, so a failure keeps what was done

Output tree under --out (tools/train/run_on_device.sh packs it into a few files under $OUT):
  models/<name>/{config.json, generation_config.json, model.safetensors, tokenizer.json,
                 tokenizer_config.json}
  fixtures/<name>/...   (eval.py), fixtures/heldout_sample.txt, heldout_sample_tokens.json
  corpus_files.tsv.gz   every file taken: split, bytes, sha1, path
  report.json

Run on the GPU machine (repo root; see docs/models.md):
  tools/train/run_on_device.sh
Exact re-run of a recorded training: pass the recorded step counts, e.g.
  --steps tiny-draft=1230,tiny-dense=980,tiny-hybrid=410

--dry-run (the development machine, no transformers/tokenizers/GPU): a tiny corpus, the stand-in
bytes tokenizer and pure-torch stand-in models (standin.py), a few steps each. It checks the
plumbing only; its output says "dry_run": true and must never be committed.
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import eval as ev  # noqa: E402
import models  # noqa: E402
import mtp as mtp_mod  # noqa: E402
import tok  # noqa: E402
import trainer  # noqa: E402
from summary import summary  # noqa: E402

T0 = time.time()
# Training plan: seconds of training per model (the step count follows, see trainer.py), batch,
# sequence length, peak learning rate. Order = training order.
PLAN = {
    "tiny-draft": dict(budget=40, batch=64, seq=512, lr=3e-3, seed=11),
    "tiny-dense": dict(budget=85, batch=64, seq=512, lr=2e-3, seed=12),
    "tiny-hybrid": dict(budget=140, batch=64, seq=512, lr=2e-3, seed=13),
}
EVAL_RESERVE_S = 30  # per model, kept free for export + evaluation


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


class Report:
    def __init__(self, path, base):
        self.path, self.data = path, base

    def save(self):
        self.data["seconds_total"] = round(time.time() - T0, 1)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)


def parse_steps(s):
    out = {}
    for part in filter(None, (s or "").split(",")):
        k, v = part.split("=")
        out[k.strip()] = int(v)
    return out


def stage_corpus(args, rep):
    t = time.time()
    roots = args.roots.split(",") if args.roots else corpus.default_roots()
    train_docs, held_docs, records, info = corpus.build(
        roots, args.train_bytes, args.heldout_min_bytes, args.heldout_max_bytes, log)
    corpus.write_file_list(records, os.path.join(args.out, "corpus_files.tsv.gz"))
    info["seconds"] = round(time.time() - t, 1)
    rep.data["corpus"] = info
    rep.save()
    return train_docs, held_docs


def stage_tokenizer(args, rep, train_docs, held_docs):
    t = time.time()
    with open(args.template) as f:
        template = json.load(f)
    added = tok.added_token_entries(template)
    tdir = os.path.join(args.out, "tokenizer")
    os.makedirs(tdir, exist_ok=True)
    path = os.path.join(tdir, "tokenizer.json")
    if args.dry_run:
        import standin
        t_obj = standin.BytesTokenizer(added)
        tok.write_tokenizer_json(t_obj, path)
        encoder = t_obj
    else:
        budget, texts = 0, []
        for d in train_docs:  # the first tok_bytes of the train split (hash order)
            if budget >= args.tok_bytes:
                break
            texts.append(d)
            budget += len(d)
        trained = tok.train_bpe(texts, args.vocab, added, log)
        tok.write_tokenizer_json(trained, path)
        encoder = tok.HFTokenizer(path)  # reload: what is saved is what encodes
    with_ids = tok.added_ids(encoder, added)
    tok.write_tokenizer_config(os.path.join(tdir, "tokenizer_config.json"), template, with_ids,
                               4096)
    ids = {"eot": encoder.token_to_id(tok.EOT), "im_end": encoder.token_to_id(tok.IM_END),
           "im_start": encoder.token_to_id(tok.IM_START)}
    t_enc = time.time()

    def stream(docs):
        out = []
        for i in range(0, len(docs), 2000):
            for e in encoder.encode_batch(docs[i:i + 2000]):
                out.extend(e)
                out.append(ids["eot"])
        return torch.tensor(out, dtype=torch.int64)

    train_ids, held_ids = stream(train_docs), stream(held_docs)
    vocab = args.vocab if not args.dry_run else 256 + len(added)
    held_bytes = sum(len(d.encode()) for d in held_docs)
    rep.data["tokenizer"] = {
        "vocab_size": vocab, "bpe_vocab": encoder.model_vocab_size(), "added": with_ids,
        "ids": ids, "train_tokens": train_ids.numel(), "heldout_tokens": held_ids.numel(),
        "heldout_bytes_per_token": round(held_bytes / held_ids.numel(), 3),
        "seconds_train": round(t_enc - t, 1), "seconds_encode": round(time.time() - t_enc, 1)}
    log(f"  {train_ids.numel()} train tokens, {held_ids.numel()} held-out tokens, "
        f"{held_bytes / held_ids.numel():.2f} bytes/token held-out")
    # The held-out sample for `syv eval-ppl` tests, and its ids.
    fdir = os.path.join(args.out, "fixtures")
    os.makedirs(fdir, exist_ok=True)
    sample = ev.sample_text(held_docs, ev.SAMPLE_BYTES)
    with open(os.path.join(fdir, "heldout_sample.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(sample)
    sample_ids = encoder.encode_batch([sample])[0]
    with open(os.path.join(fdir, "heldout_sample_tokens.json"), "w") as f:
        json.dump({"tokens": sample_ids, "bytes": len(sample.encode())}, f)
    if not args.dry_run:
        rep.data["tokenizer"]["transformers_check"] = transformers_tokenizer_check(tdir, sample)
        log(f"  transformers' AutoTokenizer: {rep.data['tokenizer']['transformers_check']}")
    counts = torch.bincount(train_ids, minlength=vocab)
    scored = ev.scored_targets(held_ids[:args.eval_tokens], args.eval_context)
    rep.data["unigram_ppl"] = ev.unigram_ppl(counts, scored)
    log(f"  unigram ppl on held-out {rep.data['unigram_ppl']:.1f}")
    rep.save()
    return tdir, ids, vocab, train_ids, held_ids, sample_ids


def transformers_tokenizer_check(tdir, sample):
    """Does transformers load the folder's tokenizer, encode like `tokenizers`, and render the
    chat template? A diagnostic for the report (syv and eval.py use tokenizer.json directly)."""
    out = {}
    try:
        from tokenizers import Tokenizer
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(tdir)
        raw = Tokenizer.from_file(os.path.join(tdir, "tokenizer.json"))
        text = sample[:4000] + "\n<|im_start|>user\nhi<|im_end|>\n<think>\n</think>"
        out["encode_equal"] = at.encode(text, add_special_tokens=False) == \
            raw.encode(text, add_special_tokens=False).ids
        msgs = [{"role": "user", "content": "What is 2+2?"}]
        rendered = at.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        out["chat_template_renders"] = rendered.startswith("<|im_start|>user")
        out["class"] = type(at).__name__
    except Exception as e:  # noqa: BLE001  a diagnostic only
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def stage_model(name, args, rep, tdir, ids, vocab, train_ids, held_ids, sample_ids, device,
                time_left_for_this):
    spec = dict(models.SPECS[name])
    plan = dict(PLAN[name])
    if args.dry_run:
        spec.update({k: v for k, v in models.DRY_SHRINK.items() if k in spec})
        if spec["kind"] == "qwen3_5_text":
            spec["inter"] = 96
        plan.update(batch=4, seq=64)
    cfg = models.config_dict(spec, vocab, ids)
    folder = os.path.join(args.out, "models", name)
    r = {"spec": spec, "config": cfg}
    rep.data["models"][name] = r
    t = time.time()
    torch.manual_seed(plan["seed"])
    model = models.build(cfg, folder, args.dry_run).to(device)
    head = mtp_mod.MtpHead(mtp_mod.mtp_config_fields(cfg)).to(device) if spec.get("mtp") else None
    r["parameters"] = models.count_params(model, head)
    log(f"== {name}: {r['parameters'] / 1e6:.2f} M parameters; "
        f"{time_left_for_this:.0f} s for training")
    steps = parse_steps(args.steps).get(name)
    if args.dry_run:
        steps = steps or 12
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    r["train"] = trainer.train(
        model, head, train_ids.to(device), seq=plan["seq"], batch=plan["batch"], lr=plan["lr"],
        budget_s=time_left_for_this, max_steps=args.max_steps, steps=steps,
        mtp_weight=args.mtp_weight, seed=plan["seed"], device=device, log=log)
    rep.save()
    # Export, then everything else from the folder as saved.
    r["tensors"] = models.export(model.cpu(), head.cpu() if head else None, cfg, ids, folder)
    tok.save_folder_files(tdir, folder)
    r["folder_bytes"] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    del model
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref, saved = models.reload(folder, args.dry_run, device)
    ref_head = None
    if head is not None:
        ref_head = mtp_mod.MtpHead(mtp_mod.mtp_config_fields(cfg))
        ref_head.load_checkpoint_tensors({k: v.float() for k, v in saved.items()})
        ref_head = ref_head.to(device).eval()
    held = held_ids[:args.eval_tokens]
    nll, cnt = ev.window_nll(ref, held, args.eval_context, device)
    r["heldout"] = {"ppl": math.exp(nll / cnt), "tokens_scored": cnt,
                    "context": args.eval_context}
    log(f"  held-out ppl {r['heldout']['ppl']:.2f} over {cnt} tokens (unigram "
        f"{rep.data['unigram_ppl']:.1f})")
    s_nll, s_cnt = ev.window_nll(ref, torch.tensor(sample_ids), ev.SAMPLE_CONTEXT, device)
    fdir, meta = ev.model_fixtures(name, ref, held_ids, ids["eot"], args.out, device)
    meta["sample"] = {"file": "heldout_sample.txt", "context": ev.SAMPLE_CONTEXT,
                      "nll_sum": s_nll, "tokens_scored": s_cnt,
                      "ppl": math.exp(s_nll / s_cnt)}
    meta["versions"] = versions()
    meta["dry_run"] = args.dry_run
    if ref_head is not None:
        r["mtp"] = ev.mtp_metrics(ref, ref_head, held, args.eval_context, device)
        log(f"  MTP: ppl {r['mtp']['mtp_ppl']:.2f}, top-1 {r['mtp']['mtp_top1']:.3f}, "
            f"accept vs trunk {r['mtp']['mtp_accept_vs_trunk']:.3f}")
        meta["mtp"] = ev.mtp_fixture(ref, ref_head, held_ids, ids["eot"], fdir, device)
        if not args.dry_run:
            try:
                r["mtp_layer_vs_transformers"] = ev.crosscheck_mtp_layer(ref, ref_head, device)
                log(f"  MTP layer vs transformers' decoder layer: rel "
                    f"{r['mtp_layer_vs_transformers']:.2e}")
            except Exception as e:  # noqa: BLE001  a diagnostic: record, do not fail the model
                r["mtp_layer_vs_transformers"] = f"failed: {type(e).__name__}: {e}"
    with open(os.path.join(fdir, "meta.json"), "w") as f:
        json.dump(meta, f)
    r["greedy_min_margins"] = meta["greedy"]["min_margins"]
    r["seconds"] = round(time.time() - t, 1)
    rep.save()
    return ref


def versions():
    v = {"torch": torch.__version__, "python": sys.version.split()[0]}
    for m in ("transformers", "tokenizers", "safetensors"):
        try:
            v[m] = __import__(m).__version__
        except ImportError:
            v[m] = None
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--template", default="third_party/qwen3-tokenizer/tokenizer_config.json",
                    help="Qwen3's tokenizer_config.json (chat template, added-token flags)")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--steps", default="", help="fixed step counts: name=N,...")
    ap.add_argument("--time-limit", type=float, default=430.0,
                    help="seconds for the whole run; training budgets shrink to fit")
    ap.add_argument("--max-steps", type=int, default=4000)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--train-bytes", type=int, default=64_000_000)
    ap.add_argument("--tok-bytes", type=int, default=16_000_000)
    ap.add_argument("--heldout-min-bytes", type=int, default=3_000_000)
    ap.add_argument("--heldout-max-bytes", type=int, default=4_000_000)
    ap.add_argument("--eval-tokens", type=int, default=600_000)
    ap.add_argument("--eval-context", type=int, default=512)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--roots", default="", help="comma-separated corpus roots (default: the "
                    "interpreter's stdlib and site-packages, /usr/lib/python3*)")
    ap.add_argument("--dry-run", action="store_true",
                    help="development machine only: stand-ins, tiny sizes; never commit output")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    have_hf = all(importlib.util.find_spec(m) for m in ("transformers", "tokenizers"))
    if not have_hf and not args.dry_run:
        sys.exit("transformers and tokenizers are needed (use --dry-run only for plumbing checks)")
    if args.dry_run:
        args.train_bytes = min(args.train_bytes, 400_000)
        args.tok_bytes = min(args.tok_bytes, 200_000)
        args.heldout_min_bytes = min(args.heldout_min_bytes, 60_000)
        args.heldout_max_bytes = min(args.heldout_max_bytes, 80_000)
        args.eval_tokens = min(args.eval_tokens, 4_000)
        args.eval_context = min(args.eval_context, 128)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.use_deterministic_algorithms(True, warn_only=True)
    rep = Report(os.path.join(args.out, "report.json"), {
        "dry_run": args.dry_run, "command": " ".join(sys.argv), "device": str(device),
        "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else None,
        "versions": versions(), "plan": PLAN, "models": {}, "errors": []})
    rep.save()
    log(f"device {device}; {rep.data['versions']}")
    log("== corpus")
    train_docs, held_docs = stage_corpus(args, rep)
    log("== tokenizer")
    tdir, ids, vocab, train_ids, held_ids, sample_ids = stage_tokenizer(
        args, rep, train_docs, held_docs)
    del train_docs
    names = [n for n in PLAN if not args.only or n in args.only.split(",")]
    planned = sum(PLAN[n]["budget"] for n in names)
    refs = {}
    for i, name in enumerate(names):
        left = args.time_limit - (time.time() - T0)
        rest = names[i:]
        share = PLAN[name]["budget"] / sum(PLAN[n]["budget"] for n in rest)
        budget = min(PLAN[name]["budget"], share * (left - EVAL_RESERVE_S * len(rest)))
        budget = max(budget, 10.0)
        try:
            refs[name] = stage_model(name, args, rep, tdir, ids, vocab, train_ids, held_ids,
                                     sample_ids, device, budget)
        except Exception as e:  # noqa: BLE001  keep going: the other models still get made
            traceback.print_exc()
            rep.data["errors"].append(f"{name}: {type(e).__name__}: {e}")
            rep.save()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    # Draft/target agreement on held-out (the draft-model speculation acceptance proxy).
    if "tiny-draft" in refs and "tiny-dense" in refs:
        try:
            held = held_ids[:args.eval_tokens]
            _, _, pd = ev.window_nll(refs["tiny-draft"], held, args.eval_context, device,
                                     want_argmax=True)
            _, _, pt = ev.window_nll(refs["tiny-dense"], held, args.eval_context, device,
                                     want_argmax=True)
            rep.data["draft_dense_top1_agreement"] = float((pd == pt).float().mean())
            log(f"  draft/dense greedy agreement on held-out: "
                f"{rep.data['draft_dense_top1_agreement']:.3f}")
        except Exception as e:  # noqa: BLE001
            rep.data["errors"].append(f"agreement: {type(e).__name__}: {e}")
    rep.data["planned_training_s"] = planned
    rep.data["total_folder_bytes"] = sum(m.get("folder_bytes", 0)
                                         for m in rep.data["models"].values())
    rep.save()
    summary(rep.data)
    sys.exit(1 if rep.data["errors"] else 0)


if __name__ == "__main__":
    main()
