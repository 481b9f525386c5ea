// CPU backend ops against naive double-precision references written from the math, not the code.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace syv {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

double max_abs_diff(const float* a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

Tensor t(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

std::vector<double> naive_rmsnorm(const std::vector<float>& x, const std::vector<float>& w,
                                  int64_t H, float eps, bool one_plus) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / H; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(x[r * H + i]) * x[r * H + i];
    const double inv = 1.0 / std::sqrt(ss / H + eps);
    for (int64_t i = 0; i < H; ++i)
      y[r * H + i] = x[r * H + i] * inv * (one_plus ? 1.0 + w[i] : w[i]);
  }
  return y;
}

class CpuBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> b = make_cpu_backend();
};

TEST_F(CpuBackendTest, RmsNormPlainAndOnePlus) {
  const int64_t T = 5, H = 48;
  auto x = random_vec(T * H, 1, -3, 3);
  auto w = random_vec(H, 2, 0.5f, 1.5f);
  for (bool one_plus : {false, true}) {
    std::vector<float> out(T * H);
    Tensor to = t(out, {T, H});
    b->rmsnorm(t(x, {T, H}), t(w, {H}), 1e-5f, one_plus ? NormKind::kOnePlus : NormKind::kPlain,
               to);
    EXPECT_LT(max_abs_diff(out.data(), naive_rmsnorm(x, w, H, 1e-5f, one_plus)), 1e-5) << one_plus;
  }
  // bf16 weights give the same result as their f32 widening.
  auto wb = to_bf16(w);
  std::vector<float> w_round(H);
  for (int64_t i = 0; i < H; ++i) w_round[i] = bf16_to_f32(wb[i]);
  std::vector<float> out(T * H);
  Tensor to = t(out, {T, H});
  b->rmsnorm(t(x, {T, H}), Tensor(wb.data(), DType::BF16, {H}), 1e-6f, NormKind::kPlain, to);
  EXPECT_LT(max_abs_diff(out.data(), naive_rmsnorm(x, w_round, H, 1e-6f, false)), 1e-5);
}

TEST_F(CpuBackendTest, AddRmsNormUpdatesResidual) {
  const int64_t T = 3, H = 32;
  auto h = random_vec(T * H, 3), d = random_vec(T * H, 4), w = random_vec(H, 5, 0.5f, 1.5f);
  std::vector<float> sum(T * H);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = h[i] + d[i];
  std::vector<float> out(T * H);
  Tensor th = t(h, {T, H}), to = t(out, {T, H});
  b->add_rmsnorm(th, t(d, {T, H}), t(w, {H}), 1e-6f, NormKind::kPlain, to);
  for (size_t i = 0; i < sum.size(); ++i) ASSERT_FLOAT_EQ(h[i], sum[i]);
  EXPECT_LT(max_abs_diff(out.data(), naive_rmsnorm(sum, w, H, 1e-6f, false)), 1e-5);
}

TEST_F(CpuBackendTest, LinearWithBiasF32AndBf16Weights) {
  const int64_t T = 4, K = 24, N = 10;
  auto x = random_vec(T * K, 6), w = random_vec(N * K, 7), bias = random_vec(N, 8);
  auto wb = to_bf16(w);
  for (bool bf16 : {false, true}) {
    std::vector<double> ref(T * N);
    for (int64_t r = 0; r < T; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double acc = bias[n];
        for (int64_t k = 0; k < K; ++k)
          acc += double(x[r * K + k]) * (bf16 ? bf16_to_f32(wb[n * K + k]) : w[n * K + k]);
        ref[r * N + n] = acc;
      }
    std::vector<float> out(T * N);
    Tensor to = t(out, {T, N});
    Tensor tw = bf16 ? Tensor(wb.data(), DType::BF16, {N, K}) : t(w, {N, K});
    b->linear(t(x, {T, K}), tw, t(bias, {N}), to);
    EXPECT_LT(max_abs_diff(out.data(), ref), 1e-5) << "bf16 " << bf16;
    // T == 1 takes the gemv path.
    std::vector<float> out1(N);
    Tensor to1 = t(out1, {1, N});
    b->linear(t(x, {1, K}), tw, t(bias, {N}), to1);
    EXPECT_LT(max_abs_diff(out1.data(), std::vector<double>(ref.begin(), ref.begin() + N)), 1e-5);
  }
}

