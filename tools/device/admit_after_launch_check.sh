#!/usr/bin/env bash
# On the GPU machine, one call (278 s on an H100, 328 s with BURST=1; 2026-12-07): issue 17's
# others' decode while a host hit loads, with the host hit admitted after the step's launch
# (--admit-after-launch, on by default with CUDA since 2026-12-07) against before it (off):
#  1. gpu_host_tier_engine_gpu_test (the host-tier scenarios on CUDA, admission after the launch by
#     default) and gpu_engine_graphs_gpu_test.
#  2. tools/device/host_tier_steps.sh on the Qwen3-8B shape: off, on, off, on (one process each:
#     32K-token prefix evicted to the host tier and resent while 8 others decode), then on the
#     Qwen3.5 9B-class shape: off, on, as time allows (BUDGET, default 540 s).
#     VARIANTS_8B / VARIANTS_9B: other host_tier_steps.sh variants (e.g. default+mapped).
#  3. BURST=1 and 120 s left: issue 18's burst through `syv serve` with the default flags
#     (serve_bench_check.sh QUICK=1 PRESETS=default, on the same 8B folder).
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/admit_after_launch_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build gpu_host_tier_engine_gpu_test gpu_engine_graphs_gpu_test
( timeout 200 $B/syv demo-model --config tools/bench/configs/qwen3-8b \
    --tokenizer third_party/qwen3-tokenizer --out /tmp/qwen3-8b-random >$O/prep8b.log 2>&1 ) &
echo "== tests $(date +%T)"
for t in gpu_host_tier_engine_gpu_test gpu_engine_graphs_gpu_test; do
  timeout 240 $B/$t 2>&1 | tee $O/$t.log |
    grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -12
done
wait
for v in ${VARIANTS_8B:-default-admit default default-admit default}; do
  ((SECONDS - t0 < ${BUDGET:-540} - 60)) || { echo "-- 8B $v: skipped (time)"; continue; }
  echo "== 8B $v $(date +%T)"
  CONFIG=qwen3-8b tools/device/host_tier_steps.sh $v 2>&1 | tee -a $O/steps.log | grep -v "^\["
done
for v in ${VARIANTS_9B:-default-admit default}; do
  ((SECONDS - t0 < ${BUDGET:-540} - 90)) || { echo "-- 9B-class $v: skipped (time)"; continue; }
  echo "== 9B-class $v $(date +%T)"
  CONFIG=qwen3.5-9b-class tools/device/host_tier_steps.sh $v 2>&1 | tee -a $O/steps.log |
    grep -v "^\["
done
if [[ -n ${BURST:-} ]] && ((SECONDS - t0 < ${BUDGET:-540} - 120)); then
  echo "== burst, default flags $(date +%T)"
  QUICK=1 PRESETS=default timeout 150 tools/device/serve_bench_check.sh build/gpu-carry $O/serve \
    2>&1 | grep -v "^\[" | tail -12
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
