#!/usr/bin/env bash
# On the GPU machine: Qwen3-Next's prefill (issue 14's target: 8K tokens at >= 40% of the same-run
# GEMM rate on active FLOPs). The routed-expert op tests against the CPU (every prefill tile of
# moe.cu's tiled path included), the routed experts alone at 2K and 8K tokens in TFLOP/s against
# cuBLASLt's GEMM (QwenNextPrefillTiming), `syv bench decode --lengths 2048,8192` on an 8-layer
# copy of the qwen3-next-24l shape (random weights: the model-level rate and its "% of measured
# GEMM"), then, where nsys is installed, the kernels of one 8K prefill of a 4-layer copy summed by
# name (nsys's cuda_gpu_kern_sum: where the prefill goes). ncu was tried for that split on
# 2026-12-05 and did not finish in 200 s (it replays every kernel of the bench's warm-up too).
# Each of the first three under the default grid order (moe.cu: the blocks of one tile of rows
# together, the default since 2026-12-05) and under SYV_MOE_GRID=m (the order before).
# Carry .devcarry-deps. About 4 minutes after the build.
#   tools/device/moe_prefill_check.sh
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
for grid in default m; do
  g=""
  [[ $grid == m ]] && g="SYV_MOE_GRID=m"
  echo "== grid order: $grid"
  echo "tests: $(env $g timeout 100 $B/gpu_cuda_moe_ops_test \
    --gtest_filter='*Experts*:*Tiled*:-*Timing*' 2>&1 | grep -E "^\[ +(PASSED|FAILED) |Failure" |
    head -4 | tr '\n' ' ')"
  env $g timeout 100 $B/gpu_cuda_moe_ops_test --gtest_filter='*QwenNextPrefillTiming*' 2>&1 |
    grep -E "^moe prefill|FAILED"
  env $g timeout 150 $B/syv bench decode --config /tmp/qnext-8l --random-weights --batch 1 \
    --context 64 --steps 5 --lengths 2048,8192 2>&1 | grep -E "^\| |ceilings|rror" | sort -u
  echo "bench: $((SECONDS - t0)) s"
done
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
if [[ -x $NSYS ]]; then
  mk_config 4 /tmp/qnext-4l
  timeout 150 "$NSYS" profile -o /tmp/qnext_prefill --force-overwrite true -t cuda \
    $B/syv bench prefill --config /tmp/qnext-4l --random-weights --lengths 8192 >/dev/null 2>&1
  timeout 60 "$NSYS" stats --report cuda_gpu_kern_sum --format csv /tmp/qnext_prefill.nsys-rep \
    2>/dev/null | python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.count(",") > 4)]
head, body = rows[0], rows[1:]
ti, ni, ci = head.index("Total Time (ns)"), head.index("Name"), head.index("Instances")
total = sum(float(r[ti]) for r in body)
print(f"nsys: {len(body)} kernels, {total / 1e6:.1f} ms in all (the whole bench, warm-up included)")
for r in sorted(body, key=lambda r: -float(r[ti]))[:25]:
    print(f"| {float(r[ti]) / 1e6:8.2f} ms | {100 * float(r[ti]) / total:5.1f}% | {r[ci]:>5} | {r[ni][:110]} |")'
else
  echo "no nsys on this machine: the split by ncu (tools/device/prefill_kernel_split.sh)"
  CONFIG=tools/bench/configs/qwen3-next-24l LAYERS=4 LENGTHS=8192 timeout 300 \
    tools/device/prefill_kernel_split.sh 2>&1 | grep -vE "^build"
fi
echo "total: $((SECONDS - t0)) s"
