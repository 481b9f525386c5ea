#!/usr/bin/env bash
# On the GPU machine, one call (262 s on an H100 with both rounds, 2026-12-07): the
# dequantization scratch's row chunks written in place (2026-12-07: an int4 linear outside W4A8
# and the output projection count at most 64 MiB of the scratch, each chunk's cuBLASLt GEMM
# writing its columns of out, ldc N), on the Qwen3-8B and Qwen3.5-27B shapes:
#  1. gpu_quant_linear_gpu_test (the row chunks, in place and copied, against the CPU),
#     gpu_cuda_load_scratch_gpu_test (the backend's scratch = inspect's count) and
#     gpu_engine_quantized_gpu_test.
#  2. `syv bench decode` of a `syv quantize`d gptq copy (made meanwhile), b = 1 / 64 at context 512
#     and the 2K prefill (int4 gate|up [24576, 4096], 201 MB in bf16: 3 chunks at 64 MiB), under
#     the default cap, SYV_DEQUANT_CHUNK_MB=0 (every weight whole, as before) and =32; then the 2K
#     prefill of Qwen3.5-27B cut to 4 layers in gptq with --lm-head (gate|up [34816, 5120], 357 MB
#     in bf16: 6 chunks at 64 MiB, 11 at 32) under the three caps; a second round as time allows.
#  3. BURST=1 and time left (BUDGET, default 560 s, less 150): issue 18's burst through `syv serve`
#     with the default flags (serve_bench_check.sh QUICK=1 PRESETS=default; bf16 random weights).
# FORMS: the environments compared (default "DEFAULT=1 SYV_DEQUANT_CHUNK_MB=0
# SYV_DEQUANT_CHUNK_MB=32"); EIGHT_B=0 skips the 8B copy and its runs (the tests, the 27B only).
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/dequant_chunks_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
build gpu_quant_linear_gpu_test gpu_cuda_load_scratch_gpu_test gpu_engine_quantized_gpu_test
FORMATS="gptq"
FORMS=${FORMS:-DEFAULT=1 SYV_DEQUANT_CHUNK_MB=0 SYV_DEQUANT_CHUNK_MB=32}
source tools/device/fp8_folders.sh
[[ ${EIGHT_B:-1} == 0 ]] || fp8_folders_start
Q27=/tmp/q27-gptq
(
  python3 tools/device/cut_config.py tools/bench/configs/qwen3.5-27b 4 /tmp/q27-config
  $B/syv demo-model --config /tmp/q27-config --out /tmp/q27-bf16 >$O/prep27.log 2>&1 &&
    timeout 400 $B/syv quantize --format gptq --lm-head --in /tmp/q27-bf16 --out $Q27 \
      >>$O/prep27.log 2>&1 && touch $Q27/.done
) &

echo "== tests $(date +%T)"
for t in gpu_quant_linear_gpu_test gpu_cuda_load_scratch_gpu_test gpu_engine_quantized_gpu_test; do
  timeout 300 $B/$t 2>&1 | tee $O/$t.log |
    grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -12
done
if [[ ${EIGHT_B:-1} != 0 ]] && ! fp8_folders_wait; then
  echo "gptq copy failed"; tail -5 $O/prep*.log; exit 1
fi
wait
[[ -f $Q27/.done ]] || { echo "27B copy failed"; tail -3 $O/prep27.log; }
for round in 1 2; do
  echo "== round $round: gptq 8B b = 1 / 64, 2K prefill; 27B (4 layers) 2K prefill $(date +%T)"
  for v in $FORMS; do
    [[ ${EIGHT_B:-1} == 0 ]] && break
    ((SECONDS - t0 < ${BUDGET:-560})) || { echo "-- $v: skipped (time)"; continue; }
    BATCHES=1,64 fp8_bench gptq ${v//,/ }
  done
  [[ -f $Q27/.done ]] || continue
  for v in $FORMS; do
    ((SECONDS - t0 < ${BUDGET:-560})) || { echo "-- 27B $v: skipped (time)"; continue; }
    echo "-- 27B $v"
    env ${v//,/ } timeout 100 $B/syv bench decode --config $Q27 --batch 1 --context 512 --steps 5 \
      --lengths 2048 2>&1 | tee -a $O/decode.log | grep -E "^\| prefill|rror" | tail -2
  done
done
if [[ -n ${BURST:-} ]] && ((SECONDS - t0 < ${BUDGET:-560} - 150)); then
  echo "== burst through syv serve $(date +%T)"
  QUICK=1 PRESETS=default timeout 200 tools/device/serve_bench_check.sh build/gpu-carry \
    /tmp/serve-bench 2>&1 | tail -8
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
