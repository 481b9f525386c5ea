#!/usr/bin/env bash
# On the GPU machine, one call (about 3-6 minutes with the build): issue 14's batch-1 MoE decode.
#  1. gpu_cuda_moe_ops_test (the MoE block against the op sequence bit for bit, the top-k's ties),
#     gpu_cuda_ops_test's GEMV and fused-norm tests, the hybrid ops tests, the hybrid golden test (MoE fixtures) and the
#     engine's MoE scenarios.
#  2. `syv bench decode` b = 1 (graph ms a step, % of the routed floor) of Qwen3-Next's shape cut
#     to LAYERS layers (default 8: it fits an H100) under each form of FORMS (environment
#     assignments, "A=1,B=2" sets both), of the Qwen3.5 9B-class shape under NFORMS, of Qwen3-8B,
#     and of the whole 24-layer shape where the GPU holds it (over 100 GB).
#  3. decode_kernel_split.sh of the Qwen3-Next cut under the defaults (ncu, one eager step);
#     SPLIT=0 skips it.
# Carry .devcarry-deps and .devcarry-tok.
#   tools/device/moe_b1_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
LAYERS=${LAYERS:-8}
FORMS=${FORMS:-SYV_GEMV_QKV_VARIANT=6 SYV_FUSED_NORM=0}
NFORMS=${NFORMS:-}
build gpu_cuda_moe_ops_test gpu_cuda_ops_test gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test \
  gpu_engine_qwen3_gpu_test

echo "== tests $(date +%T)"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/moe_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|differ" | head -20
timeout 150 $B/gpu_cuda_ops_test --gtest_filter='*Gemv*:*FusedNorm*:-*Timing*' 2>&1 |
  tee $O/ops.log | grep -E "^\[ +(PASSED|FAILED) |Failure|Expected" | head -10
timeout 150 $B/gpu_cuda_hybrid_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/hybrid_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected" | head -10
timeout 150 $B/gpu_hybrid_golden_gpu_test 2>&1 | tee $O/hybrid_golden.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -10
timeout 150 $B/gpu_engine_qwen3_gpu_test --gtest_filter='MixtureOfExperts*' 2>&1 |
  tee $O/engine_moe.log | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -10

cut=/tmp/moe-b1-config-$LAYERS
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l "$LAYERS" $cut
echo "== Qwen3-Next ($LAYERS layers) b = 1 $(date +%T)"
echo "default: $(b1 $cut DEFAULT=1)"
for v in $FORMS; do echo "$v: $(b1 $cut ${v//,/ })"; done
echo "default again: $(b1 $cut DEFAULT=1)"
echo "== Qwen3.5 9B-class b = 1 $(date +%T)"
echo "default: $(b1 tools/bench/configs/qwen3.5-9b-class DEFAULT=1)"
for v in $NFORMS; do echo "$v: $(b1 tools/bench/configs/qwen3.5-9b-class ${v//,/ })"; done
echo "== Qwen3-8B b = 1 $(date +%T)"
echo "default: $(b1 tools/bench/configs/qwen3-8b DEFAULT=1)"
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if ((mem > 100000)); then
  echo "== Qwen3-Next 24 layers b = 1 $(date +%T)"
  echo "default: $(b1 tools/bench/configs/qwen3-next-24l DEFAULT=1)"
  for v in $FORMS; do echo "$v: $(b1 tools/bench/configs/qwen3-next-24l ${v//,/ })"; done
fi
if [[ ${SPLIT:-1} != 0 ]]; then
  echo "== kernel split $(date +%T)"
  NOBUILD=1 CONFIG=$cut LIST=12 tools/device/decode_kernel_split.sh 2>&1 | grep -v '^| decode'
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