TEST_F(CpuBackendTest, SiluMulAndEmbedding) {
  const int64_t T = 3, I = 7;
  auto gu = random_vec(T * 2 * I, 9, -4, 4);
  std::vector<float> out(T * I);
  Tensor to = t(out, {T, I});
  b->silu_mul(t(gu, {T, 2 * I}), to);
  std::vector<double> ref(T * I);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu[r * 2 * I + i];
      ref[r * I + i] = g / (1 + std::exp(-g)) * gu[r * 2 * I + I + i];
    }
  EXPECT_LT(max_abs_diff(out.data(), ref), 1e-5);

  auto table = to_bf16(random_vec(6 * 4, 10));
  std::vector<int32_t> ids = {5, 0, 5};
  std::vector<float> emb(3 * 4);
  Tensor te = t(emb, {3, 4});
  b->embedding(Tensor(table.data(), DType::BF16, {6, 4}), Tensor(ids.data(), DType::I32, {3}), te);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(emb[r * 4 + i], bf16_to_f32(table[ids[r] * 4 + i]));
}

// Two sequences (GQA 3:1, shuffled pages, the second with 30 tokens already cached).
struct AttentionCase {
  static constexpr int64_t Hq = 6, Hk = 2, D = 16, kPage = 8;
  Batch batch;
  std::vector<int32_t> full_len = {13, 35};  // context length of each sequence
  std::vector<int32_t> new_len = {13, 5};    // new tokens (the tail)
  AttentionCase() {
    batch.max_pages_per_seq = 5;
    batch.page_table = {7, 2, -1, -1, -1, /**/ 0, 9, 4, 1, 6};
    batch.seq_starts = {0};
    for (int s = 0; s < 2; ++s) {
      for (int32_t p = full_len[s] - new_len[s]; p < full_len[s]; ++p) {
        batch.token_ids.push_back(1);
        batch.positions.push_back(p);
      }
      batch.seq_starts.push_back(batch.num_tokens());
      batch.context_lens.push_back(full_len[s]);
    }
  }
};

TEST_F(CpuBackendTest, QkNormRopePartialRotaryMatchesNaive) {
  AttentionCase c;
  const int64_t T = c.batch.num_tokens(), Hq = c.Hq, Hk = c.Hk, D = c.D;
  const int32_t rotary = 8;  // half the lanes rotate; the rest pass through after the norm
  BatchMeta meta = b->prepare_batch(c.batch, c.kPage);
  auto q = random_vec(T * Hq * D, 11), k = random_vec(T * Hk * D, 12);
  auto qn = random_vec(D, 13, 0.5f, 1.5f), kn = random_vec(D, 14, 0.5f, 1.5f);
  auto q0 = q, k0 = k;
  Tensor tq = t(q, {T, Hq, D}), tk = t(k, {T, Hk, D});
  RopeParams rope{10000.0, rotary};
  b->qk_norm_rope(tq, tk, t(qn, {D}), t(kn, {D}), 1e-6f, NormKind::kOnePlus, rope, meta);
  auto check = [&](const std::vector<float>& before, const std::vector<float>& after,
                   const std::vector<float>& w, int64_t H) {
    for (int64_t tok = 0; tok < T; ++tok)
      for (int64_t h = 0; h < H; ++h) {
        std::vector<float> head(before.begin() + (tok * H + h) * D,
                                before.begin() + (tok * H + h + 1) * D);
        std::vector<double> x = naive_rmsnorm(head, w, D, 1e-6f, true);
        std::vector<double> y = x;
        for (int i = 0; i < rotary / 2; ++i) {
          const double angle = c.batch.positions[tok] * std::pow(10000.0, -2.0 * i / rotary);
          y[i] = x[i] * std::cos(angle) - x[i + rotary / 2] * std::sin(angle);
          y[i + rotary / 2] = x[i + rotary / 2] * std::cos(angle) + x[i] * std::sin(angle);
        }
        EXPECT_LT(max_abs_diff(after.data() + (tok * H + h) * D, y), 2e-5)
            << "token " << tok << " head " << h;
      }
  };
  check(q0, q, qn, Hq);
  check(k0, k, kn, Hk);
}

