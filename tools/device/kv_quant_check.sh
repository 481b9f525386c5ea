#!/usr/bin/env bash
# On the GPU machine: builds syv and the quantized-KV GPU test and runs it, then benchmarks decode
# on the Qwen3-8B shape (random weights) at b = 1 and 64, context 8192, with a bf16, an fp8 and an
# int4 KV cache (`syv bench decode --kv-cache-dtype`). Issue 24's target: fp8 KV at b = 64,
# ctx 8192 at least 1.5x the bf16 KV decode rate. Carry .devcarry-deps (tools/device/pack_deps.sh).
# Phases, each sized for one 10-minute call:
#   tools/device/kv_quant_check.sh build   Release build of syv + the tests (build/gpu)
#   tools/device/kv_quant_check.sh tests   gpu_kv_quant_gpu_test, then the float-KV attention and
#                                          write tests of gpu_cuda_ops_test (the kernels it shares)
#   tools/device/kv_quant_check.sh bench   syv bench decode, bf16 / fp8 / int4 KV, b = 1 and 64
#   tools/device/kv_quant_check.sh all     all of them in order
# Later phases build first when build/gpu-carry/bin/syv is missing (a fresh machine).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WHAT=${1:-all}
DEPS=${DEPS:-.devcarry-deps}
CFG=tools/bench/configs/qwen3-8b
B=build/gpu-carry/bin
export SYV_SOURCE_DIR=$PWD
phase() { [[ $WHAT == "$1" || $WHAT == all ]]; }

if phase build || [[ ! -x $B/syv ]]; then
  t0=$SECONDS
  timeout 500 tools/device/build_gpu.sh "$DEPS" build/gpu syv gpu_kv_quant_gpu_test \
    gpu_cuda_ops_test 2>&1 | tail -2
  echo "build: $((SECONDS - t0)) s"
fi
if phase tests; then
  timeout 240 $B/gpu_kv_quant_gpu_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |Failure|relative L2|first differing|Expected|error" | head -60
  # The bf16 paths of the kernels the quantized ones were added to (decode, prefill, writes).
  timeout 240 $B/gpu_cuda_ops_test --gtest_filter='*Attention*:*KvWrite*:*QkvNormRope*:-*Timing*' \
    2>&1 | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -10
fi
if phase bench; then
  for kv in bf16 fp8 int4; do
    echo "== $kv KV"
    timeout 180 $B/syv bench decode --config $CFG --random-weights --batch 1,64 --context 8192 \
      --steps 30 --kv-cache-dtype $kv 2>&1 | grep -E "^\| decode|decode floor|KV|rror" | tail -6
  done
fi
