# Sourced by the quantized device scripts (fp8_routing_check.sh, fp8_skinny_check.sh,
# quant_b1_check.sh), after they set B (the syv binaries), O (the log folder), W (where the folders
# go) and CFG (a config folder):
#   fp8_folders_start  makes $W/bf16 (`syv demo-model --config $CFG`) and its `syv quantize` copies
#                      $W/F for each F of FORMATS (default fp8; e.g. "gptq fp8", quantized at once)
#                      in the background (once; logs $O/prep*.log)
#   fp8_folders_wait   waits for it; false where a copy failed
#   fp8_bench FOLDER [ENV...]  `syv bench decode` on $W/FOLDER, b = 1-64 (or BATCHES) at context
#                      512 and a 2K prefill, under the given environment (log $O/decode.log)
fp8_folders_start() {
  mkdir -p "$W"
  (
    s=$SECONDS
    [[ -f $W/bf16/config.json ]] || $B/syv demo-model --config "$CFG" --out "$W/bf16" >"$O/prep.log" 2>&1
    for f in ${FORMATS:-fp8}; do
      [[ -f $W/$f/.done ]] && continue
      timeout 420 $B/syv quantize --format $f --in "$W/bf16" --out "$W/$f" >"$O/prep_$f.log" 2>&1 &&
        touch "$W/$f/.done" &
    done
    wait
    r=
    for f in ${FORMATS:-fp8}; do r+=" $f $([[ -f $W/$f/.done ]] && echo done || echo FAILED)"; done
    echo "prep: $((SECONDS - s)) s,$r" >>"$O/prep.log"
  ) &
}
fp8_folders_wait() {
  wait
  tail -1 "$O/prep.log"
  for f in ${FORMATS:-fp8}; do [[ -f $W/$f/.done ]] || return 1; done
}
fp8_bench() {
  local f=$1
  shift
  echo "-- $f${*:+, $*}"
  env "$@" timeout 120 $B/syv bench decode --config "$W/$f" --batch "${BATCHES:-1,16,32,64}" \
    --context 512 --steps 20 --lengths 2048 2>&1 | tee -a "$O/decode.log" |
    grep -E "^\| (decode|prefill)|rror" | tail -12 | cut -d'|' -f2-9,11-12
}
