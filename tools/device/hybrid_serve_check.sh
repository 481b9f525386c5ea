#!/usr/bin/env bash
# On the GPU machine, after tools/device/build_gpu.sh: writes a random-weight Qwen3.5 9B-class
# folder (syv demo-model), starts `syv serve --device cuda` on it twice (the second start reads the
# weights from the page cache: the start-up figure), and sends completions through the HTTP API:
# one plain, 8 concurrent, and a repeated prompt (a prefix hit through a state checkpoint).
#   tools/device/hybrid_serve_check.sh [config dir, default tools/bench/configs/qwen3.5-9b-class]
#                                      [build carry dir, default build/gpu-carry]
# (tools/bench/configs/qwen3.5-tiny: the real vocabulary and tokenizer, 4 layers of width 256.)
set -uo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-tools/bench/configs/qwen3.5-9b-class}
B=${2:-build/gpu-carry}/bin
DIR=/tmp/$(basename "$CONFIG")-random
PORT=18431
KEY=hybrid-check-key
[[ -f $DIR/config.json ]] || timeout 120 $B/syv demo-model --config "$CONFIG" \
  --tokenizer third_party/qwen3-tokenizer --out $DIR 2>&1 | tail -2
for start in cold warm; do
  t0=$(python3 -c "import time; print(time.time())")
  $B/syv serve --model $DIR --device cuda --port $PORT --api-key $KEY >/tmp/serve-$start.log 2>&1 &
  PID=$!
  for _ in $(seq 900); do
    curl -sf -H "Authorization: Bearer $KEY" localhost:$PORT/health >/dev/null 2>&1 && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  echo "$start start: $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" \
    localhost:$PORT/health) after $(python3 -c "import time; print(round(time.time() - $t0, 2))") s"
  tail -3 /tmp/serve-$start.log
  [[ $start == cold ]] && { kill $PID; wait $PID; }
done
grep -E "memory plan|engine:|graphs|error|qwen3_5" /tmp/serve-warm.log | head -12
req() {
  curl -s -m 60 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
    localhost:$PORT/v1/completions \
    -d "{\"model\":\"$(basename $DIR)\",\"prompt\":\"$1\",\"max_tokens\":$2,\"temperature\":0}"
}
req "The quick brown fox" 16 | head -c 400; echo
pids=()
for i in $(seq 8); do
  req "Concurrent request number $i with some text" 32 >/tmp/c$i.json &
  pids+=($!)
done
wait "${pids[@]}"  # not a bare wait: the server is a background job too
for i in $(seq 8); do grep -c '"text"' /tmp/c$i.json; done | sort | uniq -c
long=$(python3 -c "print(' '.join(['hybrid'] * 600))")
a=$(req "$long" 8); b=$(req "$long" 8)
echo "resend equal: $([[ $(echo "$a" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])') == \
  $(echo "$b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])') ]] && echo yes || echo no)"
echo "$b" | python3 -c 'import json,sys; print("usage", json.load(sys.stdin)["usage"])'
curl -s -H "Authorization: Bearer $KEY" localhost:$PORT/metrics | grep -E "^syv_(prefix|checkpoint|state)" | head -8
kill $PID; wait $PID
tail -3 /tmp/serve-warm.log
