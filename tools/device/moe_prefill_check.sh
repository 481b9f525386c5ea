#!/usr/bin/env bash
# On the GPU machine: where Qwen3-Next's 8K prefill goes (issue 14's prefill target: >= 40% of the
# same-run GEMM rate on active FLOPs; 17% on 2026-12-02) and the MoE tiled path's prefill tile.
#   1. For each SYV_MOE_PREFILL_TILE (moe.cu: 0 the default 64 x 64, 1 128 x 128, 2 and 3 64 x 128
#      of 4 and 8 warps): the routed-expert op tests against the CPU (the tiled path at more than
#      16 rows an expert included), then the routed experts alone at 2K and 8K tokens in TFLOP/s
#      against cuBLASLt's GEMM (QwenNextPrefillTiming).
#   2. An 8K prefill of a 4-layer copy of the qwen3-next-24l shape (3 linear-attention layers and a
#      full-attention one, random weights) under ncu, every kernel summed by name
#      (tools/device/kernel_profile.sh): the split between the experts, the dense GEMMs, the
#      linear-attention scan and the rest.
#   3. `syv bench decode --lengths 8192` on an 8-layer copy under tiles 0 and 1: the model-level
#      prefill rate and its "% of measured GEMM".
# Written 2026-12-05 without a GPU. Carry .devcarry-deps. About 5 minutes.
#   tools/device/moe_prefill_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_moe_ops_test 2>&1 |
  tail -1
echo "build: $((SECONDS - t0)) s"
for v in 0 1 2 3; do
  echo "== tile $v: $(SYV_MOE_PREFILL_TILE=$v timeout 100 $B/gpu_cuda_moe_ops_test \
    --gtest_filter='*Experts*:*Tiled*:-*Timing*' 2>&1 |
    grep -E "^\[ +(PASSED|FAILED) |Failure" | head -4 | tr '\n' ' ')"
  SYV_MOE_PREFILL_TILE=$v timeout 100 $B/gpu_cuda_moe_ops_test \
    --gtest_filter='*QwenNextPrefillTiming*' 2>&1 | grep -E "^moe prefill|FAILED"
done
echo "tiles: $((SECONDS - t0)) s"
mk_config() {  # mk_config LAYERS DIR: the 24-layer config cut to its first LAYERS layers
  mkdir -p "$2"
  python3 - "$1" tools/bench/configs/qwen3-next-24l/config.json "$2/config.json" <<'PY'
import json, sys
n = int(sys.argv[1]); c = json.load(open(sys.argv[2]))
c["num_hidden_layers"] = n; c["layer_types"] = c["layer_types"][:n]
json.dump(c, open(sys.argv[3], "w"), indent=1)
PY
}
mk_config 4 /tmp/qnext-4l
mk_config 8 /tmp/qnext-8l
timeout 200 tools/device/kernel_profile.sh $B/syv /tmp/qnext-4l 1 64 --lengths 8192 2>&1 | head -40
echo "profile: $((SECONDS - t0)) s"
for v in 0 1; do
  echo "== 8 layers, tile $v"
  SYV_MOE_PREFILL_TILE=$v timeout 150 $B/syv bench decode --config /tmp/qnext-8l --random-weights \
    --batch 1 --context 64 --steps 5 --lengths 2048,8192 2>&1 | grep -E "^\| |ceilings|rror"
done
echo "total: $((SECONDS - t0)) s"
