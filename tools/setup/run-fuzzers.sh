#!/usr/bin/env bash
# Runs every libFuzzer target in a build folder for a bounded time, seeded from tests/fuzz/corpus/.
# The targets run side by side, one per core (FUZZ_JOBS, default nproc): each is single-threaded,
# so every target still fuzzes for the full time while `make test` waits about a core-count
# fraction of it.
set -euo pipefail
build=$1; seconds=${2:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
root=$(cd "$(dirname "$0")/../.." && pwd)
shopt -s nullglob
fuzz_one() {  # name bin: its exit status in $build/$name.status, its output in $build/$name.log
  local name=$1 bin=$2 corpus="$build/corpus/$1" seeds="$root/tests/fuzz/corpus/${1%_fuzz}"
  mkdir -p "$corpus"
  [ -d "$seeds" ] || seeds=""
  local rc=0
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
    "$corpus" $seeds >"$build/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$build/$name.status"
}
names=()
for bin in "$build"/tests/*_fuzz; do
  name=$(basename "$bin")
  names+=("$name")
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "fuzz: $name for ${seconds}s"
  rm -f "$build/$name.status"
  fuzz_one "$name" "$bin" &
done
wait
status=0
for name in "${names[@]}"; do
  if [ "$(cat "$build/$name.status" 2>/dev/null)" != 0 ]; then
    echo "fuzz: $name failed:"
    tail -50 "$build/$name.log"
    status=1
  fi
done
exit $status
