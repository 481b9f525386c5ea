#!/usr/bin/env bash
# On the GPU machine: MTP speculation on CUDA with the trained tiny-hybrid, and draft-model
# speculation with tiny-draft on tiny-dense (models/, docs/models.md).
# Builds syv and the speculation GPU tests, runs them, then
#  1. `syv generate --device cuda --one-by-one` over the 20 held-out prompts of
#     tests/fixtures/tiny/tiny-hybrid/greedy256.json (256 greedy tokens each) without speculation
#     and with --speculative-method mtp k = 1, 2, 3: steps, tokens per step, tok/s, and whether the
#     texts equal plain decoding's (transformers' tokens are checked by gpu_hybrid_golden_gpu_test);
#  2. the same with tiny-dense alone and with --speculative-method draft --draft-model
#     models/tiny-draft, k = 3;
#  3. `syv serve --device cuda` without and with MTP (k = 3), loaded by `syv bench serve --scenario
#     c1` (one request at a time): the end-to-end figure.
# Carry .devcarry-deps (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer.
#   tools/device/mtp_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
T="gpu_engine_mtp_gpu_test gpu_engine_verify_gpu_test gpu_engine_graphs_gpu_test gpu_cuda_hybrid_ops_test"
timeout 240 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T 2>&1 | tail -1
B=build/gpu-carry/bin
for t in $T; do
  echo "$t: $(timeout 90 $B/$t --gtest_filter='-*Timing*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')"
done
M=models/tiny-hybrid
FIX=tests/fixtures/tiny/tiny-hybrid/greedy256.json
P=/tmp/mtp_prompts.jsonl
python3 - "$FIX" "$P" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as f:
    for p, t in zip(d["prompts"], d["tokens"]):
        f.write(json.dumps({"tokens": p, "max_tokens": len(t), "temperature": 0}) + "\n")
EOF
for k in 0 1 2 3; do
  spec=()
  [[ $k -gt 0 ]] && spec=(--speculative-method mtp --num-speculative-tokens $k)
  timeout 120 $B/syv generate --model $M --device cuda --prompts-file $P --one-by-one "${spec[@]}" \
    >/tmp/mtp_out$k.jsonl 2>/tmp/mtp_err$k.txt
  echo "k=$k: $(tail -1 /tmp/mtp_err$k.txt)"
done
python3 - <<'EOF'
import json
def texts(k):
    return [json.loads(l)["text"] for l in open(f"/tmp/mtp_out{k}.jsonl")]
base = texts(0)
for k in range(1, 4):
    print(f"k={k}: text equal to k=0 for all {len(base)} prompts: {texts(k) == base}")
EOF
python3 -c "import json
for p in json.load(open('tests/fixtures/tiny/tiny-dense/greedy256.json'))['prompts']:
    print(json.dumps({'tokens': p, 'max_tokens': 256, 'ignore_eos': True}))" > /tmp/dense_prompts.jsonl
for k in 0 3; do
  spec=()
  [[ $k -gt 0 ]] && spec=(--speculative-method draft --draft-model models/tiny-draft --num-speculative-tokens $k)
  timeout 120 $B/syv generate --model models/tiny-dense --device cuda --prompts-file /tmp/dense_prompts.jsonl \
    --one-by-one "${spec[@]}" >/tmp/draft_out$k.jsonl 2>/tmp/draft_err$k.txt
  echo "draft model k=$k: $(tail -1 /tmp/draft_err$k.txt)"
done
for k in 0 3; do  # batch-invariant mode: verify rows bit-equal to decode rows (docs/engine.md)
  spec=()
  [[ $k -gt 0 ]] && spec=(--speculative-method draft --draft-model models/tiny-draft --num-speculative-tokens $k)
  timeout 120 $B/syv generate --model models/tiny-dense --device cuda --prompts-file /tmp/dense_prompts.jsonl \
    --one-by-one --batch-invariant "${spec[@]}" >/tmp/draft_inv$k.jsonl 2>/tmp/draft_inv_err$k.txt
  echo "draft model, --batch-invariant, k=$k: $(tail -1 /tmp/draft_inv_err$k.txt)"
done
python3 - <<'EOF2'
import json
t = lambda f: [json.loads(l)["text"] for l in open(f)]
for a, b, what in [("draft_out0", "draft_out3", "default mode"), ("draft_inv0", "draft_inv3", "--batch-invariant")]:
    x, y = t(f"/tmp/{a}.jsonl"), t(f"/tmp/{b}.jsonl")
    print(f"draft model k=3, {what}: {sum(p != q for p, q in zip(x, y))} of {len(x)} texts differ from k=0")
EOF2
PORT=18433
KEY=mtp-check-key
for k in 0 3; do
  spec=()
  [[ $k -gt 0 ]] && spec=(--speculative-method mtp --num-speculative-tokens $k)
  $B/syv serve --model $M --device cuda --port $PORT --api-key $KEY "${spec[@]}" >/tmp/serve$k.log 2>&1 &
  PID=$!
  for _ in $(seq 300); do
    curl -sf -H "Authorization: Bearer $KEY" localhost:$PORT/health >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "serve k=$k:"
  timeout 120 $B/syv bench serve --url http://127.0.0.1:$PORT --api-key $KEY --scenario c1 \
    --c1-requests 8 --input-len 256 --output-len 256 --seed 1 --max-token-id 8192 2>&1 | tail -6
  curl -s -H "Authorization: Bearer $KEY" localhost:$PORT/metrics | grep -E "^syv_spec" | head -8
  kill $PID
  wait $PID
done
