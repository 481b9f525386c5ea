#!/usr/bin/env bash
# On the GPU machine, one call: issue 18's burst through `syv serve` (128 requests x 512 prompt
# tokens, 128 out, 64 offered, ignore_eos; Qwen3-8B shape, random weights) with the default flags
# and with `--preset throughput`, each preset's `syv bench serve` stderr kept, then the 64-row
# decode step it is mostly made of (`syv bench decode --batch 64 --context 512`, graph ms and % of
# the floor, with the run's copy and GEMM ceilings for `syv bench schedule`'s floor of the burst),
# then, as time allows (BUDGET, default 540 s), issue 17's host-tier steps on the 8B for the
# copy-path variants in VARIANTS_8B (default: none).
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   [PRESETS="default throughput"] [VARIANTS_8B="default engines:engines"] \
#   tools/device/burst_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build
timeout 200 $B/syv demo-model --config tools/bench/configs/qwen3-8b \
  --tokenizer third_party/qwen3-tokenizer --out /tmp/qwen3-8b-random >$O/prep8b.log 2>&1 ||
  { echo "demo-model failed:"; tail -3 $O/prep8b.log; }
echo "== burst $(date +%T)"
QUICK=1 PRESETS="${PRESETS:-default throughput}" timeout 300 tools/device/serve_bench_check.sh \
  build/gpu-carry $O/serve 2>&1 | grep -v "^\[" | tail -24
for f in $O/serve/bench-*.err; do
  [[ -s $f ]] && { echo "-- $f (last lines)"; tail -4 "$f"; }
done
echo "== decode b = 64 $(date +%T)"
timeout 150 $B/syv bench decode --config tools/bench/configs/qwen3-8b --random-weights \
  --batch 64 --context 512 --steps 20 2>&1 | tee -a $O/bench.log |
  grep -E "^\| decode|^summary|copy .* GB/s|rror" | head -8
for v in ${VARIANTS_8B:-}; do
  ((SECONDS - t0 < ${BUDGET:-540} - 60)) || { echo "-- 8B $v: skipped (time)"; continue; }
  echo "== 8B host tier $v $(date +%T)"
  CONFIG=qwen3-8b tools/device/host_tier_steps.sh $v 2>&1 | tee -a $O/steps.log | grep -v "^\["
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
