#!/usr/bin/env bash
# On the GPU machine, one call: the step budget `syv serve` chooses without --max-batched-tokens
# (src/cli/step_budget.h), through `syv bench serve`'s burst (128 requests x 512 prompt tokens,
# 128 out, 64 offered, ignore_eos; random weights): the Qwen3-8B shape with the default flags
# (chooses 2,048: issue 18's figure), then the Qwen3-0.6B shape with the default flags (chooses
# 16,384) against --max-batched-tokens 2048 (the fixed default before), each with its start-up
# lines. BURST / PRESETS as tools/device/serve_bench_check.sh takes them. SPLIT=1: then where a
# 2,048-token prefill of the 8B's first 4 layers goes, kernel by kernel under ncu
# (tools/device/prefill_kernel_split.sh), the burst's prefill steps being ~56 ms against 36 of
# linears at the GEMM rate on an H100.
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/step_budget_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build
for cfg in qwen3-8b qwen3-0.6b; do
  runs=default
  [[ $cfg == qwen3-0.6b ]] && runs="default default:--max-batched-tokens=2048 default"
  echo "== $cfg $(date +%T)"
  CONFIG_DIR=tools/bench/configs/$cfg QUICK=1 PRESETS="${PRESETS:-$runs}" timeout 200 \
    tools/device/serve_bench_check.sh build/gpu-carry $O/$cfg 2>&1 | grep -v "^\[" | tail -24
  for f in $O/$cfg/bench-*.err; do
    [[ -s $f ]] && grep -q -i "error\|fail" "$f" && { echo "-- $f"; tail -4 "$f"; }
  done
done
if [[ -n ${SPLIT:-} ]]; then
  echo "== 2K prefill split $(date +%T)"
  CONFIG=tools/bench/configs/qwen3-8b LAYERS=4 LENGTHS=2048 timeout 200 \
    tools/device/prefill_kernel_split.sh 2>&1 | grep -v "^\[" | head -30
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
