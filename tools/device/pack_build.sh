#!/usr/bin/env bash
# Packs a CUDA build of this machine for the GPU machine: the syv binary and the GPU test binaries
# into .devcarry/bin, and the shared libraries the GPU machine's image may lack (cpp-httplib,
# PCRE2, utf8proc, xxHash, brotli; OpenBLAS + gfortran only with PACK_BLAS=1: the GPU image has
# OpenBLAS) into .devcarry/lib. Name ".devcarry"
# in the device call's `carry` (it is git-ignored through .git/info/exclude).
#   tools/device/pack_build.sh [build dir, default build/cuda] [carry folder, default .devcarry]
# Engineers sharing a checkout each use their own carry folder (e.g. .devcarry-prefill); every
# ".devcarry*" folder is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/cuda}
DEST=${2:-.devcarry}
grep -qx '/.devcarry\*/' .git/info/exclude 2>/dev/null || echo '/.devcarry*/' >>.git/info/exclude
rm -rf "$DEST" && mkdir -p "$DEST/bin" "$DEST/lib"
cp "$BUILD/syv" "$DEST/bin/"
for t in "$BUILD"/tests/gpu_*_test "$BUILD"/gpu_*_test; do [[ -x $t ]] && cp "$t" "$DEST/bin/"; done
strip "$DEST"/bin/* 2>/dev/null || true
for b in "$DEST"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -E "httplib|pcre2|utf8proc|xxhash|brotli|gtest|gmock${PACK_BLAS:+|openblas|gfortran|quadmath}" |
  while read -r lib; do cp -L "$lib" "$DEST/lib/"; done
du -sh "$DEST" "$DEST"/*
