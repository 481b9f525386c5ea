#!/usr/bin/env bash
# Packs a CUDA build of this machine for the GPU machine: the syv binary and the GPU test binaries
# into .devcarry/bin, and the shared libraries the GPU machine's image may lack (cpp-httplib,
# PCRE2, utf8proc, xxHash, brotli; OpenBLAS + gfortran only with PACK_BLAS=1: the GPU image has
# OpenBLAS) into .devcarry/lib. Name ".devcarry"
# in the device call's `carry` (it is git-ignored through .git/info/exclude).
#   tools/device/pack_build.sh [build dir, default build/cuda]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/cuda}
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >>.git/info/exclude
rm -rf .devcarry && mkdir -p .devcarry/bin .devcarry/lib
cp "$BUILD/syv" .devcarry/bin/
for t in "$BUILD"/tests/gpu_*_test "$BUILD"/gpu_*_test; do [[ -x $t ]] && cp "$t" .devcarry/bin/; done
strip .devcarry/bin/* 2>/dev/null || true
for b in .devcarry/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -E "httplib|pcre2|utf8proc|xxhash|brotli|gtest|gmock${PACK_BLAS:+|openblas|gfortran|quadmath}" |
  while read -r lib; do cp -L "$lib" .devcarry/lib/; done
du -sh .devcarry .devcarry/*
