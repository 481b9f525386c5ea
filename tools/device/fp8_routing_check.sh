#!/usr/bin/env bash
# On the GPU machine, one call (about 7 minutes with the build, 8 with PROFILE): the kernels fp8
# weights take between the GEMV's 8 tokens and prefill sizes.
#  1. gpu_quant_linear_gpu_test (the W8A16 GEMM first at 9-16 tokens for weights of fewer
#     128-row tiles than SMs where cuBLASLt's W8A8 GEMM would run, kQuantGemmBeforeFp8MaxTokens;
#     since 2026-12-06 11:20 not where syv's own fp8 kernel takes them; the norm writing the fp8
#     GEMM's activations, NormWritingFp8ActivationsGivesTheUnfusedBits) and
#     gpu_engine_quantized_gpu_test (every format's logits and greedy tokens against the CPU), the
#     dense linear tests of gpu_cuda_ops_test (gemm.cpp's plans).
#  2. `syv bench quant-kernels` on the Qwen3-8B shapes, fp8, 8-256 tokens: the default route, the
#     W8A16 GEMM, bf16, and the W8A8 GEMM (its rows with cuBLASLt's algorithm).
#  3. Model level (folders made meanwhile: the 8B's bf16 weights and their `syv quantize --format
#     fp8` copy): `syv bench decode` b = 1-64 and prefill 2K, bf16, then fp8 under the defaults,
#     with SYV_QUANT_GEMM_BEFORE_FP8_MAX_TOKENS=0 (as before 2026-12-06; only with OLD=1; on Hopper
#     with syv's own fp8 kernel up to 32 tokens, the default since, it changes nothing) and with
#     SYV_FP8_NORM_QUANT=0 (without the norm writing the W8A8 GEMM's activations, the default
#     since 2026-12-06; its bits tested by NormWritingFp8ActivationsGivesTheUnfusedBits).
# PROFILE=64: then tools/device/kernel_profile.sh on both folders at that batch (about 1 minute
# more). Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/fp8_routing_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
source tools/device/fp8_folders.sh
build gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test gpu_cuda_ops_test
fp8_folders_start
echo "== quant linear tests $(date +%T)"
timeout 150 $B/gpu_quant_linear_gpu_test 2>&1 | tee $O/quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is|splitk" | head -12
timeout 300 $B/gpu_engine_quantized_gpu_test 2>&1 | tee $O/engine_quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -8
# The fp8 formats again without the norm writing the W8A8 GEMM's activations (on by default).
SYV_FP8_NORM_QUANT=0 timeout 200 $B/gpu_engine_quantized_gpu_test --gtest_filter='*fp8*' 2>&1 |
  tee $O/engine_quant_tests_normq.log | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -8
# The dense GEMMs share gemm.cpp's plans with the fp8 GEMM.
timeout 120 $B/gpu_cuda_ops_test --gtest_filter='*Linear*:*Gemm*:*Gemv*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
echo "== quant kernels, fp8 $(date +%T)"
timeout 200 $B/syv bench quant-kernels --config $CFG --formats fp8 \
  --tokens ${TOKENS:-8,16,24,32,64,128,256} --paths default,gemm,fp8-gemm,bf16 >$O/qk.log 2>&1
# One line per shape and token count: us a call of each path (the fp8 GEMM's with the K splits
# cuBLASLt chose).
grep -E "^\| fp8" $O/qk.log | awk -F'|' '{
  k = sprintf("%-8s %4d", $3, $6); gsub(/ /, "", $7); if (!(k in line)) order[n++] = k
  line[k] = line[k] sprintf(" %s %.1f", $7, $8)
  if ($7 == "fp8-gemm" && match($12, /splitk [0-9]+/))
    line[k] = line[k] "(" substr($12, RSTART + 7, RLENGTH - 7) ")"
} END {for (i = 0; i < n; i++) print order[i] line[order[i]]}' | sed 's/fp8-gemm//g'

echo "== waiting for prep $(date +%T)"
fp8_folders_wait || exit 1
echo "== model level $(date +%T)"
fp8_bench bf16
fp8_bench fp8
[[ -n ${OLD:-} ]] && fp8_bench fp8 SYV_QUANT_GEMM_BEFORE_FP8_MAX_TOKENS=0
fp8_bench fp8 SYV_FP8_NORM_QUANT=0
if [[ -n ${PROFILE:-} ]]; then  # where a step's time goes, kernel by kernel (ncu, eager)
  for f in fp8 bf16; do
    echo "== kernel profile, $f, b = $PROFILE $(date +%T)"
    timeout 100 tools/device/kernel_profile.sh $B/syv $W/$f "$PROFILE" 512 2>&1 |
      tee $O/profile_$f.txt | head -20 | cut -c1-160
  done
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
