#!/usr/bin/env bash
# Packs the files of the Debian packages a syv build needs that the GPU machine's image lacks
# (headers, shared libraries, gtest/gmock static libraries) into one archive, so the GPU machine
# can build the tree itself (~90 s with ninja -j16 there, against ~25 min on this 2-core machine):
#
#   tools/device/pack_deps.sh [carry folder, default .devcarry-deps]   -> FOLDER/deps.tar.xz
#   on the GPU machine: tools/device/build_gpu.sh FOLDER [build dir] [targets...]
#
# The alternatives links OpenBLAS installs (cblas.h, libopenblas.so, libblas.so) are added by hand,
# as update-alternatives does not run there. The folder is git-ignored (".devcarry*").
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.devcarry-deps}
grep -qx '/.devcarry\*/' .git/info/exclude 2>/dev/null || echo '/.devcarry*/' >>.git/info/exclude
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
packages=(nlohmann-json3-dev libcpp-httplib-dev libcpp-httplib0.11 libpcre2-dev libpcre2-8-0
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2 libxxhash-dev
  libxxhash0 libcli11-dev libgtest-dev libgmock-dev libopenblas-dev libopenblas0-pthread
  libopenblas-pthread-dev libgfortran5 libbrotli1 libbrotli-dev libssl-dev zlib1g-dev
  libboost1.74-dev libboost-dev)
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || continue
  dpkg -L "$p" | while read -r f; do
    [[ -f $f || -L $f ]] || continue
    case $f in
      /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;;
      *.a) [[ $f == *gtest* || $f == *gmock* ]] || continue ;;
    esac
    mkdir -p "$STAGE$(dirname "$f")"
    cp -a "$f" "$STAGE$f"
  done
done
multiarch=/usr/lib/x86_64-linux-gnu
mkdir -p "$STAGE/usr/include/x86_64-linux-gnu" "$STAGE$multiarch"
ln -sf /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h "$STAGE/usr/include/x86_64-linux-gnu/cblas.h"
ln -sf /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
  "$STAGE/usr/include/x86_64-linux-gnu/openblas_config.h"
ln -sf "$multiarch/openblas-pthread/libopenblas.so" "$STAGE$multiarch/libopenblas.so"
ln -sf "$multiarch/openblas-pthread/libopenblas.so.0" "$STAGE$multiarch/libopenblas.so.0"
ln -sf "$multiarch/openblas-pthread/libblas.so" "$STAGE$multiarch/libblas.so"
ln -sf "$multiarch/openblas-pthread/libblas.so.3" "$STAGE$multiarch/libblas.so.3"
rm -rf "$DEST" && mkdir -p "$DEST"
tar -cJf "$DEST/deps.tar.xz" -C "$STAGE" .
du -sh "$DEST/deps.tar.xz"
