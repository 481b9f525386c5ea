#!/usr/bin/env bash
# On the GPU machine: where Qwen3-Next's 8K prefill goes and why, for issue 14's prefill target.
#  1. gpu_cuda_moe_ops_test (every MoE op test but the timing) and the hybrid op tests; the
#     routed experts alone at 2K and 8K tokens (QwenNextPrefillTiming: every tile and form); the
#     delta rule alone (Qwen35OpsTiming: every form).
#  2. The 8-layer copy of qwen3-next-24l: `syv bench decode --lengths 2048,8192` (ms, % of the
#     same-run GEMM rate on active FLOPs) by default, with the delta rule's phases 1 and 3 as
#     before 2026-12-07 (SYV_GDN_WU=blocked SYV_GDN_OUT=dots), by default again.
#  3. ncu's sections (speed of light, memory and compute workload, occupancy, warp states,
#     scheduler) on one launch each of the routed experts' two GEMMs and the delta rule's three
#     phases (and phases 1 and 3 as before 2026-12-07) in the 8K prefill; the full reports in
#     $OUT/ncu_*.txt, the headline rows here.
#  4. The 8K prefill's kernel shares under ncu (prefill_kernel_split.sh's table).
# Carry .devcarry-deps and .devcarry-tok.
#   tools/device/prefill_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test

echo "== tests $(date +%T)"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/moe_ops.log |
  grep -E "^\[ +(PASSED|FAILED|SKIPPED) |Failure|Expected" | head -20
timeout 150 $B/gpu_cuda_hybrid_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/hybrid_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6

cut=/tmp/prefill-profile-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
echo "== experts alone $(date +%T)"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  tee $O/moe_timing.log | grep -E "^moe prefill|FAILED"
echo "== delta rule alone $(date +%T)"
timeout 120 $B/gpu_cuda_hybrid_ops_test --gtest_filter='*Qwen35OpsTiming*' 2>&1 |
  tee $O/hybrid_timing.log | grep -E "delta rule" | grep -v " 1 tokens"
echo "== prefill, Qwen3-Next 8 layers $(date +%T)"
for v in DEFAULT=1 SYV_GDN_WU=blocked,SYV_GDN_OUT=dots DEFAULT=1; do
  ((SECONDS - t0 < 450)) || break
  echo "-- $v"; prefill $cut 2048,8192 ${v//,/ }
done

NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null |
  head -1)
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
  --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats"
profile() {  # NAME REGEX COUNT
  echo "== ncu $1 $(date +%T)"
  SYV_BENCH_PROFILE_RANGE=1 timeout 90 "$NCU" --profile-from-start off \
    --kernel-name "regex:$2" --launch-count "$3" $sections \
    $B/syv bench prefill --config $cut --random-weights --lengths 8192 >$O/ncu_$1.txt 2>&1
  echo "rc $?"
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 \
Cache Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|\
Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Block Limit|Warp Cycles Per Issued|\
Executed Ipc A|Max Bandwidth|Mem Busy|L2 Hit|Dynamic Shared" $O/ncu_$1.txt | head -48
}
# What is left of the call's 600 s decides how much of the profiling runs (each step ~30-60 s).
before() {
  ((SECONDS - t0 < $1)) && return 0
  echo "(skipped: $((SECONDS - t0)) s gone)"
  return 1
}
before 480 && profile experts moe_wgmma_kernel 2
before 500 && profile delta_rule \
  "gdn_wu_products_kernel|gdn_state_mma_kernel|gdn_output_products_kernel" 3
before 520 && SYV_GDN_WU=blocked SYV_GDN_OUT=dots profile delta_rule_before \
  "gdn_wu_kernel|gdn_output_kernel" 2
if before 480; then
  echo "== kernel shares $(date +%T)"
  CONFIG=$cut LENGTHS=8192 timeout 100 tools/device/prefill_kernel_split.sh 2>&1 |
    grep -E "^\||kernels|rc"
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
