#!/usr/bin/env bash
# Calibrates adaptive speculation's cost model (docs/engine.md "Adaptive speculation"): for each
# batch size, plain decoding vs speculation with adaptivity off (every sequence asks for k drafts),
# and speculation with adaptivity on. Prints per batch: plain and speculative output tokens/s, the
# verify step's cost over a decode step (step time ratio), the drafts fed per sequence and step,
# the per-draft cost r = (ratio - 1) / drafts, the knee it implies (r = B / (B + knee)), and the
# adaptive run's speed relative to plain, and the share of the adaptive run's steps that replayed
# a verify graph (vgraph%) and that were padded to one draft count to do so (pad%; both 0 with
# graphs off or on the CPU: engine/verify_padding.h).
#
# Each figure is the fastest of $REPEATS runs (default 3).
#
#   [SPEC_ARGS="flags for the speculative runs only"] \
#   tools/spec_calibrate.sh SYV MODEL_DIR METHOD K "BATCHES" [extra bench flags for every run...]
#   e.g. tools/spec_calibrate.sh build/dev/syv models/tiny-dense ngram 4 "1 4 16 64"
#        SPEC_ARGS="--draft-model models/tiny-draft" \
#          tools/spec_calibrate.sh build/dev/syv models/tiny-dense draft 4 "1 16"
set -euo pipefail
syv=$1 model=$2 method=$3 k=$4 batches=$5
shift 5
# The fastest of REPEATS runs (a shared machine's noise only ever slows a run down).
bench() {
  local best="" i out
  for ((i = 0; i < ${REPEATS:-3}; ++i)); do
    out=$("$syv" bench offline --model "$model" --input-len 64 --output-len 128 --host-cache-gb 0 \
      --json "$@" 2>/dev/null | tail -1)
    best=$(python3 -c 'import json,sys; a,b=sys.argv[1:3]; print(b if not a or json.loads(b)["seconds"] < json.loads(a)["seconds"] else a)' "$best" "$out")
  done
  echo "$best"
}
printf "%5s %10s %10s %10s %8s %8s %8s %11s %7s %7s\n" B plain_t/s spec_t/s ratio drafts r knee \
  adapt/plain vgraph% pad%
for b in $batches; do
  plain=$(bench --num-prompts "$b" "$@")
  spec=$(bench --num-prompts "$b" --speculative-method "$method" --num-speculative-tokens "$k" \
    --speculative-adaptive off ${SPEC_ARGS:-} "$@")
  adapt=$(bench --num-prompts "$b" --speculative-method "$method" --num-speculative-tokens "$k" \
    --speculative-adaptive on ${SPEC_ARGS:-} "$@")
  python3 - "$b" "$plain" "$spec" "$adapt" <<'PY'
import json, sys
b = int(sys.argv[1]); p, s, a = (json.loads(x) for x in sys.argv[2:5])
ratio = (s["seconds"] / s["steps"]) / (p["seconds"] / p["steps"])
drafts = s["draft_tokens"] / max(1, s["steps"]) / b  # per sequence and step
r = (ratio - 1) / drafts if drafts > 0 else float("nan")
knee = b * (1 / r - 1) if r > 0 else float("inf")
steps = max(1, a["steps"])
print("%5d %10.1f %10.1f %10.2f %8.2f %8.2f %8.2f %11.3f %7.1f %7.1f" % (
    b, p["output_tokens_per_s"], s["output_tokens_per_s"], ratio, drafts, r, knee,
    a["output_tokens_per_s"] / p["output_tokens_per_s"],
    100.0 * a.get("graph_verify_steps", 0) / steps, 100.0 * a.get("verify_padded_steps", 0) / steps))
PY
done
