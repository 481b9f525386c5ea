#!/usr/bin/env bash
# On the GPU machine: builds and runs every gpu_*_test (timing tests excluded), one PASSED/FAILED line
# each, then the host tier's copy rate and serve ratio on the qwen3-0.6b shape (syv bench host-tier). Carry .devcarry-deps
# (tools/device/pack_deps.sh) and third_party/qwen3-tokenizer.
#   tools/device/gpu_regression.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export SYV_SOURCE_DIR=$PWD
T="gpu_batch_invariance_test gpu_cache_store_gpu_test gpu_host_copy_gpu_test gpu_cuda_hybrid_ops_test gpu_cuda_moe_ops_test gpu_cuda_ops_test gpu_engine_graphs_gpu_test gpu_engine_mtp_gpu_test gpu_engine_qwen3_gpu_test gpu_engine_verify_gpu_test gpu_hybrid_golden_gpu_test gpu_qwen3_golden_test gpu_sampling_gpu_test gpu_weight_load_gpu_test gpu_quant_linear_gpu_test gpu_engine_quantized_gpu_test gpu_kv_quant_gpu_test gpu_host_tier_engine_gpu_test"
timeout 200 tools/device/build_gpu.sh .devcarry-deps build/gpu syv $T 2>&1 | tail -2
B=build/gpu-carry/bin
for t in $T; do
  r=$(timeout 60 $B/$t --gtest_filter='-*Timing*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head -6 | tr '\n' ' ')
  echo "$t: $r"
done
D=/tmp/qwen3-0.6b-random
timeout 40 $B/syv demo-model --config tools/bench/configs/qwen3-0.6b --tokenizer third_party/qwen3-tokenizer --out $D >/dev/null 2>&1
timeout 60 $B/syv bench host-tier --model $D --prefix-len 32768 --max-model-len 40960 --kv-cache-mb 6144 --host-cache-gb 8 --max-batched-tokens 8192 2>&1 | grep -E "pinned|serve ratio|error" | tail -3
