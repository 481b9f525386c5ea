// GPTQ's pieces (model/gptq.h) and its use in the int4 packers (model/quant_pack.h): the
// factorizations against their definitions, the Gram matrix against a plain sum, GPTQ with
// uncorrelated inputs equal to round to nearest byte for byte, and GPTQ's point: on correlated
// inputs the layer's output moves less than with round to nearest, in both layouts; an input that
// is always zero zeroes its weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "model/gptq.h"
#include "model/quant_pack.h"

namespace syv {
namespace {

std::vector<double> random_spd(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  std::vector<double> b(static_cast<size_t>(n * n)), a(static_cast<size_t>(n * n), 0.0);
  for (double& x : b) x = d(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < n; ++k) a[i * n + j] += b[i * n + k] * b[j * n + k];
      if (i == j) a[i * n + j] += static_cast<double>(n);
    }
  return a;
}

TEST(Gptq, InputGramIsTheSumOfOuterProducts) {
  const int64_t k = 11, t = 300;  // over the accumulator's 256-row chunks
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(t * k));
  for (float& v : x) v = d(rng);
  InputGram gram(k);
  gram.add(x.data(), 100);
  gram.add(x.data() + 100 * k, t - 100);
  EXPECT_EQ(gram.tokens(), t);
  const std::vector<double> h = gram.symmetric();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double s = 0.0;
      for (int64_t r = 0; r < t; ++r) s += double(x[r * k + i]) * double(x[r * k + j]);
      EXPECT_NEAR(h[i * k + j], s, 1e-9 * t) << i << ", " << j;
    }
  }
}

TEST(Gptq, FactorIsTheUpperCholeskyOfTheDampedInverse) {
  const int64_t n = 24;
  std::vector<double> h = random_spd(n, 3);
  // Column 5 never saw a nonzero input.
  for (int64_t i = 0; i < n; ++i) h[i * n + 5] = h[5 * n + i] = 0.0;
  const double damp = 0.01;
  auto f = gptq_factor(h, n, damp, 77);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tokens, 77);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(f->dead[i], i == 5 ? 1 : 0);
  // The damped H the factor inverts: the dead diagonal set to 1, then + damp * mean(diag).
  h[5 * n + 5] = 1.0;
  double mean = 0.0;
  for (int64_t i = 0; i < n; ++i) mean += h[i * n + i];
  mean /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) h[i * n + i] += damp * mean;
  // (U^T U) H = I, U upper triangular.
  std::vector<double> hinv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (j < i) EXPECT_EQ(f->u[i * n + j], 0.0);
      for (int64_t k = 0; k < n; ++k) hinv[i * n + j] += f->u[k * n + i] * f->u[k * n + j];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < n; ++k) s += hinv[i * n + k] * h[k * n + j];
      EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-9) << i << ", " << j;
    }
  // An H that is not positive definite (rank 1, no damping) is refused, naming the column.
  auto singular = gptq_factor({4, 2, 2, 1}, 2, 0.0, 1);
  ASSERT_FALSE(singular.ok());
  EXPECT_NE(singular.message().find("not positive definite at column 1"), std::string::npos)
      << singular.message();
  // A non-finite input is refused, naming it.
  h[0] = std::nan("");
  auto nan = gptq_factor(h, n, damp, 1);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.message().find("non-finite"), std::string::npos) << nan.message();
}

// Inputs x = z A (A mixes 64 independent sources into correlated channels, some of them large),
// the weight [N, K] random.
struct Layer {
  static constexpr int64_t N = 16, K = 64, T = 600;
  std::vector<float> w, x;
  Layer() : w(N * K), x(T * K) {
    std::mt19937 rng(4);
    std::normal_distribution<float> d;
    for (float& v : w) v = 0.05f * d(rng);
    std::vector<float> a(K * K);
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) a[i * K + j] = (i == j ? 1.0f : 0.0f) + 0.6f * d(rng);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> z(K);
      for (float& v : z) v = d(rng);
      for (int64_t j = 0; j < K; ++j) {
        float s = 0.0f;
        for (int64_t i = 0; i < K; ++i) s += z[i] * a[i * K + j];
        x[t * K + j] = s * (j % 7 == 0 ? 4.0f : 1.0f);
      }
    }
  }
  GptqFactor factor(double damp = 0.01, bool act_order = false) const {
    InputGram gram(K);
    gram.add(x.data(), T);
    auto f = gptq_factor(gram.symmetric(), K, damp, T, act_order);
    EXPECT_TRUE(f.ok()) << f.message();
    return *f;
  }
  // sum over the inputs of |x (W - Wq)^T|^2.
  double output_error(const std::vector<float>& wq) const {
    double e = 0.0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k) s += double(x[t * K + k]) * (w[n * K + k] - wq[n * K + k]);
        e += s * s;
      }
    return e;
  }
};

