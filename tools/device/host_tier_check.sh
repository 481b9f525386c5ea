#!/usr/bin/env bash
# On the GPU machine, after tools/device/build_gpu.sh: the host tier's figures (issue 17) and the
# start-up cost of its pinned pool. Writes random-weight folders of the dense Qwen3-8B shape and the
# Qwen3.5 9B-class shape (syv demo-model), times `syv serve --device cuda` from the page cache
# with the default host tier and with --host-cache-gb 0, then runs `syv bench host-tier` (32K-token
# prefix evicted to host and resent) on each.
#   tools/device/host_tier_check.sh [build carry dir, default build/gpu-carry] [prefix tokens]
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/gpu-carry}/bin
PREFIX=${2:-32768}
PORT=18432
KEY=host-tier-check-key
for cfg in qwen3-8b qwen3.5-9b-class; do
  DIR=/tmp/$cfg-random
  [[ -f $DIR/config.json ]] || timeout 200 $B/syv demo-model --config tools/bench/configs/$cfg \
    --tokenizer third_party/qwen3-tokenizer --out $DIR 2>&1 | tail -1
  cat $DIR/*.safetensors >/dev/null  # into the page cache
  for host in default 0; do
    extra=()
    [[ $host == 0 ]] && extra=(--host-cache-gb 0)
    t0=$(python3 -c "import time; print(time.time())")
    $B/syv serve --model $DIR --device cuda --port $PORT --api-key $KEY "${extra[@]}" \
      >/tmp/serve-$cfg-$host.log 2>&1 &
    PID=$!
    for _ in $(seq 1200); do
      curl -sf -H "Authorization: Bearer $KEY" localhost:$PORT/health >/dev/null 2>&1 && break
      kill -0 $PID 2>/dev/null || break
      sleep 0.05
    done
    echo "$cfg, host tier $host: healthy after $(python3 -c "import time; print(round(time.time() - $t0, 2))") s"
    grep -E "host tier|weights|graphs:|listening" /tmp/serve-$cfg-$host.log | head -5
    kill $PID
    wait $PID
  done
  timeout 300 $B/syv bench host-tier --model $DIR --prefix-len $PREFIX \
    --max-model-len $((PREFIX + 8192)) --kv-cache-mb 6144 --host-cache-gb 16 \
    --max-batched-tokens 8192 2>&1 | grep -vE "^\[.*(debug|trace)" | tail -12
done
