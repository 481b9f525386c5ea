#!/usr/bin/env bash
# On the GPU machine (issue 17: the admission step of a host hit spends 3.1-4.2 ms of host time in
# its schedule phase on the 8B shape, 1.7-2.3 ms with SYV_DEFER_COPIES=1, 2026-12-05; whether that
# is the engine's bookkeeping or CUDA API calls is not known): `syv bench host-tier` on a random-weight
# Qwen3-8B-shape folder (the command of host_tier_steps.sh) under nsys with the CUDA API and OS
# runtime traced, then nsys's per-API summary (calls, total and longest time) and the API calls
# longer than 50 us with their time stamps, to set against the step times the bench prints.
# Carry .devcarry-deps and .devcarry-tok. About 4 minutes.
#   [CONFIG=qwen3.5-9b-class] [ENV="SYV_DEFER_COPIES=1"] tools/device/host_tier_api_trace.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
timeout 260 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
B=build/gpu-carry/bin
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
[[ -x $NSYS ]] || { echo "host_tier_api_trace: nsys not found"; exit 1; }
CONFIG=${CONFIG:-qwen3-8b}
D=/tmp/$CONFIG-random
[[ -f $D/config.json ]] || timeout 200 $B/syv demo-model --config tools/bench/configs/$CONFIG \
  --tokenizer third_party/qwen3-tokenizer --out $D >/dev/null 2>&1
R=${OUT:-/tmp}/host_tier_trace
env ${ENV:-} timeout 200 "$NSYS" profile -o "$R" --force-overwrite true -t cuda,osrt \
  $B/syv bench host-tier --model $D --prefix-len 32768 --max-model-len 40960 --kv-cache-mb 6144 \
  --host-cache-gb 16 --max-batched-tokens 8192 --json >"$R.json" 2>/dev/null
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("serve_ratio", j["serve_ratio"], "loading_decode_ratio", j["loading_decode_ratio"], "loading ms", [round(t*1e3,1) for t in j["loading_step_times_s"]])' "$R.json"
timeout 90 "$NSYS" stats --report cuda_api_sum --format csv "$R.nsys-rep" 2>/dev/null |
  grep -v "^$" | head -30
timeout 90 "$NSYS" stats --report cuda_api_trace --format csv "$R.nsys-rep" 2>/dev/null |
  python3 -c '
import csv, sys
rows = list(csv.reader(l for l in sys.stdin if l.count(",") > 3))
head = rows[0]
st, du, na = head.index("Start (ns)"), head.index("Duration (ns)"), head.index("Name")
long = [r for r in rows[1:] if float(r[du]) > 50e3]
print(f"{len(long)} API calls over 50 us:")
for r in long[:80]:
    print(f"  {float(r[st]) / 1e9:10.4f} s  {float(r[du]) / 1e3:9.1f} us  {r[na]}")'
