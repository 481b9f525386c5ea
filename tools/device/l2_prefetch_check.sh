#!/usr/bin/env bash
# On the GPU machine, one call (~7 minutes with the build): the weights' L2 prefetch before the PDL
# wait (SYV_L2_PREFETCH_KIB, common.cuh l2_prefetch_bytes; off by default until measured), and the
# hybrid prefill's new defaults at the model level.
#  1. Tests: gpu_cuda_ops_test's prefetch test (every GEMV form's bits with and without it) and the
#     GEMV / fused-norm tests, gpu_cuda_moe_ops_test's block tests (with the prefetch among them);
#     under SYV_L2_PREFETCH_KIB=16384 the quantized-linear tests, the hybrid golden tests and the
#     engine's hybrid and MoE scenarios.
#  2. `syv bench decode` b = 1 (graph ms a step, % of the floor) under each of KIBS (KiB prefetched,
#     0: none): Qwen3-Next's 8-layer copy, its 24 layers where the GPU holds them (> 100 GB); under
#     each of SHORT: the Qwen3.5 9B-class shape, Qwen3-8B, and Qwen3-8B in gptq int4 (`syv
#     quantize`d meanwhile).
#  3. The 8-layer copy's 2K / 8K prefill under the defaults (issue 14's prefill target).
# STOP_AFTER=s: no bench line starts later (default 540). Carry .devcarry-deps and .devcarry-tok.
#   [KIBS="0 8192 16384 32768 0"] [SHORT="0 16384 32768"] tools/device/l2_prefetch_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
KIBS=${KIBS:-0 8192 16384 32768 0}  # the Qwen3-Next lines
SHORT=${SHORT:-0 16384 32768}        # the others
PF=SYV_L2_PREFETCH_KIB=16384
build gpu_cuda_ops_test gpu_cuda_moe_ops_test gpu_quant_linear_gpu_test \
  gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
FORMATS=gptq
source tools/device/fp8_folders.sh
fp8_folders_start

echo "== tests $(date +%T)"
result() { grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' '; }
echo "ops: $(timeout 150 $B/gpu_cuda_ops_test \
  --gtest_filter='*L2Prefetch*:*LinearPair*:*FusedNorm*:*Gemv*:-*Timing*' 2>&1 |
  tee -a $O/tests.log | result)"
echo "moe: $(timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='*Block*' 2>&1 |
  tee -a $O/tests.log | result)"
echo "$PF quant: $(env $PF timeout 200 $B/gpu_quant_linear_gpu_test --gtest_filter='-*Timing*' \
  2>&1 | tee -a $O/tests.log | result)"
echo "$PF golden: $(env $PF timeout 150 $B/gpu_hybrid_golden_gpu_test 2>&1 |
  tee -a $O/tests.log | result)"
echo "$PF engine: $(env $PF timeout 150 $B/gpu_engine_qwen3_gpu_test \
  --gtest_filter='*Hybrid*:*Moe*:*MixtureOfExperts*' 2>&1 | tee -a $O/tests.log | result)"

lines() {  # CONFIG [KIB...]: b = 1 under each KIB given (default: KIBS)
  local cfg=$1
  shift
  for kib in ${@:-$KIBS}; do
    ((SECONDS - t0 < ${STOP_AFTER:-540})) || { echo "  (time)"; return; }
    echo "  $kib KiB: $(b1 "$cfg" SYV_L2_PREFETCH_KIB=$kib)"
  done
}
cut=/tmp/l2-prefetch-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
echo "== b = 1, Qwen3-Next 8 layers $(date +%T)"
lines $cut
echo "== prefill, Qwen3-Next 8 layers, the defaults $(date +%T)"
prefill $cut 2048,8192 DEFAULT=1
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if ((mem > 100000)); then
  echo "== b = 1, Qwen3-Next 24 layers $(date +%T)"
  lines tools/bench/configs/qwen3-next-24l
fi
echo "== b = 1, Qwen3.5 9B-class $(date +%T)"
lines tools/bench/configs/qwen3.5-9b-class $SHORT
echo "== b = 1, Qwen3-8B $(date +%T)"
lines $CFG $SHORT
echo "== b = 1, Qwen3-8B gptq $(date +%T)"
fp8_folders_wait && lines $W/gptq $SHORT
echo "total: $((SECONDS - t0)) s $(date +%T)"
