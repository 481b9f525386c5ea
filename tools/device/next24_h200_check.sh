#!/usr/bin/env bash
# On an H200 (the 24-layer Qwen3-Next shape of tools/bench/configs/qwen3-next-24l takes more than an
# H100's 80 GB in bf16), one call (not yet run: two H200 requests on 2026-12-07 got none): issue
# 14's targets on the shape itself, `syv bench decode` b = 1 at context 512 (graph ms, % of the
# floor counting the routed experts' bytes) and the 2K / 8K prefill (% of the same-run GEMM rate
# on active FLOPs) in one process; then the same of its 8-layer copy (the H100's proxy). Run it
# with needs_h200. Carry .devcarry-deps and .devcarry-tok.
#   tools/device/next24_h200_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/device/device_start.sh
build
cut=/tmp/next24-config-8
python3 tools/device/cut_config.py tools/bench/configs/qwen3-next-24l 8 $cut
for cfg in tools/bench/configs/qwen3-next-24l $cut; do
  echo "== $(basename $cfg) $(date +%T)"
  timeout 240 $B/syv bench decode --config $cfg --random-weights --batch 1 --context 512 \
    --steps 30 --lengths 2048,8192 2>&1 | tee -a $O/bench.log |
    grep -E "^\| (decode|prefill)|rror" | sort -u
done
echo "total: $((SECONDS - t0)) s $(date +%T)"
