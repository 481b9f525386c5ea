#!/usr/bin/env bash
# On the GPU machine (issue 17, the host tier's pinning and copy rate): builds syv and the host
# tier's GPU tests, runs them (the gather kernel's copy rates from the *Timing test too), then
#  1. `syv bench host-tier` on a random Qwen3-0.6B-shape folder and on the Qwen3-8B shape: serve
#     ratio, copy rate, and the tier's pinning (reserve pinned while idle, pieces pinned between
#     steps, evictions not written back);
#  2. eager steps early in a process's life with the tier on (default size) and off:
#     `syv generate --one-by-one --cuda-graphs off` of the 20 tiny-hybrid prompts (2026-12-01:
#     11.8 s / 10.9 s with a tier pinned by a background thread, 1.3 s without);
#  3. `syv serve` start-up to healthy with the default tier and with --host-cache-gb 0.
# Carry .devcarry-deps (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer. Stays within 8
# minutes on the H200 machine: the 8B shape runs last (its 16 GB folder takes the longest to write)
# and is skipped, saying so, when too little time is left.
# HOST_TIER_AB_S: its time budget in seconds (default 470), for a call that runs more.
#   [HOST_TIER_AB_S=300] tools/device/host_tier_ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
T="gpu_host_copy_gpu_test gpu_cache_store_gpu_test"
timeout 230 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T 2>&1 | tail -2
B=build/gpu-carry/bin
[[ -x $B/syv ]] || { echo "build failed"; exit 1; }
for t in $T; do
  r=$(timeout 60 $B/$t --gtest_filter='-*Timing*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
timeout 60 $B/gpu_host_copy_gpu_test --gtest_filter='*Timing*' 2>&1 | grep -E "GB/s|pinning|FAILED"

probe() {  # folder, label (PROBE_S: time limit, default 150 s)
  timeout "${PROBE_S:-150}" $B/syv bench host-tier --model "$1" --prefix-len 32768 --max-model-len 40960 \
    --kv-cache-mb 6144 --host-cache-gb 8 --max-batched-tokens 8192 2>&1 |
    grep -E "pinned copies|serve ratio|host tier pinning|note:|error" | sed "s/^/$2: /"
}

# 2. Eager steps early on, tier on and off (before anything else pins in this process's life).
P=/tmp/host_tier_ab_prompts.jsonl
python3 - tests/fixtures/tiny/tiny-hybrid/greedy256.json "$P" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as f:
    for p, t in zip(d["prompts"], d["tokens"]):
        f.write(json.dumps({"tokens": p, "max_tokens": len(t), "temperature": 0}) + "\n")
EOF
for host in default 0; do
  extra=()
  [[ $host == 0 ]] && extra=(--host-cache-gb 0)
  t0=$(date +%s.%N)
  timeout 45 $B/syv generate --model models/tiny-hybrid --device cuda --prompts-file "$P" \
    --one-by-one --cuda-graphs off "${extra[@]}" >/tmp/host_tier_ab_gen.jsonl 2>/tmp/host_tier_ab_gen.err
  rc=$?
  echo "generate --one-by-one, 20 x 256 tokens, graphs off, host tier $host: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s wall; $(grep -m1 "host tier" /tmp/host_tier_ab_gen.err | cut -c1-160)"
done

# 1a. The 0.6B shape.
D=/tmp/qwen3-0.6b-random
[[ -f $D/config.json ]] || timeout 60 $B/syv demo-model --config tools/bench/configs/qwen3-0.6b \
  --tokenizer third_party/qwen3-tokenizer --out $D >/dev/null 2>&1
probe $D "qwen3-0.6b"

# 3. Start-up to healthy (0.6B folder, in the page cache).
PORT=18433
KEY=host-tier-ab-key
for host in default 0; do
  extra=()
  [[ $host == 0 ]] && extra=(--host-cache-gb 0)
  t0=$(date +%s.%N)
  $B/syv serve --model $D --device cuda --port $PORT --api-key $KEY "${extra[@]}" \
    >/tmp/host_tier_ab_serve.log 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    curl -sf -H "Authorization: Bearer $KEY" localhost:$PORT/health >/dev/null 2>&1 && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.05
  done
  echo "serve, host tier $host: healthy after $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
  sleep 3  # the reserve pins while idle
  curl -s -H "Authorization: Bearer $KEY" localhost:$PORT/metrics | grep -E "^syv_host_tier_(pinned_bytes|pieces_pinned_total|pin_seconds_total)" | tr '\n' ' '
  echo
  kill $PID
  wait $PID 2>/dev/null
done

# 1b. The 8B shape, in what is left of 8 minutes (its folder is written first: 16 GB).
BUDGET=${HOST_TIER_AB_S:-470}
left=$((BUDGET - SECONDS))
if ((left < 90)); then
  echo "qwen3-8b: skipped, ${left} s left of 8 minutes (run tools/device/host_tier_check.sh)"
  exit 0
fi
D8=/tmp/qwen3-8b-random
[[ -f $D8/config.json ]] || timeout $((left - 60)) $B/syv demo-model \
  --config tools/bench/configs/qwen3-8b --tokenizer third_party/qwen3-tokenizer --out $D8 2>&1 |
  tail -1
left=$((BUDGET - SECONDS))
((left > 30)) && PROBE_S=$left probe $D8 "qwen3-8b" || echo "qwen3-8b: no time left for the probe"
