# Sourced by a device script from the repository root (after its `cd`): unpacks the carried
# tokenizer, sets SYV_SOURCE_DIR, B (the bin folder), O ($OUT or /tmp), t0 (the script's start),
# sources bench_lines.sh (b1, prefill) and defines
#   build TARGETS...   tools/device/build_gpu.sh of syv and TARGETS (carry .devcarry-deps), its
#                      seconds and the GPU's name; exits the script when syv did not build.
[[ -d third_party/qwen3-tokenizer ]] || tar -xJf .devcarry-tok/tok.tar.xz
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
O=${OUT:-/tmp}
t0=$SECONDS
source tools/device/bench_lines.sh
build() {
  echo "== build $(date +%T)"
  timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv "$@" 2>&1 | tail -1
  echo "build: $((SECONDS - t0)) s"
  [[ -x $B/syv ]] || exit 1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
}
