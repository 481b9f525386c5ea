// The CPU hybrid ops (backend/cpu/cpu_hybrid_ops.h) against independent formulations:
//  * causal conv1d: whole prompt == token by token (state carried) == a zero-padded direct conv;
//  * gated delta rule: the recurrent op == the chunked (64) formula transformers uses for prefill,
//    computed here in double; prefill split in pieces == in one go; packed sequences independent;
//  * gated rmsnorm, sigmoid_mul, MoE routing and experts against direct per-element loops.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_hybrid_ops.h"

namespace syv {
namespace {

Tensor no_saves;  // the ops' state-save target when a batch saves nothing

Tensor view(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}
Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::I32, dims);
}

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A BatchMeta over host vectors (only the fields the hybrid ops read).
struct Meta {
  std::vector<int32_t> starts, slots;
  BatchMeta meta;
  Meta(std::vector<int32_t> s, std::vector<int32_t> sl)
      : starts(std::move(s)), slots(std::move(sl)) {
    meta.seq_starts = view(starts, {static_cast<int64_t>(starts.size())});
    meta.state_slots = view(slots, {static_cast<int64_t>(slots.size())});
  }
};

double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

double silu(double x) {
  return x / (1 + std::exp(-x));
}

// ---- causal conv1d ------------------------------------------------------------------------------

TEST(HybridOps, Conv1dPrefillEqualsDecodeEqualsDirect) {
  std::mt19937 rng(1);
  const int64_t T = 37, C = 12, K = 4;
  auto x = randn(T * C, rng), w = randn(C * K, rng);
  // Direct: zero-padded depthwise conv, out[t] = sum_j w[j] x[t - (K-1) + j], then SiLU.
  std::vector<double> ref(T * C);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        if (src >= 0) acc += double(w[c * K + j]) * x[src * C + c];
      }
      ref[t * C + c] = silu(acc);
    }
  Tensor wt = view(w, {C, K});
  // Whole prompt, slot 1 of 2.
  std::vector<float> state(2 * (K - 1) * C, 0.f), out(T * C);
  Tensor st = view(state, {2, K - 1, C});
  Meta m({0, int32_t(T)}, {1});
  Tensor xt = view(x, {T, C}), ot = view(out, {T, C});
  cpu::causal_conv1d_silu(xt, wt, st, no_saves, m.meta, ot);
  EXPECT_LT(max_rel(out, ref), 1e-6);
  for (int64_t i = 0; i < (K - 1) * C; ++i) EXPECT_EQ(state[i], 0.f) << "slot 0 untouched";
  // Final state = the last K-1 inputs, oldest first.
  for (int64_t j = 0; j < K - 1; ++j)
    for (int64_t c = 0; c < C; ++c)
      EXPECT_EQ(state[(K - 1) * C + j * C + c], x[(T - (K - 1) + j) * C + c]);
  // Token by token into slot 0 (and a first piece of 5 tokens).
  std::vector<float> step_out(T * C);
  Meta first({0, 5}, {0});
  Tensor x5 = xt.rows(0, 5), o5 = view(step_out, {T, C}).rows(0, 5);
  cpu::causal_conv1d_silu(x5, wt, st, no_saves, first.meta, o5);
  for (int64_t t = 5; t < T; ++t) {
    Meta one({0, 1}, {0});
    Tensor xr = xt.rows(t, 1), orow = view(step_out, {T, C}).rows(t, 1);
    cpu::causal_conv1d_silu(xr, wt, st, no_saves, one.meta, orow);
  }
  EXPECT_EQ(step_out, out);
  for (int64_t i = 0; i < (K - 1) * C; ++i) EXPECT_EQ(state[i], state[(K - 1) * C + i]);
}

