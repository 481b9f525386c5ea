// `--gpu-memory-utilization` for commands that print the memory plan without loading a model
// (syv inspect): the same plan_memory() the benchmarks and the server use, with the activation
// peak estimated (they measure it) and the device's total memory read from the GPU (or given).
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"

#include "core/status.h"
#include "io/model_config.h"

namespace syv::cli {

struct PlanArgs {
  double utilization = 0.0;     // 0: no plan asked for
  double gpu_memory_gib = 0.0;  // 0: read the device's total memory
  int64_t max_batch_tokens = 8192;
  int64_t max_num_seqs = 256;      // serve's --max-num-seqs: decode rows, hybrid state slots
  int num_speculative_tokens = 0;  // serve's --num-speculative-tokens: verify rows per sequence
  // serve's --kv-cache-dtype: the K/V dtype the pool is counted in (bf16, CUDA's, when unset);
  // quantized KV counts its real bytes, scales included (kv/cache_spec.h).
  std::optional<DType> kv_dtype;
  // serve's hybrid state flags: --state-dtype (the delta-rule state's dtype), --num-checkpoints
  // (0: --checkpoint-cache-mb worth) and --checkpoint-cache-mb: the recurrent-state slots the
  // plan reserves before the pool.
  DType state_dtype = DType::F32;
  int32_t num_checkpoints = 0;
  int64_t checkpoint_cache_mb = 1024;
  // serve's --host-embeddings: the embedding table's bf16 bytes leave the device (untied only).
  bool host_embeddings = false;
};

// "KV pool: N tokens (P pages of 64), B bytes/token, max context M" plus the inputs, or an error
// naming the argument (no GPU and no --gpu-memory-gib, utilization out of range, no room).
// `weight_bytes`: what the weights take on the device (model/prepare_model.h's
// weight_backend_bytes with CUDA's dtypes: bf16, quantized modules in their packed layouts).
// `scratch_bytes`: what CudaBackend holds besides them once the model is loaded
// (backend/cuda_choices.h cuda_load_scratch_bytes). serve's plan (cli/kv_pool_plan.cpp) counts
// it in the runtime reserve (backend/memory_plan.h runtime_reserve_bytes): so does this.
Result<std::string> describe_memory_plan(const PlanArgs& args, const ModelConfig& config,
                                         int64_t weight_bytes, int64_t scratch_bytes);

}  // namespace syv::cli
