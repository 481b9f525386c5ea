#!/usr/bin/env bash
# On the GPU machine, one call: four changes written without a GPU (2026-12-05/06), each checked
# and timed against the default it would replace (about 4 minutes with the build). First run
# 2026-12-06 on an H100 (docs/performance.md): all passed their tests; the bulk-copy GEMV, the
# extra MoE tiles and phase 1 by columns were slower and stay off; the fp8 crossover led to the
# W8A16 GEMM at 9-16 tokens (tools/device/fp8_routing_check.sh). Kept to re-check them:
#  1. gpu_quant_linear_gpu_test: fp8 weights leaving the GEMV from 9 tokens for the GEMMs
#     (CudaBackend::kFp8GemvMaxTokens, 2026-12-06) and the bulk-copy single-token GEMV
#     (quant_gemv_bulk.cu, SYV_QUANT_GEMV_BULK=1, off); then `syv bench quant-kernels` on the
#     Qwen3-8B shapes: fp8 GEMV against the fp8 GEMM at 8-24 tokens (the crossover), and the
#     single-token GEMV with the bulk copy off and on (us a call, % of the copy rate).
#  2. gpu_cuda_moe_ops_test: every MoE prefill tile (moe.cuh MoeTile, SYV_MOE_TILE) bit-identical
#     to the default's, and the routed experts' time per tile at 2K / 8K tokens.
#  3. The delta rule's phase 1 by columns (SYV_GDN_WU=columns, off): hybrid op and golden tests
#     under it, and the op timing's "phase 1 by columns" row against the default's.
# ONLY=quant: part 1 alone (syv and the quantized-linear test built; about 4 minutes).
# Model-level follow-ups once a form wins: TILES="auto <tile>" tools/device/moe_prefill_check.sh,
# tools/device/gdn_phases_check.sh, tools/device/quant_cuda_check.sh prep + ab. Carry
# .devcarry-deps and .devcarry-tok; full logs under $OUT.
#   tools/device/pending_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
O=${OUT:-/tmp}
t0=$SECONDS
echo "== build $(date +%T)"
TARGETS=(syv gpu_quant_linear_gpu_test)
[[ ${ONLY:-} == quant ]] ||
  TARGETS+=(gpu_cuda_moe_ops_test gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test)
timeout 330 tools/device/build_gpu.sh .devcarry-deps build/gpu "${TARGETS[@]}" 2>&1 | tail -2
echo "build: $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== quant linear tests $(date +%T)"
timeout 150 $B/gpu_quant_linear_gpu_test 2>&1 | tee $O/quant_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -8
echo "== quant kernels fp8 crossover $(date +%T)"
timeout 60 $B/syv bench quant-kernels --config tools/bench/configs/qwen3-8b --formats fp8 \
  --tokens 8,9,12,16,24 2>&1 | tee $O/qk.log | grep -E "gemv|fp8-gemm" | awk -F'|' '{print $3,$6,$7,$8}'
echo "== quant kernels b=1, bulk copy off / on $(date +%T)"
for b in 0 1; do
  SYV_QUANT_GEMV_BULK=$b timeout 60 $B/syv bench quant-kernels --config tools/bench/configs/qwen3-8b \
    --formats int4,fp8 --tokens 1 2>&1 | tee $O/qk_bulk$b.log | grep -E "\| gemv" |
    awk -F'|' -v b=$b '{print "bulk=" b, $2, $3, $8, $10}'
done
if [[ ${ONLY:-} == quant ]]; then
  echo "total: $((SECONDS - t0)) s $(date +%T)"
  exit 0
fi
echo "== moe tests $(date +%T)"
timeout 100 $B/gpu_cuda_moe_ops_test --gtest_filter='-*Timing*' 2>&1 | tee $O/moe_tests.log |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  tee $O/moe_timing.log | grep -E "^moe prefill|FAILED"
echo "== gdn columns tests $(date +%T)"
for t in gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test; do
  r=$(SYV_GDN_WU=columns timeout 120 $B/$t --gtest_filter='-*Timing*' 2>&1 | tee $O/$t.cols.log |
    grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
timeout 90 $B/gpu_cuda_hybrid_ops_test --gtest_filter='*Timing*' 2>&1 | grep -E "delta rule"
echo "total: $((SECONDS - t0)) s $(date +%T)"