TEST(HybridOps, Conv1dPackedSequencesAreIndependent) {
  std::mt19937 rng(2);
  const int64_t C = 6, K = 4;
  auto x = randn(20 * C, rng), w = randn(C * K, rng);
  Tensor wt = view(w, {C, K});
  std::vector<float> s_packed(2 * (K - 1) * C, 0.f), s_alone(2 * (K - 1) * C, 0.f);
  std::vector<float> o_packed(20 * C), o_alone(20 * C);
  Tensor sp = view(s_packed, {2, K - 1, C}), sa = view(s_alone, {2, K - 1, C});
  Tensor xt = view(x, {20, C});
  Meta packed({0, 8, 20}, {1, 0});
  Tensor op = view(o_packed, {20, C});
  cpu::causal_conv1d_silu(xt, wt, sp, no_saves, packed.meta, op);
  Meta a({0, 8}, {1}), b({0, 12}, {0});
  Tensor xa = xt.rows(0, 8), xb = xt.rows(8, 12);
  Tensor oa = view(o_alone, {20, C}).rows(0, 8), ob = view(o_alone, {20, C}).rows(8, 12);
  cpu::causal_conv1d_silu(xa, wt, sa, no_saves, a.meta, oa);
  cpu::causal_conv1d_silu(xb, wt, sa, no_saves, b.meta, ob);
  EXPECT_EQ(o_packed, o_alone);
  EXPECT_EQ(s_packed, s_alone);
}

// ---- gated delta rule ---------------------------------------------------------------------------

struct GdnCase {
  GdnShape shape;
  int64_t T;
  std::vector<float> qkv, ba, a_log, dt_bias;
};

GdnCase make_case(int hk, int hv, int dk, int dv, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  GdnCase c;
  c.shape = {hk, hv, dk, dv};
  c.T = T;
  c.qkv = randn(T * c.shape.conv_dim(), rng);
  c.ba = randn(T * 2 * hv, rng);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  for (int h = 0; h < hv; ++h) c.a_log.push_back(std::log(u(rng)));
  c.dt_bias = randn(hv, rng, 0.5f);
  return c;
}

