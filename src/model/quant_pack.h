// Round-to-nearest quantization of a float [N, K] weight into the published checkpoint layouts
// (the writing side of model/quant_weights.h; `syv quantize`). No calibration: per-block (fp8)
// scales from the block's range; per-group (int4) scales from the group's range clipped to the
// fraction of it (100%, 95%, ... 70%) whose dequantized group is nearest the weights (least
// squares; GPTQ's quantizer with `mse`, coarser); then round to nearest. Rows are packed on the
// process's thread pool (core/thread_pool.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace syv {

struct GptqFactor;  // model/gptq.h

// One tensor of a quantized module, ready for write_safetensors.
struct PackedTensor {
  std::string suffix;  // ".weight", ".weight_scale_inv", ".qweight", ".qzeros", ".scales", ".g_idx"
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Qwen / transformers FineGrainedFP8: scale_inv = max(|W| over the block, 1e-12) / 448 (f32),
// weight = e4m3(W / scale_inv) [N, K], weight_scale_inv [ceil(N/bn), ceil(K/bk)].
std::vector<PackedTensor> pack_fp8_block(const float* w, int64_t N, int64_t K, int32_t block_n,
                                         int32_t block_k);

// AutoAWQ GEMM, asymmetric: per (row, group), with [min, max] the group's range times the clip
// fraction chosen (above): scale = max(max - min, 1e-5) / 15 (rounded to f16),
// zero = clamp(round(-min / scale), 0, 15), q = clamp(round(W / scale) + zero, 0, 15);
// qweight i32 [K, N/8] (AWQ nibble order), qzeros i32 [K/G, N/8], scales f16 [K/G, N].
// Needs N % 8 == 0 and K % G == 0.
//
// gptq (both int4 layouts): GPTQ's error feedback (model/gptq.h) with this module's factor
// (K = gptq->k) instead of rounding each weight to nearest; null: round to nearest.
std::vector<PackedTensor> pack_awq(const float* w, int64_t N, int64_t K, int32_t group,
                                   const GptqFactor* gptq = nullptr);

// GPTQ format v1 ("gptq"), symmetric, no act-order: scale = max(|W| over the group) * 2 / 15
// times the clip fraction chosen (above) (f16; 1 when the group is all zeros), zero 8 (stored as
// 7), q = clamp(round(W / scale) + 8, 0,
// 15); qweight i32 [K/8, N], qzeros i32 [K/G, N/8], scales f16 [K/G, N], g_idx i32 [K] = k / G.
// Needs N % 8 == 0, K % 8 == 0 and K % G == 0.
// gptq: as pack_awq's.
std::vector<PackedTensor> pack_gptq(const float* w, int64_t N, int64_t K, int32_t group,
                                    const GptqFactor* gptq = nullptr);

}  // namespace syv
