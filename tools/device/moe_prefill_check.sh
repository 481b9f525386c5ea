#!/usr/bin/env bash
# On the GPU machine: Qwen3-Next's prefill (issue 14's target: 8K tokens at >= 40% of the same-run
# GEMM rate on active FLOPs) and the routed experts' prefill tile (moe.cuh MoeTile). The
# routed-expert op tests against the CPU (every prefill tile, forced in turn, bit-identical to the
# default's), the routed experts alone at 2K and 8K tokens under each tile in TFLOP/s against
# cuBLASLt's GEMM (QwenNextPrefillTiming), then `syv bench decode --lengths 2048,8192` on an
# 8-layer copy of the qwen3-next-24l shape (random weights: the model-level rate and its "% of
# measured GEMM") under each SYV_MOE_TILE in TILES (default: all; "best": the default and the two
# fastest others at 8K tokens in the timing). SPLIT=1 adds where one 8K
# prefill of a 4-layer copy goes, kernel by kernel (tools/device/prefill_kernel_split.sh, ncu).
# Carry .devcarry-deps. About 2 minutes after the build (2026-12-06, H100).
#   TILES="auto warp64" tools/device/moe_prefill_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_moe_ops_test 2>&1 |
  tail -1
echo "build: $((SECONDS - t0)) s"
mk_config() {  # mk_config LAYERS DIR: the 24-layer config cut to its first LAYERS layers
  mkdir -p "$2"
  python3 - "$1" tools/bench/configs/qwen3-next-24l/config.json "$2/config.json" <<'PY'
import json, sys
n = int(sys.argv[1]); c = json.load(open(sys.argv[2]))
c["num_hidden_layers"] = n; c["layer_types"] = c["layer_types"][:n]
json.dump(c, open(sys.argv[3], "w"), indent=1)
PY
}
mk_config 8 /tmp/qnext-8l
TILES=${TILES:-auto wide large large-k32 warp64 warp64-k64 tall}
echo "tests: $(timeout 100 $B/gpu_cuda_moe_ops_test --gtest_filter='-*Timing*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure" | head -4 | tr '\n' ' ')"
timeout 150 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
  grep -E "^moe prefill|FAILED" | tee /tmp/moe_tiles.txt
if [[ $TILES == best ]]; then  # the default and the two fastest others at 8K tokens
  TILES="auto $(grep -E "^moe prefill,  8192 tokens" /tmp/moe_tiles.txt | grep -v "tile auto " |
    sed -E 's/.*tile ([a-z0-9-]+) *: experts +([0-9.]+) ms.*/\2 \1/' | sort -n |
    awk '{print $2}' | head -2 | tr '\n' ' ')"
fi
for tile in $TILES; do
  echo "== SYV_MOE_TILE=$tile"
  SYV_MOE_TILE=$tile timeout 100 $B/syv bench decode --config /tmp/qnext-8l --random-weights \
    --batch 1 --context 64 --steps 5 --lengths 2048,8192 2>&1 | grep -E "^\| prefill|rror" |
    sort -u
done
echo "bench: $((SECONDS - t0)) s"
if [[ ${SPLIT:-0} == 1 ]]; then
  SYV_MOE_TILE=${SPLIT_TILE:-auto} CONFIG=tools/bench/configs/qwen3-next-24l LAYERS=4 \
    LENGTHS=8192 timeout 200 tools/device/prefill_kernel_split.sh 2>&1 | grep -vE "^build" |
    head -24
fi
echo "total: $((SECONDS - t0)) s"
