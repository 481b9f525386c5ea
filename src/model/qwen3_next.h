// Qwen3-Next (model_type "qwen3_next"): the Qwen3.5 hybrid stack with MoE MLPs (top-k routed
// experts + a sigmoid-gated shared expert) and fused GDN projections (in_proj_qkvz, in_proj_ba,
// laid out per key-head group), which are reordered into syv's layout at load.
#pragma once

#include <memory>

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// The tensors of a qwen3_next checkpoint (model.* names, no mtp.* head; model/hybrid_layers.h
// hybrid_weight_specs with the fused in_proj_qkvz / in_proj_ba), for `syv inspect --config`.
std::vector<WeightSpec> qwen3_next_weight_specs(const ModelConfig& config);

// Loads a qwen3_next model (store == nullptr: random weights from options.seed).
// Reads a qwen3_next checkpoint's tensors (the MTP head's too with options.mtp) into the kit's
// layout (model/hybrid_layers.h: the fused qkvz / ba projections reordered), after
// validate_hybrid_config().
Status load_qwen3_next_weights(const ModelConfig& config, const WeightStore* store,
                               WeightLoader& loader, const LoadOptions& options,
                               DecoderWeights* out);

Result<std::unique_ptr<Model>> load_qwen3_next(const ModelConfig& config, const WeightStore* store,
                                               Backend& backend, const LoadOptions& options);

}  // namespace syv