// The chunked form of transformers' torch_chunk_gated_delta_rule, in double, one sequence from a
// zero state. Returns out [T, Hv*dv].
std::vector<double> chunked_reference(const GdnCase& c, int64_t chunk = 64) {
  const int64_t Hk = c.shape.num_k_heads, Hv = c.shape.num_v_heads;
  const int64_t dk = c.shape.k_head_dim, dv = c.shape.v_head_dim, T = c.T;
  const int64_t W = c.shape.conv_dim(), key_dim = Hk * dk, r = Hv / Hk;
  const int64_t Tp = (T + chunk - 1) / chunk * chunk;
  std::vector<double> out(T * Hv * dv, 0.0);
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t kh = h / r;
    using Mat = std::vector<std::vector<double>>;
    Mat q(Tp, std::vector<double>(dk, 0)), k = q, v(Tp, std::vector<double>(dv, 0));
    std::vector<double> beta(Tp, 0), g(Tp, 0);
    for (int64_t t = 0; t < T; ++t) {
      const float* row = &c.qkv[t * W];
      double qq = 0, kk = 0;
      for (int64_t d = 0; d < dk; ++d) {
        qq += double(row[kh * dk + d]) * row[kh * dk + d];
        kk += double(row[key_dim + kh * dk + d]) * row[key_dim + kh * dk + d];
      }
      for (int64_t d = 0; d < dk; ++d) {
        q[t][d] = row[kh * dk + d] / std::sqrt(qq + 1e-6) / std::sqrt(double(dk));
        k[t][d] = row[key_dim + kh * dk + d] / std::sqrt(kk + 1e-6);
      }
      for (int64_t d = 0; d < dv; ++d) v[t][d] = row[2 * key_dim + h * dv + d];
      beta[t] = 1 / (1 + std::exp(-double(c.ba[t * 2 * Hv + h])));
      const double a = double(c.ba[t * 2 * Hv + Hv + h]) + c.dt_bias[h];
      g[t] = -std::exp(double(c.a_log[h])) * (a > 20 ? a : std::log1p(std::exp(a)));
    }
    Mat S(dk, std::vector<double>(dv, 0));
    for (int64_t c0 = 0; c0 < Tp; c0 += chunk) {
      std::vector<double> gc(chunk);
      double acc = 0;
      for (int64_t i = 0; i < chunk; ++i) gc[i] = (acc += g[c0 + i]);
      auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
        double s = 0;
        for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
        return s;
      };
      // attn = -(k_beta k^T * decay) strictly lower; then the forward-substitution inverse.
      Mat A(chunk, std::vector<double>(chunk, 0));
      for (int64_t i = 0; i < chunk; ++i)
        for (int64_t j = 0; j < i; ++j)
          A[i][j] = -beta[c0 + i] * dot(k[c0 + i], k[c0 + j]) * std::exp(gc[i] - gc[j]);
      for (int64_t i = 1; i < chunk; ++i) {
        std::vector<double> row(A[i].begin(), A[i].begin() + i);
        Mat sub(i, std::vector<double>(i));
        for (int64_t m = 0; m < i; ++m)
          for (int64_t j = 0; j < i; ++j) sub[m][j] = A[m][j];
        for (int64_t j = 0; j < i; ++j) {
          double s = row[j];
          for (int64_t m = 0; m < i; ++m) s += row[m] * sub[m][j];
          A[i][j] = s;
        }
      }
      for (int64_t i = 0; i < chunk; ++i) A[i][i] += 1;
      Mat value(chunk, std::vector<double>(dv, 0)), kcum(chunk, std::vector<double>(dk, 0));
      for (int64_t i = 0; i < chunk; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < dv; ++d) value[i][d] += A[i][j] * v[c0 + j][d] * beta[c0 + j];
          for (int64_t d = 0; d < dk; ++d)
            kcum[i][d] += A[i][j] * k[c0 + j][d] * beta[c0 + j] * std::exp(gc[j]);
        }
      Mat vnew(chunk, std::vector<double>(dv, 0));
      for (int64_t i = 0; i < chunk; ++i)
        for (int64_t d = 0; d < dv; ++d) {
          double vp = 0;
          for (int64_t a = 0; a < dk; ++a) vp += kcum[i][a] * S[a][d];
          vnew[i][d] = value[i][d] - vp;
        }
      for (int64_t i = 0; i < chunk && c0 + i < T; ++i)
        for (int64_t d = 0; d < dv; ++d) {
          double o = 0;
          for (int64_t a = 0; a < dk; ++a) o += q[c0 + i][a] * std::exp(gc[i]) * S[a][d];
          for (int64_t j = 0; j <= i; ++j)
            o += dot(q[c0 + i], k[c0 + j]) * std::exp(gc[i] - gc[j]) * vnew[j][d];
          out[(c0 + i) * Hv * dv + h * dv + d] = o;
        }
      const double glast = gc[chunk - 1];
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t d = 0; d < dv; ++d) {
          double s = S[a][d] * std::exp(glast);
          for (int64_t j = 0; j < chunk; ++j)
            s += k[c0 + j][a] * std::exp(glast - gc[j]) * vnew[j][d];
          S[a][d] = s;
        }
    }
  }
  return out;
}

void run_gdn(GdnCase& c, std::vector<float>& state, int64_t num_slots, Meta& m, int64_t begin,
             int64_t count, std::vector<float>& out) {
  const auto& s = c.shape;
  Tensor qkv = view(c.qkv, {c.T, s.conv_dim()}).rows(begin, count);
  Tensor ba = view(c.ba, {c.T, 2 * s.num_v_heads}).rows(begin, count);
  Tensor al = view(c.a_log, {s.num_v_heads}), dt = view(c.dt_bias, {s.num_v_heads});
  Tensor st = view(state, {num_slots, s.num_v_heads, s.k_head_dim, s.v_head_dim});
  Tensor o = view(out, {c.T, s.value_dim()}).rows(begin, count);
  cpu::gated_delta_rule(qkv, ba, al, dt, s, st, no_saves, m.meta, o);
}

class GatedDeltaRule : public ::testing::TestWithParam<std::tuple<int, int, int, int, int>> {};

