#include "model/registry.h"

#include <algorithm>

#include "model/hybrid_layers.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "model/qwen3_next.h"

namespace syv {

const std::vector<ModelArch>& model_archs() {
  static const std::vector<ModelArch> archs = {
      {"qwen3",
       {"qwen3"},
       "qwen3 (dense)",
       false,
       validate_qwen3_config,
       qwen3_cache_spec,
       qwen3_weight_specs,
       load_qwen3},
      {"qwen3_5",
       {"qwen3_5_text", "qwen3_5", "qwen3_5_moe_text", "qwen3_5_moe"},
       "qwen3_5 (hybrid Gated DeltaNet + gated attention)",
       true,
       validate_hybrid_config,
       hybrid_cache_spec,
       nullptr,  // real checkpoints add mtp.* (and vision) tensors the count would not know
       load_qwen3_5},
      {"qwen3_next",
       {"qwen3_next"},
       "qwen3_next (hybrid + MoE)",
       true,
       validate_hybrid_config,
       hybrid_cache_spec,
       nullptr,
       load_qwen3_next},
  };
  return archs;
}

const ModelArch* find_model_arch(const std::string& model_type) {
  for (const ModelArch& a : model_archs()) {
    if (std::find(a.model_types.begin(), a.model_types.end(), model_type) != a.model_types.end())
      return &a;
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string out;
  for (const ModelArch& a : model_archs()) {
    for (const std::string& t : a.model_types) out += (out.empty() ? "" : ", ") + t;
  }
  return out;
}

}  // namespace syv
