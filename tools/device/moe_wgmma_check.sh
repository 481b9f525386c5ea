#!/usr/bin/env bash
# On the GPU machine, one call (153 s with the build on an H100, 2026-12-07): the routed experts'
# grouped GEMMs on warpgroup MMA (moe_wgmma.cu) against moe_gemm_kernel (SYV_MOE_WGMMA=0), and the
# decode conv1d's reads before the PDL wait.
#  1. gpu_cuda_moe_ops_test (every MoE op test, WgmmaGemmsMatchCpuAtEveryTileSize among them), the
#     hybrid ops, the hybrid golden test (MoE fixtures) and the engine's MoE scenarios.
#  2. QwenNextPrefillTiming: the routed experts alone at 2K and 8K tokens, every tile.
#  3. `syv bench decode --lengths 2048,8192` (prefill ms, % of the same-run GEMM on active FLOPs)
#     on an 8-layer copy of qwen3-next-24l, and on the whole 24 layers at 8K where the GPU holds
#     it (over 100 GB), each with and without SYV_MOE_WGMMA.
#  4. b = 1 decode of the 8-layer copy (and 24 layers where it fits) with and without
#     SYV_PDL_EARLY_READS.
# Carry .devcarry-deps and .devcarry-tok.
#   tools/device/moe_wgmma_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test \
  gpu_engine_qwen3_gpu_test

echo "== tests $(date +%T)"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/moe_ops.log |
  grep -E "^\[ +(PASSED|FAILED|SKIPPED) |Failure|Expected|differ|bits" | head -20
timeout 150 $B/gpu_cuda_hybrid_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/hybrid_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
timeout 150 $B/gpu_hybrid_golden_gpu_test 2>&1 | tee $O/hybrid_golden.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
timeout 150 $B/gpu_engine_qwen3_gpu_test --gtest_filter='MixtureOfExperts*' 2>&1 |
  tee $O/engine_moe.log | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6

echo "== experts alone $(date +%T)"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  tee $O/moe_timing.log | grep -E "^moe prefill|FAILED"

cut=/tmp/moe-wgmma-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
echo "== prefill, Qwen3-Next 8 layers $(date +%T)"
echo "-- default"; prefill $cut 2048,8192 DEFAULT=1
echo "-- SYV_MOE_WGMMA=0"; prefill $cut 2048,8192 SYV_MOE_WGMMA=0
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if ((mem > 100000)); then
  echo "== prefill, Qwen3-Next 24 layers $(date +%T)"
  echo "-- default"; prefill tools/bench/configs/qwen3-next-24l 8192 DEFAULT=1
  echo "-- SYV_MOE_WGMMA=0"; prefill tools/bench/configs/qwen3-next-24l 8192 SYV_MOE_WGMMA=0
fi
echo "== b = 1, Qwen3-Next 8 layers $(date +%T)"
echo "default: $(b1 $cut DEFAULT=1)"
echo "SYV_PDL_EARLY_READS=0: $(b1 $cut SYV_PDL_EARLY_READS=0)"
echo "default again: $(b1 $cut DEFAULT=1)"
if ((mem > 100000)); then
  echo "== b = 1, Qwen3-Next 24 layers $(date +%T)"
  for v in ${FORMS24:-DEFAULT=1 SYV_PDL_EARLY_READS=0}; do
    echo "$v: $(b1 tools/bench/configs/qwen3-next-24l ${v//,/ })"
  done
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