TEST_P(GatedDeltaRule, RecurrentEqualsChunkedAndSplitsAgree) {
  auto [hk, hv, dk, dv, T] = GetParam();
  GdnCase c = make_case(hk, hv, dk, dv, T, 7 + hk + hv + T);
  const std::vector<double> ref = chunked_reference(c);
  const size_t state_size = size_t(hv) * dk * dv;
  // One call over the whole sequence.
  std::vector<float> state(state_size, 0.f), out(T * hv * dv);
  Meta whole({0, T}, {0});
  run_gdn(c, state, 1, whole, 0, T, out);
  EXPECT_LT(max_rel(out, ref), 2e-5) << "recurrent vs chunked";
  // The same sequence in three pieces (a chunk boundary inside), state carried by the slot.
  std::vector<float> state2(2 * state_size, 0.f), out2(T * hv * dv);
  const int64_t cuts[] = {0, 5, 70, T};
  for (int p = 0; p < 3; ++p) {
    Meta piece({0, int32_t(cuts[p + 1] - cuts[p])}, {1});
    run_gdn(c, state2, 2, piece, cuts[p], cuts[p + 1] - cuts[p], out2);
  }
  EXPECT_EQ(out2, out);
  EXPECT_EQ(std::vector<float>(state2.begin() + state_size, state2.end()), state);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedDeltaRule,
                         ::testing::Values(std::make_tuple(2, 2, 16, 16, 100),
                                           std::make_tuple(2, 4, 8, 12, 80),
                                           std::make_tuple(1, 3, 8, 8, 130)));

TEST(HybridOps, GatedDeltaRulePackedSequencesAreIndependent) {
  GdnCase c = make_case(1, 2, 8, 8, 30, 11);
  const size_t ss = 2 * 8 * 8;
  std::vector<float> s_packed(3 * ss, 0.f), s_alone(3 * ss, 0.f);
  std::vector<float> o_packed(30 * 16), o_alone(30 * 16);
  Meta packed({0, 10, 30}, {2, 0});
  run_gdn(c, s_packed, 3, packed, 0, 30, o_packed);
  Meta a({0, 10}, {2}), b({0, 20}, {0});
  run_gdn(c, s_alone, 3, a, 0, 10, o_alone);
  run_gdn(c, s_alone, 3, b, 10, 20, o_alone);
  EXPECT_EQ(o_packed, o_alone);
  EXPECT_EQ(s_packed, s_alone);
}

// Slot -1 marks a padding sequence (a CUDA graph's bucket filler, Batch::state_slots): the
// recurrent ops leave every state alone for it, zero its outputs, and the real sequences beside it
// get what they get alone.
TEST(HybridOps, PaddingSequencesTouchNoStateAndZeroTheirRows) {
  GdnCase c = make_case(1, 2, 8, 8, 12, 13);
  const size_t ss = 2 * 8 * 8;
  std::vector<float> s_padded(2 * ss, 0.5f), s_alone(2 * ss, 0.5f);
  std::vector<float> o_padded(12 * 16, 7.f), o_alone(12 * 16, 7.f);
  Meta padded({0, 5, 12}, {1, -1});
  run_gdn(c, s_padded, 2, padded, 0, 12, o_padded);
  Meta a({0, 5}, {1});
  run_gdn(c, s_alone, 2, a, 0, 5, o_alone);
  EXPECT_EQ(s_padded, s_alone);
  EXPECT_TRUE(std::equal(o_alone.begin(), o_alone.begin() + 5 * 16, o_padded.begin()));
  EXPECT_TRUE(
      std::all_of(o_padded.begin() + 5 * 16, o_padded.end(), [](float v) { return v == 0; }));

  std::mt19937 rng(5);
  const int64_t C = 6, K = 4;
  auto x = randn(12 * C, rng), w = randn(C * K, rng);
  std::vector<float> w_padded(2 * (K - 1) * C, 0.25f), w_alone = w_padded;
  std::vector<float> y_padded(12 * C, 7.f), y_alone(5 * C, 7.f);
  Tensor wt = view(w, {C, K}), xt = view(x, {12, C});
  Tensor wp = view(w_padded, {2, K - 1, C}), wa = view(w_alone, {2, K - 1, C});
  Tensor yp = view(y_padded, {12, C}), ya = view(y_alone, {5, C});
  cpu::causal_conv1d_silu(xt, wt, wp, no_saves, padded.meta, yp);
  Tensor xa = xt.rows(0, 5);
  cpu::causal_conv1d_silu(xa, wt, wa, no_saves, a.meta, ya);
  EXPECT_EQ(w_padded, w_alone);
  EXPECT_TRUE(std::equal(y_alone.begin(), y_alone.end(), y_padded.begin()));
  EXPECT_TRUE(
      std::all_of(y_padded.begin() + 5 * C, y_padded.end(), [](float v) { return v == 0; }));
}

