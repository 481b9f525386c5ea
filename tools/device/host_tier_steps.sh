#!/usr/bin/env bash
# On the GPU machine (issue 17, the others' decode while a host hit loads): builds syv, writes a
# random-weight folder of the Qwen3-8B shape, and runs `syv bench host-tier --json` (32K-token
# prefix evicted to the host tier and resent, 8 decoders) once per variant, printing the serve
# ratio, the loading figure and every step's time (before the hit; while it loads, * = wrote an
# eviction back, +N = the write-ahead copied N pages after it). A variant is an SYV_HOST_COPY
# value ("default": unset) with an optional "/off" for --host-write-ahead off, e.g. default
# default/off engines:kernel calls:engines (docs/cuda-backend.md "Host tier copies"). Carry .devcarry-deps
# (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer.
#   tools/device/host_tier_steps.sh [variant ...]     (default: the default paths, twice)
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
timeout 260 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
B=build/gpu-carry/bin
[[ -x $B/syv ]] || { echo "build failed"; exit 1; }
D=/tmp/qwen3-8b-random
[[ -f $D/config.json ]] || timeout 200 $B/syv demo-model --config tools/bench/configs/qwen3-8b \
  --tokenizer third_party/qwen3-tokenizer --out $D >/dev/null 2>&1
(($#)) || set -- default default
for variant in "$@"; do
  copy=${variant%%/*} ahead=on
  [[ $variant == */off ]] && ahead=off
  [[ $copy == default ]] && copy=""
  env ${copy:+SYV_HOST_COPY=$copy} timeout 120 $B/syv bench host-tier --model $D --prefix-len 32768 \
    --max-model-len 40960 --kv-cache-mb 6144 --host-cache-gb 16 --max-batched-tokens 8192 \
    --host-write-ahead $ahead --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
keys = ["serve_ratio", "loading_decode_ratio", "loading_decode_ratio_no_stores",
        "loading_admission_step_s", "loading_steps", "loading_steps_with_stores"]
print(sys.argv[1] + ": " + ", ".join(f"{k}={j.get(k)}" for k in keys))
print("  before ms: " + " ".join(f"{x * 1e3:.1f}" for x in j["before_step_times_s"]))
steps = zip(j["loading_step_times_s"], j["loading_step_stored"], j["loading_step_written_ahead"])
print("  loading ms: " + " ".join(f"{t * 1e3:.1f}" + ("*" if s else "") + (f"+{a}" if a else "")
                                  for t, s, a in steps))' "$variant"
done
