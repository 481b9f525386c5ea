#!/usr/bin/env bash
# On the GPU machine: wgmma128's head_dim-256 form (SYV_PREFILL_WGMMA_256=1, off by default)
# against the mma8w fallback that head_dim 256 takes otherwise.
#  1. gpu_cuda_ops_test's attention cases (the head_dim-256 prefill cases check the form against the
#     CPU and for determinism).
#  2. `syv bench prefill --attention-only` at Qwen3-Next's attention shape (the 8-layer copy of
#     qwen3-next-24l: 16 q / 2 kv heads of 256) and the 8-layer 2K / 8K prefill, each with and
#     without the form.
# Carry .devcarry-deps and .devcarry-tok.
#   tools/device/attention256_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
O=${OUT:-/tmp}
source tools/device/bench_lines.sh
t0=$SECONDS
echo "== build $(date +%T)"
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_ops_test 2>&1 | tail -1
echo "build: $((SECONDS - t0)) s"
[[ -x $B/syv ]] || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== attention tests $(date +%T)"
timeout 200 $B/gpu_cuda_ops_test --gtest_filter='*CudaAttention*' 2>&1 | tee $O/attention.log |
  grep -E "^\[  (PASSED|FAILED) |Failure|head_dim 256" | head -12
cut=/tmp/attention256-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
for v in DEFAULT=1 SYV_PREFILL_WGMMA_256=1; do
  echo "== attention alone, $v $(date +%T)"
  env $v timeout 120 $B/syv bench prefill --config $cut --random-weights --attention-only \
    --lengths 2048,8192 2>&1 | tee -a $O/bench.log | grep -E "^\| prefill|rror" | sort -u
done
for v in DEFAULT=1 SYV_PREFILL_WGMMA_256=1 DEFAULT=1 SYV_PREFILL_WGMMA_256=1; do
  ((SECONDS - t0 < 540)) || break
  echo "== prefill, $v $(date +%T)"
  prefill $cut 2048,8192 $v
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
