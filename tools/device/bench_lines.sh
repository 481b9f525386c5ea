# Sourced by the device scripts that time `syv bench decode` forms one process a line (needs $B,
# the bin folder, and $O, where the full output is appended to bench.log).
#   b1 CONFIG ENV...         b = 1 decode, context 512, 30 steps: "graph ms (p10-p90) | % of floor"
#                            (random weights of CONFIG's shapes, a folder's own where it has them)
#   prefill CONFIG LENGTHS ENV...   the prefill lines of `--lengths LENGTHS` (one a length)
# ENV: environment assignments for that process (DEFAULT=1 for none).
b1() {
  local cfg=$1 random=--random-weights
  shift
  compgen -G "$cfg/*.safetensors" >/dev/null && random=
  env "$@" timeout 120 $B/syv bench decode --config "$cfg" $random --batch 1 \
    --context 512 --steps 30 2>&1 | tee -a $O/bench.log | grep -E "^\| decode" | head -1 |
    awk -F'|' '{gsub(/ +/, " "); print $8 "|" $11}'
}
prefill() {
  local cfg=$1 lengths=$2
  shift 2
  env "$@" timeout 150 $B/syv bench decode --config "$cfg" --random-weights --batch 1 \
    --context 64 --steps 5 --lengths "$lengths" 2>&1 | tee -a $O/bench.log |
    grep -E "^\| prefill|rror" | sort -u
}
