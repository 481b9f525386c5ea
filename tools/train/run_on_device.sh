#!/usr/bin/env bash
# Trains the three tiny models on the GPU machine in one call (docs/models.md), from the repo root:
#   tools/train/run_on_device.sh [extra train_all.py arguments, e.g. --steps tiny-draft=1200]
# Needs third_party/qwen3-tokenizer/tokenizer_config.json (the chat template; `make tokenizer`
# here, and carried to the device). Writes the tree to $WORK (default /tmp/syv_train) and packs it
# into $OUT in at most 8 files, as the device tool returns them:
#   $OUT/tiny-draft.tar, tiny-dense.tar, tiny-hybrid.tar   models/<name>/ (one tar each: < 16 MiB)
#   $OUT/fixtures.tar   fixtures/ + corpus_files.tsv.gz
#   $OUT/report.json    $OUT/train.log
# Unpack into the repo root: for f in $OUT/*.tar; do tar -xf $f; done (models/, fixtures/ ->
# tests/fixtures/tiny/, see docs/models.md). Partial results are packed even when a stage fails;
# the hard wall-clock limit is TRAIN_TIMEOUT (default 500 s) for the Python part.
set -euo pipefail
OUT=${OUT:?set OUT to the folder that comes back}
WORK=${WORK:-/tmp/syv_train}
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-500}
PY=${PYTHON:-python3}
TEMPLATE=third_party/qwen3-tokenizer/tokenizer_config.json
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK"

pack() {
  set +e
  for m in tiny-draft tiny-dense tiny-hybrid; do
    [ -d "$WORK/models/$m" ] && tar -cf "$OUT/$m.tar" -C "$WORK" "models/$m"
  done
  ( cd "$WORK" && tar -cf "$OUT/fixtures.tar" $(ls -d fixtures corpus_files.tsv.gz 2>/dev/null) )
  [ -f "$WORK/report.json" ] && cp "$WORK/report.json" "$OUT/report.json"
  ls -la "$OUT"
  if [ -f "$OUT/report.json" ]; then
    "$PY" tools/train/summary.py "$OUT/report.json"
  fi
}
trap pack EXIT

test -f "$TEMPLATE" || { echo "missing $TEMPLATE (carry third_party/qwen3-tokenizer)"; exit 2; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true CUBLAS_WORKSPACE_CONFIG=:4096:8
rc=0
timeout -k 10 "$TRAIN_TIMEOUT" "$PY" tools/train/train_all.py --out "$WORK" \
  --template "$TEMPLATE" "$@" > "$OUT/train.log" 2>&1 || rc=$?
tail -n 40 "$OUT/train.log"
echo "train_all.py exit code $rc"
exit $rc
