#!/usr/bin/env bash
# On the GPU machine: the hybrid prefill's defaults of 2026-12-07 (the chunked delta rule's phases
# 1 and 3 by products; prefill attention at head_dim 256 on wgmma128's 64-key form) checked and
# timed against the forms they replaced, in one call. First run 2026-12-07 07:56 on an H100
# (docs/performance.md), when the products forms were still behind SYV_GDN_WU=products
# SYV_GDN_OUT=products and the attention form behind SYV_PREFILL_WGMMA_256=1.
#  1. Tests under the defaults: the attention tests (the head_dim-256 cases take both forms), the
#     MoE and hybrid op tests (every form of the delta rule against the CPU), the hybrid golden
#     tests (against transformers), the engine's hybrid and MoE scenarios (batching, chunked
#     prefill, prefix hits, preemption, CUDA graphs, MTP and verify steps, a multi-turn
#     conversation resumed from the host tier).
#  2. The hybrid golden tests again under the forms of before (SYV_GDN_WU=blocked SYV_GDN_OUT=dots
#     SYV_PREFILL_WGMMA_256=0).
#  3. Prefill attention at head_dim 256 alone (`syv bench prefill --attention-only`): the default
#     against mma8w's (SYV_PREFILL_WGMMA_256=0).
#  4. Prefill (`syv bench decode --lengths 2048,8192`): the 8-layer copy of qwen3-next-24l and the
#     Qwen3.5 9B-class shape: the default, the delta rule's forms of before, attention's form of
#     before, both, the default again.
# QUICK=1: the attention, MoE op, hybrid op, hybrid golden and engine hybrid / MoE tests, then the
# 8-layer copy's prefill only (~250 s); QUICK=2: the head_dim-256 attention, hybrid golden and
# engine tests (~200 s). Carry .devcarry-deps and .devcarry-tok. Writes 2 files to $OUT
# (tests.log, bench.log).
#   [QUICK=1|2] [STOP_AFTER=s (no prefill starts later)] tools/device/gdn_products_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
TESTS="gpu_cuda_ops_test gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test
  gpu_engine_qwen3_gpu_test gpu_engine_graphs_gpu_test gpu_engine_mtp_gpu_test
  gpu_engine_verify_gpu_test gpu_host_tier_engine_gpu_test"
CONFIGS="qwen3.5-9b-class"
BEFORE="SYV_GDN_WU=blocked,SYV_GDN_OUT=dots"
FORMS="DEFAULT=1 $BEFORE SYV_PREFILL_WGMMA_256=0 $BEFORE,SYV_PREFILL_WGMMA_256=0 DEFAULT=1"
if [[ ${QUICK:-0} == 1 ]]; then  # what fits ~250 s: the ops, golden and engine hybrid tests
  TESTS="gpu_cuda_ops_test gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test
    gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test"
  CONFIGS=""
fi
if [[ ${QUICK:-0} == 2 ]]; then
  TESTS="gpu_cuda_ops_test gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test"
  CONFIGS=""
  FORMS="DEFAULT=1 $BEFORE,SYV_PREFILL_WGMMA_256=0"
fi
build $TESTS

echo "== tests, the defaults $(date +%T)"
declare -A FILTER=([gpu_engine_qwen3_gpu_test]='*Hybrid*:*Moe*'
  [gpu_engine_verify_gpu_test]='*Hybrid*:*Graphs*' [gpu_host_tier_engine_gpu_test]='*Hybrid*'
  [gpu_cuda_ops_test]="$([[ ${QUICK:-0} == 2 ]] && echo '*HeadDim256*' ||
    echo '*CudaAttention*')")
for t in $TESTS; do
  r=$(timeout 200 $B/$t --gtest_filter="${FILTER[$t]:--*Timing*}" 2>&1 | tee -a $O/tests.log |
    grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
if [[ ${QUICK:-0} == 0 ]]; then
  echo "== golden, the forms of before $(date +%T)"
  env ${BEFORE//,/ } SYV_PREFILL_WGMMA_256=0 timeout 200 $B/gpu_hybrid_golden_gpu_test 2>&1 |
    tee -a $O/tests.log | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6
fi

cut=/tmp/gdn-products-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
for v in DEFAULT=1 SYV_PREFILL_WGMMA_256=0; do
  echo "== attention alone (head_dim 256), $v $(date +%T)"
  env $v timeout 100 $B/syv bench prefill --config $cut --random-weights --attention-only \
    --lengths 2048,8192 2>&1 | tee -a $O/bench.log | grep -E "^\| attention" | sort -u
done
for cfg in $cut ${CONFIGS:+tools/bench/configs/$CONFIGS}; do
  for v in $FORMS; do
    ((SECONDS - t0 < ${STOP_AFTER:-540})) || break
    echo "== prefill $(basename $cfg), $v $(date +%T)"
    prefill $cfg 2048,8192 ${v//,/ }
  done
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
