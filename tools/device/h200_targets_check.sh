#!/usr/bin/env bash
# On an H200, one call (not yet run; STOP_AFTER keeps it under a call's 600 s): the open targets'
# H200 rows of docs/performance.md that later work measured only on H100s, in one pass (run it
# with needs_h200: the 24-layer Qwen3-Next shape takes more than an H100's 80 GB in bf16).
#  1. Issue 14: the 24-layer Qwen3-Next shape b = 1 at context 512 and its 2K / 8K prefill (one
#     process), and the same of its 8-layer copy; the Qwen3.5-MoE default text config
#     (tools/bench/configs/qwen3.5-moe, 69.3 GB in bf16) b = 1 / 64 and its 2K / 8K prefill.
#  2. Issue 19: Qwen3-8B (random weights) b = 1 / 64 / 256 at context 512, b = 64 at 8,192.
#  3. Issue 24: Qwen3-8B in gptq int4 and fp8 (`syv quantize`d copies made meanwhile): b = 1, and
#     fp8 b = 64 with the 2K prefill; the bf16 b = 64 and 2K prefill beside them.
#  4. The Qwen3.5 9B-class shape b = 1.
# STOP_AFTER=s: no bench process starts later (default 540). Carry .devcarry-deps and
# .devcarry-tok. Writes bench.log and the folders' prep logs to $OUT.
#   tools/device/h200_targets_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build
W=/tmp/syv-quant
CFG=tools/bench/configs/qwen3-8b
FORMATS="gptq fp8"
source tools/device/fp8_folders.sh
fp8_folders_start
# NAME CONFIG ARGS...: one `syv bench decode` process, its decode and prefill lines.
bench() {
  local name=$1 cfg=$2
  shift 2
  ((SECONDS - t0 < ${STOP_AFTER:-540})) || { echo "== $name: skipped (time)"; return; }
  echo "== $name $(date +%T)"
  timeout 240 $B/syv bench decode --config "$cfg" "$@" 2>&1 | tee -a $O/bench.log |
    grep -E "^\| (decode|prefill)|rror" | sort -u
}
cut=/tmp/h200-targets-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
bench "Qwen3-Next 24 layers" tools/bench/configs/qwen3-next-24l --random-weights --batch 1 \
  --context 512 --steps 30 --lengths 2048,8192
bench "Qwen3-Next 8 layers" $cut --random-weights --batch 1 --context 512 --steps 30 \
  --lengths 2048,8192
bench "Qwen3.5-MoE (35B-A3B shape)" tools/bench/configs/qwen3.5-moe --random-weights \
  --batch 1,64 --context 512 --steps 20 --lengths 2048,8192
bench "Qwen3-8B" $CFG --random-weights --batch 1,64,256 --context 512 --steps 20 --lengths 2048
bench "Qwen3-8B, context 8192" $CFG --random-weights --batch 64 --context 8192 --steps 10
bench "Qwen3.5 9B-class" tools/bench/configs/qwen3.5-9b-class --random-weights --batch 1 \
  --context 512 --steps 30
echo "== waiting for the quantized folders $(date +%T)"
fp8_folders_wait
bench "Qwen3-8B gptq" $W/gptq --batch 1 --context 512 --steps 30
bench "Qwen3-8B fp8" $W/fp8 --batch 1,64 --context 512 --steps 20 --lengths 2048
echo "total: $((SECONDS - t0)) s $(date +%T)"
