#!/usr/bin/env bash
# On the GPU machine: the decode attention kernels (tensor cores, attention_decode_mma.cu, and CUDA
# cores, attention_decode.cu). Builds syv and the attention tests, runs the decode / split /
# quantized-KV attention tests (both kernels), then `syv bench decode` on the Qwen3-8B shape
# (random weights) at b = 1 and 64, context 8192: bf16, fp8 and int4 KV on the default kernel,
# bf16 and fp8 on the CUDA-core one (SYV_ATTN_DECODE=cores), the tensor-core kernel's two forms
# (SYV_DECODE_MMA_FORM=heads|keys) for every KV dtype, and its split target
# (SYV_ATTN_MMA_BLOCKS_PER_SM) swept at b = 64. Carry .devcarry-deps (pack_deps.sh).
#   [FORMS_ONLY=1] tools/device/decode_attention_check.sh   (FORMS_ONLY: tests + the forms' A/B)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export SYV_SOURCE_DIR=$PWD
CFG=tools/bench/configs/qwen3-8b
B=build/gpu-carry/bin
t0=$SECONDS
timeout 300 tools/device/build_gpu.sh .devcarry-deps build/gpu syv gpu_cuda_ops_test \
  gpu_kv_quant_gpu_test 2>&1 | tail -1
echo "build: $((SECONDS - t0)) s"
timeout 200 $B/gpu_cuda_ops_test --gtest_filter='*Attention*:-*Timing*' 2>&1 |
  grep -E "^\[ +(PASSED|FAILED) |Failure|Expected|relative|error" | head -30
timeout 200 $B/gpu_kv_quant_gpu_test 2>&1 |
  grep -E "^\[ +(OK|FAILED|PASSED) |Failure|relative L2|Expected|error" | head -30
bench() {  # label, then env assignments and syv bench decode arguments
  local label=$1
  shift
  echo "== $label"
  timeout 120 env "$@" 2>&1 | grep -E "^\| decode|rror" | sort -u
}
# The forms: key rows (the fp8 default from 16 blocks per split; bf16 / int4 only when forced).
for kv in bf16 fp8 int4; do
  for form in heads keys; do
    bench "$kv KV, $form form" SYV_DECODE_MMA_FORM=$form $B/syv bench decode --config $CFG \
      --random-weights --batch 1,16,64 --context 8192 --steps 30 --kv-cache-dtype $kv
  done
done
for form in heads keys; do
  bench "qwen3.5-9b-class bf16 KV, $form form" SYV_DECODE_MMA_FORM=$form $B/syv bench decode \
    --config tools/bench/configs/qwen3.5-9b-class --random-weights --batch 1,64 --context 512,4096 \
    --steps 30
done
[[ ${FORMS_ONLY:-0} == 1 ]] && exit 0
for kv in bf16 fp8 int4; do
  bench "$kv KV, default kernel" $B/syv bench decode --config $CFG --random-weights --batch 1,64 \
    --context 8192 --steps 30 --kv-cache-dtype $kv
done
for kv in bf16 fp8; do
  bench "$kv KV, CUDA cores" SYV_ATTN_DECODE=cores $B/syv bench decode --config $CFG \
    --random-weights --batch 1,64 --context 8192 --steps 30 --kv-cache-dtype $kv
done
for n in 4 16; do
  for kv in fp8; do
    bench "$kv KV, $n blocks per SM" SYV_ATTN_MMA_BLOCKS_PER_SM=$n $B/syv bench decode \
      --config $CFG --random-weights --batch 64 --context 8192 --steps 30 --kv-cache-dtype $kv
  done
done
# Qwen3.5 (head_dim 256 gated attention in 8 of 32 layers): default kernel vs CUDA cores.
for k in default cores; do
  bench "qwen3.5-9b-class, $k" SYV_ATTN_DECODE=$k $B/syv bench decode \
    --config tools/bench/configs/qwen3.5-9b-class --random-weights --batch 1,64 --context 4096 \
    --steps 30
done
