#!/usr/bin/env bash
# On the GPU machine: builds syv and the quantized-weight GPU tests and runs them, then benchmarks
# b=1 (and 16) decode of the Qwen3-8B shape in bf16 and in `syv quantize`d fp8, awq and gptq copies
# of the same random weights: tok/s and % of the floor, whose weight term is the packed bytes
# (data + scales + zeros) for the quantized folders (`syv bench decode` prints the figure it used).
# Carry .devcarry-deps (tools/device/pack_deps.sh). Each phase fits one 10-minute device call:
#   tools/device/quant_cuda_check.sh tests    build + gpu_quant_linear_gpu_test + the engine test
#   tools/device/quant_cuda_check.sh prep     the 8B bf16 folder (16.4 GB) and its fp8 / awq / gptq
#   tools/device/quant_cuda_check.sh bench    syv bench decode on the four folders (b = 1, 16)
#   tools/device/quant_cuda_check.sh all      the three in order
# WORK (default /tmp/syv-quant) holds the folders (about 37 GB); DEPS (default .devcarry-deps).
set -uo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
DEPS=${DEPS:-.devcarry-deps}
WORK=${WORK:-/tmp/syv-quant}
CFG=tools/bench/configs/qwen3-8b
B=build/gpu-carry/bin
export SYV_SOURCE_DIR=$PWD
TESTS="gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test"

if [[ $WHAT == tests || $WHAT == all || ! -x $B/syv ]]; then
  timeout 400 tools/device/build_gpu.sh "$DEPS" build/gpu syv $TESTS gpu_cuda_ops_test 2>&1 | tail -2
fi
if [[ $WHAT == tests || $WHAT == all ]]; then
  timeout 120 $B/gpu_quant_linear_gpu_test 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED) |Failure|error" | head -40
  timeout 240 $B/gpu_engine_quantized_gpu_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |Failure|relative L2|error|chose" | head -40
  # The dense linear paths the quantized prefill path calls into, unchanged.
  timeout 120 $B/gpu_cuda_ops_test --gtest_filter='*Linear*:*Gemv*' 2>&1 |
    grep -E "^\[ +(PASSED|FAILED) |Failure" | head -10
fi
if [[ $WHAT == prep || $WHAT == all ]]; then
  mkdir -p "$WORK"
  df -h "$WORK" | tail -1
  if [[ ! -f $WORK/bf16/config.json ]]; then
    /usr/bin/time -f "demo-model %e s" $B/syv demo-model --config $CFG --out "$WORK/bf16" 2>&1 | tail -2
  fi
  for f in fp8 awq gptq; do
    [[ -f $WORK/$f/config.json ]] && continue
    /usr/bin/time -f "quantize $f %e s" $B/syv quantize --format $f --in "$WORK/bf16" --out "$WORK/$f" 2>&1 |
      tail -2
  done
  du -sh "$WORK"/* 2>/dev/null
fi
if [[ $WHAT == bench || $WHAT == all ]]; then
  for f in bf16 fp8 awq gptq; do
    [[ -f $WORK/$f/config.json ]] || { echo "$f: no folder (run the prep phase)"; continue; }
    echo "== $f"
    timeout 140 $B/syv bench decode --config "$WORK/$f" --batch 1,16 --context 512 --steps 30 2>&1 |
      grep -E "^\| decode|ceilings|weights:|decode floor|error|Error" | tail -6
  done
  # The GEMV / dequantize + GEMM crossover at 16 tokens (SYV_QUANT_GEMV_MAX_TOKENS=0: always the
  # dequantize path), for the record.
  for f in fp8 awq; do
    [[ -f $WORK/$f/config.json ]] || continue
    echo "== $f, quantized GEMV off"
    SYV_QUANT_GEMV_MAX_TOKENS=0 timeout 140 $B/syv bench decode --config "$WORK/$f" --batch 1,16 \
      --context 512 --steps 20 2>&1 | grep -E "^\| decode|error|Error" | tail -3
  done
fi
