#!/usr/bin/env bash
# On the GPU machine (about 4 minutes with the build): the open question of 2026-12-06 about the
# norm-folded q|k|v GEMV with K split over 2 warps (SYV_GEMV_QKV_VARIANT=6) on Qwen3-Next's shape:
# faster in graph and eager runs (8-layer b = 1 0.909 -> ~0.84 ms, H100) with every expert routed,
# but under ncu (kernels serialized) the same step routed no expert from the third layer on. A
# shared-memory race found afterwards in the gated norm prologue (norm weights read before the
# barrier; hidden by the PDL wait, exposed when launches are serialized) is fixed since: this
# checks that it was the cause. Answered (2026-12-06 20:33, H200): it was; 80 experts in every
# mode, no hazard. The 2-warp split is the default at K = 2048 since (the VARIANT=6 lines repeat
# it there; SYV_GEMV_QKV_VARIANT=7 gives the 4-warp split).
#  1. compute-sanitizer racecheck on the gated and plain fused-norm GEMV tests (where installed),
#     then gpu_cuda_ops_test FusedNormLinearSilu: every GEMV shape against the CPU, now with 8,192
#     and 6,144 rows at K = 2048 / 4096 (more tiles than the persistent grid has blocks), and the
#     hybrid ops tests with PDL off (FusedNormGemvsReadNoStaleSharedMemory: the fused norm GEMVs
#     launched right after a kernel that leaves NaN in every SM's shared memory).
#  2. `syv bench decode` of the Qwen3-Next shape cut to 8 layers, eager, with the experts it reads
#     per step (80 = 10 a MoE layer when the hidden states are finite), under the default form and
#     SYV_GEMV_QKV_VARIANT=6, each also with CUDA_LAUNCH_BLOCKING=1 and SYV_PDL=0 (serialized, as
#     under ncu).
# Carry .devcarry-deps and .devcarry-tok.
#   tools/device/norm_gemv_probe.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_ops_test \
  gpu_cuda_hybrid_ops_test 2>&1 | tail -1
echo "build: $((SECONDS - t0)) s"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [[ -x $CS ]]; then
  timeout 150 "$CS" --tool racecheck $B/gpu_cuda_hybrid_ops_test \
    --gtest_filter='*GatedRmsNorm*:*FusedNormGemvs*' \
    2>&1 | grep -E "RACECHECK SUMMARY|hazard|^\[ +(PASSED|FAILED) " | head -6
fi
timeout 150 $B/gpu_cuda_ops_test --gtest_filter='*FusedNormLinearSilu*' 2>&1 |
  grep -E "^\[ +(OK|PASSED|FAILED) |Failure|relative|Expected" | head -30
SYV_PDL=0 timeout 150 $B/gpu_cuda_hybrid_ops_test --gtest_filter='-*Timing*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
SYV_GEMV_QKV_VARIANT=6 timeout 150 $B/gpu_cuda_hybrid_ops_test --gtest_filter='*FusedNormGemvs*' \
  2>&1 | grep -E "^\[ +(PASSED|FAILED) |Failure" | head -6
cut=/tmp/norm-gemv-probe-config
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
for v in DEFAULT=1 CUDA_LAUNCH_BLOCKING=1 SYV_PDL=0 SYV_GEMV_QKV_VARIANT=6 \
  SYV_GEMV_QKV_VARIANT=6,CUDA_LAUNCH_BLOCKING=1 SYV_GEMV_QKV_VARIANT=6,SYV_PDL=0; do
  # eager ms | experts read
  echo "$v: $(env ${v//,/ } timeout 90 $B/syv bench decode --config $cut --random-weights \
    --batch 1 --context 512 --steps 5 --no-graphs 2>&1 | grep -E '^\| decode' | head -1 |
    awk -F'|' '{print $7 "|" $13}')"
done
echo "total: $((SECONDS - t0)) s"
