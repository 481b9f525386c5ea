// --kv-cache-dtype auto|bf16|f32|fp8|int4: the dtype of the paged K/V (CacheConfig::kv_dtype;
// layouts in backend/kv_cache_view.h), shared by the commands that build a KV cache (serve,
// generate, bench offline / host-tier / decode / prefill, logits, eval-ppl) and by `syv inspect`'s
// memory plan.
//
//   auto  the backend's activation dtype (bf16 on CUDA, f32 on the CPU): the model's declared cache
//   bf16, f32  that float dtype (only the backend's own has kernels)
//   fp8   e4m3 values, one f32 scale per (token, kv head) for K and for V (~2x bf16's tokens)
//   int4  4-bit values, one f16 scale per 32 elements of a (token, kv head) row (3.56x bf16's
//         tokens: D / 2 bytes + D / 16 bytes of f16 scales per row); head_dim a multiple of 32
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/status.h"
#include "io/model_config.h"

namespace syv::cli {

// Adds the option (values checked by CLI11: an unknown one names the flag and the choices).
CLI::Option* add_kv_cache_dtype_arg(CLI::App& app, std::string& value);

// The flag's value as a dtype: auto -> nullopt (the declared cache); bf16, f32, fp8 (F8E4M3),
// int4 (U4X2). Unknown values are an error naming --kv-cache-dtype and the choices.
Result<std::optional<DType>> parse_kv_cache_dtype(const std::string& value);

// parse_kv_cache_dtype(), then what this model and backend allow: int4 needs the model's head_dim
// to be a multiple of 32 (named), and the backend must have kernels for the dtype
// (Backend::supports_kv_dtype). Logs one start-up line: the KV dtype and why.
Result<std::optional<DType>> resolve_kv_cache_dtype(const std::string& value,
                                                    const Backend& backend,
                                                    const ModelConfig& config);

// Whether `kv` can hold this model's K/V (nullopt, float, fp8: always; int4: head_dim % 32 == 0).
// The error names --kv-cache-dtype and head_dim.
Status check_kv_head_dim(std::optional<DType> kv, const ModelConfig& config);

}  // namespace syv::cli
