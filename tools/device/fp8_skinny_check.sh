#!/usr/bin/env bash
# On the GPU machine, one call (about 7 minutes with the build): fp8_skinny_gemm.cu, the W8A8
# GEMM at 1-64 tokens on thread-block clusters splitting K.
#  1. gpu_quant_linear_gpu_test (SkinnyKernelMatchesTheQuantizedProduct, SkinnyKernelReplaysInAGraph
#     and the routing tests under the new default) and gpu_engine_quantized_gpu_test (every
#     format's logits and greedy tokens against the CPU).
#  2. `syv bench quant-kernels` on the Qwen3-8B shapes, fp8, 1-64 tokens: the default route, the
#     GEMV (up to 16), the W8A16 GEMM, cuBLASLt's W8A8 GEMM, the skinny kernel, bf16.
#  3. Model level (the 8B's bf16 weights and their `syv quantize --format fp8` copy, made
#     meanwhile): `syv bench decode` b = 1-64 and prefill 2K, bf16, fp8 under the defaults, fp8
#     with SYV_FP8_SKINNY_MAX_TOKENS=0 (cuBLASLt's GEMM, as before), fp8 under each variant.
# VARIANTS="A=1 B=0 ...": the skinny kernel again under each environment assignment (parts 2
# and 3; e.g. SYV_FP8_SKINNY_TMA=0, SYV_FP8_SKINNY_PIPE=0; "A=1,B=1" sets both at once); NCU=1:
# each kernel's GPU time under ncu (tools/device/ncu_kernels.sh); STALL=1: ncu's throughput,
# memory and warp-state sections for one launch each of the skinny kernel on gate_up at 64 tokens
# and o_proj at 8 (the default and each variant; reports under $OUT). TOKENS overrides
# part 2's counts; SPLITS="1 2 4 8" times the skinny kernel under each cap of
# its K splits (SPLIT_TOKENS: the counts); SKIP_MODEL=1 stops after part 2; MODEL_VARIANTS: part
# 3's variants instead of VARIANTS (e.g. "SYV_FP8_SKINNY_MAX_TOKENS=64 SYV_FP8_SKINNY_PIPE=0").
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/fp8_skinny_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
source tools/device/fp8_folders.sh
build gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test
[[ -n ${SKIP_MODEL:-} ]] || fp8_folders_start
echo "== quant linear tests $(date +%T)"
timeout 200 $B/gpu_quant_linear_gpu_test 2>&1 | tee $O/quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is|error|rror" | head -24
timeout 300 $B/gpu_engine_quantized_gpu_test 2>&1 | tee $O/engine_quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -8
echo "== quant kernels, fp8 $(date +%T)"
timeout 200 $B/syv bench quant-kernels --config $CFG --formats fp8 \
  --tokens ${TOKENS:-1,8,9,16,24,32,48,64} --paths default,gemv,gemm,fp8-gemm,fp8-skinny,bf16 \
  >$O/qk.log 2>&1
# One line per shape and token count: us a call of each path (skinny: its K splits).
grep -E "^\| fp8" $O/qk.log | awk -F'|' '{
  k = sprintf("%-8s %4d", $3, $6); gsub(/ /, "", $7); if (!(k in line)) order[n++] = k
  line[k] = line[k] sprintf(" %s %.1f", $7, $8)
  if ($7 == "fp8-skinny" && match($12, /in [0-9]+ splits/))
    line[k] = line[k] "(" substr($12, RSTART + 3, RLENGTH - 10) ")"
} END {for (i = 0; i < n; i++) print order[i] line[order[i]]}'
grep -iE "rror|not taken" $O/qk.log | head -5
# VARIANTS: the skinny kernel again under each environment.
for v in ${VARIANTS:-}; do
  echo "-- skinny, $v"
  env ${v//,/ } timeout 100 $B/syv bench quant-kernels --config $CFG --formats fp8 \
    --tokens ${TOKENS:-1,8,9,16,24,32,48,64} --paths fp8-skinny 2>&1 | tee -a $O/qk_variants.log |
    grep -E "^\| fp8" | awk -F'|' '{  # one line a shape: its us a call at each token count
      k = $3; gsub(/ /, "", k); if (!(k in line)) order[n++] = k
      line[k] = line[k] sprintf(" %d: %.1f", $6, $8)
    } END {for (i = 0; i < n; i++) printf "%-8s%s\n", order[i], line[order[i]]}'
done
# SPLITS="1 2 4 8": the skinny kernel again with its K splits capped at each (SYV_FP8_SKINNY_SPLITS),
# us a call and the clusters the GPU holds at once.
for sp in ${SPLITS:-}; do
  echo "-- skinny, splits <= $sp"
  SYV_FP8_SKINNY_SPLITS=$sp timeout 100 $B/syv bench quant-kernels --config $CFG --formats fp8 \
    --tokens ${SPLIT_TOKENS:-8,32,64} --paths fp8-skinny 2>&1 | tee -a $O/qk_splits.log |
    grep -E "^\| fp8" | awk -F'|' '{gsub(/ +/, " ", $12); printf "%-8s %4d %6.1f %s\n", $3, $6, $8, $12}'
done
# NCU=1: the GPU time of each kernel alone (ncu), the skinny kernel (under each variant too) and
# cuBLASLt's at 8 and 64 tokens: whether the bench's us a call include host time.
if [[ -n ${NCU:-} ]]; then
  for v in DEFAULT=1 ${VARIANTS:-}; do
    echo "-- ncu, $v"
    env ${v//,/ } FILTER='fp8_skinny|nvjet|quantize_fp8' timeout 200 \
      tools/device/ncu_kernels.sh $B/syv bench quant-kernels --config $CFG --formats fp8 \
      --tokens 8,64 --paths fp8-skinny,fp8-gemm 2>&1 | tee -a $O/ncu.log | cut -c1-170 | head -24
  done
fi
# STALL=1: one launch each under ncu's sections (the bench's launches come 184 a projection in
# the order q|k|v, o_proj, gate_up, down: gate_up's first is 368, o_proj's 184).
if [[ -n ${STALL:-} ]]; then
  NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for v in DEFAULT=1 ${VARIANTS:-}; do
    for case in "64 368 gate_up" "8 184 o_proj"; do
      set -- $case
      f=$O/stall_${3}_${1}_${v//[=,]/_}.txt
      env ${v//,/ } timeout 120 "$NCUB" --kernel-name regex:fp8_skinny --launch-skip $2 \
        --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        $B/syv bench quant-kernels --config $CFG --formats fp8 --tokens $1 --paths fp8-skinny \
        >"$f" 2>&1
      echo "-- stall, $3 at $1 tokens, $v"
      grep -E "^ +(Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Registers Per Thread|Achieved Occupancy|Mem Busy|Max Bandwidth) " \
        "$f" | awk '{$1=$1; print}' | paste - - - | head -8
      grep -E "Stall|stall" "$f" | grep -oE "(On average|about) [^.]*\." | head -3
    done
  done
fi
[[ -n ${SKIP_MODEL:-} ]] && { echo "total: $((SECONDS - t0)) s"; exit 0; }

echo "== waiting for prep $(date +%T)"
fp8_folders_wait || exit 1
echo "== model level $(date +%T)"
fp8_bench bf16
fp8_bench fp8
fp8_bench fp8 SYV_FP8_SKINNY_MAX_TOKENS=0
for v in ${MODEL_VARIANTS:-${VARIANTS:-}}; do fp8_bench fp8 ${v//,/ }; done
echo "total: $((SECONDS - t0)) s $(date +%T)"
