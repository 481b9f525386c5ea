#!/usr/bin/env bash
# On the GPU machine, one call: where the prefill attention kernel (wgmma128,
# attention_prefill_wgmma.cu) spends its cycles at 32K tokens (issue 19's 32K prefill: attention
# is ~55% of it at ~320 TFLOP/s, about half of FlashAttention-3's published rate).
#  1. Tests: the attention cases of gpu_cuda_ops_test.
#  2. `syv bench prefill --attention-only` on the Qwen3-8B shape at 2K / 32K (ATTN_VARIANTS).
#  3. ncu on one 32K launch of the wgmma kernel (the default form; the environment picks others):
#     speed of light, compute workload (pipes), occupancy, warp states and scheduler, then the raw
#     metrics of warp stalls and pipe use.
# Carry .devcarry-deps and .devcarry-tok; full reports under $OUT.
#   tools/device/prefill_attention_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build gpu_cuda_ops_test
CFG=tools/bench/configs/qwen3-8b
echo "== tests $(date +%T)"
timeout 150 $B/gpu_cuda_ops_test --gtest_filter='*Attention*' 2>&1 | tee $O/cuda_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -8

echo "== attention alone $(date +%T)"
timeout 120 $B/syv bench prefill --config $CFG --attention-only --lengths 2048,32768 \
  --attention-variants ${ATTN_VARIANTS:-wgmma128} 2>&1 | tee $O/attention.log |
  grep -E "^\| attention|rror" | tr -s ' '

NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null |
  head -1)
if [[ -x $NCU ]]; then
  echo "== ncu wgmma_kernel, 32K $(date +%T)"
  # Launches at 32K: the reference (mma8w, not matched), 2 warm-up and 5 timed: the second.
  timeout 150 "$NCU" --kernel-name regex:wgmma_ --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --section InstructionStats -o $O/attn32k -f \
    $B/syv bench prefill --config $CFG --attention-only --lengths 32768 \
    --attention-variants wgmma128 >$O/ncu_run.log 2>&1
  echo "rc $?"
  "$NCU" --import $O/attn32k.ncu-rep --print-units base >$O/attn32k.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occ|\
Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Ipc A|Issue Slots Busy|\
SM Busy|Executed Instructions  " $O/attn32k.txt | head -20
  "$NCU" --import $O/attn32k.ncu-rep --page raw --csv >$O/attn32k_raw.csv 2>&1
  python3 - $O/attn32k_raw.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
if len(rows) < 3:
    print("raw page: no rows"); sys.exit()
names, units, vals = rows[0], rows[1], rows[2]
stall = {}
for n, u, v in zip(names, units, vals):
    try:
        x = float(v.replace(",", ""))
    except ValueError:
        continue
    if "issue_stalled" in n:
        reason = n.split("issue_stalled_")[1].split("_per")[0].split(".")[0]
        stall.setdefault(n.split("__")[1].split("_issue")[0], []).append((x, reason, u))
    elif ("pipe" in n and "pct" in n and x > 1.0) or n.endswith("inst_executed.sum"):
        print(f"{n} = {x:.2f} {u}")
for kind, xs in stall.items():
    print(f"-- {kind}")
    for x, reason, u in sorted(xs, reverse=True)[:12]:
        print(f"stall {reason:24s} {x:8.3f} {u}")
PY
fi

echo "total: $((SECONDS - t0)) s $(date +%T)"
