// A projection weight as the backend ops take it: the data tensor plus the format that gives its
// bytes meaning. Backend::linear and the other ops that multiply by a weight (the fused
// projections, the MoE experts) take a Weight and dispatch on `format`: kDense runs the float
// kernels every backend has; a quantized format goes to the backend's quantized path, which no
// backend implements yet, so it is refused by name ("backend cpu linear: fp8 block-scaled
// weights (f8e4m3, 128x128 blocks) are not supported yet"), never computed wrongly.
//
// Formats (the checkpoint side is in docs/architecture.md and WAVE2-SPECS part C):
//   kDense     tensor: any float dtype (f32, f16, bf16), the weight itself. [N, K] for a
//              projection ([E, N, K] for stacked experts); scales and zeros empty.
//   kFp8Block  tensor: F8E4M3 [N, K]; scales: f32 [ceil(N / block_n), ceil(K / block_k)], one per
//              [block_n x block_k] tile, weight = tensor * scale of its tile (DeepSeek-V3 / Qwen3
//              FP8 checkpoints: 128 x 128, "weight_scale_inv"). zeros empty.
//   kInt4Group tensor: U4X2 [N, K / 2] (two K-neighbours a byte, the lower index in the low
//              nibble: core/dtype.h); scales: f32/f16/bf16 [N, K / group_size]; zeros: U4X2
//              [N, K / group_size / 2] or empty (symmetric: zero point 8). weight =
//              (q - zero) * scale of its group along K (AWQ / GPTQ after repacking to this
//              layout).
// n and k are the logical [N, K] of the (last) matrix, whatever the storage packs.
//
// A Weight is a non-owning view (its tensors point into DeviceBuffers owned elsewhere, e.g.
// model/weight_spec.h's DeviceWeight, which is a Weight plus its buffers). Cheap to copy.
#pragma once

#include <cstdint>
#include <string>

#include "backend/tensor.h"

namespace syv {

enum class WeightFormat : uint8_t { kDense, kFp8Block, kInt4Group };

// "dense", "fp8 block-scaled", "int4 group-quantized"
const char* weight_format_name(WeightFormat f);

struct Weight {
  Tensor tensor;  // the data (see the formats above); empty for an absent weight (no bias...)
  WeightFormat format = WeightFormat::kDense;
  Tensor scales;                     // kFp8Block, kInt4Group (see above); empty for kDense
  Tensor zeros;                      // kInt4Group with zero points; empty otherwise
  int64_t n = 0;                     // logical output rows N of the (last) matrix
  int64_t k = 0;                     // logical input columns K
  int32_t block_n = 0, block_k = 0;  // kFp8Block: the scale tile, e.g. 128 x 128
  int32_t group_size = 0;            // kInt4Group: K elements per scale (and zero), e.g. 128

  // A dense weight over `t` (n, k from its last two dims; n = 1 for a vector).
  static Weight dense(const Tensor& t) {
    Weight w;
    w.set_dense(t);
    return w;
  }
  // Makes this a dense weight over `t` (the loader, and reshapes of a loaded weight).
  void set_dense(const Tensor& t) {
    tensor = t;
    format = WeightFormat::kDense;
    scales = zeros = Tensor();
    n = t.ndim >= 2 ? t.dim(-2) : 1;
    k = t.ndim >= 1 ? t.dim(-1) : 0;
    block_n = block_k = group_size = 0;
  }
  bool empty() const { return tensor.empty(); }
  bool dense() const { return format == WeightFormat::kDense; }
  // "fp8 block-scaled weights (f8e4m3, 128x128 blocks)": what refusals name.
  std::string describe() const;
};

}  // namespace syv
