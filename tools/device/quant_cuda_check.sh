#!/usr/bin/env bash
# On the GPU machine: builds syv and the quantized-weight GPU tests and runs them, then benchmarks
# decode (b = 1 and 16, context 512) and a 2K prefill of the Qwen3-8B shape in bf16 and in
# `syv quantize`d fp8, awq and gptq copies of the same random weights: tok/s and % of the floor,
# whose weight term is the packed bytes (data + scales + zeros) for the quantized folders
# (`syv bench decode` prints the figure it used: "decode floor: X GB of weights per step").
# Carry .devcarry-deps (tools/device/pack_deps.sh). Phases, each sized for one 10-minute call:
#   tools/device/quant_cuda_check.sh build      Release build of syv + the tests (build/gpu)
#   tools/device/quant_cuda_check.sh tests      gpu_quant_linear_gpu_test, the engine-level test,
#                                               the dense linear tests of gpu_cuda_ops_test
#   tools/device/quant_cuda_check.sh prep       the 8B bf16 folder (16.4 GB) and its fp8 / awq /
#                                               gptq copies (`syv quantize`, one core each, at once)
#   tools/device/quant_cuda_check.sh bench      syv bench decode on the four folders, b = 1, 16, 64
#                                               and prefill 2K, each quantized folder with the
#                                               GEMM activations it can take (W8A8 / W4A8 too)
#   tools/device/quant_cuda_check.sh crossover  fp8 / awq with the quantized GEMV off (every step
#                                               dequantizes to bf16 + cuBLASLt), b = 1 and 16
#   tools/device/quant_cuda_check.sh kernels    `syv bench quant-kernels` on the 8B's shapes: each
#                                               quantized path (GEMV, GEMM, dequantize with either
#                                               kernel, fp8 GEMM) and bf16 at 1-256 tokens; no
#                                               folders needed (not in `all`)
#   tools/device/quant_cuda_check.sh gemm       the paths measured on 2026-12-05 and on since (the
#                                               tensor-core GEMM to 128 tokens, the vectorized
#                                               dequantize, the MoE experts' tiled path on packed
#                                               rows): their tests, the MoE timing, `bench
#                                               quant-kernels` (no folders needed; not in `all`)
#   tools/device/quant_cuda_check.sh ab         decode at b = 1-128 and prefill 2K, bf16, gptq and
#                                               fp8 (W8A8) folders under the defaults, gptq also
#                                               as before 2026-12-05 (SYV_QUANT_GEMM_MAX_TOKENS=0
#                                               SYV_QUANT_DEQUANT_VEC=0); needs `prep` (not in `all`)
#   tools/device/quant_cuda_check.sh profile    ncu on the quantized GEMVs at b = 1 (fp8, gptq
#                                               folders): duration, DRAM and SM throughput,
#                                               registers, occupancy, issue stalls (not in `all`)
#   tools/device/quant_cuda_check.sh all        all of them in order (more than 10 minutes)
# Later phases build first when build/gpu-carry/bin/syv is missing (a fresh machine). WORK
# (default /tmp/syv-quant) holds the folders (about 37 GB); DEPS (default .devcarry-deps).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WHAT=${1:-all}
DEPS=${DEPS:-.devcarry-deps}
WORK=${WORK:-/tmp/syv-quant}
CFG=tools/bench/configs/qwen3-8b
B=build/gpu-carry/bin
export SYV_SOURCE_DIR=$PWD
TESTS="gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test gpu_moe_quantized_gpu_test
  gpu_moe_quant_gemv_gpu_test"
phase() { [[ $WHAT == "$1" || $WHAT == all ]]; }

if phase build || [[ ! -x $B/syv ]]; then
  t0=$SECONDS
  timeout 500 tools/device/build_gpu.sh "$DEPS" build/gpu syv $TESTS gpu_cuda_ops_test 2>&1 | tail -2
  echo "build: $((SECONDS - t0)) s"
fi
if phase tests; then
  timeout 150 $B/gpu_quant_linear_gpu_test 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED) |Failure|error" |
    head -60
  timeout 300 $B/gpu_engine_quantized_gpu_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED) |Failure|relative L2|error|chose" | head -60
  # The dense linear paths the quantized prefill path calls into.
  timeout 120 $B/gpu_cuda_ops_test --gtest_filter='*Linear*:*Gemv*' 2>&1 |
    grep -E "^\[ +(PASSED|FAILED) |Failure" | head -10
