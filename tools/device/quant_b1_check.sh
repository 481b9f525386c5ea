#!/usr/bin/env bash
# On the GPU machine, one call (about 5-9 minutes with the build): the quantized single-token GEMV's
# forms (quant_gemv_mma.cu: SYV_QUANT_GEMV_FOUR_WARPS=0, the eight-warp blocks everywhere instead of
# four-warp blocks where the eight-warp grid passes a wave; SYV_QUANT_GEMV_BULK=1, the bulk-copy
# form) and the fp8 skinny GEMM's staged weight scales (SYV_FP8_SKINNY_STAGE_SCALES=0 against the
# default), on the Qwen3-8B shape:
#  1. gpu_quant_linear_gpu_test (every form's bits / the CPU) and gpu_engine_quantized_gpu_test.
#  2. `syv bench quant-kernels` at 1 token, int4 and fp8, under each form (FORMS, KFORMS); the
#     skinny kernel at 8-32 tokens with and without the staged scales.
#  3. ncu (NCU=1): one launch of the int4 single-token GEMV a projection, its throughput, memory,
#     warp-state and scheduler sections (reports under $OUT); NCU_CASES="0:qkv 368:gate_up"
#     (the launches skipped: a name) for fewer.
#  4. Model level (bf16 weights and their `syv quantize` gptq and fp8 copies, made meanwhile):
#     `syv bench decode` b = 1 under each form of FORMS, fp8 b = 16 / 32 with and without the
#     staged scales; BF16=1 adds bf16 b = 1.
# FORMS: the environment assignments of parts 2 and 4 ("A=1,B=2" sets both), KFORMS more of part 2
# only; BUDGET: seconds after which part 4 starts no more runs (default 570). Carry .devcarry-deps
# and .devcarry-tok; full logs under $OUT.
#   tools/device/quant_b1_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
FORMS=${FORMS:-SYV_QUANT_GEMV_FOUR_WARPS=0}
KFORMS=${KFORMS:-SYV_QUANT_GEMV_BULK=1}
build gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test
# The folders, in the background: bf16, then its gptq (int4 g128) and fp8 copies at once.
FORMATS="gptq fp8"
source tools/device/fp8_folders.sh
fp8_folders_start

echo "== tests $(date +%T)"
timeout 240 $B/gpu_quant_linear_gpu_test 2>&1 | tee $O/quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is|error|rror" | head -24
timeout 300 $B/gpu_engine_quantized_gpu_test 2>&1 | tee $O/engine_quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -8

# One line a (format, shape): us a call of the GEMV at 1 token.
qk_one_token() {
  env "$@" timeout 100 $B/syv bench quant-kernels --config $CFG --formats int4,fp8 --tokens 1 \
    --paths gemv 2>&1 | tee -a $O/qk.log | grep -E "^\| (int4|fp8)" |
    awk -F'|' '{k = $2 $3; gsub(/ +/, " ", k); printf "%s %.2f us", k, $8} END {print ""}'
}
echo "== quant kernels, 1 token, us a call $(date +%T)"
echo "default: $(qk_one_token DEFAULT=1)"
for v in $FORMS $KFORMS; do echo "$v: $(qk_one_token ${v//,/ })"; done
echo "-- fp8 skinny, 8 / 16 / 32 tokens, default (staged scales) then without"
for v in DEFAULT=1 SYV_FP8_SKINNY_STAGE_SCALES=0; do
  env $v timeout 100 $B/syv bench quant-kernels --config $CFG --formats fp8 --tokens 8,16,32 \
    --paths fp8-skinny 2>&1 | tee -a $O/qk_skinny.log | grep -E "^\| fp8" |
    awk -F'|' -v v=$v '{k = $3; gsub(/ /, "", k); if (!(k in line)) order[n++] = k
      line[k] = line[k] sprintf(" %d: %.1f", $6, $8)
    } END {printf "%s:", v; for (i = 0; i < n; i++) printf " %s%s;", order[i], line[order[i]]; print ""}'
done

if [[ -n ${NCU:-} ]]; then
  NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  # The bench's launches: 184 a projection, in the order q|k|v, o_proj, gate_up, down.
  for case in ${NCU_CASES:-0:qkv 184:o_proj 368:gate_up 552:down}; do
    set -- ${case%%:*} ${case#*:}
    f=$O/ncu_int4_${2}.txt
    timeout 100 "$NCUB" --clock-control none --kernel-name regex:quant_gemv_mma --launch-skip $1 \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      --section InstructionStats $B/syv bench quant-kernels --config $CFG --formats int4 \
      --tokens 1 --paths gemv >"$f" 2>&1
    echo "-- ncu, int4 $2, 1 token"
    grep -E "^ +(Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Grid Size|Mem Busy|Max Bandwidth) " \
      "$f" | awk '{$1=$1; print}' | paste - - - - | head -6
    grep -oE "(On average|about) [^.]*\." "$f" | head -3
  done
fi

echo "== waiting for prep $(date +%T)"
fp8_folders_wait
bench() {  # FOLDER BATCHES [ENV...]
  local f=$1 b=$2
  shift 2
  [[ -f $W/$f/.done || $f == bf16 ]] || { echo "$f: no folder"; return; }
  ((SECONDS - t0 < ${BUDGET:-570})) || { echo "-- $f ${*}: skipped (time)"; return; }
  echo "-- $f b=$b${*:+, $*}"
  env "$@" timeout 90 $B/syv bench decode --config "$W/$f" --batch "$b" --context 512 \
    --steps 30 2>&1 | tee -a "$O/decode.log" | grep -E "^\| decode|rror" | cut -d'|' -f2-9,11-12
}
echo "== model level $(date +%T)"
bench gptq 1
for v in $FORMS; do bench gptq 1 ${v//,/ }; done
bench fp8 1,16,32
for v in $FORMS; do bench fp8 1 ${v//,/ }; done
bench fp8 16,32 SYV_FP8_SKINNY_STAGE_SCALES=0
[[ -n ${BF16:-} ]] && bench bf16 1
echo "total: $((SECONDS - t0)) s $(date +%T)"
