// The model registry: every architecture syv serves, keyed by config.json's model_type.
// load_model() and `syv inspect` look models up here instead of switching over families; adding an
// architecture is one entry in registry.cpp (docs/adding-a-model.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/model_config.h"
#include "kv/cache_spec.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

struct ModelArch {
  std::string name;                      // "qwen3"
  std::vector<std::string> model_types;  // config.json model_type values it serves
  std::string description;               // one line for `syv inspect`
  // Whether it needs Backend::supports_hybrid_ops() (Gated DeltaNet, gated attention, MoE);
  // load_model() refuses it on a backend without them.
  bool needs_hybrid_ops = false;
  // Config checks beyond what io/hf_config parses (heads divide, rotary dim even...).
  Status (*validate)(const ModelConfig& config) = nullptr;
  // The cache the model declares (Model::cache_spec() returns the same), with K/V in kv_dtype.
  CacheSpec (*cache_spec)(const ModelConfig& config, DType kv_dtype) = nullptr;
  // Every tensor a checkpoint must hold, when the architecture lists them (`syv inspect` checks
  // the parameter count); null otherwise.
  std::vector<WeightSpec> (*weight_specs)(const ModelConfig& config) = nullptr;
  // Builds the model (store == nullptr: random weights from options.seed).
  Result<std::unique_ptr<Model>> (*load)(const ModelConfig& config, const WeightStore* store,
                                         Backend& backend, const LoadOptions& options) = nullptr;
};

// Every registered architecture, in registry order.
const std::vector<ModelArch>& model_archs();
// The architecture serving config.model_type, or null.
const ModelArch* find_model_arch(const std::string& model_type);
// "qwen3, qwen3_5, ..." (every model_type served), for messages.
std::string supported_model_types();

}  // namespace syv
