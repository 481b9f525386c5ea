#!/usr/bin/env bash
# On the GPU machine, one call (141-191 s with the build on H100s, 2026-12-07): the routed
# experts' tiled path with down's per-pair output y in bf16 (2026-12-07; f32 before), against the
# CPU and at the model level.
#  1. Tests: gpu_cuda_moe_ops_test (the tiled path against the CPU, every tile's bits against the
#     default's, the wgmma tiles against each other), gpu_moe_quantized_gpu_test (the quantized
#     experts' tiled path writes y too), the hybrid golden tests (MoE fixtures against
#     transformers), the engine's hybrid and MoE scenarios.
#  2. The routed experts alone at 2K and 8K tokens (QwenNextPrefillTiming; f32 y before: 1.268 /
#     2.454 ms on an H100, 2026-12-07 07:57).
#  3. The 8-layer copy of qwen3-next-24l: `syv bench decode --lengths 2048,8192`, twice (f32 y
#     before: 17.4 / 48.0 ms, 25.8% / 39.5%, H100, 2026-12-07 08:12).
# Carry .devcarry-deps and .devcarry-tok. Writes 2 files to $OUT (tests.log, bench.log).
#   tools/device/moe_y_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
TESTS="gpu_cuda_moe_ops_test gpu_moe_quantized_gpu_test gpu_hybrid_golden_gpu_test
  gpu_engine_qwen3_gpu_test"
build $TESTS

echo "== tests $(date +%T)"
declare -A FILTER=([gpu_engine_qwen3_gpu_test]='*Hybrid*:*Moe*:*MixtureOfExperts*')
for t in $TESTS; do
  r=$(timeout 200 $B/$t --gtest_filter="${FILTER[$t]:--*Timing*}" 2>&1 | tee -a $O/tests.log |
    grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
echo "== the routed experts alone $(date +%T)"
timeout 100 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  tee -a $O/tests.log | grep -E "^moe prefill.*(auto |wgmma-64 )|FAILED"
cut=/tmp/moe-y-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
for i in 1 2; do
  echo "== prefill, the 8-layer copy ($i) $(date +%T)"
  prefill $cut 2048,8192 DEFAULT=1
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