// ---- norms, gates, MoE --------------------------------------------------------------------------

// In-pass state saves (Batch::state_save_*): checkpoint dests[i] gets exactly the conv window and
// delta-rule state a run over only the first after[i] tokens leaves in its slot.
TEST(HybridOps, StateSavesEqualTheStateAfterThatManyTokens) {
  const int64_t T = 40, K = 4;
  GdnCase c = make_case(2, 4, 16, 12, T, 99);
  const auto& g = c.shape;
  const int64_t C = g.conv_dim(), state_size = g.num_v_heads * g.k_head_dim * g.v_head_dim;
  std::mt19937 rng(5);
  auto w = randn(C * K, rng);
  Tensor wt = view(w, {C, K});
  Batch host;
  host.state_save_starts = {0, 3};
  host.state_save_after = {5, 20, 40};
  host.state_save_dests = {2, 0, 1};
  std::vector<int32_t> packed = {0, 3, 5, 20, 40, 2, 0, 1};
  Meta m({0, int32_t(T)}, {0});
  m.meta.host = &host;
  m.meta.state_saves = view(packed, {8});
  m.meta.num_state_saves = 3;
  // Whole sequence with the saves.
  std::vector<float> conv_state((K - 1) * C, 0.f), conv_ckpt(3 * (K - 1) * C, 0.f);
  std::vector<float> mixed(T * C);
  Tensor cs = view(conv_state, {1, K - 1, C}), cc = view(conv_ckpt, {3, K - 1, C});
  Tensor xt = view(c.qkv, {T, C}), mt = view(mixed, {T, C});
  cpu::causal_conv1d_silu(xt, wt, cs, cc, m.meta, mt);
  std::vector<float> state(state_size, 0.f), ckpt(3 * state_size, 0.f), out(T * g.value_dim());
  Tensor st = view(state, {1, g.num_v_heads, g.k_head_dim, g.v_head_dim});
  Tensor ck = view(ckpt, {3, g.num_v_heads, g.k_head_dim, g.v_head_dim});
  Tensor ba = view(c.ba, {T, 2 * g.num_v_heads}), al = view(c.a_log, {g.num_v_heads});
  Tensor dt = view(c.dt_bias, {g.num_v_heads}), ot = view(out, {T, g.value_dim()});
  cpu::gated_delta_rule(view(mixed, {T, C}), ba, al, dt, g, st, ck, m.meta, ot);
  for (size_t i = 0; i < 3; ++i) {
    const int64_t n = host.state_save_after[i], dest = host.state_save_dests[i];
    Meta part({0, int32_t(n)}, {0});
    std::vector<float> cs1((K - 1) * C, 0.f), mixed1(n * C);
    Tensor cs1t = view(cs1, {1, K - 1, C}), mixed1t = view(mixed1, {n, C});
    cpu::causal_conv1d_silu(xt.rows(0, n), wt, cs1t, no_saves, part.meta, mixed1t);
    const float* saved_window = conv_ckpt.data() + dest * (K - 1) * C;
    EXPECT_EQ(cs1, std::vector<float>(saved_window, saved_window + (K - 1) * C))
        << "window after " << n;
    std::vector<float> s1(state_size, 0.f), o1(n * g.value_dim());
    Tensor s1t = view(s1, {1, g.num_v_heads, g.k_head_dim, g.v_head_dim});
    Tensor o1t = view(o1, {n, g.value_dim()});
    cpu::gated_delta_rule(mixed1t, ba.rows(0, n), al, dt, g, s1t, no_saves, part.meta, o1t);
    const float* saved = ckpt.data() + dest * state_size;
    EXPECT_EQ(s1, std::vector<float>(saved, saved + state_size)) << "state after " << n;
  }
  EXPECT_EQ(state, std::vector<float>(ckpt.data() + 1 * state_size, ckpt.data() + 2 * state_size))
      << "the save after the last token is the slot's final state";
}

