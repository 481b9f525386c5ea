// Qwen3.5 text (model_type "qwen3_5_text", or "qwen3_5" with the text model under text_config and
// its tensors under model.language_model.*): hybrid Gated DeltaNet / gated attention with dense
// SwiGLU MLPs. The forward is shared with Qwen3-Next (model/hybrid_layers.h).
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// The tensors of a qwen3_5_text / qwen3_5_moe_text checkpoint's text model (model.* names, the
// layer types of the config; no mtp.* head; model/hybrid_layers.h hybrid_weight_specs), for `syv
// demo-model` (dense) and `syv inspect --config`.
std::vector<WeightSpec> qwen3_5_weight_specs(const ModelConfig& config);

// Loads a qwen3_5 / qwen3_5_text model (store == nullptr: random weights from options.seed).
// Reads a qwen3_5 checkpoint's tensors (the MTP head's too with options.mtp) into the kit's
// layout (model/hybrid_layers.h), after validate_hybrid_config().
Status load_qwen3_5_weights(const ModelConfig& config, const WeightStore* store,
                            WeightLoader& loader, const LoadOptions& options, DecoderWeights* out);

Result<std::unique_ptr<Model>> load_qwen3_5(const ModelConfig& config, const WeightStore* store,
                                            Backend& backend, const LoadOptions& options);

}  // namespace syv
