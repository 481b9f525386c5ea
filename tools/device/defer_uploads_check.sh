#!/usr/bin/env bash
# On the GPU machine: the A/B options of docs/cuda-backend.md "Host tier copies"
# (SYV_DEFER_COPIES=0: a step's copies issued at their calls, not after its forward is launched
# as by default since 2026-12-05; SYV_STEP_UPLOADS=mapped:
# a step's metadata and sampling rows read from mapped memory by a kernel; SYV_AHEAD_STREAM=out: the
# write-ahead on the write-backs' stream). Builds syv and the GPU tests, runs the tests that cover
# copies, graphs and the host tier with each option set (exactness must not change; the first set,
# the defaults, also runs gpu_quant_linear_gpu_test (with the act-order permuted case of
# SYV_ACT_ORDER_PERM), gpu_moe_quantized_gpu_test (SYV_QUANT_MOE's check) and
# gpu_engine_quantized_gpu_test (quantized hybrids now keep their gated attention quantized),
# gpu_moe_quant_gemv_gpu_test and gpu_cuda_load_scratch_gpu_test (the scratch syv inspect
# counts)), or times the host tier's loading steps with and without them on one shape
# (tools/device/host_tier_steps.sh). Progress is printed as it goes; every phase has its own
# timeout.
# Carry .devcarry-deps (tools/device/pack_deps.sh) and .devcarry-tok.
# Each part fits one 10-minute device call:
#   tools/device/defer_uploads_check.sh tests
#   tools/device/defer_uploads_check.sh quant   (the default set and the quantized paths the
#                                                defaults replaced since 2026-12-05, then the
#                                                quantized MoE GEMV's and tiled path's timing at
#                                                Qwen3-Next's shape)
#   tools/device/defer_uploads_check.sh steps qwen3-8b [variant ...]
#   tools/device/defer_uploads_check.sh steps qwen3.5-9b-class [variant ...]
# (variants as host_tier_steps.sh takes them; default: default (deferred copies), -defer, +mapped,
# -defer+mapped, +aheadout)
set -uo pipefail
cd "$(dirname "$0")/../.."
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
WHAT=${1:?tests or steps CONFIG}
T="gpu_host_copy_gpu_test gpu_engine_graphs_gpu_test gpu_engine_qwen3_gpu_test gpu_sampling_gpu_test gpu_host_tier_engine_gpu_test gpu_engine_mtp_gpu_test"
echo "== build $(date +%T)"
Q="gpu_quant_linear_gpu_test gpu_moe_quantized_gpu_test gpu_engine_quantized_gpu_test
  gpu_moe_quant_gemv_gpu_test gpu_cuda_load_scratch_gpu_test"
timeout 280 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T $Q \
  2>&1 | tail -1
B=build/gpu-carry/bin
[[ -x $B/syv ]] || { echo "build failed"; exit 1; }
sets=("" "SYV_DEFER_COPIES=0" "SYV_STEP_UPLOADS=mapped"
  "SYV_STEP_UPLOADS=mapped SYV_AHEAD_STREAM=out")
# quant: the defaults, then the quantized paths they replaced on 2026-12-05 (the one-element
# dequantize, the dequantize path instead of the tensor-core GEMM at 17-128 tokens and of MoE
# experts' tiled path on packed rows), still reachable for A/B; here the other tests under them.
[[ $WHAT == quant ]] &&
  sets=("" "SYV_QUANT_DEQUANT_VEC=0 SYV_QUANT_GEMM_MAX_TOKENS=0 SYV_QUANT_MOE_GEMM=0")
if [[ $WHAT == tests || $WHAT == quant ]]; then
  for opts in "${sets[@]}"; do
    echo "== tests with [${opts:-defaults}] $(date +%T)"
    tests=$T
    [[ -z $opts || $WHAT == quant ]] && tests="$T $Q"
    for t in $tests; do
      r=$(env $opts timeout 90 $B/$t --gtest_filter='-*Timing*' 2>&1 |
        grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
      echo "$t: $r"
    done
  done
fi
if [[ $WHAT == quant ]]; then
  echo "== quantized MoE GEMV / tiled path timing $(date +%T)"
  timeout 120 $B/gpu_moe_quant_gemv_gpu_test --gtest_filter='*Timing*' 2>&1 |
    grep -E "device copy|int4 moe|PASSED|FAILED|Failure"
fi
if [[ $WHAT == steps ]]; then
  config=${2:?steps CONFIG}
  shift 2
  (($#)) || set -- default default-defer default+mapped default-defer+mapped default+aheadout
  echo "== host tier steps, $config $(date +%T)"
  CONFIG=$config timeout 500 tools/device/host_tier_steps.sh "$@"
fi
echo "== done $(date +%T)"
