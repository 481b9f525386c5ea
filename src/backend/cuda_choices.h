// Load-time choices of the CUDA backend that change what the weights take on the device, readable
// without a CUDA build: CudaBackend applies them, and `syv inspect` (which plans for CUDA without
// a GPU) counts the weights the same way.
#pragma once

#include <cstdlib>

namespace syv {

// Whether CUDA keeps quantized MoE experts quantized (Backend::keeps_moe_experts_quantized);
// SYV_QUANT_MOE=1 / 0 (default: off until measured on a GPU; docs/cuda-backend.md "Quantized MoE
// experts").
inline bool cuda_keeps_moe_experts_quantized() {
  const char* env = std::getenv("SYV_QUANT_MOE");
  return env != nullptr && std::atoi(env) != 0;
}

}  // namespace syv
