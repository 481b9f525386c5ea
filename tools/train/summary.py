#!/usr/bin/env python3
"""The short summary of a training run's report.json (printed last by run_on_device.sh).
Usage: summary.py REPORT_JSON"""
import json
import sys


def summary(d):
    print("\nSUMMARY" + (" (DRY RUN: not for commit)" if d.get("dry_run") else ""))
    print(f"corpus: {d.get('corpus', {}).get('train_bytes', 0) / 1e6:.1f} MB train, "
          f"{d.get('corpus', {}).get('heldout_bytes', 0) / 1e6:.2f} MB held-out; unigram ppl "
          f"{d.get('unigram_ppl', float('nan')):.1f}")
    for name, m in d.get("models", {}).items():
        tr, ho = m.get("train", {}), m.get("heldout", {})
        line = (f"{name:12s} {m.get('parameters', 0) / 1e6:5.2f} M  steps {tr.get('steps')}  "
                f"tokens {tr.get('tokens_seen', 0) / 1e6:.1f} M  train {tr.get('seconds')} s  "
                f"ppl {ho.get('ppl', float('nan')):.2f}  {m.get('folder_bytes', 0) / 1e6:.2f} MB")
        if "mtp" in m:
            line += f"  mtp accept {m['mtp']['mtp_accept_vs_trunk']:.3f}"
        print(line)
    if "draft_dense_top1_agreement" in d:
        print(f"draft/dense top-1 agreement {d['draft_dense_top1_agreement']:.3f}")
    print(f"all folders {d.get('total_folder_bytes', 0) / 1e6:.2f} MB; total "
          f"{d.get('seconds_total')} s; errors: {d.get('errors') or 'none'}")



if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        summary(json.load(f))