fi
if phase prep; then
  mkdir -p "$WORK"
  df -h "$WORK" | tail -1
  if [[ ! -f $WORK/bf16/.done ]]; then
    t0=$SECONDS
    rm -rf "$WORK/bf16"
    $B/syv demo-model --config $CFG --out "$WORK/bf16" 2>&1 | tail -2 &&
      touch "$WORK/bf16/.done"
    echo "demo-model: $((SECONDS - t0)) s"
  fi
  for f in fp8 awq gptq; do
    [[ -f $WORK/$f/.done ]] && continue
    (
      t0=$SECONDS
      timeout 500 $B/syv quantize --format $f --in "$WORK/bf16" --out "$WORK/$f" \
        >"$WORK/quantize_$f.log" 2>&1 && touch "$WORK/$f/.done"
      echo "quantize $f: $([[ -f $WORK/$f/.done ]] && echo "done" || echo "FAILED"), $((SECONDS - t0)) s"
      tail -1 "$WORK/quantize_$f.log"
    ) &
  done
  wait
  du -sh "$WORK"/* 2>/dev/null
fi
if phase bench; then
  # Each folder with the GEMM activations it can take (--quantized-activations): bf16 as is; fp8
  # weights W8A8 (auto) and dequantized (off); int4 W4A16 (auto) and W4A8 (fp8).
  for spec in "bf16 auto" "fp8 auto" "fp8 off" "awq auto" "awq fp8" "gptq auto" "gptq fp8"; do
    read -r f acts <<<"$spec"
    [[ -f $WORK/$f/.done ]] || { echo "$f: no folder (run the prep phase)"; continue; }
    echo "== $f, --quantized-activations $acts"
    timeout 140 $B/syv bench decode --config "$WORK/$f" --batch 1,16,64 --context 512 --steps 30 \
      --lengths 2048 --quantized-activations "$acts" 2>&1 |
      grep -E "^\| (decode|prefill)|ceilings|weights:|decode floor|rror" | tail -8
  done
fi
if [[ $WHAT == profile ]]; then  # not part of `all`: ncu replays every kernel (minutes)
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [[ -x $NCU ]] || { echo "profile: ncu not found"; exit 1; }
  for f in fp8 gptq; do
    [[ -f $WORK/$f/.done ]] || { echo "$f: no folder (run the prep phase)"; continue; }
    echo "== $f, b = 1: the quantized GEMV's launches (qkv, o, gate_up, down of one layer)"
    timeout 240 "$NCU" --clock-control none --kernel-name regex:quant_gemv --launch-skip 40 \
      --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats $B/syv bench decode --config "$WORK/$f" --no-graphs --batch 1 \
      --context 512 --steps 1 2>&1 |
      grep -E "quant_gemv|Duration|DRAM Throughput|Compute \(SM\)|Registers|Theoretical Occ|Achieved Occ|Cycles Per Issued|Grid Size" |
      head -48
  done
fi
if [[ $WHAT == gemm ]]; then  # not part of `all`
  timeout 150 $B/gpu_quant_linear_gpu_test 2>&1 |
    grep -E "^\[ +(FAILED|PASSED) |Failure|error" | head -20
  # The quantized MoE experts' tiled path on the packed rows, then its timing at Qwen3-Next's
  # shape against the dequantize path (both kernels) and bf16 experts.
  timeout 200 $B/gpu_moe_quant_gemv_gpu_test 2>&1 |
    grep -E "^\[ +(FAILED|PASSED) |Failure|error|int4 moe|device copy" | head -40
  for t in gpu_moe_quantized_gpu_test gpu_engine_quantized_gpu_test; do
    echo "$t: $(timeout 200 $B/$t 2>&1 | grep -E "^\[ +(FAILED|PASSED) |Failure|error" | head -8 |
      tr '\n' ' ')"
  done
fi
if [[ $WHAT == kernels || $WHAT == gemm ]]; then
  # Every quantized path at the 8B's projection shapes, random packed weights (no folders).
  timeout 300 $B/syv bench quant-kernels --config $CFG \
    --tokens 1,8,16,17,24,32,48,64,96,128,192,256,512 2>&1 | grep -E "^\||device:|rror"
fi
if [[ $WHAT == ab ]]; then  # not part of `all`
  run() {  # FOLDER ACTS [ENV...]
    local f=$1 acts=$2
    shift 2
    [[ -f $WORK/$f/.done ]] || { echo "$f: no folder (run the prep phase)"; return; }
    echo "== $f, --quantized-activations $acts${*:+, $*}"
    env "$@" timeout 150 $B/syv bench decode --config "$WORK/$f" --batch 1,16,32,64,128 \
      --context 512 --steps 20 --lengths 2048 --quantized-activations "$acts" 2>&1 |
      grep -E "^\| (decode|prefill)|ceilings|decode floor|rror" | tail -9
  }
  run bf16 auto
  run gptq auto
  run gptq auto SYV_QUANT_GEMM_MAX_TOKENS=0 SYV_QUANT_DEQUANT_VEC=0
  run fp8 auto
fi
if phase crossover; then
  for f in fp8 awq; do
    [[ -f $WORK/$f/.done ]] || continue
    echo "== $f, quantized GEMV off"
    SYV_QUANT_GEMV_MAX_TOKENS=0 SYV_QUANT_GEMM_MAX_TOKENS=0 timeout 140 $B/syv bench decode --config "$WORK/$f" --batch 1,16 \
      --context 512 --steps 20 2>&1 | grep -E "^\| decode|rror" | tail -3
  done
fi
