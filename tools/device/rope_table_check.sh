#!/usr/bin/env bash
# On the GPU machine, one call: the q/k norm + RoPE + K/V write with its rotations from a block
# table (rope_kv.cu, SYV_ROPE_TABLE, on by default since 2026-12-07) against the form before
# (SYV_ROPE_TABLE=0: powf and sincosf per element).
#  1. Tests: gpu_cuda_ops_test (the fused prologue against the CPU and bit-identical to the plain
#     sequence, a block spanning two tokens among the cases), gpu_kv_quant_gpu_test,
#     gpu_qwen3_golden_test, gpu_hybrid_golden_gpu_test, gpu_batch_invariance_test.
#  2. `syv bench decode` on the Qwen3-8B shape (random weights): b = 1 and 64 at context 512 and
#     the 2K prefill, off / on / off / on (one process each).
#  3. Issue 18's burst through `syv serve` (default flags), on then off, as time allows (BUDGET,
#     default 540 s), then the 2K prefill split of the 8B's first 4 layers with it on.
# TESTS / ROUNDS (default "0 1 0 1"): fewer tests or bench rounds for a short call. The register
# form (SYV_ROPE_ROWS, off by default): FORMS="SYV_ROPE_ROWS=0 SYV_ROPE_ROWS=1 SYV_ROPE_ROWS=0
# SYV_ROPE_ROWS=1" BURST_FORMS="SYV_ROPE_ROWS=1 SYV_ROPE_ROWS=0" (its tests are in
# gpu_cuda_ops_test and gpu_kv_quant_gpu_test) SPLIT_ENV=SYV_ROPE_ROWS=1.
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/rope_table_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
TESTS=${TESTS:-gpu_cuda_ops_test gpu_kv_quant_gpu_test gpu_qwen3_golden_test
  gpu_hybrid_golden_gpu_test gpu_batch_invariance_test}
build $TESTS
echo "== tests $(date +%T)"
for t in $TESTS; do
  timeout 200 $B/$t 2>&1 | tee $O/$t.log |
    grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -8 | sed "s/^/$t: /"
done
# FORMS: the environment of each bench process (default: the table off / on, ROUNDS times).
FORMS=${FORMS:-$(for v in ${ROUNDS:-0 1 0 1}; do echo -n "SYV_ROPE_TABLE=$v "; done)}
for form in $FORMS; do
  echo "== bench $form $(date +%T)"
  env $form timeout 150 $B/syv bench decode --config tools/bench/configs/qwen3-8b \
    --random-weights --batch 1,64 --context 512 --steps 20 --lengths 2048 2>&1 |
    tee -a $O/bench.log | grep -E "^\| (decode|prefill)|rror" | sort -u | tr -s ' '
done
# BURST_FORMS: the environment of each burst's server (default: the table on, then off).
for form in ${BURST_FORMS:-SYV_ROPE_TABLE=1 SYV_ROPE_TABLE=0}; do
  ((SECONDS - t0 < ${BUDGET:-540} - 60)) || { echo "-- burst $form: skipped (time)"; continue; }
  echo "== burst $form $(date +%T)"
  env $form QUICK=1 PRESETS=default timeout 150 tools/device/serve_bench_check.sh \
    build/gpu-carry $O/serve-${form//=/_} 2>&1 | grep -E "^burst|errors" | head -4
done
if ((SECONDS - t0 < ${BUDGET:-540} - 40)); then
  echo "== 2K prefill split $(date +%T)"
  env ${SPLIT_ENV:-DEFAULT=1} CONFIG=tools/bench/configs/qwen3-8b LAYERS=4 LENGTHS=2048 \
    timeout 100 tools/device/prefill_kernel_split.sh 2>&1 | grep -E "^\||kernels" | head -12
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