TEST_F(CpuBackendTest, PagedAttentionMatchesDenseCausalAttention) {
  AttentionCase c;
  const int64_t Hq = c.Hq, Hk = c.Hk, D = c.D, P = c.kPage, num_pages = 10;
  // Dense K/V of every position of both sequences, written into the cache through their pages.
  std::vector<std::vector<float>> K(2), V(2);
  std::vector<float> kc(num_pages * P * Hk * D, NAN),
      vc(num_pages * P * Hk * D, NAN);  // unwritten = NaN
  for (int s = 0; s < 2; ++s) {
    K[s] = random_vec(c.full_len[s] * Hk * D, 20 + s);
    V[s] = random_vec(c.full_len[s] * Hk * D, 30 + s);
    for (int32_t p = 0; p < c.full_len[s]; ++p) {
      const int64_t slot = c.batch.page_table[s * 5 + p / P] * P + p % P;
      std::copy_n(K[s].begin() + p * Hk * D, Hk * D, kc.begin() + slot * Hk * D);
      std::copy_n(V[s].begin() + p * Hk * D, Hk * D, vc.begin() + slot * Hk * D);
    }
  }
  BatchMeta meta = b->prepare_batch(c.batch, static_cast<int32_t>(P));
  const int64_t T = c.batch.num_tokens();
  auto q = random_vec(T * Hq * D, 40, -2, 2);
  std::vector<float> out(T * Hq * D);
  Tensor to = t(out, {T, Hq, D});
  const float scale = 1.0f / std::sqrt(float(D));
  b->paged_attention(t(q, {T, Hq, D}), t(kc, {num_pages, P, Hk, D}), t(vc, {num_pages, P, Hk, D}),
                     scale, meta, to);

  for (int64_t tok = 0; tok < T; ++tok) {
    const int s = tok < c.batch.seq_starts[1] ? 0 : 1;
    const int32_t pos = c.batch.positions[tok];
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / (Hq / Hk);
      std::vector<double> w(pos + 1);
      double mx = -1e300, sum = 0;
      for (int32_t j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += double(q[(tok * Hq + h) * D + d]) * K[s][(j * Hk + kh) * D + d];
        w[j] = dot * scale;
        mx = std::max(mx, w[j]);
      }
      for (auto& x : w) sum += (x = std::exp(x - mx));
      std::vector<double> ref(D, 0.0);
      for (int32_t j = 0; j <= pos; ++j)
        for (int64_t d = 0; d < D; ++d) ref[d] += w[j] / sum * V[s][(j * Hk + kh) * D + d];
      EXPECT_LT(max_abs_diff(out.data() + (tok * Hq + h) * D, ref), 1e-5)
          << "token " << tok << " head " << h;
    }
  }
}

TEST_F(CpuBackendTest, KvWriteUsesSlotMapping) {
  AttentionCase c;
  const int64_t Hk = c.Hk, D = c.D, P = c.kPage, num_pages = 10;
  const int64_t T = c.batch.num_tokens();
  BatchMeta meta = b->prepare_batch(c.batch, static_cast<int32_t>(P));
  auto k = random_vec(T * Hk * D, 50), v = random_vec(T * Hk * D, 51);
  std::vector<float> kc(num_pages * P * Hk * D, 0), vc(num_pages * P * Hk * D, 0);
  Tensor tkc = t(kc, {num_pages, P, Hk, D}), tvc = t(vc, {num_pages, P, Hk, D});
  b->kv_write(t(k, {T, Hk, D}), t(v, {T, Hk, D}), tkc, tvc, meta);
  // Token 13 is sequence 1 at position 30: page index 3 -> page 1, offset 6.
  const int64_t slot = 1 * P + 6;
  for (int64_t i = 0; i < Hk * D; ++i) {
    EXPECT_EQ(kc[slot * Hk * D + i], k[13 * Hk * D + i]);
    EXPECT_EQ(vc[slot * Hk * D + i], v[13 * Hk * D + i]);
  }
}

}  // namespace
}  // namespace syv
