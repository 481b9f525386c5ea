// Load-time choices of the CUDA backend that change what the weights take on the device, readable
// without a CUDA build: CudaBackend applies them, and `syv inspect` (which plans for CUDA without
// a GPU) counts the weights the same way.
#pragma once

#include <cstdlib>
#include <optional>

namespace syv {

// Whether CUDA keeps quantized MoE experts quantized (Backend::keeps_moe_experts_quantized) as
// SYV_QUANT_MOE=1 / 0 forces it; unset (nullopt): chosen per model by prepare_model() from the
// memory the dequantized weights would take (docs/cuda-backend.md "Quantized MoE experts").
inline std::optional<bool> cuda_forced_moe_experts_quantized() {
  const char* env = std::getenv("SYV_QUANT_MOE");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return std::atoi(env) != 0;
}
// What `syv inspect` (no device at hand) counts: the forced choice, else dequantized.
inline bool cuda_keeps_moe_experts_quantized() {
  return cuda_forced_moe_experts_quantized().value_or(false);
}

}  // namespace syv
