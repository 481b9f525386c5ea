// Qwen3 dense (model_type "qwen3"): embeddings, N x [attention with q/k RMSNorm + RoPE, SwiGLU
// MLP], final RMSNorm, lm_head (tied to the embeddings when tie_word_embeddings). See
// /work/shared/reference/MODELS.md and docs/cpu-backend.md.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// Config checks specific to qwen3 (heads divide, head_dim even, no sliding window...).
Status validate_qwen3_config(const ModelConfig& config);

// Every tensor a qwen3 checkpoint must hold, in load order (lm_head.weight only when untied;
// q/k/v/o biases only when attention_bias).
std::vector<WeightSpec> qwen3_weight_specs(const ModelConfig& config);

// Reads the checkpoint's tensors (in qwen3_weight_specs() order) into the kit's layout: q/k/v
// projections (and biases) fused into one [(Hq + 2 Hk) * D, H] matrix, gate/up into [2I, H].
Status load_qwen3_weights(const ModelConfig& config, WeightLoader& loader, DecoderWeights* out);

// K and V of every layer, per token, with the cache in `kv_dtype`.
CacheSpec qwen3_cache_spec(const ModelConfig& config, DType kv_dtype);

// Loads a qwen3 model (store == nullptr: random weights from options.seed).
Result<std::unique_ptr<Model>> load_qwen3(const ModelConfig& config, const WeightStore* store,
                                          Backend& backend, const LoadOptions& options);

}  // namespace syv