const PackedTensor& part(const std::vector<PackedTensor>& parts, const char* suffix) {
  for (const PackedTensor& p : parts)
    if (p.suffix == suffix) return p;
  ADD_FAILURE() << "no " << suffix;
  return parts[0];
}

template <typename T>
std::vector<T> values(const PackedTensor& p) {
  std::vector<T> v(p.bytes.size() / sizeof(T));
  std::memcpy(v.data(), p.bytes.data(), p.bytes.size());
  return v;
}

// The weights a GPTQ v1 pack stands for: (q - 8) * scale (qweight [K/8, N], nibble i of word
// (r, n) = column 8r + i; scales f16 [G, N]).
std::vector<float> dequantize_gptq(const std::vector<PackedTensor>& parts, int64_t N, int64_t K,
                                   int64_t group) {
  const auto words = values<int32_t>(part(parts, ".qweight"));
  const auto scales = values<uint16_t>(part(parts, ".scales"));
  std::vector<float> w(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t word = static_cast<uint32_t>(words[(k / 8) * N + n]);
      const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xF);
      w[n * K + k] = static_cast<float>(q - 8) * f16_to_f32(scales[(k / group) * N + n]);
    }
  return w;
}

// AutoAWQ GEMM: qweight [K, N/8], nibble i of word (k, j) = column 8j + order[i]; qzeros
// [G, N/8] alike; scales f16 [G, N].
std::vector<float> dequantize_awq(const std::vector<PackedTensor>& parts, int64_t N, int64_t K,
                                  int64_t group) {
  static constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const auto words = values<int32_t>(part(parts, ".qweight"));
  const auto zeros = values<int32_t>(part(parts, ".qzeros"));
  const auto scales = values<uint16_t>(part(parts, ".scales"));
  auto nibble = [](int32_t word, int n) {
    for (int i = 0; i < 8; ++i)
      if (kOrder[i] == n % 8)
        return static_cast<int>((static_cast<uint32_t>(word) >> (4 * i)) & 0xF);
    return -1;
  };
  std::vector<float> w(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int q = nibble(words[k * (N / 8) + n / 8], static_cast<int>(n));
      const int z = nibble(zeros[(k / group) * (N / 8) + n / 8], static_cast<int>(n));
      w[n * K + k] = static_cast<float>(q - z) * f16_to_f32(scales[(k / group) * N + n]);
    }
  return w;
}

TEST(Gptq, UncorrelatedInputsGiveRoundToNearestByteForByte) {
  const Layer layer;
  // H = c I: U is diagonal, no error reaches another column.
  const int64_t K = Layer::K;
  std::vector<double> h(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i) h[i * K + i] = 3.0;
  auto f = gptq_factor(h, K, 0.01, 1);
  ASSERT_TRUE(f.ok());
  for (int32_t group : {16, 64}) {
    const auto rtn = pack_gptq(layer.w.data(), Layer::N, K, group);
    const auto gptq = pack_gptq(layer.w.data(), Layer::N, K, group, &*f);
    ASSERT_EQ(rtn.size(), gptq.size());
    for (size_t i = 0; i < rtn.size(); ++i) EXPECT_EQ(rtn[i].bytes, gptq[i].bytes) << rtn[i].suffix;
    const auto rtn_awq = pack_awq(layer.w.data(), Layer::N, K, group);
    const auto gptq_awq = pack_awq(layer.w.data(), Layer::N, K, group, &*f);
    for (size_t i = 0; i < rtn_awq.size(); ++i)
      EXPECT_EQ(rtn_awq[i].bytes, gptq_awq[i].bytes) << rtn_awq[i].suffix;
  }
}

TEST(Gptq, CorrelatedInputsMoveTheOutputLessThanRoundToNearest) {
  const Layer layer;
  const GptqFactor f = layer.factor();
  const int64_t N = Layer::N, K = Layer::K;
  for (int32_t group : {16, 32, 64}) {
    const double rtn =
        layer.output_error(dequantize_gptq(pack_gptq(layer.w.data(), N, K, group), N, K, group));
    const double gptq = layer.output_error(
        dequantize_gptq(pack_gptq(layer.w.data(), N, K, group, &f), N, K, group));
    EXPECT_LT(gptq, 0.7 * rtn) << "gptq layout, group " << group;
    const double rtn_awq =
        layer.output_error(dequantize_awq(pack_awq(layer.w.data(), N, K, group), N, K, group));
    const double gptq_awq =
        layer.output_error(dequantize_awq(pack_awq(layer.w.data(), N, K, group, &f), N, K, group));
    EXPECT_LT(gptq_awq, 0.7 * rtn_awq) << "awq layout, group " << group;
  }
}

