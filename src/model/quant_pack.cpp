// The writers of model/quant_pack.h. Packings mirror model/quant_weights.cpp's readers (which
// cite their sources); tests check both against bytes computed by hand.
#include "model/quant_pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <cblas.h>

#include "core/check.h"
#include "core/thread_pool.h"
#include "model/gptq.h"

namespace syv {

namespace {

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble i holds column 8j + order[i]

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

float to_f16_value(float x) {
  return f16_to_f32(f32_to_f16(x));
}

uint8_t clamp_q(float x) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint(x), 0.0f, 15.0f));
}

// The range fractions an int4 group's scale is searched over (GPTQ's quantizer with `mse`,
// coarser): the full range, then ranges clipped by 5% steps down to 70%, keeping the one whose
// dequantized group is nearest the weights (least squares). Clipping a few outliers buys the
// rest of the group finer steps.
constexpr float kClipFractions[] = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};

// One int4 group's (scale, zero) for the range [lo, hi] (f16-rounded scale) and its squared error.
struct GroupFit {
  float scale;
  uint8_t zero;
  double err;
};
GroupFit fit_group(const float* row, int64_t group, float lo, float hi, bool symmetric) {
  GroupFit f;
  if (symmetric) {
    const float amax = std::max(std::fabs(lo), std::fabs(hi));
    f.scale = amax > 0.0f ? to_f16_value(amax * 2.0f / 15.0f) : 1.0f;
    f.zero = 8;
  } else {
    f.scale = to_f16_value(std::max(hi - lo, 1e-5f) / 15.0f);
    f.zero = clamp_q(-lo / f.scale);
  }
  f.err = 0;
  for (int64_t i = 0; i < group; ++i) {
    const float q = static_cast<float>(clamp_q(row[i] / f.scale + f.zero));
    const double d = double(row[i]) - double(q - f.zero) * f.scale;
    f.err += d * d;
  }
  return f;
}

// The best fit of kClipFractions for a group (the first on ties: the widest range).
GroupFit best_fit(const float* row, int64_t group, bool symmetric) {
  const auto [lo, hi] = std::minmax_element(row, row + group);
  GroupFit best{1.0f, 8, std::numeric_limits<double>::infinity()};
  for (float p : kClipFractions) {
    const GroupFit f = fit_group(row, group, p * *lo, p * *hi, symmetric);
    if (f.err < best.err) best = f;
  }
  return best;
}

// One int4 row's codes q [K], scales [K / group] (f16-rounded) and zero points: each group's fit
// (best_fit) and round to nearest.
void quantize_int4_row(const float* w, int64_t K, int32_t group, bool symmetric, uint8_t* q,
                       float* scales, uint8_t* zeros) {
  for (int64_t g = 0; g < K / group; ++g) {
    const float* part = w + g * group;
    const GroupFit fit = best_fit(part, group, symmetric);
    scales[g] = fit.scale;
    zeros[g] = fit.zero;
    for (int64_t i = 0; i < group; ++i) q[g * group + i] = clamp_q(part[i] / fit.scale + fit.zero);
  }
}

