#!/usr/bin/env bash
# Runs every libFuzzer target in a build folder for a bounded time, seeded from tests/fuzz/corpus/.
set -euo pipefail
build=$1; seconds=${2:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
shopt -s nullglob
status=0
for bin in "$build"/tests/*_fuzz; do
  name=$(basename "$bin")
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  seeds="$root/tests/fuzz/corpus/${name%_fuzz}"
  [ -d "$seeds" ] || seeds=""
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
      "$corpus" $seeds >"$build/$name.log" 2>&1; then
    tail -50 "$build/$name.log"; status=1
  fi
done
exit $status
