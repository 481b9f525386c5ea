// The CPU backend's quantized KV cache (backend/cpu/cpu_kv_quantized.cpp, layouts in
// backend/kv_cache_view.h): kv_write stores exactly backend/kv_quant.h's bytes and scales (directly
// and through qkv_norm_rope_write), paged attention over fp8 / int4 pages equals float attention
// over the dequantized pages, views of the wrong shape are refused by name, and the int4 reference
// quantizer follows its stated rules (f16 scales, clamps, unusable groups).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_quant.h"

namespace syv {
namespace {

constexpr int64_t kPages = 4, kPage = 4, kHk = 2, kHq = 4;

std::vector<float> random_vec(size_t n, uint32_t seed, float range = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Tensor t(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

// A quantized cache over host buffers: values [pages, page, Hk, D or D / 2], scales as bytes of
// kv_scale_dtype (f32 for fp8, f16 for int4).
struct QuantCache {
  std::vector<uint8_t> k, v;
  std::vector<uint8_t> ks, vs;
  KvCacheView view;
  int64_t row_bytes = 0, groups = 0, scale_bytes = 0;  // scale_bytes: of one row's scales
  QuantCache(DType dtype, int64_t D) {
    row_bytes = dtype == DType::U4X2 ? D / 2 : D;
    groups = dtype == DType::U4X2 ? D / kKvInt4Group : 1;
    scale_bytes = groups * static_cast<int64_t>(dtype_size(kv_scale_dtype(dtype)));
    k.assign(static_cast<size_t>(kPages * kPage * kHk * row_bytes), 0xAB);
    v = k;
    ks.assign(static_cast<size_t>(kPages * kPage * kHk * scale_bytes), 0xCD);
    vs = ks;
    view.dtype = dtype;
    view.k = Tensor(k.data(), dtype, {kPages, kPage, kHk, row_bytes});
    view.v = Tensor(v.data(), dtype, {kPages, kPage, kHk, row_bytes});
    view.k_scales = Tensor(ks.data(), kv_scale_dtype(dtype), {kPages, kPage, kHk, groups});
    view.v_scales = Tensor(vs.data(), kv_scale_dtype(dtype), {kPages, kPage, kHk, groups});
  }
  // Row `row`'s first scale as f32 (k: which == 0, v: which == 1).
  float scale(int which, int64_t row) const {
    const uint8_t* p = (which == 0 ? ks : vs).data() + row * scale_bytes;
    if (view.dtype == DType::F8E4M3) {
      float f = 0.0f;
      std::memcpy(&f, p, sizeof(f));
      return f;
    }
    uint16_t h = 0;
    std::memcpy(&h, p, sizeof(h));
    return f16_to_f32(h);
  }
  // The float cache these pages stand for (kv_quant.h's dequantizers), [pages, page, Hk, D].
  void dequantize(int64_t D, std::vector<float>& kf, std::vector<float>& vf) const {
    kf.assign(static_cast<size_t>(kPages * kPage * kHk * D), 0.0f);
    vf = kf;
    for (int64_t row = 0; row < kPages * kPage * kHk; ++row) {
      for (int which = 0; which < 2; ++which) {
        const uint8_t* q = (which == 0 ? k : v).data() + row * row_bytes;
        const uint8_t* s = (which == 0 ? ks : vs).data() + row * scale_bytes;
        float* out = (which == 0 ? kf : vf).data() + row * D;
        if (view.dtype == DType::F8E4M3) {
          kv_quant::dequantize_fp8_row(q, scale(which, row), D, out);
        } else {
          std::vector<uint16_t> h(static_cast<size_t>(groups));
          std::memcpy(h.data(), s, static_cast<size_t>(scale_bytes));
          kv_quant::dequantize_int4_row(q, h.data(), D, out);
        }
      }
    }
  }
};

// Two sequences: 6 tokens on pages {2, 0} and 3 tokens on page {3}, every position new.
struct TwoSeqs {
  Batch batch;
  BatchMeta meta;
  int64_t T = 9;
  explicit TwoSeqs(Backend& b) {
    batch.token_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    batch.positions = {0, 1, 2, 3, 4, 5, 0, 1, 2};
    batch.seq_starts = {0, 6, 9};
    batch.context_lens = {6, 3};
    batch.page_table = {2, 0, 3, -1};
    batch.max_pages_per_seq = 2;
    batch.logit_rows = {5, 8};
    meta = b.prepare_batch(batch, static_cast<int32_t>(kPage));
  }
  // Cache slot of token i.
  int64_t slot(int64_t i) const {
    const int64_t seq = i < 6 ? 0 : 1, pos = batch.positions[static_cast<size_t>(i)];
    return batch.page_table[static_cast<size_t>(seq * 2 + pos / kPage)] * kPage + pos % kPage;
  }
};

// Every (token, kv head) row of k and v stored as kv_quant.h quantizes it.
void expect_reference_rows(const QuantCache& c, const TwoSeqs& s, const std::vector<float>& k,
                           const std::vector<float>& v, int64_t D) {
  std::vector<uint8_t> q(static_cast<size_t>(c.row_bytes));
  std::vector<uint8_t> scales(static_cast<size_t>(c.scale_bytes));
  std::vector<uint16_t> f16(static_cast<size_t>(c.groups));
  for (int64_t i = 0; i < s.T; ++i) {
    for (int64_t h = 0; h < kHk; ++h) {
      const int64_t row = s.slot(i) * kHk + h;
      for (int which = 0; which < 2; ++which) {
        const float* x = (which == 0 ? k : v).data() + (i * kHk + h) * D;
        if (c.view.dtype == DType::F8E4M3) {
          const float f = kv_quant::quantize_fp8_row(x, D, q.data());
          std::memcpy(scales.data(), &f, sizeof(f));
        } else {
          kv_quant::quantize_int4_row(x, D, q.data(), f16.data());
          std::memcpy(scales.data(), f16.data(), scales.size());
        }
        const uint8_t* stored = (which == 0 ? c.k : c.v).data() + row * c.row_bytes;
        const uint8_t* stored_scales = (which == 0 ? c.ks : c.vs).data() + row * c.scale_bytes;
        ASSERT_EQ(std::memcmp(stored, q.data(), q.size()), 0)
            << "token " << i << " head " << h << (which == 0 ? " k" : " v");
        ASSERT_EQ(std::memcmp(stored_scales, scales.data(), scales.size()), 0)
            << "scales of token " << i << " head " << h << (which == 0 ? " k" : " v");
      }
    }
  }
}

class CpuQuantizedKv : public ::testing::TestWithParam<DType> {
 protected:
  static constexpr int64_t D = 64;
  std::unique_ptr<Backend> b_ = make_cpu_backend();
};

TEST_P(CpuQuantizedKv, WrittenBytesAndScalesAreTheReference) {
  TwoSeqs s(*b_);
  QuantCache c(GetParam(), D);
  auto k = random_vec(static_cast<size_t>(s.T * kHk * D), 1);
  auto v = random_vec(static_cast<size_t>(s.T * kHk * D), 2, 40.0f);
  std::fill(k.begin() + 3 * kHk * D, k.begin() + 3 * kHk * D + D, 0.0f);  // amax 0: scale 1
  b_->kv_write(t(k, {s.T, kHk, D}), t(v, {s.T, kHk, D}), c.view, s.meta);
  expect_reference_rows(c, s, k, v, D);
  EXPECT_EQ(c.scale(0, s.slot(3) * kHk), 1.0f);
}

TEST_P(CpuQuantizedKv, QkvNormRopeWriteStoresTheReferenceOfItsFloatKAndV) {
  TwoSeqs s(*b_);
  QuantCache c(GetParam(), D);
  auto qkv = random_vec(static_cast<size_t>(s.T * (kHq + 2 * kHk) * D), 3);
  auto qn = random_vec(D, 4), kn = random_vec(D, 5);
  RopeParams rope;
  rope.rotary_dim = static_cast<int32_t>(D);
  std::vector<float> q(static_cast<size_t>(s.T * kHq * D)), k(static_cast<size_t>(s.T * kHk * D)),
      v(k.size()), kc(static_cast<size_t>(kPages * kPage * kHk * D)), vc(kc.size());
  std::vector<float> q2 = q, k2 = k, v2 = v;
  Tensor tq = t(q, {s.T, kHq, D}), tk = t(k, {s.T, kHk, D}), tv = t(v, {s.T, kHk, D});
  Tensor tkc = t(kc, {kPages, kPage, kHk, D}), tvc = t(vc, {kPages, kPage, kHk, D});
  b_->qkv_norm_rope_write(t(qkv, {s.T, (kHq + 2 * kHk) * D}), t(qn, {D}), t(kn, {D}), 1e-6f,
                          NormKind::kPlain, rope, s.meta, tq, tk, tv, tkc, tvc);
  Tensor tq2 = t(q2, {s.T, kHq, D}), tk2 = t(k2, {s.T, kHk, D}), tv2 = t(v2, {s.T, kHk, D});
  b_->qkv_norm_rope_write(t(qkv, {s.T, (kHq + 2 * kHk) * D}), t(qn, {D}), t(kn, {D}), 1e-6f,
                          NormKind::kPlain, rope, s.meta, tq2, tk2, tv2, c.view);
  EXPECT_EQ(std::memcmp(q.data(), q2.data(), q.size() * sizeof(float)), 0) << "q differs";
  expect_reference_rows(c, s, k, v, D);
}

TEST_P(CpuQuantizedKv, AttentionIsFloatAttentionOverTheDequantizedCache) {
  TwoSeqs s(*b_);
  QuantCache c(GetParam(), D);
  auto k = random_vec(static_cast<size_t>(s.T * kHk * D), 6);
  auto v = random_vec(static_cast<size_t>(s.T * kHk * D), 7);
  b_->kv_write(t(k, {s.T, kHk, D}), t(v, {s.T, kHk, D}), c.view, s.meta);
  std::vector<float> kf, vf;
  c.dequantize(D, kf, vf);
  auto q = random_vec(static_cast<size_t>(s.T * kHq * D), 8);
  std::vector<float> out(q.size()), ref(q.size()), exact(q.size());
  Tensor to = t(out, {s.T, kHq, D}), tr = t(ref, {s.T, kHq, D}), te = t(exact, {s.T, kHq, D});
  const float scale = 0.125f;
  b_->paged_attention(t(q, {s.T, kHq, D}), c.view, scale, s.meta, to);
  b_->paged_attention(t(q, {s.T, kHq, D}), t(kf, {kPages, kPage, kHk, D}),
                      t(vf, {kPages, kPage, kHk, D}), scale, s.meta, tr);
  double max_diff = 0;
  for (size_t i = 0; i < out.size(); ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(out[i] - ref[i])));
  EXPECT_LE(max_diff, 1e-6) << "quantized attention vs float attention over the dequantized pages";

  // And near attention over the unquantized K/V: the quantization error only (loose bounds).
  std::vector<float> kx(kf.size()), vx(vf.size());
  Tensor tkx = t(kx, {kPages, kPage, kHk, D}), tvx = t(vx, {kPages, kPage, kHk, D});
  b_->kv_write(t(k, {s.T, kHk, D}), t(v, {s.T, kHk, D}), tkx, tvx, s.meta);
  b_->paged_attention(t(q, {s.T, kHq, D}), tkx, tvx, scale, s.meta, te);
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - exact[i]) * (out[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  EXPECT_LT(std::sqrt(err / norm), GetParam() == DType::F8E4M3 ? 0.05 : 0.2)
      << "relative L2 error against unquantized attention";
}

TEST_P(CpuQuantizedKv, ViewsOfTheWrongShapeAreRefusedByName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TwoSeqs s(*b_);
  auto k = random_vec(static_cast<size_t>(s.T * kHk * D), 9);
  auto q = random_vec(static_cast<size_t>(s.T * kHq * D), 10);
  std::vector<float> out(q.size());
  Tensor tk = t(k, {s.T, kHk, D}), to = t(out, {s.T, kHq, D});
  const std::string scale_t(dtype_name(kv_scale_dtype(GetParam())));
  {  // scales of the old 3-d shape
    QuantCache c(GetParam(), D);
    c.view.k_scales =
        Tensor(c.ks.data(), kv_scale_dtype(GetParam()), {kPages, kPage, kHk * c.groups});
    EXPECT_DEATH(b_->kv_write(tk, tk, c.view, s.meta), "KV scales must be " + scale_t);
    EXPECT_DEATH(b_->paged_attention(t(q, {s.T, kHq, D}), c.view, 1.0f, s.meta, to),
                 "backend cpu paged_attention: KV scales must be " + scale_t);
  }
  {  // scales of the other dtype (int4's f32 scales before they became f16, or f16 for fp8)
    QuantCache c(GetParam(), D);
    const DType other = kv_scale_dtype(GetParam()) == DType::F16 ? DType::F32 : DType::F16;
    c.view.v_scales = Tensor(c.vs.data(), other, {kPages, kPage, kHk, c.groups});
    EXPECT_DEATH(b_->kv_write(tk, tk, c.view, s.meta), "KV scales must be " + scale_t);
  }
  {  // no V scales
    QuantCache c(GetParam(), D);
    c.view.v_scales = Tensor();
    EXPECT_DEATH(b_->kv_write(tk, tk, c.view, s.meta), "without scales");
  }
  {  // k / v input of another head_dim
    QuantCache c(GetParam(), D);
    auto small = random_vec(static_cast<size_t>(s.T * kHk * 32), 11);
    Tensor ts = t(small, {s.T, kHk, 32});
    EXPECT_DEATH(b_->kv_write(ts, ts, c.view, s.meta), "kv_write: k/v not \\[T, Hk, D\\]");
  }
  {  // fp8 e5m2 pages: not a KV dtype
    QuantCache c(GetParam(), D);
    c.view.dtype = c.view.k.dtype = c.view.v.dtype = DType::F8E5M2;
    EXPECT_DEATH(b_->kv_write(tk, tk, c.view, s.meta), "KV cache dtype f8e5m2 is not supported");
  }
}

// The int4 reference quantizer's rules (kv_quant.h), one group of 32 at a time: the scale is the
// f16 of clamp(amax / 7, 2^-14, 65504), and the nibbles use that rounded scale.
struct Int4Group {
  std::vector<uint8_t> q = std::vector<uint8_t>(kKvInt4Group / 2);
  uint16_t scale = 0;
  explicit Int4Group(const std::vector<float>& x) {
    kv_quant::quantize_int4_row(x.data(), kKvInt4Group, q.data(), &scale);
  }
  int nibble(int i) const {
    const uint8_t b = q[static_cast<size_t>(i / 2)];
    return i % 2 == 0 ? u4_low(b) : u4_high(b);
  }
};

TEST(KvQuantInt4, ScaleIsTheRoundedF16AndNibblesUseIt) {
  std::vector<float> x(kKvInt4Group, 0.0f);
  // amax 7.0028: amax / 7 = 1.0004 rounds to f16 1.0 (steps of 2^-10 near 1), so 7.0028
  // quantizes with the rounded scale to 7 (7.0028 / 1.0, rounded), -3.5 to -4 and 2.5 to 2 (ties
  // to even: exact only because the rounded scale is 1).
  x[0] = 7.0028f;
  x[1] = -3.5f;
  x[2] = 2.5f;
  x[3] = 0.49f;
  const Int4Group g(x);
  EXPECT_EQ(g.scale, 0x3c00);  // f16 1.0
  EXPECT_EQ(g.nibble(0), 7 + 8);
  EXPECT_EQ(g.nibble(1), -4 + 8);
  EXPECT_EQ(g.nibble(2), 2 + 8);
  EXPECT_EQ(g.nibble(3), 0 + 8);
  // A scale off the f16 grid: amax 1 gives f16(1 / 7) = 0x3092 (0.142822...), and
  // dequantization is nibble * that f16 exactly.
  std::vector<float> y(kKvInt4Group, 0.25f);
  y[5] = -1.0f;
  const Int4Group h(y);
  EXPECT_EQ(h.scale, f32_to_f16(1.0f / 7.0f));
  std::vector<float> out(kKvInt4Group);
  kv_quant::dequantize_int4_row(h.q.data(), &h.scale, kKvInt4Group, out.data());
  EXPECT_EQ(out[5], -7.0f * f16_to_f32(h.scale));
  EXPECT_EQ(out[0], 2.0f * f16_to_f32(h.scale));  // 0.25 / 0.142822 = 1.75 -> 2
}

TEST(KvQuantInt4, ScaleClampsToTheF16Range) {
  // amax / 7 below 2^-14 (the smallest normal f16): the scale stays 2^-14.
  std::vector<float> tiny(kKvInt4Group, 1e-6f);
  tiny[1] = 2e-4f;  // 2e-4 * 2^14 = 3.28 -> 3
  const Int4Group t(tiny);
  EXPECT_EQ(t.scale, 0x0400);
  EXPECT_EQ(t.nibble(0), 0 + 8);
  EXPECT_EQ(t.nibble(1), 3 + 8);
  // amax / 7 above 65504 (the largest f16): the scale stays 65504, larger elements saturate.
  std::vector<float> huge(kKvInt4Group, 3.0f * 65504.0f);
  huge[0] = 1e6f;
  huge[1] = -1e6f;
  const Int4Group u(huge);
  EXPECT_EQ(u.scale, 0x7bff);
  EXPECT_EQ(u.nibble(0), 7 + 8);
  EXPECT_EQ(u.nibble(1), -8 + 8);
  EXPECT_EQ(u.nibble(2), 3 + 8);
}

TEST(KvQuantInt4, UnusableGroupsStoreScaleOneAndZeroCodes) {
  for (float bad : {0.0f, INFINITY, -INFINITY, NAN}) {
    std::vector<float> x(kKvInt4Group, bad == 0.0f ? 0.0f : 0.5f);
    x[3] = bad;
    const Int4Group g(x);
    const bool nan = std::isnan(bad);
    if (nan) {  // NaN does not enter amax (0.5): the group is usable, the NaN element reads -8
      EXPECT_EQ(g.scale, f32_to_f16(0.5f / 7.0f));
      EXPECT_EQ(g.nibble(3), 0);
      EXPECT_EQ(g.nibble(0), 7 + 8);
    } else {
      EXPECT_EQ(g.scale, 0x3c00) << bad;
      for (int i = 0; i < kKvInt4Group; ++i) EXPECT_EQ(g.nibble(i), 8) << bad << " element " << i;
    }
  }
}

// Every element of a random group is within half a step of its dequantized value.
TEST(KvQuantInt4, ErrorIsAtMostHalfAStep) {
  std::vector<float> x = random_vec(kKvInt4Group, 21, 5.0f);
  const Int4Group g(x);
  std::vector<float> out(kKvInt4Group);
  kv_quant::dequantize_int4_row(g.q.data(), &g.scale, kKvInt4Group, out.data());
  const float step = f16_to_f32(g.scale);
  for (int i = 0; i < kKvInt4Group; ++i) {
    EXPECT_LE(std::fabs(out[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]),
              0.5f * step * 1.002f)
        << "element " << i;
  }
}

TEST(CpuQuantizedKvShapes, Int4NeedsHeadDimAMultipleOf32) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::unique_ptr<Backend> b = make_cpu_backend();
  TwoSeqs s(*b);
  std::vector<uint8_t> pages(static_cast<size_t>(kPages * kPage * kHk * 8));
  std::vector<uint16_t> scales(static_cast<size_t>(kPages * kPage * kHk));
  KvCacheView c;
  c.dtype = DType::U4X2;
  c.k = c.v = Tensor(pages.data(), DType::U4X2, {kPages, kPage, kHk, 8});  // head_dim 16
  c.k_scales = c.v_scales = Tensor(scales.data(), DType::F16, {kPages, kPage, kHk, 1});
  auto k = random_vec(static_cast<size_t>(s.T * kHk * 16), 12);
  Tensor tk = t(k, {s.T, kHk, 16});
  EXPECT_DEATH(b->kv_write(tk, tk, c, s.meta),
               "int4 KV needs head_dim % 32 == 0, found head_dim 16");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuQuantizedKv, ::testing::Values(DType::F8E4M3, DType::U4X2),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace syv
