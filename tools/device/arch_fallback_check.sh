#!/usr/bin/env bash
# On the GPU machine (an H200): runs the GPU tests whose kernels have a shared-memory fallback
# (docs/cuda-backend.md "Architectures") with the limit of smaller GPUs, so the H200 takes their
# dispatch: SYV_SMEM_LIMIT_KIB=163 (sm_80: prefill attention at head_dim 256 on the decode
# kernels) and 99 (sm_86 / 89 / 120: also prefill at 128, tensor-core decode at 256, the chunked
# Gated DeltaNet, the large invariant GEMM tile), with SYV_PDL=0 as those GPUs default to.
# Then the same tests on the H200's own choices. Carry .devcarry-deps (tools/device/pack_deps.sh).
#   tools/device/arch_fallback_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
T="gpu_kv_quant_gpu_test gpu_cuda_ops_test gpu_cuda_hybrid_ops_test gpu_batch_invariance_test gpu_engine_quantized_gpu_test gpu_hybrid_golden_gpu_test gpu_qwen3_golden_test"
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T 2>&1 | tail -2
B=build/gpu-carry/bin
for limit in 163 99 0; do
  for t in $T; do
    if [[ $limit == 0 ]]; then
      r=$(timeout 90 $B/$t --gtest_filter='-*Timing*' 2>&1)
    else
      r=$(SYV_SMEM_LIMIT_KIB=$limit SYV_PDL=0 timeout 90 $B/$t --gtest_filter='-*Timing*' 2>&1)
    fi
    echo "limit ${limit} KiB (0: the device's) $t: $(echo "$r" |
      grep -E "^\[  (PASSED|FAILED) |Failure|error" | head -6 | tr '\n' ' ')"
  done
done
