#!/usr/bin/env bash
# On the GPU machine: builds syv and the hybrid GPU tests, runs them, then the Qwen3.5 9B-class
# decode and prefill benchmarks (random weights). Writes the bench config from transformers when
# it is missing (Qwen3_5TextConfig() defaults, vocab_size 151936).
#   tools/device/hybrid_check.sh DEPS_FOLDER [tests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
DEPS=${1:?deps folder (tools/device/pack_deps.sh)}
WHAT=${2:-all}
CFG=tools/bench/configs/qwen3.5-9b-class
tools/device/build_gpu.sh "$DEPS" build/gpu syv gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test \
  gpu_engine_qwen3_gpu_test gpu_engine_verify_gpu_test gpu_engine_mtp_gpu_test gpu_cuda_ops_test || exit 1
export SYV_SOURCE_DIR=$PWD
B=build/gpu-carry/bin
if [[ $WHAT != bench ]]; then
  for t in gpu_cuda_hybrid_ops_test gpu_hybrid_golden_gpu_test; do
    $B/$t 2>&1 | grep -E "median|FAILED|PASSED|Failure|hybrid ops|error" | head -40
  done
  $B/gpu_cuda_ops_test --gtest_filter='*Attention*' 2>&1 | grep -E "FAILED|PASSED|Failure|error" | head -20
  $B/gpu_engine_qwen3_gpu_test --gtest_filter='*Hybrid*' 2>&1 | grep -E "OK \]|FAILED|Failure|request" | head -30
  $B/gpu_engine_verify_gpu_test --gtest_filter='*Hybrid*' 2>&1 | grep -E "OK \]|FAILED|Failure" | head -20
  $B/gpu_engine_mtp_gpu_test 2>&1 | grep -E "OK \]|FAILED|Failure|Expected|Which|trace" | head -30
fi
if [[ ! -f $CFG/config.json ]]; then
  mkdir -p $CFG
  python3 -c "
import transformers
c = transformers.Qwen3_5TextConfig(vocab_size=151936)
c.save_pretrained('$CFG')
print('config from transformers', transformers.__version__)"
fi
[[ -n ${OUT:-} ]] && mkdir -p "$OUT/cfg" && cp $CFG/config.json "$OUT/cfg/"
if [[ $WHAT != tests ]]; then
  $B/syv bench decode --config $CFG --random-weights --batch 1,16,64 --context 512 --steps 20 2>&1 |
    grep -E "^\||ceilings|weights:|recurrent|error|Error" | tail -12
  $B/syv bench prefill --config $CFG --random-weights --lengths 2048,8192 2>&1 |
    grep -E "^\||error|Error" | tail -4
fi
