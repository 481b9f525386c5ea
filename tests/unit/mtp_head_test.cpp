// The MTP head (model/mtp_head.h) against an independent float64 computation of WAVE2-SPECS B.2
// written from the formula (not from syv's blocks), on a Qwen3.5 fixture with a random head; and
// the load-time refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/log.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "unit/mtp_fixture.h"

namespace syv::testing {
namespace {

using Vec = std::vector<double>;

struct Tensors {
  WeightStore store;
  std::vector<float> get(const std::string& name) const {
    const TensorInfo* t = store.find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<float> out(static_cast<size_t>(t->numel()));
    convert_to_f32(t->dtype, t->data, out.data(), out.size());
    return out;
  }
};

// y = W x for W [N, K].
Vec matvec(const std::vector<float>& w, int64_t n, int64_t k, const Vec& x, int64_t x0 = 0) {
  Vec y(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) y[r] += static_cast<double>(w[r * k + c]) * x[x0 + c];
  return y;
}

// Zero-centred RMSNorm x̂ (1 + w) over groups of w.size().
Vec rms1p(Vec x, const std::vector<float>& w, double eps) {
  const size_t d = w.size();
  for (size_t g = 0; g < x.size(); g += d) {
    double ss = 0;
    for (size_t i = 0; i < d; ++i) ss += x[g + i] * x[g + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (size_t i = 0; i < d; ++i) x[g + i] = x[g + i] * inv * (1.0 + w[i]);
  }
  return x;
}

// The head of B.2, one sequence's rows in order: row i is (token, hidden, position).
class ReferenceHead {
 public:
  ReferenceHead(const ModelConfig& c, const Tensors& t) : c_(c) {
    const std::string p = "mtp.layers.0.";
    embed_ = t.get("model.embed_tokens.weight");
    lm_head_ = c.tie_word_embeddings ? embed_ : t.get("lm_head.weight");
    fc_ = t.get("mtp.fc.weight");
    ne_ = t.get("mtp.pre_fc_norm_embedding.weight");
    nh_ = t.get("mtp.pre_fc_norm_hidden.weight");
    norm_ = t.get("mtp.norm.weight");
    in_ = t.get(p + "input_layernorm.weight");
    post_ = t.get(p + "post_attention_layernorm.weight");
    q_ = t.get(p + "self_attn.q_proj.weight");
    k_ = t.get(p + "self_attn.k_proj.weight");
    v_ = t.get(p + "self_attn.v_proj.weight");
    o_ = t.get(p + "self_attn.o_proj.weight");
    qn_ = t.get(p + "self_attn.q_norm.weight");
    kn_ = t.get(p + "self_attn.k_norm.weight");
    gate_ = t.get(p + "mlp.gate_proj.weight");
    up_ = t.get(p + "mlp.up_proj.weight");
    down_ = t.get(p + "mlp.down_proj.weight");
  }

  // Logits of the next row; returns `out` (post mtp.norm) through *out.
  Vec step(int32_t token, const Vec& hidden, int32_t pos, Vec* out) {
    const int64_t H = c_.hidden_size, Hq = c_.num_attention_heads, Hk = c_.num_key_value_heads;
    const int64_t D = c_.head_dim, I = c_.intermediate_size, V = c_.vocab_size;
    const double eps = c_.rms_norm_eps;
    Vec e(embed_.begin() + token * H, embed_.begin() + (token + 1) * H);
    e = rms1p(e, ne_, eps);
    const Vec h = rms1p(hidden, nh_, eps);
    Vec cat = e;
    cat.insert(cat.end(), h.begin(), h.end());  // embedding first
    const Vec u = matvec(fc_, H, 2 * H, cat);
    const Vec x = rms1p(u, in_, eps);
    const Vec qg = matvec(q_, 2 * Hq * D, H, x);
    Vec q(static_cast<size_t>(Hq * D)), gate(static_cast<size_t>(Hq * D));
    for (int64_t hd = 0; hd < Hq; ++hd)
      for (int64_t i = 0; i < D; ++i) {
        q[hd * D + i] = qg[hd * 2 * D + i];
        gate[hd * D + i] = qg[hd * 2 * D + D + i];
      }
    q = rope(rms1p(q, qn_, eps), pos);
    keys_.push_back(rope(rms1p(matvec(k_, Hk * D, H, x), kn_, eps), pos));
    values_.push_back(matvec(v_, Hk * D, H, x));
    Vec attn(static_cast<size_t>(Hq * D), 0.0);
    for (int64_t hd = 0; hd < Hq; ++hd) {
      const int64_t kv = hd / (Hq / Hk);
      std::vector<double> s(keys_.size());
      double mx = -1e300;
      for (size_t j = 0; j < keys_.size(); ++j) {
        double dot = 0;
        for (int64_t i = 0; i < D; ++i) dot += q[hd * D + i] * keys_[j][kv * D + i];
        s[j] = dot / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (size_t j = 0; j < keys_.size(); ++j)
        for (int64_t i = 0; i < D; ++i) attn[hd * D + i] += s[j] / sum * values_[j][kv * D + i];
    }
    for (size_t i = 0; i < attn.size(); ++i) attn[i] *= 1.0 / (1.0 + std::exp(-gate[i]));
    Vec h1 = matvec(o_, H, Hq * D, attn);
    for (int64_t i = 0; i < H; ++i) h1[i] += u[i];
    const Vec x2 = rms1p(h1, post_, eps);
    const Vec g = matvec(gate_, I, H, x2), up = matvec(up_, I, H, x2);
    Vec act(static_cast<size_t>(I));
    for (int64_t i = 0; i < I; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
    const Vec m = matvec(down_, H, I, act);
    for (int64_t i = 0; i < H; ++i) h1[i] += m[i];
    *out = rms1p(h1, norm_, eps);
    return matvec(lm_head_, V, H, *out);
  }

 private:
  // Partial rotate-half RoPE on the first rotary_dim lanes of every head.
  Vec rope(Vec x, int32_t pos) const {
    const int64_t D = c_.head_dim;
    const int64_t rot = static_cast<int64_t>(D * c_.partial_rotary_factor), half = rot / 2;
    for (size_t h0 = 0; h0 < x.size(); h0 += static_cast<size_t>(D)) {
      for (int64_t i = 0; i < half; ++i) {
        const double inv = std::pow(c_.rope_theta, -2.0 * static_cast<double>(i) / rot);
        const double a = x[h0 + i], b = x[h0 + i + half], cs = std::cos(pos * inv),
                     sn = std::sin(pos * inv);
        x[h0 + i] = a * cs - b * sn;
        x[h0 + i + half] = b * cs + a * sn;
      }
    }
    return x;
  }

  ModelConfig c_;
  std::vector<float> embed_, lm_head_, fc_, ne_, nh_, norm_, in_, post_, q_, k_, v_, o_, qn_, kn_,
      gate_, up_, down_;
  std::vector<Vec> keys_, values_;
};

std::vector<float> download(Model& m, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  m.backend().download(host.data(), t.data, host.size() * sizeof(float));
  return host;
}

void expect_rows_close(const std::vector<float>& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    err = std::max(err, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(err, 1e-4 * scale) << what << ": max |syv - reference| " << err << " of " << scale;
}

TEST(MtpHead, ForwardMatchesTheFormulaStepByStep) {
  set_log_level(LogLevel::WARN);
  const std::string dir = make_mtp_fixture("q35_r1_lllf", 7);
  auto backend = make_cpu_backend();
  LoadOptions lo;
  lo.mtp = true;
  auto model = load_model(dir, *backend, lo);
  ASSERT_TRUE(model.ok()) << model.message();
  Model& m = **model;
  ASSERT_TRUE(m.has_mtp());
  const ModelConfig& c = m.config();
  const CacheSpec spec = m.cache_spec();
  ASSERT_EQ(spec.layer_kinds.size(), static_cast<size_t>(c.num_hidden_layers) + 1);
  EXPECT_EQ(spec.layer_kinds.back(), LayerCacheKind::kPagedKV);
  CacheConfig cc;
  cc.page_size = 8;
  cc.num_pages = 8;
  cc.num_state_slots = 1;
  auto store = make_cache_store(m, cc);
  ASSERT_TRUE(store.ok()) << store.message();

  // The target over 21 tokens (3 pages): every token's post-norm hidden state.
  const int32_t T = 21, H = static_cast<int32_t>(c.hidden_size);
  Batch b;
  for (int32_t i = 0; i < T; ++i) {
    b.token_ids.push_back((i * 37 + 11) % static_cast<int32_t>(c.vocab_size));
    b.positions.push_back(i);
  }
  b.seq_starts = {0, T};
  b.context_lens = {T};
  b.page_table = {0, 1, 2, 3, 4, 5, 6, 7};
  b.max_pages_per_seq = 8;
  b.state_slots = {0};
  b.logit_rows = {T - 1};
  Model::Outputs target;
  m.forward(b, target);
  ASSERT_EQ(target.token_hidden.dim(0), T);
  const std::vector<float> hidden = download(m, target.token_hidden);

  // The head over (x_{p+1}, h_p) at p = 0 .. T-2, every row's logits, in two calls (K/V reuse).
  Tensors t{*WeightStore::open_dir(dir)};
  ReferenceHead ref(c, t);
  Vec out;
  const int32_t split = 12;
  {
    for (int32_t part = 0; part < 2; ++part) {
      const int32_t p0 = part == 0 ? 0 : split, p1 = part == 0 ? split : T - 1;
      Batch hb;
      for (int32_t p = p0; p < p1; ++p) {
        hb.token_ids.push_back(b.token_ids[static_cast<size_t>(p) + 1]);
        hb.positions.push_back(p);
        hb.logit_rows.push_back(p - p0);
      }
      hb.seq_starts = {0, p1 - p0};
      hb.context_lens = {p1};
      hb.page_table = b.page_table;
      hb.max_pages_per_seq = 8;
      Tensor rows(const_cast<float*>(hidden.data()) + static_cast<size_t>(p0) * H, DType::F32,
                  {p1 - p0, H});
      Model::Outputs head;
      m.mtp_forward(hb, rows, head);
      const std::vector<float> logits = download(m, head.logits);
      const int64_t V = c.vocab_size;
      for (int32_t p = p0; p < p1; ++p) {
        Vec h(hidden.begin() + static_cast<int64_t>(p) * H,
              hidden.begin() + static_cast<int64_t>(p + 1) * H);
        const Vec want = ref.step(b.token_ids[static_cast<size_t>(p) + 1], h, p, &out);
        expect_rows_close(
            std::vector<float>(logits.begin() + (p - p0) * V, logits.begin() + (p - p0 + 1) * V),
            want, "position " + std::to_string(p));
      }
      if (part == 1) {  // the head's `out` of the last row is the reference's
        const std::vector<float> got = download(m, head.hidden);
        expect_rows_close(std::vector<float>(got.end() - H, got.end()), out, "out row");
      }
    }
  }
  // A second draft: the head on its own argmax and `out` at position T - 1.
  const Vec prev_out = out;
  Vec want_logits = ref.step(5, prev_out, T - 1, &out);
  Batch hb;
  hb.token_ids = {5};
  hb.positions = {T - 1};
  hb.seq_starts = {0, 1};
  hb.context_lens = {T};
  hb.page_table = b.page_table;
  hb.max_pages_per_seq = 8;
  hb.logit_rows = {0};
  std::vector<float> h32(prev_out.begin(), prev_out.end());
  Tensor rows(h32.data(), DType::F32, {1, H});
  Model::Outputs head;
  m.mtp_forward(hb, rows, head);
  expect_rows_close(download(m, head.logits), want_logits, "second draft");
  // The target's outputs are untouched by the head.
  EXPECT_EQ(download(m, target.token_hidden), hidden);
}

TEST(MtpHead, LoadRefusalsNameWhatIsMissing) {
  set_log_level(LogLevel::WARN);
  auto backend = make_cpu_backend();
  LoadOptions lo;
  lo.mtp = true;
  const std::string fixtures = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/";
  // A dense Qwen3 has no head.
  auto qwen3 = load_model(fixtures + "qwen3/tied_gqa2", *backend, lo);
  ASSERT_FALSE(qwen3.ok());
  EXPECT_NE(qwen3.message().find("has no MTP head"), std::string::npos) << qwen3.message();
  // A hybrid whose config has no head (the fixtures as transformers saved them).
  auto plain = load_model(fixtures + "hybrid/q35_r1_lllf", *backend, lo);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.message().find("mtp_num_hidden_layers is 0"), std::string::npos)
      << plain.message();
  // The config says 1 but the files hold no mtp.* tensors.
  auto missing = load_model(make_mtp_fixture("q35_r1_lllf", 1, false), *backend, lo);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no mtp.* tensors"), std::string::npos) << missing.message();
  // Without LoadOptions::mtp the head's tensors are ignored: the model and cache are as before.
  auto without = load_model(make_mtp_fixture("q35_r1_lllf", 1), *backend);
  ASSERT_TRUE(without.ok()) << without.message();
  EXPECT_FALSE((*without)->has_mtp());
  auto original = load_model(fixtures + "hybrid/q35_r1_lllf", *backend);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ((*without)->cache_spec().layer_kinds, (*original)->cache_spec().layer_kinds);
  // Random weights draw a head too (benchmarks at real shapes), MoE for Qwen3-Next.
  lo.random_weights = true;
  for (const char* name : {"q35_r1_lllf", "qnext_top2_r1"}) {
    auto random = load_model(make_mtp_fixture(name, 1, false), *backend, lo);
    ASSERT_TRUE(random.ok()) << random.message();
    EXPECT_TRUE((*random)->has_mtp());
    EXPECT_EQ((*random)->cache_spec().kv_layers.size(),
              static_cast<size_t>((*random)->config().num_full_attention_layers()) + 1);
  }
}

}  // namespace
}  // namespace syv::testing
