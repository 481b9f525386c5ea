// GPTQ's error feedback for int4 weights (Frantar et al., "GPTQ: Accurate Post-Training
// Quantization for Generative Pre-trained Transformers", 2022, Algorithm 1; the reference code is
// IST-DASLab/gptq gptq.py `fasterquant`, which AutoGPTQ and GPTQModel keep): the columns of a
// weight [N, K] are quantized in order, and each column's rounding error is spread over the
// columns not yet quantized through the inverse of H = sum over calibration tokens of x x^T (the
// layer's inputs), so that the layer's output on those inputs moves least. `syv quantize
// --calibration-file` (model/quant_pack.h takes the factor below; cli/quantize_calibration.h
// gathers H).
//
// What this file computes (the reference's steps, in double):
//   dead columns (H_ii == 0: an input that was always zero): H_ii = 1, their weights zeroed
//   H += damp * mean(diag H) * I                                   (percdamp, default 0.01)
//   U = the upper Cholesky factor of H^-1  (H^-1 = U^T U)
// and quantize_int4_rows_gptq() (quant_pack.cpp) then walks every row:
//   for i in 0..K-1: (at a group's first column: its scale from the row's current values)
//     q_i = round(w_i / s + z);  e = (w_i - (q_i - z) s) / U_ii;  w_j -= e U_ij for j > i
// in full precision, with the reference's lazy block updates (the columns after a block of 128
// updated by one matrix product for all rows: the same arithmetic, summed in another order).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace syv {

struct GptqFactor {
  int64_t k = 0;
  // act_order (GPTQ's desc_act with static_groups): the columns in the order they are quantized,
  // by decreasing diag(H); u is then the factor of H permuted so (H[order][order]). Empty: 0..K-1.
  std::vector<int32_t> order;
  std::vector<double> u;      // [K, K] row-major, upper triangular: H^-1 = U^T U
  std::vector<uint8_t> dead;  // [K]: 1 where the column's input was always zero (weight zeroed)
  int64_t tokens = 0;         // calibration tokens H was gathered over (for logs)
};

// The factor of H ([K, K] row-major, symmetric; `tokens` rows gathered into it). Errors when H
// is not positive definite after damping (NaN inputs, damp <= 0 with too few tokens), naming the
// column where the factorization failed. act_order: the columns quantized in order of decreasing
// diag(H) (ties in column order), each group's scale fitted beforehand on the weights as they are
// (static groups), so the checkpoint keeps plain contiguous groups (no g_idx).
Result<GptqFactor> gptq_factor(std::vector<double> h, int64_t k, double damp, int64_t tokens,
                               bool act_order = false);

// H = sum of x x^T over rows x of the inputs added (f32 rows of K), accumulated in double.
class InputGram {
 public:
  explicit InputGram(int64_t k);
  // Adds the T rows of x [T, K].
  void add(const float* x, int64_t t);
  int64_t k() const { return k_; }
  int64_t tokens() const { return tokens_; }
  // The full symmetric H (the accumulation keeps one triangle).
  std::vector<double> symmetric() const;

 private:
  int64_t k_;
  int64_t tokens_ = 0;
  std::vector<double> upper_;  // [K, K]: the upper triangle is H's
  std::vector<double> rows_;   // scratch: x widened to double
};

}  // namespace syv
