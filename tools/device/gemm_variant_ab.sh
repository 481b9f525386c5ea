#!/usr/bin/env bash
# On the GPU machine: A/B of the quantized tensor-core GEMM's variants (quant_gemm_mma.cu,
# SYV_QUANT_GEMM_VARIANT: 0 the default; bit 0, the activations staged in the mma's pair order, no
# PRMT per mma; bit 1, the tile's token width fitted to the step) in one build: each variant's
# GEMM tests (against the CPU), then `syv bench quant-kernels` at 24-128 tokens (the "gemm" rows:
# us a call and TFLOP/s per projection of the 8B shape; 24, 48 and 96 are graph buckets). Written
# 2026-12-05 without a GPU to run it on (the device time went to checking the paths now on by
# default). Then fp8_gemm_mma.cu's W8A8 kernel (off by default, written the same day): its tests
# and its "fp8-mma" rows against cuBLASLt's "fp8-gemm" rows, under the fitted tile.
# Carry .devcarry-deps (tools/device/pack_deps.sh) and .devcarry-tok. About 6 minutes.
#   tools/device/gemm_variant_ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
t0=$SECONDS
timeout 400 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_quant_linear_gpu_test 2>&1 |
  tail -1
echo "build: $((SECONDS - t0)) s"
for v in 0 1 2 3; do
  echo "== variant $v: $(SYV_QUANT_GEMM_VARIANT=$v timeout 100 $B/gpu_quant_linear_gpu_test \
    --gtest_filter='*TensorCoreGemm*' 2>&1 | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -4 |
    tr '\n' ' ')"
  SYV_QUANT_GEMM_VARIANT=$v timeout 100 $B/syv bench quant-kernels \
    --config tools/bench/configs/qwen3-8b --formats int4,fp8 --tokens 24,32,48,64,96,128 2>&1 |
    grep -E "\| gemm " | tee "${OUT:-/tmp}/gemm_variant_$v.txt"
done
echo "== fp8 mma kernel: $(timeout 100 $B/gpu_quant_linear_gpu_test --gtest_filter='*Fp8Gemm*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')"
timeout 100 $B/syv bench quant-kernels --config tools/bench/configs/qwen3-8b --formats fp8 \
  --tokens 17,24,32,48,64,96,128,256 2>&1 | grep -E "\| (fp8-gemm|fp8-mma|bf16) " |
  tee "${OUT:-/tmp}/fp8_mma.txt"
