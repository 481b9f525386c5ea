# Sourced by the fp8 device scripts (fp8_routing_check.sh, fp8_skinny_check.sh), after they set
# B (the syv binaries), O (the log folder), W (where the folders go) and CFG (a config folder):
#   fp8_folders_start  makes $W/bf16 (`syv demo-model --config $CFG`) and its `syv quantize
#                      --format fp8` copy $W/fp8 in the background (once; log $O/prep.log)
#   fp8_folders_wait   waits for it; false where it failed
#   fp8_bench FOLDER [ENV...]  `syv bench decode` on $W/FOLDER, b = 1-64 (or BATCHES) at context
#                      512 and a 2K prefill, under the given environment (log $O/decode.log)
fp8_folders_start() {
  mkdir -p "$W"
  (
    s=$SECONDS
    [[ -f $W/fp8/.done ]] || {
      $B/syv demo-model --config "$CFG" --out "$W/bf16" >"$O/prep.log" 2>&1 &&
        timeout 400 $B/syv quantize --format fp8 --in "$W/bf16" --out "$W/fp8" >>"$O/prep.log" 2>&1 &&
        touch "$W/fp8/.done"
    }
    r=$([[ -f $W/fp8/.done ]] && echo done || echo FAILED)
    echo "prep: $((SECONDS - s)) s, $r" >>"$O/prep.log"
  ) &
}
fp8_folders_wait() {
  wait
  tail -1 "$O/prep.log"
  [[ -f $W/fp8/.done ]]
}
fp8_bench() {
  local f=$1
  shift
  echo "-- $f${*:+, $*}"
  env "$@" timeout 120 $B/syv bench decode --config "$W/$f" --batch "${BATCHES:-1,16,32,64}" \
    --context 512 --steps 20 --lengths 2048 2>&1 | tee -a "$O/decode.log" |
    grep -E "^\| (decode|prefill)|rror" | tail -12 | cut -d'|' -f2-9,11-12
}
