#!/usr/bin/env bash
# On the GPU machine: calibrates adaptive speculation's CUDA cost model (docs/engine.md "Adaptive
# speculation"; the CUDA defaults in engine_core.cpp are estimates until this has run). Builds
# syv, then tools/spec_calibrate.sh on n-gram (tiny-dense and the Qwen3-8B shape with random
# weights, where greedy output repeats enough for prompt lookup to draft), the draft model
# (tiny-draft on tiny-dense) and MTP (tiny-hybrid), at batches 1..128: the knee is the printed
# `knee` column of the n-gram runs at the larger batches, each drafter's cost its `r` minus
# n-gram's at the same batch. Write the figures into docs/performance.md.
# Every run passes --device cuda (bench offline's default device is the CPU).
# Carry .devcarry-deps (tools/device/pack_deps.sh).
#   tools/device/spec_calibrate_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
timeout 240 tools/device/build_gpu.sh .devcarry-deps build/gpu syv 2>&1 | tail -1
S=build/gpu-carry/bin/syv
C=tools/spec_calibrate.sh
echo "== tiny-dense ngram"; $C $S models/tiny-dense ngram 4 "1 8 32 128" --device cuda
echo "== qwen3-8b shape ngram"
$C $S tools/bench/configs/qwen3-8b ngram 4 "1 8 32 64" --random-weights --device cuda
echo "== tiny-dense draft"
SPEC_ARGS="--draft-model models/tiny-draft" $C $S models/tiny-dense draft 4 "1 8 32 128" --device cuda
echo "== tiny-hybrid mtp"; $C $S models/tiny-hybrid mtp 3 "1 8 32 128" --device cuda
