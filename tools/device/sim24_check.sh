#!/usr/bin/env bash
# On the GPU machine: the seed's 24 GB card simulated on the H200 (issue 24's last target). Writes
# a random-weight Qwen3.5-27B folder (tools/bench/configs/qwen3.5-27b; `syv demo-model`, bf16,
# 53.8 GB, into /dev/shm when it has the room), quantizes it to int4 (`syv quantize --format gptq`,
# group 128: 18.1 GB on the device; LMHEAD=1: with `--lm-head` too, into $OUT_DIR-lmhead), then
# starts `syv serve` on it with the memory plan of a 24 GiB card (--gpu-memory-gib 24
# --gpu-memory-utilization 0.90) for a bf16, an fp8 and an int4 KV cache, with $FLAGS (e.g.
# "--host-embeddings --state-dtype bf16 --num-checkpoints 1"), and prints each start's memory plan
# line: the pool that was allocated, and the seconds from start to the plan. The same plan computed
# on the CPU for comparison:
#   syv inspect --config tools/bench/configs/qwen3.5-27b --weights-format gptq --gpu-memory-gib 24 \
#     --gpu-memory-utilization 0.90 --max-num-seqs N --max-batch-tokens 2048 --kv-cache-dtype KV
# Phases, each sized for one 10-minute call (carry .devcarry-deps: tools/device/pack_deps.sh):
#   tools/device/sim24_check.sh build   Release build of syv (build/gpu)
#   tools/device/sim24_check.sh model   demo-model (bf16) + quantize (gptq) -> $OUT_DIR
#   tools/device/sim24_check.sh plan    serve with the 24 GiB cap, bf16 / fp8 / int4 KV
# Environment: SEQS (--max-num-seqs, default 1: the seed's single-user card), OUT_DIR (default
# /tmp/qwen3.5-27b-gptq), LMHEAD (1: the folder with an int4 lm_head), FLAGS (serve's and
# inspect's plan flags).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WHAT=${1:-all}
DEPS=${DEPS:-.devcarry-deps}
CFG=tools/bench/configs/qwen3.5-27b
B=build/gpu-carry/bin
SEQS=${SEQS:-1}
OUT_DIR=${OUT_DIR:-/tmp/qwen3.5-27b-gptq}
LMHEAD=${LMHEAD:-0}
FLAGS=${FLAGS:-}
QFLAGS=""
((LMHEAD)) && OUT_DIR=$OUT_DIR-lmhead QFLAGS="--lm-head"
phase() { [[ $WHAT == "$1" || $WHAT == all ]]; }

if phase build || [[ ! -x $B/syv ]]; then
  t0=$SECONDS
  timeout 500 tools/device/build_gpu.sh "$DEPS" build/gpu syv 2>&1 | tail -2
  echo "build: $((SECONDS - t0)) s"
fi
if phase model && [[ ! -f $OUT_DIR/config.json ]]; then
  # The bf16 folder only feeds `syv quantize`: tmpfs when it holds 56 GB, else the disk.
  BF16=/tmp/qwen3.5-27b-bf16
  if (($(df --output=avail -B1G /dev/shm | tail -1) >= 56)); then BF16=/dev/shm/qwen3.5-27b-bf16; fi
  df -h /tmp /dev/shm | tail -2
  t0=$SECONDS
  [[ -f $BF16/config.json ]] || timeout 280 $B/syv demo-model --config $CFG \
    --tokenizer third_party/qwen3-tokenizer --out $BF16 2>&1 | tail -2
  echo "demo-model: $((SECONDS - t0)) s"
  t0=$SECONDS
  timeout 300 $B/syv quantize --format gptq --group-size 128 $QFLAGS --in $BF16 --out "$OUT_DIR" \
    2>&1 |
    tail -2
  echo "quantize: $((SECONDS - t0)) s"
  [[ -f $OUT_DIR/config.json ]] && rm -rf "$BF16"
  du -sh "$OUT_DIR"
fi
if phase plan; then
  echo "folder: $OUT_DIR; flags: ${FLAGS:-none}"
  for kv in bf16 fp8 int4; do
    echo "== $kv KV, --max-num-seqs $SEQS"
    $B/syv inspect --config $CFG --weights-format gptq $QFLAGS --gpu-memory-gib 24 \
      --gpu-memory-utilization 0.90 --max-num-seqs "$SEQS" --max-batch-tokens 2048 \
      --kv-cache-dtype $kv $FLAGS 2>&1 | grep -E "KV pool|rror" | sed 's/^/cpu plan:  /'
    log=/tmp/sim24-serve-$kv.log
    t0=$SECONDS
    $B/syv serve --model "$OUT_DIR" --device cuda --port 18452 --gpu-memory-gib 24 \
      --gpu-memory-utilization 0.90 --max-num-seqs "$SEQS" --max-batched-tokens 2048 \
      --kv-cache-dtype $kv $FLAGS >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1500); do  # up to 150 s: the load of 18 GB from the page cache, the plan
      grep -q "memory plan:" "$log" && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    grep -E "memory plan:|weights:|KV cache:|load: .* in |rror" "$log" | head -8 |
      sed 's/^/serve:     /'
    echo "serve:     $((SECONDS - t0)) s from start to the plan"
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  done
fi
