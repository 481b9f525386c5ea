#!/usr/bin/env bash
# On the GPU machine: unpacks the dependencies tools/device/pack_deps.sh carried and builds the
# tree (Release, sm_90a) with every core. Prints the tail of the log on failure.
#   tools/device/build_gpu.sh DEPS_FOLDER [build dir, default build/gpu] [ninja targets...]
# Then run tools/device/run_gpu.sh with CARRY=<build dir>-carry (this script fills it: bin/ holds
# syv and the gpu_*_test binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEPS=${1:?deps folder (tools/device/pack_deps.sh)}
BUILD=${2:-build/gpu}
shift $(($# >= 2 ? 2 : $#))
tar -xJf "$DEPS/deps.tar.xz" -C / && ldconfig
LOG=$(mktemp)
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYV_CUDA=ON \
  -DSYV_CUDA_ARCHS=90a -DSYV_BENCHMARKS=OFF -DSYV_TESTS=ON >"$LOG" 2>&1 &&
  ninja -C "$BUILD" -j "$(nproc)" "$@" >>"$LOG" 2>&1; }; then
  tail -40 "$LOG"
  exit 1
fi
tail -2 "$LOG"
CARRY="$BUILD-carry"
rm -rf "$CARRY" && mkdir -p "$CARRY/bin"
cp "$BUILD/syv" "$CARRY/bin/"
for t in "$BUILD"/tests/gpu_*_test; do [[ -x $t ]] && cp "$t" "$CARRY/bin/"; done
echo "built into $CARRY/bin"
