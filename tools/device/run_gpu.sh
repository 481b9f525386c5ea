#!/usr/bin/env bash
# Runs the CUDA backend's checks and benchmarks on the GPU machine in one go, and prints a short
# table last. Uses a build carried from the dev machine (tools/device/pack_build.sh puts the
# binaries and the shared libraries the GPU machine lacks into .devcarry/), or builds here when
# none was carried.
#
#   tools/device/run_gpu.sh [what...]   what: alltests (every gpu_*_test), startup (8B folder -> serve ready),
#                                       tests, tests_old, golden, sampling, engine, small, kernels, decode (+ prefill
#                                       on the same model), prefill (default: tests golden decode)
# Environment: CARRY (carried build folder, default .devcarry), OUT (logs; default /tmp/syv-gpu-out), CONFIG (default tools/bench/configs/qwen3-8b),
#   BATCH (1,8,64,256), CONTEXT (512,8192), LENGTHS (2048,32768).
set -uo pipefail
cd "$(dirname "$0")/../.."
RESULTS=${OUT:-/tmp/syv-gpu-out}   # gets logs.tgz and summary.txt
OUT=$(mktemp -d)                   # the logs, tarred into $RESULTS at the end
mkdir -p "$RESULTS"
CARRY=${CARRY:-.devcarry}            # the carried build (pack_build.sh's second argument)
CONFIG=${CONFIG:-tools/bench/configs/qwen3-8b}
WHAT=${*:-tests golden decode}
export SYV_SOURCE_DIR=$PWD

if [[ -x $CARRY/bin/syv ]]; then
  BIN=$CARRY/bin
  export LD_LIBRARY_PATH=$PWD/$CARRY/lib:${LD_LIBRARY_PATH:-}
else
  echo "no carried build: building in build/gpu" | tee -a "$OUT/build.log"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYV_CUDA=ON -DSYV_CUDA_ARCHS=90a \
    -DSYV_BENCHMARKS=OFF >>"$OUT/build.log" 2>&1 &&
    ninja -C build/gpu syv gpu_cuda_ops_test gpu_qwen3_golden_test >>"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; exit 1; }
  BIN=build/gpu
  cp build/gpu/tests/gpu_* "$BIN"/ 2>/dev/null || true
fi

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv | tee "$OUT/gpu.txt"
for b in "$BIN"/syv "$BIN"/gpu_*; do
  missing=$(ldd "$b" | grep "not found")
  [[ -n $missing ]] && echo "MISSING LIBS for $b: $missing" | tee -a "$OUT/ldd.txt"
done

PREFILL_LENGTHS=${LENGTHS-2048,32768}
declare -a SUMMARY
run() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  timeout "${STEP_TIMEOUT:-300}" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  SUMMARY+=("$(printf '%-16s rc=%-3s %8d ms' "$name" "$rc" "$dt")")
  tail -4 "$OUT/$name.log"
  return $rc
}

for w in $WHAT; do
  case $w in
    tests) run ops_test "$BIN"/gpu_cuda_ops_test ;;
    tests_old)  # the same checks on the older paths: no PDL, mma8w prefill attention (mma.sync)
      run ops_test_old env SYV_PDL=0 SYV_PREFILL_ATTENTION=mma8w "$BIN"/gpu_cuda_ops_test ;;
    golden) run golden_test "$BIN"/gpu_qwen3_golden_test ;;
    alltests)  # every GPU test binary that was carried (or built), one log each
      for t in "$BIN"/gpu_*_test; do run "$(basename "$t" | sed 's/^gpu_//')" "$t"; done ;;
    startup)  # an 8B-shaped model folder in the page cache, then `syv serve` until "syv: ready"
      # (needs third_party/qwen3-tokenizer carried)
      "$BIN"/syv demo-model --config "$CONFIG" --tokenizer third_party/qwen3-tokenizer \
        --out /tmp/syv-startup-model >"$OUT/demo_model.log" 2>&1
      "$BIN"/syv serve --model /tmp/syv-startup-model --port 18123 --api-key startup-test-key \
        >"$OUT/startup.log" 2>&1 &
      spid=$!
      for _ in $(seq 600); do grep -q "syv: ready" "$OUT/startup.log" && break; sleep 0.1; done
      kill $spid; wait $spid
      tail -4 "$OUT/startup.log" ;;
    sampling) run sampling_test "$BIN"/gpu_sampling_gpu_test ;;
    engine) run engine_test "$BIN"/gpu_engine_qwen3_gpu_test ;;
    small) run decode_0.6b "$BIN"/syv bench decode --config tools/bench/configs/qwen3-0.6b \
             --random-weights --batch 1,64 --context 512 ;;
    decode) run decode "$BIN"/syv bench decode --config "$CONFIG" --random-weights \
              --batch "${BATCH:-1,8,64,256}" --context "${CONTEXT:-512,8192}" \
              ${PREFILL_LENGTHS:+--lengths "$PREFILL_LENGTHS"} ;;  # + prefill; LENGTHS= skips it
    kernels) run kernels "$BIN"/syv bench kernels --config "$CONFIG" ;;
    prefill) run prefill "$BIN"/syv bench prefill --config "$CONFIG" --random-weights \
               --lengths "${LENGTHS:-2048,32768}" ;;
    *) echo "unknown step $w" ;;
  esac
done

{
echo
echo "==== tests ===="
for log in "$OUT"/*_test.log; do
  [[ -f $log ]] || continue
  f=$(basename "$log" .log)
  echo "$f: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$f.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z]|worst per-row|Which is|scenario|request [0-9]' "$OUT/$f.log" | head -20
done
echo "==== benchmarks ===="
grep -hE "^(device|ceilings|weights|KV pool|warm-up)" "$OUT"/decode.log "$OUT"/prefill.log 2>/dev/null | sort -u
grep -hE "start-up:|load: " "$OUT"/startup.log 2>/dev/null
grep -hE "^\| (decode|prefill|gemv) " "$OUT"/kernels.log "$OUT"/decode_0.6b.log "$OUT"/decode.log "$OUT"/prefill.log 2>/dev/null | awk '!seen[$0]++'
echo "==== steps ===="
printf '%s\n' "${SUMMARY[@]}"
} | tee "$OUT/summary.txt"
cp "$OUT/summary.txt" "$RESULTS/summary.txt"
tar czf "$RESULTS/logs.tgz" -C "$OUT" .
