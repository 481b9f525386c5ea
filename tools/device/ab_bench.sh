#!/usr/bin/env bash
# Before/after decode and prefill figures in one GPU-machine call: builds a base commit (carried as
# a git archive, see below) and the working tree, then runs the same `syv bench decode` on both,
# interleaved (base, new, base, new) so drift in clocks or temperature shows up as spread.
#
#   here:        git archive BASE | xz > .devcarry-base/base.tar.xz; tools/device/pack_deps.sh
#   GPU machine: tools/device/ab_bench.sh .devcarry-deps .devcarry-base [rounds, default 2]
# Environment: CONFIG (default tools/bench/configs/qwen3-8b), BATCH (default 1,64),
#   CONTEXT (512), LENGTHS (2048), NEW (the working tree's build folder, default build/ab-new; an
#   existing build_gpu.sh folder is reused). Writes $OUT/ab_*.log and prints each run's table rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEPS=${1:?deps folder}
BASE=${2:?folder with base.tar.xz}
ROUNDS=${3:-2}
CONFIG=${CONFIG:-tools/bench/configs/qwen3-8b}
OUT=${OUT:-/tmp/syv-ab}
mkdir -p "$OUT" build/ab-base
tar -xJf "$BASE/base.tar.xz" -C build/ab-base
NEW=${NEW:-build/ab-new}
tools/device/build_gpu.sh "$DEPS" "$NEW" syv >"$OUT/ab_build_new.log" 2>&1 ||
  { tail -30 "$OUT/ab_build_new.log"; exit 1; }
(cd build/ab-base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYV_CUDA=ON \
  -DSYV_CUDA_ARCHS=90a -DSYV_BENCHMARKS=OFF -DSYV_TESTS=OFF >/dev/null &&
  ninja -C build -j "$(nproc)" syv) >"$OUT/ab_build_base.log" 2>&1 ||
  { tail -30 "$OUT/ab_build_base.log"; exit 1; }
for round in $(seq "$ROUNDS"); do
  for which in base new; do
    bin=$NEW/syv
    [[ $which == base ]] && bin=build/ab-base/build/syv
    log="$OUT/ab_${which}_$round.log"
    timeout 300 "$bin" bench decode --config "$CONFIG" --random-weights --batch "${BATCH:-1,64}" \
      --context "${CONTEXT:-512}" --lengths "${LENGTHS:-2048}" >"$log" 2>&1
    echo "== $which round $round (rc $?)"
    grep -E "^\| (decode|prefill) " "$log"
  done
done
