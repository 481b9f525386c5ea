#!/usr/bin/env bash
# On the GPU machine, one call: the wgmma prefill attention's forms against each other (measured
# first on 2026-12-07, the defaults since): K/V tiles by every thread's cp.async gather
# (SYV_PREFILL_WGMMA_TMA=0 with SYV_PREFILL_WGMMA_OVERLAP=0), by one thread's tensor-map loads in
# the lockstep kernel (SYV_PREFILL_WGMMA_OVERLAP=0), and with the softmax of tile j under P V of
# tile j - 1 (the default at head_dim 64 / 128, attention_prefill_wgmma_overlap.cu).
#  1. Tests: the attention cases of gpu_cuda_ops_test (every prefill kernel and both forms against
#     the CPU, with NaN in every cache slot past the sequences' keys, bit-identical on re-run, and
#     the form that ran checked; page sizes 8-256). The golden tests reach neither form (their
#     prompts are shorter than a K/V tile, or head_dim 16 / 32); step 2's bench compares each
#     form's output with mma8w's at 2K-32K tokens (rel L2).
#  2. `syv bench prefill --attention-only` on the Qwen3-8B shape at 2K / 8K / 32K (and, in the
#     first round, the Qwen3.5 9B-class shape, head_dim 256, at 8K), each of ATTN_FORMS in turn,
#     ROUNDS times (default 2).
#  3. The 8B's prefill at 2K and 32K (`syv bench prefill`) in each form, as time allows (BUDGET,
#     default 540 s); then ncu's warp states of one 32K launch of the default form (NCU_RUN=1).
#  4. ROPE_FORMS (e.g. "SYV_ROPE_ROWS=0 SYV_ROPE_ROWS=1"): the fused prologue's register form
#     (off by default, not yet run on a GPU): its tests (the prologue's cases of gpu_cuda_ops_test,
#     gpu_kv_quant_gpu_test) after step 1, and `syv bench decode` b = 1 / 64 with the 2K prefill
#     in each form (one process each) after step 3, as time allows.
# Carry .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/prefill_tma_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build gpu_cuda_ops_test ${ROPE_FORMS:+gpu_kv_quant_gpu_test}
CFG=tools/bench/configs/qwen3-8b
echo "== tests $(date +%T)"
timeout 150 $B/gpu_cuda_ops_test --gtest_filter='*Attention*' 2>&1 | tee $O/cuda_ops.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is|TMA|tensor-map" | head -12
if [[ -n ${ROPE_FORMS:-} ]]; then
  timeout 100 $B/gpu_cuda_ops_test --gtest_filter='*QkvNormRope*' 2>&1 | tee $O/rope_ops.log |
    grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -6 | sed "s/^/rope: /"
  timeout 150 $B/gpu_kv_quant_gpu_test 2>&1 | tee $O/kv_quant.log |
    grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|Which is" | head -6 | sed "s/^/kv_quant: /"
fi
# ATTN_FORMS: the environment of each attention bench process, in turn (ROUNDS times).
# (one word each: commas between a form's assignments)
ATTN_FORMS=${ATTN_FORMS:-SYV_PREFILL_WGMMA_TMA=0,SYV_PREFILL_WGMMA_OVERLAP=0 \
  SYV_PREFILL_WGMMA_OVERLAP=0 DEFAULT=1}
for round in $(seq ${ROUNDS:-2}); do
  for form in $ATTN_FORMS; do
    ((SECONDS - t0 < ${BUDGET:-540} - 60)) || { echo "-- attention $form: skipped"; continue; }
    echo "== attention alone, $form $(date +%T)"
    env ${form//,/ } timeout 100 $B/syv bench prefill --config $CFG --attention-only \
      --lengths 2048,8192,32768 --attention-variants wgmma128 2>&1 | tee -a $O/attention.log |
      grep -E "^\| attention|rror" | tr -s ' ' | cut -c1-150
    [[ $round == 1 ]] || continue
    env ${form//,/ } timeout 60 $B/syv bench prefill --config tools/bench/configs/qwen3.5-9b-class \
      --attention-only --lengths 8192 --attention-variants wgmma128 2>&1 |
      tee -a $O/attention.log | grep -E "^\| attention|rror" | tr -s ' ' | cut -c1-150
  done
done
for form in $ATTN_FORMS; do
  ((SECONDS - t0 < ${BUDGET:-540} - 70)) || { echo "-- prefill $form: skipped (time)"; continue; }
  echo "== 8B prefill, $form $(date +%T)"
  env ${form//,/ } timeout 120 $B/syv bench prefill --config $CFG --random-weights \
    --lengths 2048,32768 2>&1 | tee -a $O/prefill.log | grep -E "^\| prefill|rror" | tr -s ' '
done
for form in ${ROPE_FORMS:-}; do
  ((SECONDS - t0 < ${BUDGET:-540} - 40)) || { echo "-- bench $form: skipped (time)"; continue; }
  echo "== decode bench $form $(date +%T)"
  env $form timeout 100 $B/syv bench decode --config $CFG --random-weights --batch 1,64 \
    --context 512 --steps 20 --lengths 2048 2>&1 | tee -a $O/bench.log |
    grep -E "^\| (decode|prefill)|rror" | sort -u | tr -s ' '
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null |
  head -1)
if [[ -n ${NCU_RUN:-} && -x $NCU ]] && ((SECONDS - t0 < ${BUDGET:-540} - 60)); then
  echo "== ncu, the default form, 32K $(date +%T)"
  timeout 100 "$NCU" --kernel-name regex:wgmma_ --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    $B/syv bench prefill --config $CFG --attention-only --lengths 32768 \
    --attention-variants wgmma128 >$O/ncu_tma.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued" \
    $O/ncu_tma.txt | head -8
fi
echo "total: $((SECONDS - t0)) s $(date +%T)"