TEST(HybridOps, GatedRmsNormUsesPlainWeightAndSiluGate) {
  std::mt19937 rng(3);
  const int64_t N = 5, D = 8;
  auto x = randn(N * D, rng), z = randn(N * D, rng), w = randn(D, rng);
  std::vector<float> out(N * D);
  Tensor xt = view(x, {N, D}), zt = view(z, {N, D}), wt = view(w, {D}), ot = view(out, {N, D});
  cpu::gated_rmsnorm(xt, zt, wt, 1e-6f, ot);
  std::vector<double> ref(N * D);
  for (int64_t r = 0; r < N; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(x[r * D + d]) * x[r * D + d];
    const double inv = 1 / std::sqrt(ss / D + 1e-6);
    for (int64_t d = 0; d < D; ++d) ref[r * D + d] = x[r * D + d] * inv * w[d] * silu(z[r * D + d]);
  }
  EXPECT_LT(max_rel(out, ref), 1e-6);
}

TEST(HybridOps, SigmoidMulFullAndBroadcast) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, g = {0, 1, -1, 2, 0.5f, -3}, g1 = {0, 2}, out(6);
  Tensor xt = view(x, {2, 3}), gt = view(g, {2, 3}), g1t = view(g1, {2, 1}), ot = view(out, {2, 3});
  cpu::sigmoid_mul(xt, gt, ot);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[i], x[i] / (1 + std::exp(-g[i])));
  cpu::sigmoid_mul(xt, g1t, ot);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[i], x[i] / (1 + std::exp(-g1[i / 3])));
}

TEST(HybridOps, MoeTopkSoftmaxTopkRenormalise) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f,    // token 0
                               3.0f, 3.0f, 0.0f,  -2.0f};  // token 1: a tie, lower index first
  std::vector<int32_t> ids(4);
  std::vector<float> w(4);
  Tensor lt = view(logits, {2, 4}), it = view(ids, {2, 2}), wt = view(w, {2, 2});
  cpu::moe_topk(lt, 2, false, it, wt);
  double sum0 = 0;
  for (int e = 0; e < 4; ++e) sum0 += std::exp(logits[e]);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 0, 1}));
  EXPECT_NEAR(w[0], std::exp(2.0) / sum0, 1e-6);
  EXPECT_NEAR(w[1], std::exp(1.5) / sum0, 1e-6);
  cpu::moe_topk(lt, 2, true, it, wt);
  EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.5)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  EXPECT_NEAR(w[2], 0.5, 1e-6);
}

TEST(HybridOps, MoeExpertsMatchPerTokenLoop) {
  std::mt19937 rng(4);
  const int64_t T = 9, H = 16, E = 5, I = 6, k = 2;
  auto x = randn(T * H, rng), gu = randn(E * 2 * I * H, rng, 0.3f),
       dn = randn(E * H * I, rng, 0.3f);
  std::vector<float> logits = randn(T * E, rng);
  std::vector<int32_t> ids(T * k);
  std::vector<float> w(T * k), out(T * H);
  Tensor lt = view(logits, {T, E}), it = view(ids, {T, k}), wt = view(w, {T, k});
  cpu::moe_topk(lt, k, true, it, wt);
  Tensor xt = view(x, {T, H}), gut = view(gu, {E, 2 * I, H}), dt = view(dn, {E, H, I});
  Tensor ot = view(out, {T, H});
  cpu::moe_experts(xt, it, wt, gut, dt, ot);
  std::vector<double> ref(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j];
      std::vector<double> act(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < H; ++h) {
          g += double(gu[(e * 2 * I + i) * H + h]) * x[t * H + h];
          u += double(gu[(e * 2 * I + I + i) * H + h]) * x[t * H + h];
        }
        act[i] = silu(g) * u;
      }
      for (int64_t h = 0; h < H; ++h) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += double(dn[(e * H + h) * I + i]) * act[i];
        ref[t * H + h] += w[t * k + j] * y;
      }
    }
  EXPECT_LT(max_rel(out, ref), 1e-5);
}

}  // namespace
}  // namespace syv
