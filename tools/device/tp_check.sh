#!/usr/bin/env bash
# On a GPU machine: tensor parallelism over NCCL (issue 21). Builds syv and the tensor-parallel
# GPU test, runs the test, then `syv bench decode` on the Qwen3-8B shape (random weights) at
# b = 1 and 64, context 512, on one GPU and with --tensor-parallel-size 2, CUDA graphs on in both
# rows (every rank captures and replays its own graph; the eager column is there too), and the
# Qwen3-32B shape at b = 1 on one GPU and on two.
# On one GPU (nvidia-h200): the NCCL all-reduce over one rank (f32 / bf16, and captured into a
# CUDA graph), and tiny-dense, tiny-hybrid and a MoE fixture "split" over 1 rank through the NCCL
# group with CUDA graphs on against the plain model (bit-equal tokens and logprobs, the same graph
# steps); the multi-GPU tests skip and the TP bench refuses with the device count.
# With 2 or more GPUs (nvidia-h200-x2 or larger) also: the all-reduce over every GPU, and those
# fixtures split over 2 GPUs (and 4 when there are 4) against one GPU, graphs off and on (greedy
# tokens up to near-ties, prompt logprobs within bf16 rounding). Carry .devcarry-deps
# (tools/device/pack_deps.sh).
#   tools/device/tp_check.sh build   Release build of syv + the test (build/gpu)
#   tools/device/tp_check.sh tests   gpu_tensor_parallel_gpu_test (one GPU or more)
#   tools/device/tp_check.sh bench   syv bench decode, 1 GPU vs --tensor-parallel-size 2
#   tools/device/tp_check.sh all     all of them in order (the default)
# Later phases build first when build/gpu-carry/bin/syv is missing (a fresh machine).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
WHAT=${1:-all}
DEPS=${DEPS:-.devcarry-deps}
CFG=tools/bench/configs/qwen3-8b
B=build/gpu-carry/bin
export SYV_SOURCE_DIR=$PWD
phase() { [[ $WHAT == "$1" || $WHAT == all ]]; }

nvidia-smi -L 2>&1 | head -8
if phase build || [[ ! -x $B/syv ]]; then
  t0=$SECONDS
  timeout 500 tools/device/build_gpu.sh "$DEPS" build/gpu syv gpu_tensor_parallel_gpu_test 2>&1 |
    tail -2
  grep -E "NCCL" build/gpu/CMakeCache.txt | grep -E "^SYV_NCCL_(INCLUDE_DIR|LIBRARY)" || true
  echo "build: $((SECONDS - t0)) s"
fi
if phase tests; then
  timeout 300 $B/gpu_tensor_parallel_gpu_test 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Skipped|Failure|Expected|over [0-9] GPUs|rror|NCCL" |
    head -60
fi
if phase bench; then
  echo "== 1 GPU"
  timeout 200 $B/syv bench decode --config $CFG --random-weights --batch 1,64 --context 512 \
    --steps 20 2>&1 | grep -E "^\| decode|decode floor|weights:|rror" | tail -4
  echo "== --tensor-parallel-size 2"
  timeout 240 $B/syv bench decode --config $CFG --random-weights --batch 1,64 --context 512 \
    --steps 20 --tensor-parallel-size 2 2>&1 |
    grep -E "^\| decode|tensor parallel|decode floor|weights:|rror" | tail -8
  # Issue 21's first target: the Qwen3-32B shape at b = 1, one rank's floor (printed) against the
  # step; 65 GB of bf16 weights fit one H200, so the one-GPU row is there too.
  for n in 1 2; do
    echo "== qwen3-32b, --tensor-parallel-size $n"
    timeout 300 $B/syv bench decode --config tools/bench/configs/qwen3-32b --random-weights \
      --batch 1 --context 512 --steps 20 --tensor-parallel-size $n 2>&1 |
      grep -E "^\| decode|decode floor|weights:|rror" | tail -4
  done
fi
