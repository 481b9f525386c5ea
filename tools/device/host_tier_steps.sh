#!/usr/bin/env bash
# On the GPU machine (issue 17, the others' decode while a host hit loads): builds syv, writes a
# random-weight folder of the Qwen3-8B shape, and runs `syv bench host-tier --json` (32K-token
# prefix evicted to the host tier and resent, 8 decoders) once per variant, printing the serve
# ratio, the loading figure and every step's time (before the hit; while it loads, * = wrote an
# eviction back, +N = the write-ahead copied N pages after it, pN = N pieces of host memory
# pinned after it, wN = N evictions that waited for a write-ahead batch still in flight), and
# each loading step's parts (the engine's schedule / forward / output phases | between_steps; the
# steps before: their mean).
# A variant is an SYV_HOST_COPY value ("default": unset) with an optional "/off" for
# --host-write-ahead off and an optional "@reserve" for --host-pin-idle reserve, e.g. default
# default/off default@reserve engines:kernel calls:engines (docs/cuda-backend.md "Host tier
# copies", docs/hybrid-cache.md "Host tier"), then optionally "+defer" (SYV_DEFER_COPIES=1, the
# default since 2026-12-05), "-defer" (SYV_DEFER_COPIES=0: the copies issued at their calls),
# "+mapped" (SYV_STEP_UPLOADS=mapped), "+aheadout" (SYV_AHEAD_STREAM=out) and "-admit"
# (--admit-after-launch off: the host hit admitted in the schedule phase, as before 2026-12-07),
# e.g. default+defer default+defer+mapped default-admit. Carry
# .devcarry-deps (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer.
#   [CONFIG=qwen3.5-9b-class] tools/device/host_tier_steps.sh [variant ...]
#   (default: the default paths, twice, on tools/bench/configs/$CONFIG, qwen3-8b by default)
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
timeout 260 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
B=build/gpu-carry/bin
[[ -x $B/syv ]] || { echo "build failed"; exit 1; }
CONFIG=${CONFIG:-qwen3-8b}
D=/tmp/$CONFIG-random
[[ -f $D/config.json ]] || timeout 200 $B/syv demo-model --config tools/bench/configs/$CONFIG \
  --tokenizer third_party/qwen3-tokenizer --out $D >/dev/null 2>&1
(($#)) || set -- default default
for variant in "$@"; do
  pin=""
  [[ $variant == *@* ]] && pin=${variant##*@} && pin=${pin%%+*}
  copy=${variant%%[/@+-]*} ahead=on defer="" mapped="" aheadout=""
  [[ $variant == */off* ]] && ahead=off
  [[ $variant == *+defer* ]] && defer=1
  [[ $variant == *-defer* ]] && defer=0
  [[ $variant == *+mapped* ]] && mapped=mapped
  [[ $variant == *+aheadout* ]] && aheadout=out
  admit=on
  [[ $variant == *-admit* ]] && admit=off
  [[ $copy == default ]] && copy=""
  env ${copy:+SYV_HOST_COPY=$copy} ${defer:+SYV_DEFER_COPIES=$defer} ${mapped:+SYV_STEP_UPLOADS=mapped} \
    ${aheadout:+SYV_AHEAD_STREAM=out} \
    timeout 120 $B/syv bench host-tier --model $D --prefix-len 32768 \
    --max-model-len 40960 --kv-cache-mb 6144 --host-cache-gb 16 --max-batched-tokens 8192 \
    --host-write-ahead $ahead ${pin:+--host-pin-idle $pin} --admit-after-launch $admit \
    --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
keys = ["serve_ratio", "loading_decode_ratio", "loading_decode_ratio_no_stores",
        "loading_admission_step_s", "loading_steps", "loading_steps_with_stores",
        "loading_run_pieces_pinned", "loading_run_pin_s", "reserve_pinned_idle_s", "stores_short", "host_ttft_s", "cold_ttft_s",
        "pinned_h2d_gb_per_s", "loading_copy_gb_per_s_min", "loading_copy_of_pinned_min"]
print(sys.argv[1] + ": " + ", ".join(f"{k}={j.get(k)}" for k in keys))
print("  before ms: " + " ".join(f"{x * 1e3:.1f}" + (f"p{p}" if p else "")
                                 for x, p in zip(j["before_step_times_s"], j["before_step_pieces"])))
steps = zip(j["loading_step_times_s"], j["loading_step_stored"], j["loading_step_written_ahead"],
            j["loading_step_pieces"], j["loading_step_ahead_waits"])
print("  loading ms: " + " ".join(f"{t * 1e3:.1f}" + ("*" if s else "") + (f"+{a}" if a else "")
                                  + (f"p{p}" if p else "") + (f"w{w}" if w else "")
                                  for t, s, a, p, w in steps))
bp = j.get("before_step_parts_s", [])
if bp:
    mean = [sum(p[i] for p in bp) / len(bp) * 1e3 for i in range(5)]
    print(f"  before parts ms, mean (schedule/forward/output | between): {mean[0]:.2f}/{mean[1]:.2f}/{mean[2]:.2f}|{mean[4]:.2f}")
print("  loading parts ms (schedule/forward/output | between): " + "  ".join(
    f"{sc * 1e3:.1f}/{fw * 1e3:.1f}/{ou * 1e3:.1f}|{bt * 1e3:.1f}"
    for sc, fw, ou, st, bt in j.get("loading_step_parts_s", [])))' "$variant"
done
