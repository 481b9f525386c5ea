#!/usr/bin/env bash
# On the GPU machine: prompt logprobs (echo + logprobs + max_tokens 0) through `syv serve --device
# cuda` (CUDA graphs on, decodes running beside the scoring request) against `syv logits --device
# cuda` on the same tokens, for a prompt longer than one step's 128 prompt rows; then the engine's
# graph tests (their reservation now counts the prompt rows) and /v1/responses once. Carry
# .devcarry-deps (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer.
#   tools/device/prompt_logprobs_check.sh
# The model is the trained tiny-dense (models/): a random-weight model's logits reach +-200, where
# bf16's rounding alone moves a logprob by ~1 between step shapes. Prints "max |difference| N"
# (expected < 0.1: bf16 activations, different step shapes; a misplaced row is off by several
# nats) and PASS/FAIL.
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
T="gpu_engine_graphs_gpu_test gpu_engine_qwen3_gpu_test"
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T 2>&1 | tail -2
B=build/gpu-carry/bin
for t in $T; do
  r=$(timeout 120 $B/$t --gtest_filter='-*Timing*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
D=models/tiny-dense
IDS=$(python3 -c "print(','.join(str(100 + (i * 7919) % 8000) for i in range(300)))")
timeout 120 $B/syv logits --model $D --device cuda --tokens "$IDS" --out /tmp/pl_logits.bin 2>&1 | tail -1
KEY=sk-prompt-logprobs-check-0123456789
$B/syv serve --model $D --device cuda --port 18093 --api-key $KEY --max-model-len 4096 >/tmp/pl_serve.out 2>/tmp/pl_serve.err &
PID=$!
for _ in $(seq 120); do
  curl -sf -H "Authorization: Bearer $KEY" http://127.0.0.1:18093/health >/dev/null && break
  sleep 1
done
post() { curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:18093$1"; }
DECODES=()
for i in 1 2 3 4; do  # decodes beside the scoring request (graph steps between its prefill steps)
  post /v1/completions "{\"prompt\": \"Story $i:\", \"max_tokens\": 200, \"ignore_eos\": true}" >/dev/null &
  DECODES+=($!)
done
post /v1/completions "{\"prompt\": [$IDS], \"max_tokens\": 1}" >/dev/null  # fills the cache first
post /v1/completions "{\"prompt\": [$IDS], \"echo\": true, \"logprobs\": 1, \"max_tokens\": 0}" >/tmp/pl_answer.json
wait "${DECODES[@]}" 2>/dev/null
post /v1/responses '{"input": "Hello", "max_output_tokens": 8, "stream": true}' | grep -c '^event: ' |
  sed 's/^/responses stream events: /'
kill $PID
wait $PID 2>/dev/null
python3 - "$IDS" <<'EOF'
import json, math, struct, sys
ids = [int(x) for x in sys.argv[1].split(',')]
raw = open('/tmp/pl_logits.bin', 'rb').read()
vocab = len(raw) // 4 // len(ids)
answer = json.load(open('/tmp/pl_answer.json'))
got = answer['choices'][0]['logprobs']['token_logprobs']
worst = 0.0
for p in range(1, len(ids)):
    row = struct.unpack_from(f'{vocab}f', raw, (p - 1) * vocab * 4)
    m = max(row)
    lse = m + math.log(sum(math.exp(v - m) for v in row))
    worst = max(worst, abs(got[p] - (row[ids[p]] - lse)))
print(f"max |difference| {worst:.3g} over {len(ids) - 1} positions; cached_tokens "
      f"{answer['usage']['prompt_tokens_details']['cached_tokens']}")
print("PASS" if worst < 0.1 and got[0] is None and answer['usage']['completion_tokens'] == 0 else "FAIL")
EOF
grep -E "error|CHECK" /tmp/pl_serve.err | head -5
