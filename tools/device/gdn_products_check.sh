#!/usr/bin/env bash
# On the GPU machine: the chunked delta rule's phases 1 and 3 by products (SYV_GDN_WU=products
# SYV_GDN_OUT=products: measured faster on 2026-12-07, not yet the default) against the default
# forms (the blocked solve, dots), in one call; what is needed before they become the default.
#  1. Tests under the products forms: the attention tests, the hybrid op tests (every form of the
#     delta rule against the CPU), the hybrid golden tests (against transformers), the engine's
#     hybrid and MoE scenarios (batching, chunked prefill, prefix hits, preemption, CUDA graphs,
#     MTP and verify steps, a multi-turn conversation resumed from the host tier).
#  2. The hybrid golden tests again under the default forms.
#  3. Prefill attention at head_dim 256 alone (`syv bench prefill --attention-only`), mma8w's
#     fallback against wgmma128's head_dim-256 form (SYV_PREFILL_WGMMA_256=1, off by default; the
#     attention tests of gpu_cuda_ops_test check it in step 1).
#  4. The routed experts alone (QwenNextPrefillTiming) with and without the multicast pairs
#     (SYV_MOE_WGMMA_MULTICAST=1, off by default; gpu_cuda_moe_ops_test checks them in step 1).
#  5. Prefill (`syv bench decode --lengths 2048,8192`): the 8-layer copy of qwen3-next-24l and the
#     Qwen3.5 9B-class shape: the products forms, the default, the attention form, the multicast
#     pairs, all three, the products forms again.
# QUICK=1: the attention, hybrid op, hybrid golden and engine hybrid / MoE tests, then the 8-layer
# copy's prefill only (~250 s); QUICK=2: the head_dim-256 attention, hybrid golden and engine
# tests (~200 s). Carry .devcarry-deps and .devcarry-tok. Writes 2 files to $OUT.
#   [QUICK=1|2] [STOP_AFTER=s (no prefill starts later)] tools/device/gdn_products_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
TESTS="gpu_cuda_ops_test gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test
  gpu_engine_qwen3_gpu_test gpu_engine_graphs_gpu_test gpu_engine_mtp_gpu_test
  gpu_engine_verify_gpu_test gpu_host_tier_engine_gpu_test"
CONFIGS="qwen3.5-9b-class"
PRODUCTS="SYV_GDN_WU=products SYV_GDN_OUT=products"
FORMS="${PRODUCTS// /,} DEFAULT=1 SYV_PREFILL_WGMMA_256=1 SYV_MOE_WGMMA_MULTICAST=1
  ${PRODUCTS// /,},SYV_PREFILL_WGMMA_256=1,SYV_MOE_WGMMA_MULTICAST=1 ${PRODUCTS// /,}"
if [[ ${QUICK:-0} == 1 ]]; then  # what fits ~250 s: the ops, golden and engine hybrid tests
  TESTS="gpu_cuda_ops_test gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test
    gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test"
  CONFIGS=""
  FORMS="${PRODUCTS// /,} DEFAULT=1 SYV_PREFILL_WGMMA_256=1 SYV_MOE_WGMMA_MULTICAST=1"
fi
if [[ ${QUICK:-0} == 2 ]]; then
  TESTS="gpu_cuda_ops_test gpu_hybrid_golden_gpu_test gpu_engine_qwen3_gpu_test"
  CONFIGS=""
  FORMS="${PRODUCTS// /,} DEFAULT=1"
fi
build $TESTS

echo "== tests, $PRODUCTS $(date +%T)"
declare -A FILTER=([gpu_engine_qwen3_gpu_test]='*Hybrid*:*Moe*'
  [gpu_engine_verify_gpu_test]='*Hybrid*:*Graphs*' [gpu_host_tier_engine_gpu_test]='*Hybrid*'
  [gpu_cuda_ops_test]="$([[ ${QUICK:-0} == 2 ]] && echo '*HeadDim256*' ||
    echo '*CudaAttention*')")
for t in $TESTS; do
  r=$(env $PRODUCTS timeout 200 $B/$t --gtest_filter="${FILTER[$t]:--*Timing*}" 2>&1 |
    tee -a $O/tests.log |
    grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
if [[ ${QUICK:-0} == 0 ]]; then
  echo "== golden, the default forms $(date +%T)"
  timeout 200 $B/gpu_hybrid_golden_gpu_test 2>&1 |
    tee -a $O/tests.log | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6
fi

cut=/tmp/gdn-products-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
echo "== the routed experts alone $(date +%T)"
timeout 100 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  grep -E "^moe prefill.*(auto |wgmma-64)|FAILED"
for v in DEFAULT=1 SYV_PREFILL_WGMMA_256=1; do
  echo "== attention alone (head_dim 256), $v $(date +%T)"
  env $v timeout 100 $B/syv bench prefill --config $cut --random-weights --attention-only \
    --lengths 2048,8192 2>&1 | tee -a $O/bench.log | grep -E "^\| prefill|rror" | sort -u
done
for cfg in $cut ${CONFIGS:+tools/bench/configs/$CONFIGS}; do
  for v in $FORMS; do
    ((SECONDS - t0 < ${STOP_AFTER:-540})) || break
    echo "== prefill $(basename $cfg), $v $(date +%T)"
    prefill $cfg 2048,8192 ${v//,/ }
  done
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