// The paper's own form (Frantar et al. 2022, eqs. 2-3, as in OBQ): after column i is rounded, the
// columns after it move by -err * Hinv[i, j] / Hinv[i, i], and column i leaves the inverse by a
// Gaussian elimination step. The Cholesky form must choose the same codes. One group per row, so
// the scale is fitted once on the untouched row (the round-to-nearest pack's scale).
TEST(Gptq, ChoosesTheCodesOfThePapersEliminationForm) {
  const Layer layer;
  const int64_t N = Layer::N, K = Layer::K;
  InputGram gram(K);
  gram.add(layer.x.data(), Layer::T);
  std::vector<double> h = gram.symmetric();
  double mean = 0.0;
  for (int64_t i = 0; i < K; ++i) mean += h[i * K + i];
  for (int64_t i = 0; i < K; ++i) h[i * K + i] += 0.01 * mean / static_cast<double>(K);
  // Hinv by Gauss-Jordan.
  std::vector<double> a = h, inv(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i) inv[i * K + i] = 1.0;
  for (int64_t c = 0; c < K; ++c) {
    const double p = a[c * K + c];
    for (int64_t j = 0; j < K; ++j) a[c * K + j] /= p, inv[c * K + j] /= p;
    for (int64_t r = 0; r < K; ++r) {
      if (r == c) continue;
      const double m = a[r * K + c];
      for (int64_t j = 0; j < K; ++j)
        a[r * K + j] -= m * a[c * K + j], inv[r * K + j] -= m * inv[c * K + j];
    }
  }
  const auto rtn = pack_gptq(layer.w.data(), N, K, K);
  const auto scales = values<uint16_t>(part(rtn, ".scales"));  // [1, N]
  // In natural order, and in act-order (columns by decreasing diag(H), the group's scale fitted
  // beforehand: with one group per row that is the same fit): the elimination form takes the
  // columns in that order against the unpermuted Hinv.
  for (bool act_order : {false, true}) {
    const GptqFactor f = layer.factor(0.01, act_order);
    std::vector<int32_t> order(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) order[i] = static_cast<int32_t>(i);
    if (act_order) {
      ASSERT_EQ(f.order.size(), static_cast<size_t>(K));
      for (int64_t i = 1; i < K; ++i)
        EXPECT_GE(h[f.order[i - 1] * K + f.order[i - 1]], h[f.order[i] * K + f.order[i]]);
      order = f.order;
    }
    const auto words = values<int32_t>(part(pack_gptq(layer.w.data(), N, K, K, &f), ".qweight"));
    int64_t same = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float s = f16_to_f32(scales[n]);
      std::vector<double> w(layer.w.begin() + n * K, layer.w.begin() + (n + 1) * K);
      std::vector<double> hinv = inv;
      for (int32_t i : order) {
        const int q = static_cast<int>(
            std::clamp(std::nearbyint(static_cast<float>(w[i]) / s + 8.0f), 0.0f, 15.0f));
        const double err = (w[i] - double(q - 8) * s) / hinv[i * K + i];
        // Every column not yet quantized moves (the quantized ones' entries are already 0).
        for (int64_t j = 0; j < K; ++j)
          if (j != i) w[j] -= err * hinv[i * K + j];
        // Hinv -= Hinv[:, i] Hinv[i, :] / Hinv[i, i]  (row and column i become 0).
        const std::vector<double> row(hinv.begin() + i * K, hinv.begin() + (i + 1) * K);
        for (int64_t r = 0; r < K; ++r) {
          const double m = hinv[r * K + i] / row[i];
          for (int64_t j = 0; j < K; ++j) hinv[r * K + j] -= m * row[j];
        }
        const uint32_t word = static_cast<uint32_t>(words[(i / 8) * N + n]);
        same += static_cast<int>((word >> (4 * (i % 8))) & 0xF) == q;
      }
    }
    // Rounding ties may fall the other way after the two forms' different summation orders.
    EXPECT_GE(same, N * K * 99 / 100) << same << " of " << N * K << (act_order ? " act-order" : "");
  }
}

TEST(Gptq, AnInputThatIsAlwaysZeroZeroesItsWeights) {
  Layer layer;
  const int64_t N = Layer::N, K = Layer::K;
  for (int64_t t = 0; t < Layer::T; ++t) layer.x[t * K + 9] = 0.0f;
  const GptqFactor f = layer.factor();
  ASSERT_EQ(f.dead[9], 1);
  const auto wq = dequantize_gptq(pack_gptq(layer.w.data(), N, K, 16, &f), N, K, 16);
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(wq[n * K + 9], 0.0f) << "row " << n;
}

}  // namespace
}  // namespace syv
