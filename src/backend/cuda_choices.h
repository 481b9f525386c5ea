// Load-time choices of the CUDA backend that change what the weights take on the device, readable
// without a CUDA build: CudaBackend applies them, and `syv inspect` (which plans for CUDA without
// a GPU) counts the weights the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>

#include "backend/weight.h"

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

// The scratch CudaBackend holds once a model is loaded (its peak_scratch_bytes(), which
// allocated_bytes() includes besides the weights): `syv serve`'s memory plan counts it in the
// runtime reserve (cli/kv_pool_plan.cpp, backend/memory_plan.h runtime_reserve_bytes), and `syv
// inspect` the same from these figures. cuda_backend.cpp static_asserts its constructor's share;
// tests/gpu/cuda_load_scratch_gpu_test.cpp holds the backend to the rest.
//  * From its constructor: the cuBLASLt workspace (kGemmWorkspace, 32 MiB), the attention
//    arrival counters (kCounterSlots = 65536 u32) and the MoE routing flags (a u64 and a u32).
inline constexpr int64_t kCudaConstructionScratchBytes =
    (int64_t{32} << 20) + (int64_t{1} << 16) * 4 + 8 + 4;
//  * At load (reserve_quantized_scratch): the bf16 buffer the quantized weights are dequantized
//    into, the largest of their shares. A weight's share is its n x k x 2 bytes as the loader lays
//    it out (gate|up fused, a MoE layer's experts stacked: model/prepare_model.h
//    quantized_load_shapes), at most kCudaDequantRowChunkCap for a weight dequantized in row
//    chunks: the output projection in every format, and an int4 linear whose GEMMs take bf16
//    activations (`int4_w4a16`; not W4A8, whose e4m3 copy of the whole weight lives in the buffer).
//    fp8 linears keep their whole share: the W8A8 GEMM's activation rows (and the norm's staged
//    e4m3 rows of a whole prefill chunk) live in it. None without quantized weights.
inline constexpr int64_t kCudaDequantRowChunkCap = int64_t{64} << 20;
// The cap CUDA takes: SYV_DEQUANT_CHUNK_MB=M sets M MiB (A/B runs; 0 = none, every weight whole),
// else kCudaDequantRowChunkCap.
inline int64_t cuda_dequant_row_chunk_cap() {
  const char* env = std::getenv("SYV_DEQUANT_CHUNK_MB");
  if (env == nullptr || *env == '\0') return kCudaDequantRowChunkCap;
  const int64_t mib = std::atoll(env);
  return mib > 0 ? mib << 20 : std::numeric_limits<int64_t>::max();
}
inline bool cuda_dequant_in_row_chunks(QuantWeightRole role, bool int4_w4a16) {
  return role == QuantWeightRole::kOutputProjection ||
         (role == QuantWeightRole::kLinear && int4_w4a16);
}
inline int64_t cuda_dequant_scratch_bytes(int64_t n, int64_t k, QuantWeightRole role,
                                          bool int4_w4a16) {
  return cuda_dequant_in_row_chunks(role, int4_w4a16)
             ? std::min(n * k * 2, cuda_dequant_row_chunk_cap())
             : n * k * 2;
}
inline int64_t cuda_load_scratch_bytes(int64_t dequant_scratch_bytes) {
  return kCudaConstructionScratchBytes + dequant_scratch_bytes;
}

}  // namespace syv
