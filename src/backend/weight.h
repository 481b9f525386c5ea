// A projection weight as the backend ops take it: the data tensor plus the format that gives its
// bytes meaning. Backend::linear and the other ops that multiply by a weight (the fused
// projections, the MoE experts) take a Weight and dispatch on `format`: kDense runs the float
// kernels every backend has; a quantized format goes to the backend's quantized path
// (Backend::linear_quantized). The CPU backend computes both formats (cpu/cpu_quantized.cpp, the
// reference), CUDA too (cuda/quant_linear.cu, on these layouts as loaded); a backend without
// kernels refuses by name ("backend X linear: fp8 block-scaled weights (f8e4m3, 128x128 blocks)
// are not supported yet"), never computes wrongly.
//
// The canonical layouts below are what every checkpoint format is converted to at load
// (model/quant_weights.h: Qwen FP8, AWQ, GPTQ v1/v2, compressed-tensors); kernels consume only
// these. Formats:
//   kDense     tensor: any float dtype (f32, f16, bf16), the weight itself. [N, K] for a
//              projection ([E, N, K] for stacked experts); scales, zeros and g_idx empty.
//   kFp8Block  tensor: F8E4M3 [N, K]; scales: f32 [ceil(N / block_n), ceil(K / block_k)], one per
//              [block_n x block_k] tile, weight = tensor * scale of its tile (DeepSeek-V3 / Qwen3
//              FP8 checkpoints: 128 x 128, "weight_scale_inv"). Per-row scales are block_n = 1,
//              block_k = K; one scale per tensor is block_n = N, block_k = K. zeros empty.
//   kInt4Group tensor: U4X2 [N, K / 2] (K even; the two K-neighbours 2j and 2j + 1 of a row in one
//              byte, 2j in the low nibble: core/dtype.h), q in [0, 15];
//              scales: f32 [N, G], one per (row, group);
//              zeros: U8 [N, G], zero point z in [0, 16] (16 only from GPTQ v1's "z - 1"
//              storage of 15), or empty: symmetric, z = 8;
//              g_idx: I32 [K], the group of each input column k (GPTQ act-order), or empty: group
//              k / group_size (G = K / group_size);
//              weight[n, k] = (q[n, k] - z[n, g]) * scale[n, g], g = g_idx[k] or k / group_size;
//              perm: I32 [K] or empty: act-order permuted at load (the loader, where
//              Backend::takes_permuted_act_order()): stored column j holds input column perm[j],
//              the groups are contiguous (j / group_size, g_idx empty), and the product reads x
//              gathered by perm: weight[n, perm[j]] = (q[n, j] - z[n, g]) * scale[n, g],
//              g = j / group_size.
//              (AWQ's [K, N/8] interleaved words and GPTQ's [K/8, N] words are unpacked to this
//              at load; see model/quant_weights.cpp for each source layout.)
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

// What a quantized weight is to the model, for a backend whose quantized paths dequantize it into
// a scratch buffer sized at load (Backend::reserve_quantized_scratch): a linear and the output
// projection may be dequantized a part of their rows at a time; a MoE layer's stacked experts are
// dequantized whole (the routed experts' rows of the stack).
enum class QuantWeightRole : uint8_t { kLinear, kOutputProjection, kStackedExperts };

struct Weight {
  Tensor tensor;  // the data (see the formats above); empty for an absent weight (no bias...)
  WeightFormat format = WeightFormat::kDense;
  Tensor scales;                     // kFp8Block, kInt4Group (see above); empty for kDense
  Tensor zeros;                      // kInt4Group with zero points; empty otherwise
  Tensor g_idx;                      // kInt4Group with act-order groups; empty otherwise
  Tensor perm;                       // kInt4Group with act-order permuted at load; else empty
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
    scales = zeros = g_idx = perm = Tensor();
    n = t.ndim >= 2 ? t.dim(-2) : 1;
    k = t.ndim >= 1 ? t.dim(-1) : 0;
    block_n = block_k = group_size = 0;
  }
  bool empty() const { return tensor.empty(); }
  bool dense() const { return format == WeightFormat::kDense; }
  // Bytes of the data, scales, zeros, g_idx and perm together (what the weight costs in memory).
  size_t bytes() const {
    size_t b = 0;
    for (const Tensor* t : {&tensor, &scales, &zeros, &g_idx, &perm})
      b += t->empty() ? 0 : t->bytes();
    return b;
  }
  // "fp8 block-scaled weights (f8e4m3, 128x128 blocks)": what refusals name.
  std::string describe() const;
};

// Rows [row0, row0 + rows) of the logical [N, K] weight as f32 (out: rows * K floats), from a
// weight whose tensors are in host-readable memory (the CPU backend; host copies). Checks the
// canonical layout above (shapes, dtypes) first; every format is supported.
void dequantize_rows(const Weight& w, int64_t row0, int64_t rows, float* out);

}  // namespace syv
