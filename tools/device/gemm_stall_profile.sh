#!/usr/bin/env bash
# On the GPU machine: why the tile GEMMs run far below their ceilings (2026-12-05, H200): the
# W4A16 tensor-core GEMM (quant_gemm_mma.cu) reads int4 gate_up at 14% of the copy rate at 64
# tokens and is slower than bf16's cuBLASLt from 24 tokens; the MoE experts' tiled GEMM (moe.cu)
# runs at 16% of the bf16 GEMM rate at 8K tokens. One launch of each under ncu with the sections
# that say where the cycles go (throughput against the SM and memory ceilings, occupancy and its
# limiter, issue-slot use, the warp stall reasons per issued instruction), picked by kernel name
# and launch index so that ncu replays only that launch:
#   1./2. `syv bench quant-kernels --formats int4 --tokens 32 | 64` on the Qwen3-8B shape: the
#         GEMM's launches come 184 per projection (3 warm-up + 20 timed calls of 8) in the order
#         qkv, o_proj, gate_up, down; launch 368 is gate_up's first.
#   3.    gpu_cuda_moe_ops_test QwenNextPrefillTiming: moe_gemm_kernel's launches come in
#         (gate_up, down) pairs, 13 at 2K tokens (2 warm-up, 10 timed, the routed-experts
#         counter's check), then 8K's: launches 26 and 27 (24 and 25, profiled on 2026-12-05,
#         were 2K's last pair).
# First, the A/B of SYV_QUANT_GEMM_WAVES=1 (quant_gemm_mma.cu: K splits that fill the last wave,
# from the kernel's occupancy): the GEMM's tests under it, then the "gemm" rows of both formats at
# 24-128 tokens with it off and on.
# The full reports go to $OUT; the lines that matter are printed. Carry .devcarry-deps. About 4
# minutes after the build.
#   tools/device/gemm_stall_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
OUTDIR=${OUT:-/tmp}
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_moe_ops_test \
  gpu_quant_linear_gpu_test 2>&1 | tail -1
echo "build: $((SECONDS - t0)) s"
echo "== GEMM tests, SYV_QUANT_GEMM_WAVES=1: $(SYV_QUANT_GEMM_WAVES=1 timeout 100 \
  $B/gpu_quant_linear_gpu_test --gtest_filter='*TensorCoreGemm*:*Int4TakesTheGemm*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -4 | tr '\n' ' ')"
for waves in 0 1; do
  echo "== SYV_QUANT_GEMM_WAVES=$waves"
  SYV_QUANT_GEMM_WAVES=$waves timeout 100 $B/syv bench quant-kernels \
    --config tools/bench/configs/qwen3-8b --formats int4,fp8 --tokens 24,32,48,64,96,128 2>&1 |
    grep -E "\| gemm " | tee "$OUTDIR/gemm_waves_$waves.txt"
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -x $NCU ]] || { echo "gemm_stall_profile: ncu not found"; exit 1; }
SECTIONS=(--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats
  --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis)
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
KEEP='Duration|Throughput|Occupancy|Registers Per|Shared Memory Config|Block Limit|Waves Per SM|Issue Slots|Issued Ipc|No Eligible|Warp Cycles Per Issued|Eligible Warps|Active Warps|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Block Size|stalled'
profile() {  # profile NAME KERNEL_REGEX SKIP COUNT COMMAND...
  local name=$1 kernel=$2 skip=$3 count=$4
  shift 4
  echo "== $name"
  timeout 170 "$NCU" --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count "$count" \
    "${SECTIONS[@]}" --metrics "$STALLS" "$@" >"$OUTDIR/$name.txt" 2>&1
  grep -E "$KEEP" "$OUTDIR/$name.txt" | grep -vE " 0(\.0+)? *$" | sed -E 's/ {2,}/  /g' | head -60
  echo "($((SECONDS - t0)) s)"
}
for T in 32 64; do
  profile "quant_gemm_int4_gate_up_$T" quant_gemm_mma_kernel 368 1 \
    $B/syv bench quant-kernels --config tools/bench/configs/qwen3-8b --formats int4 --tokens $T
done
profile moe_gemm_8k moe_gemm_kernel 26 2 \
  $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*'
echo "total: $((SECONDS - t0)) s"
