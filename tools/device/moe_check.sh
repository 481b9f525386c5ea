#!/usr/bin/env bash
# On the GPU machine: mixture of experts on CUDA (backend/cuda/moe.cu, issue 14). Builds syv and
# the MoE GPU tests, runs the op tests (vs the CPU ops), the golden test on the MoE fixtures (and
# the Qwen3.5 ones: the same test binary), the engine exactness scenarios on the MoE fixtures,
# transformers' own bf16 floor on the fixtures when torch + transformers are installed (the MoE
# fixtures' golden bound is issue 14's 2e-2 until that floor is written into the test), then
# `syv bench decode` on Qwen3-Next's default shape with 24 layers (random weights, ~78 GB) at
# b = 1 and 64 with an 8K prefill in the same process: the decode rows give the floor that counts
# only the experts the step routes to ("% of floor", "N experts read"), the prefill row the rate on
# active FLOPs against the GEMM measured in the same run ("% of measured GEMM"). Targets (issue 14):
# b=1 >= 70% of floor, b=64 >= 60%, prefill 8K >= 40% of the measured GEMM. Carry .devcarry-deps
# (tools/device/pack_deps.sh). About 6 minutes on an H200.
#   tools/device/moe_check.sh [tests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
WHAT=${1:-all}
CFG=tools/bench/configs/qwen3-next-24l
B=build/gpu-carry/bin
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_moe_ops_test \
  gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test 2>&1 | tail -3
echo "build: $((SECONDS - t0)) s"
if [[ $WHAT != bench ]]; then
  timeout 120 $B/gpu_cuda_moe_ops_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |Failure|Expected|relative|error|differs|^moe, |^moe block|^device copy" |
    head -80
  timeout 120 $B/gpu_hybrid_golden_gpu_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |median|Failure|Expected|error" | head -80
  timeout 120 $B/gpu_engine_qwen3_gpu_test --gtest_filter='MixtureOfExperts*' 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |Failure|request" | head -30
  timeout 60 python3 tools/fixtures/hybrid_bf16_floor.py 2>&1 | grep -E "transformers|qnext|q35moe" ||
    echo "(no transformers-bf16 floor: torch / transformers not installed here)"
  echo "tests: $((SECONDS - t0)) s"
fi
if [[ $WHAT != tests ]]; then
  timeout 200 $B/syv bench decode --config $CFG --random-weights --batch 1,64 --context 512 \
    --steps 20 --lengths 8192 2>&1 |
    grep -E "^\| |ceilings|weights:|decode floor|recurrent|memory plan|rror" | tail -14
  echo "bench: $((SECONDS - t0)) s"
fi