// GPTQ's walk over rows [0, rows) of w [rows, K] (model/gptq.h): each column rounded with its
// group's fit and its error spread over the columns after it. In natural order a group's fit is
// made at its first column, on the row as the errors before it left it; in act-order
// (gptq.order; GPTQModel's desc_act + static_groups) every group's fit is made first on the row as
// it is, and the walk takes the columns in that order (u is the factor of H in that order).
// The columns go in blocks of kGptqBlock (GPTQ's lazy batch updates, `blocksize` 128; in natural
// order a whole number of groups): inside a block each error updates the block's later columns at
// once, and at its end the block's errors update every later column by one product
// (cblas_dgemm, threaded), so u is streamed once per block of rows, not once per row. The same
// sums as a column-by-column walk, in another order. q [rows, K], scales / zeros [rows, K / group].
constexpr int64_t kGptqBlock = 128;
void quantize_int4_rows_gptq(const float* w, int64_t rows, int64_t K, int32_t group, bool symmetric,
                             const GptqFactor& gptq, uint8_t* q, float* scales, uint8_t* zeros) {
  const bool act_order = !gptq.order.empty();
  const int64_t G = K / group;
  const int64_t B = act_order ? kGptqBlock : std::max<int64_t>(1, kGptqBlock / group) * group;
  auto column = [&](int64_t j) { return act_order ? int64_t{gptq.order[j]} : j; };
  std::vector<float> row(static_cast<size_t>(rows * K));   // natural order: the fits' input
  std::vector<double> cur(static_cast<size_t>(rows * K));  // walk order
  std::vector<double> err(static_cast<size_t>(rows * B));  // the block's errors / u_jj
  auto fit = [&](int64_t r, const float* values, int64_t g) {
    const GroupFit f = best_fit(values, group, symmetric);
    scales[r * G + g] = f.scale;
    zeros[r * G + g] = f.zero;
  };
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* rr = row.data() + r * K;
      for (int64_t i = 0; i < K; ++i) rr[i] = gptq.dead[i] ? 0.0f : w[r * K + i];
      if (act_order)
        for (int64_t g = 0; g < G; ++g) fit(r, rr + g * group, g);
      for (int64_t j = 0; j < K; ++j) cur[r * K + j] = rr[column(j)];
    }
  });
  for (int64_t b = 0; b < K; b += B) {
    const int64_t e = std::min(K, b + B);
    ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        double* c = cur.data() + r * K;
        float* rr = row.data() + r * K;
        for (int64_t j = b; j < e; ++j) {
          const int64_t k = column(j), g = k / group;
          if (!act_order && j % group == 0) {
            for (int64_t i = 0; i < group; ++i) rr[j + i] = static_cast<float>(c[j + i]);
            fit(r, rr + j, g);
          }
          const float scale = scales[r * G + g];
          const uint8_t zero = zeros[r * G + g];
          const uint8_t code = clamp_q(static_cast<float>(c[j]) / scale + zero);
          q[r * K + k] = code;
          const double* uj = gptq.u.data() + j * K;
          const double e_j = (c[j] - double(int(code) - int(zero)) * scale) / uj[j];
          err[r * B + (j - b)] = e_j;
          for (int64_t i = j + 1; i < e; ++i) c[i] -= e_j * uj[i];
        }
      }
    });
    if (e < K) {  // cur[:, e:] -= err[:, :e - b] u[b:e, e:]
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(K - e), static_cast<int>(e - b), -1.0, err.data(),
                  static_cast<int>(B), gptq.u.data() + b * K + e, static_cast<int>(K), 1.0,
                  cur.data() + e, static_cast<int>(K));
    }
  }
}

// Rows [0, N) of w through quantize_int4_rows_gptq in chunks (its scratch is 12 bytes per weight
// of a chunk), or each row to nearest (quantize_int4_row): q [N, K], scales / zeros [N, K / group].
constexpr int64_t kGptqRowChunk = 4096;
void quantize_int4_rows(const float* w, int64_t N, int64_t K, int32_t group, bool symmetric,
                        const GptqFactor* gptq, uint8_t* q, float* scales, uint8_t* zeros) {
  const int64_t G = K / group;
  if (gptq != nullptr) {
    for (int64_t n = 0; n < N; n += kGptqRowChunk) {
      const int64_t rows = std::min(kGptqRowChunk, N - n);
      quantize_int4_rows_gptq(w + n * K, rows, K, group, symmetric, *gptq, q + n * K,
                              scales + n * G, zeros + n * G);
    }
    return;
  }
  ThreadPool::global().parallel_for(N, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      quantize_int4_row(w + n * K, K, group, symmetric, q + n * K, scales + n * G, zeros + n * G);
  });
}

}  // namespace

std::vector<PackedTensor> pack_fp8_block(const float* w, int64_t N, int64_t K, int32_t block_n,
                                         int32_t block_k) {
  SYV_CHECK(block_n > 0 && block_k > 0) << "fp8 block " << block_n << "x" << block_k;
  const int64_t SR = (N + block_n - 1) / block_n, SC = (K + block_k - 1) / block_k;
  std::vector<float> scale(static_cast<size_t>(SR * SC));
  std::vector<uint8_t> q(static_cast<size_t>(N * K));
  ThreadPool::global().parallel_for(SR, [&](int64_t bi0, int64_t bi1) {
    for (int64_t bi = bi0; bi < bi1; ++bi) {
      for (int64_t bj = 0; bj < SC; ++bj) {
        const int64_t n1 = std::min<int64_t>(N, (bi + 1) * block_n);
        const int64_t k1 = std::min<int64_t>(K, (bj + 1) * block_k);
        float amax = 0.0f;
        for (int64_t n = bi * block_n; n < n1; ++n)
          for (int64_t k = bj * block_k; k < k1; ++k)
            amax = std::max(amax, std::fabs(w[n * K + k]));
        const float s = std::max(amax, 1e-12f) / 448.0f;
        scale[static_cast<size_t>(bi * SC + bj)] = s;
        for (int64_t n = bi * block_n; n < n1; ++n)
          for (int64_t k = bj * block_k; k < k1; ++k)
            q[n * K + k] = f32_to_fp8_e4m3(w[n * K + k] / s);
      }
    }
  });
  return {{".weight", DType::F8E4M3, {N, K}, std::move(q)},
          {".weight_scale_inv", DType::F32, {SR, SC}, as_bytes(scale)}};
}

