#!/usr/bin/env bash
# On the GPU machine, after tools/device/build_gpu.sh: `syv bench serve` through `syv serve` on a
# random-weight folder of the dense Qwen3-8B shape (issue 18's target: burst of 128 requests x
# 512 prompt tokens, 128 out, 64 offered, ignore_eos), with the default flags and with each
# preset, then c1, resend and offload (1M filler tokens) with the defaults, then `syv verify
# --model` on the same folder.
#   [PRESETS="default throughput"] [QUICK=1] [SERVE_FLAGS="--kv-cache-dtype fp8"] \
#   [BURST="512 512 1024 1024"] [CONFIG_DIR=tools/bench/configs/qwen3-0.6b] \
#   tools/device/serve_bench_check.sh [build carry dir, default build/gpu-carry] [out dir]
# PRESETS: the launch profiles to run (default: default throughput interactive long); QUICK=1:
# the burst only (no c1 / resend / offload, no `syv verify`), for a short device call.
# SERVE_FLAGS: more `syv serve` flags for every profile. BURST: the burst's requests, concurrency,
# input and output tokens (default "128 64 512 128"; "512 512 1024 1024" is issue 19's
# all-offered-at-once workload). CONFIG_DIR: another config folder for the random-weight model
# (default tools/bench/configs/qwen3-8b). A preset name may carry serve flags after a colon,
# e.g. "default:--max-batched-tokens=2048" (the flags with "=" and "," between them).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/gpu-carry}/bin
OUT=${2:-/tmp/serve-bench}
mkdir -p "$OUT"
CONFIG_DIR=${CONFIG_DIR:-tools/bench/configs/qwen3-8b}
DIR=/tmp/$(basename "$CONFIG_DIR")-random
PORT=18433
KEY=serve-bench-check-key
[[ -f $DIR/config.json ]] || timeout 300 $B/syv demo-model --config "$CONFIG_DIR" \
  --tokenizer third_party/qwen3-tokenizer --out $DIR 2>&1 | tail -1
cat $DIR/*.safetensors >/dev/null  # into the page cache
read -r NREQ CONC INLEN OUTLEN <<<"${BURST:-128 64 512 128}"
for run in ${PRESETS:-default throughput interactive long}; do
  preset=${run%%:*}
  extra=()
  [[ $preset != default ]] && extra=(--preset $preset)
  [[ $run == *:* ]] && IFS=', ' read -r -a more <<<"$(tr '=' ' ' <<<"${run#*:}")" &&
    extra+=("${more[@]}")
  preset=${run//[:=,]/_}
  $B/syv serve --model $DIR --device cuda --port $PORT --api-key $KEY "${extra[@]}" \
    ${SERVE_FLAGS:-} \
    >"$OUT/serve-$preset.log" 2>&1 &
  PID=$!
  for _ in $(seq 1200); do
    curl -sf -H "Authorization: Bearer $KEY" localhost:$PORT/health >/dev/null 2>&1 && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  echo "== $preset"
  grep -E "preset|step budget|memory plan|max context|graphs:" "$OUT/serve-$preset.log" | head -7
  scenarios=(--scenario burst)
  [[ $preset == default && -z ${QUICK:-} ]] &&
    scenarios+=(--scenario c1 --scenario resend --scenario offload)
  timeout 400 $B/syv bench serve --url http://127.0.0.1:$PORT --api-key $KEY "${scenarios[@]}" \
    --num-requests $NREQ --concurrency $CONC --input-len $INLEN --output-len $OUTLEN \
    --resend-len 8192 \
    --filler-tokens 1048576 --seed 1 2>"$OUT/bench-$preset.err" | tee "$OUT/bench-$preset.txt" |
    grep -v '^{'
  [[ -s $OUT/bench-$preset.txt ]] ||
    { echo "bench serve failed:"; tail -5 "$OUT/bench-$preset.err"; }
  grep '^{' "$OUT/bench-$preset.txt" >"$OUT/bench-$preset.jsonl"
  kill $PID
  wait $PID
done
[[ -n ${QUICK:-} ]] && exit 0
timeout 300 $B/syv verify --model $DIR --device cuda 2>&1 | tee "$OUT/verify.txt" |
  grep -E "^(FAIL|[0-9]+ passed)"
