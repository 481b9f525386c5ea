// Qwen3-Next (model_type "qwen3_next"): the Qwen3.5 hybrid stack with MoE MLPs (top-k routed
// experts + a sigmoid-gated shared expert) and fused GDN projections (in_proj_qkvz, in_proj_ba,
// laid out per key-head group), which are reordered into syv's layout at load.
#pragma once

#include <memory>

#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// Loads a qwen3_next model (store == nullptr: random weights from options.seed).
Result<std::unique_ptr<Model>> load_qwen3_next(const ModelConfig& config, const WeightStore* store,
                                               Backend& backend, const LoadOptions& options);

}  // namespace syv