std::vector<PackedTensor> pack_awq(const float* w, int64_t N, int64_t K, int32_t group,
                                   const GptqFactor* gptq) {
  SYV_CHECK(N % 8 == 0 && group > 0 && K % group == 0)
      << "awq: N " << N << ", K " << K << ", group " << group;
  SYV_CHECK(gptq == nullptr || gptq->k == K)
      << "awq: GPTQ factor of K " << gptq->k << " for K " << K;
  const int64_t G = K / group;
  std::vector<uint8_t> q(static_cast<size_t>(N * K)), z(static_cast<size_t>(N * G));
  std::vector<uint16_t> scales(static_cast<size_t>(G * N));  // [G, N] f16
  std::vector<float> row_scales(static_cast<size_t>(N * G));
  quantize_int4_rows(w, N, K, group, /*symmetric=*/false, gptq, q.data(), row_scales.data(),
                     z.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g)
      scales[static_cast<size_t>(g * N + n)] = f32_to_f16(row_scales[n * G + g]);
  std::vector<int32_t> qweight(static_cast<size_t>(K * N / 8)),
      qzeros(static_cast<size_t>(G * N / 8));
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t j = 0; j < N / 8; ++j) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= uint32_t{q[(8 * j + kAwqOrder[i]) * K + k]} << (4 * i);
      qweight[static_cast<size_t>(k * (N / 8) + j)] = static_cast<int32_t>(word);
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t j = 0; j < N / 8; ++j) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= uint32_t{z[(8 * j + kAwqOrder[i]) * G + g]} << (4 * i);
      qzeros[static_cast<size_t>(g * (N / 8) + j)] = static_cast<int32_t>(word);
    }
  }
  return {{".qweight", DType::I32, {K, N / 8}, as_bytes(qweight)},
          {".qzeros", DType::I32, {G, N / 8}, as_bytes(qzeros)},
          {".scales", DType::F16, {G, N}, as_bytes(scales)}};
}

std::vector<PackedTensor> pack_gptq(const float* w, int64_t N, int64_t K, int32_t group,
                                    const GptqFactor* gptq) {
  SYV_CHECK(N % 8 == 0 && K % 8 == 0 && group > 0 && K % group == 0)
      << "gptq: N " << N << ", K " << K << ", group " << group;
  SYV_CHECK(gptq == nullptr || gptq->k == K)
      << "gptq: GPTQ factor of K " << gptq->k << " for K " << K;
  const int64_t G = K / group;
  std::vector<uint8_t> q(static_cast<size_t>(N * K));
  std::vector<uint16_t> scales(static_cast<size_t>(G * N));
  std::vector<float> row_scales(static_cast<size_t>(N * G));
  std::vector<uint8_t> row_zeros(static_cast<size_t>(N * G));  // 8: symmetric
  quantize_int4_rows(w, N, K, group, /*symmetric=*/true, gptq, q.data(), row_scales.data(),
                     row_zeros.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g)
      scales[static_cast<size_t>(g * N + n)] = f32_to_f16(row_scales[n * G + g]);
  std::vector<int32_t> qweight(static_cast<size_t>(K / 8 * N)), g_idx(static_cast<size_t>(K));
  for (int64_t r = 0; r < K / 8; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= uint32_t{q[n * K + 8 * r + i]} << (4 * i);
      qweight[static_cast<size_t>(r * N + n)] = static_cast<int32_t>(word);
    }
  }
  // v1 stores zero - 1: 7 in every nibble.
  std::vector<int32_t> qzeros(static_cast<size_t>(G * N / 8), 0x77777777);
  for (int64_t k = 0; k < K; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / group);
  return {{".qweight", DType::I32, {K / 8, N}, as_bytes(qweight)},
          {".qzeros", DType::I32, {G, N / 8}, as_bytes(qzeros)},
          {".scales", DType::F16, {G, N}, as_bytes(scales)},
          {".g_idx", DType::I32, {K}, as_bytes(g_idx)}};
}

}  // namespace syv
