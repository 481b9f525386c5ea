// The quantized KV cache on CUDA (fp8 and int4, backend/kv_cache_view.h) against the reference of
// backend/kv_quant.h, on the host:
//  * writes: kv_write and the fused qkv_norm_rope_write quantize each (token, kv head) row into
//    exactly the bytes and scales kv_quant.h produces from the same bf16 values (converted to f32),
//    rows outside the batch's slots untouched; zero rows, rows with one large element and rows at
//    the int4 f16 scale's clamps included;
//  * attention: decode (T = 1 per sequence; split counts default and forced, the merged combine,
//    batch-invariant mode) and prefill (multi-token chunks after a prefix, the tensor-core path)
//    on a quantized cache equal a float attention over kv_quant.h's dequantization of that cache
//    within bf16 tolerance: head_dim 64 / 128 / 256, GQA groups 1 / 4 / 8, pages of 16 and 64,
//    contexts crossing pages and splits;
//  * CUDA graphs: a captured kv_write + decode attention replays the eager bits.
// The device tests skip cleanly without a CUDA device.
//
// Bounds: the decode kernel computes in fp32 from the exact stored values and scales, so only the
// bf16 output rounding (2^-9 relative) and the summation order differ from the reference; the
// prefill kernel also rounds the dequantized K/V and the probabilities to bf16 (2^-9 relative
// each). 1e-2 relative L2 covers both with margin (a wrong scale, group or row gives O(1)).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/host_batch_meta.h"
#include "backend/kv_quant.h"
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

// Pages make_batch() takes for sequences ending at these contexts (distinct pages per sequence),
// plus two spare.
int pool_for(const std::vector<int>& ctx, int64_t page) {
  int pages = 2;
  for (int c : ctx) pages += static_cast<int>((c + page - 1) / page);
  return pages;
}

const char* kv_name(DType t) {
  return t == DType::F8E4M3 ? "fp8" : "int4";
}

int64_t row_bytes(DType t, int64_t D) {
  return t == DType::U4X2 ? D / 2 : D;
}
int64_t row_groups(DType t, int64_t D) {
  return t == DType::U4X2 ? D / kKvInt4Group : 1;
}
// Bytes of a row's scales (f32 for fp8, f16 for int4: kv_scale_dtype).
int64_t row_scale_bytes(DType t, int64_t D) {
  return row_groups(t, D) * static_cast<int64_t>(dtype_size(kv_scale_dtype(t)));
}

// s: the row's scales as bytes (kv_scale_dtype(t)).
void quantize_row(DType t, const float* x, int64_t D, uint8_t* q, uint8_t* s) {
  if (t == DType::F8E4M3) {
    const float scale = kv_quant::quantize_fp8_row(x, D, q);
    std::memcpy(s, &scale, sizeof(scale));
  } else {
    std::vector<uint16_t> scales(static_cast<size_t>(row_groups(t, D)));
    kv_quant::quantize_int4_row(x, D, q, scales.data());
    std::memcpy(s, scales.data(), scales.size() * sizeof(uint16_t));
  }
}
void dequantize_row(DType t, const uint8_t* q, const uint8_t* s, int64_t D, float* out) {
  if (t == DType::F8E4M3) {
    float scale = 0.f;
    std::memcpy(&scale, s, sizeof(scale));
    kv_quant::dequantize_fp8_row(q, scale, D, out);
  } else {
    std::vector<uint16_t> scales(static_cast<size_t>(row_groups(t, D)));
    std::memcpy(scales.data(), s, scales.size() * sizeof(uint16_t));
    kv_quant::dequantize_int4_row(q, scales.data(), D, out);
  }
}

// A quantized paged cache on the GPU and its host copy.
struct QCache {
  DType dtype = DType::F8E4M3;
  int64_t pages = 0, page = 0, hk = 0, D = 0;
  std::vector<uint8_t> k, v;
  std::vector<uint8_t> ks, vs;  // scales as bytes (kv_scale_dtype(dtype))
  DeviceBuffer kb, vb, ksb, vsb;
  KvCacheView view;
  int64_t rows() const { return pages * page * hk; }
  int64_t bytes() const { return row_bytes(dtype, D); }
  int64_t groups() const { return row_groups(dtype, D); }
  int64_t scale_bytes() const { return row_scale_bytes(dtype, D); }
  // Every row dequantized: [pages, page, hk, D].
  std::vector<float> dequantized(bool values) const {
    std::vector<float> out(static_cast<size_t>(rows() * D));
    const std::vector<uint8_t>& q = values ? v : k;
    const std::vector<uint8_t>& s = values ? vs : ks;
    for (int64_t r = 0; r < rows(); ++r) {
      dequantize_row(dtype, q.data() + r * bytes(), s.data() + r * scale_bytes(), D,
                     out.data() + r * D);
    }
    return out;
  }
};

// Random rows of varied magnitude (bf16-exact values), quantized by kv_quant.h.
void fill_rows(DType t, int64_t rows, int64_t D, std::mt19937& rng, std::vector<uint8_t>& q,
               std::vector<uint8_t>& s) {
  q.assign(static_cast<size_t>(rows * row_bytes(t, D)), 0);
  s.assign(static_cast<size_t>(rows * row_scale_bytes(t, D)), 0);
  std::uniform_real_distribution<float> mag(0.05f, 8.f);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = random_vec(static_cast<size_t>(D), rng, mag(rng));
    quantize_row(t, x.data(), D, q.data() + r * row_bytes(t, D),
                 s.data() + r * row_scale_bytes(t, D));
  }
}

class KvQuantGpu : public CudaOps {
 protected:
  QCache make_cache(DType t, int64_t pages, int64_t page, int64_t hk, int64_t D) {
    QCache c;
    c.dtype = t;
    c.pages = pages;
    c.page = page;
    c.hk = hk;
    c.D = D;
    fill_rows(t, c.rows(), D, rng_, c.k, c.ks);
    fill_rows(t, c.rows(), D, rng_, c.v, c.vs);
    auto up = [&](DeviceBuffer& b, const void* src, size_t n) {
      b = gpu_->allocate(n + 64);
      gpu_->upload(b.data(), src, n);
    };
    up(c.kb, c.k.data(), c.k.size());
    up(c.vb, c.v.data(), c.v.size());
    up(c.ksb, c.ks.data(), c.ks.size());
    up(c.vsb, c.vs.data(), c.vs.size());
    c.view.dtype = t;
    c.view.k = Tensor(c.kb.data(), t, {pages, page, hk, c.bytes()});
    c.view.v = Tensor(c.vb.data(), t, {pages, page, hk, c.bytes()});
    c.view.k_scales = Tensor(c.ksb.data(), kv_scale_dtype(t), {pages, page, hk, c.groups()});
    c.view.v_scales = Tensor(c.vsb.data(), kv_scale_dtype(t), {pages, page, hk, c.groups()});
    gpu_->synchronize();
    return c;
  }
  // The device's bytes and scales.
  void download(const QCache& c, std::vector<uint8_t>& k, std::vector<uint8_t>& v,
                std::vector<uint8_t>& ks, std::vector<uint8_t>& vs) {
    gpu_->synchronize();
    k.resize(c.k.size());
    v.resize(c.v.size());
    ks.resize(c.ks.size());
    vs.resize(c.vs.size());
    gpu_->download(k.data(), c.kb.data(), k.size());
    gpu_->download(v.data(), c.vb.data(), v.size());
    gpu_->download(ks.data(), c.ksb.data(), ks.size());
    gpu_->download(vs.data(), c.vsb.data(), vs.size());
  }

  // Expects the device cache to hold `c`'s host rows, except the rows of slots[t] (kv head h),
  // which hold kv_quant.h's quantization of xk / xv [T, hk, D].
  void expect_written(const QCache& c, const std::vector<int32_t>& slots,
                      const std::vector<float>& xk, const std::vector<float>& xv,
                      const std::string& what) {
    std::vector<uint8_t> k = c.k, v = c.v, ks = c.ks, vs = c.vs;
    for (size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] < 0) continue;
      for (int64_t h = 0; h < c.hk; ++h) {
        const int64_t r = int64_t{slots[t]} * c.hk + h;
        const size_t x = (t * static_cast<size_t>(c.hk) + static_cast<size_t>(h)) * c.D;
        quantize_row(c.dtype, xk.data() + x, c.D, k.data() + r * c.bytes(),
                     ks.data() + r * c.scale_bytes());
        quantize_row(c.dtype, xv.data() + x, c.D, v.data() + r * c.bytes(),
                     vs.data() + r * c.scale_bytes());
      }
    }
    std::vector<uint8_t> gk, gv, gks, gvs;
    download(c, gk, gv, gks, gvs);
    auto first_diff = [](const auto& a, const auto& b) {
      for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(a[i])) != 0) return static_cast<int64_t>(i);
      return int64_t{-1};
    };
    EXPECT_EQ(first_diff(gk, k), -1) << what << ": first differing K byte";
    EXPECT_EQ(first_diff(gv, v), -1) << what << ": first differing V byte";
    EXPECT_EQ(first_diff(gks, ks), -1) << what << ": first differing byte of the K scales";
    EXPECT_EQ(first_diff(gvs, vs), -1) << what << ": first differing byte of the V scales";
  }

  // Float attention over the dequantized cache (double accumulation): out [T, hq, D].
  std::vector<float> reference(const Batch& b, const QCache& c, const std::vector<float>& q,
                               int64_t hq, float scale) {
    const std::vector<float> kf = c.dequantized(false), vf = c.dequantized(true);
    const int64_t T = b.num_tokens(), D = c.D, group = hq / c.hk;
    std::vector<float> out(static_cast<size_t>(T * hq * D));
    int seq = 0;
    for (int64_t t = 0; t < T; ++t) {
      while (b.seq_starts[static_cast<size_t>(seq) + 1] <= t) ++seq;
      const int n_keys = b.positions[static_cast<size_t>(t)] + 1;
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kh = h / group;
        const float* qr = q.data() + (t * hq + h) * D;
        std::vector<double> s(static_cast<size_t>(n_keys));
        std::vector<int64_t> rows(static_cast<size_t>(n_keys));
        double mx = -INFINITY;
        for (int key = 0; key < n_keys; ++key) {
          const int32_t page =
              b.page_table[static_cast<size_t>(seq * b.max_pages_per_seq + key / c.page)];
          const int64_t r = (int64_t{page} * c.page + key % c.page) * c.hk + kh;
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += double(qr[i]) * kf[static_cast<size_t>(r * D + i)];
          s[static_cast<size_t>(key)] = d * scale;
          rows[static_cast<size_t>(key)] = r;
          mx = std::max(mx, s[static_cast<size_t>(key)]);
        }
        std::vector<double> o(static_cast<size_t>(D), 0.0);
        double l = 0;
        for (int key = 0; key < n_keys; ++key) {
          const double p = std::exp(s[static_cast<size_t>(key)] - mx);
          l += p;
          const int64_t r = rows[static_cast<size_t>(key)];
          for (int64_t i = 0; i < D; ++i)
            o[static_cast<size_t>(i)] += p * vf[static_cast<size_t>(r * D + i)];
        }
        for (int64_t i = 0; i < D; ++i)
          out[static_cast<size_t>((t * hq + h) * D + i)] = static_cast<float>(o[i] / l);
      }
    }
    return out;
  }

  // GPU paged attention of `b` on `c` (q random) against reference(); each of `setups` (run in
  // turn, after the first pass) is followed by another pass compared to the reference too.
  void check_attention(const Batch& b, const QCache& c, int64_t hq, const std::string& what,
                       const std::vector<std::function<void()>>& setups = {}) {
    const int64_t T = b.num_tokens(), D = c.D;
    const float scale = 1.f / std::sqrt(static_cast<float>(D));
    const std::vector<float> qv = random_vec(static_cast<size_t>(T * hq * D), rng_, 2.f);
    auto q = make(qv, {T, hq, D});
    auto out = make_out({T, hq, D});
    const std::vector<float> ref = reference(b, c, qv, hq, scale);
    auto run = [&](const std::string& how) {
      BatchMeta m = gpu_->prepare_batch(b, static_cast<int32_t>(c.page));
      poison(out.g);
      gpu_->paged_attention(q.g, c.view, scale, m, out.g);
      const double e = rel_l2(down_gpu(out.g), ref);
      EXPECT_LT(e, 1e-2) << what << how << ": relative L2 error " << e;
    };
    run("");
    for (size_t i = 0; i < setups.size(); ++i) {
      setups[i]();
      run(", setup " + std::to_string(i));
    }
  }
};

constexpr DType kDtypes[] = {DType::F8E4M3, DType::U4X2};

// A static capability: answered without a device.
TEST(KvQuantKernels, CoverFp8AndInt4) {
  EXPECT_TRUE(CudaBackend::quantized_kv_kernels(DType::F8E4M3));
  EXPECT_TRUE(CudaBackend::quantized_kv_kernels(DType::U4X2));
  EXPECT_FALSE(CudaBackend::quantized_kv_kernels(DType::BF16));
  EXPECT_FALSE(CudaBackend::quantized_kv_kernels(DType::F8E5M2));
}

// The capability query the start-up check asks (Backend::supports_kv_dtype): bf16, fp8, int4.
TEST_F(KvQuantGpu, SupportsKvDtypes) {
  EXPECT_TRUE(gpu_->supports_kv_dtype(DType::BF16));
  EXPECT_TRUE(gpu_->supports_kv_dtype(DType::F8E4M3));
  EXPECT_TRUE(gpu_->supports_kv_dtype(DType::U4X2));
  EXPECT_FALSE(gpu_->supports_kv_dtype(DType::F8E5M2));
  EXPECT_FALSE(gpu_->supports_kv_dtype(DType::F32));
  // The quantized attention kernels' head dims (a cache store of another is refused at creation).
  for (DType t : {DType::F8E4M3, DType::U4X2}) {
    for (int64_t d : {64, 128, 256}) EXPECT_TRUE(gpu_->supports_kv_head_dim(t, d)) << d;
    for (int64_t d : {16, 32, 96}) EXPECT_FALSE(gpu_->supports_kv_head_dim(t, d)) << d;
  }
  EXPECT_TRUE(gpu_->supports_kv_head_dim(DType::BF16, 16));
}

// kv_write: the bytes and scales of kv_quant.h, bit for bit, at the batch's slots only.
TEST_F(KvQuantGpu, KvWriteMatchesReference) {
  for (DType t : kDtypes) {
    for (int64_t D : {64, 128, 256}) {
      for (int64_t hk : {1, 2, 8}) {
        const int64_t page = 16;
        const int pool = pool_for({5, 33, 60}, page);
        Batch batch = make_batch({5, 1, 20}, {5, 33, 60}, static_cast<int>(page), pool, rng_);
        const int64_t T = batch.num_tokens();
        QCache c = make_cache(t, pool, page, hk, D);
        std::vector<float> xk = random_vec(static_cast<size_t>(T * hk * D), rng_, 3.f);
        std::vector<float> xv = random_vec(static_cast<size_t>(T * hk * D), rng_, 0.02f);
        // Edge rows: all zeros (scale 1, zero codes), one large element among small ones (the
        // others round to zero / subnormals), values at bf16 extremes of the quantizer's range.
        std::fill(xk.begin(), xk.begin() + D, 0.f);
        std::fill(xv.begin() + D, xv.begin() + 2 * D, 0.f);
        if (T * hk > 2) {
          xk[static_cast<size_t>(2 * D)] = 3000.f;
          xv[static_cast<size_t>(2 * D + 5)] = -1e-3f;
        }
        // The int4 f16 scale's clamps (kv_quant.h): a row of amax < 7 * 2^-14 (scale held at
        // 2^-14) and one element past 7 * 65504 (scale held at 65504, the element saturates).
        if (T * hk > 4) {
          for (int64_t i = 3 * D; i < 4 * D; ++i) xk[static_cast<size_t>(i)] *= 1e-5f;
          xv[static_cast<size_t>(4 * D + 1)] = 1e6f;
        }
        for (auto* x : {&xk, &xv})
          for (float& f : *x) f = bf16_to_f32(f32_to_bf16(f));
        auto k = make(xk, {T, hk, D});
        auto v = make(xv, {T, hk, D});
        BatchMeta m = gpu_->prepare_batch(batch, static_cast<int32_t>(page));
        gpu_->kv_write(k.g, v.g, c.view, m);
        const std::vector<int32_t> slots =
            build_host_batch_meta(batch, static_cast<int32_t>(page)).slot_mapping;
        expect_written(c, slots, xk, xv,
                       std::string("kv_write ") + kv_name(t) + " D " + std::to_string(D) + " hk " +
                           std::to_string(hk));
      }
    }
  }
}

// The fused qkv_norm_rope_write quantizes k and v in its own kernel: q, k, v equal the float-cache
// fused op's bit for bit, and the cache rows are kv_quant.h's quantization of k and v; in both of
// its forms (the register form, cuda::set_rope_rows_form, takes every case here).
TEST_F(KvQuantGpu, FusedQkvNormRopeWriteMatchesReference) {
  struct Case {
    int64_t hq, hk, d;
    int rotary;
    bool norm;
  };
  for (const bool rows_form : {false, true})
    for (DType t : kDtypes) {
      cuda::set_rope_rows_form(rows_form);
      for (Case cs : {Case{8, 2, 128, 128, true}, Case{8, 8, 64, 64, false},
                      Case{32, 8, 128, 64, true}, Case{16, 2, 256, 256, true}}) {
        const int64_t page = 64;
        const int pool = pool_for({3, 200, 40}, page);
        Batch batch = make_batch({3, 1, 20}, {3, 200, 40}, static_cast<int>(page), pool, rng_);
        const int64_t T = batch.num_tokens(), W = (cs.hq + 2 * cs.hk) * cs.d;
        BatchMeta m = gpu_->prepare_batch(batch, static_cast<int32_t>(page));
        auto qkv = make(random_vec(static_cast<size_t>(T * W), rng_, 2.f), {T, W});
        auto qn = make(random_vec(static_cast<size_t>(cs.d), rng_), {cs.d});
        auto kn = make(random_vec(static_cast<size_t>(cs.d), rng_), {cs.d});
        QCache c = make_cache(t, pool, page, cs.hk, cs.d);
        auto fc = make(std::vector<float>(static_cast<size_t>(pool * page * cs.hk * cs.d), 0.f),
                       {pool, page, cs.hk, cs.d});
        auto fcv = make(std::vector<float>(static_cast<size_t>(pool * page * cs.hk * cs.d), 0.f),
                        {pool, page, cs.hk, cs.d});
        auto q = make_out({T, cs.hq, cs.d}), k = make_out({T, cs.hk, cs.d}),
             v = make_out({T, cs.hk, cs.d});
        auto q2 = make_out({T, cs.hq, cs.d}), k2 = make_out({T, cs.hk, cs.d}),
             v2 = make_out({T, cs.hk, cs.d});
        RopeParams rope{1e6, cs.rotary};
        Tensor none;
        const Tensor& qng = cs.norm ? qn.g : none;
        const Tensor& kng = cs.norm ? kn.g : none;
        gpu_->qkv_norm_rope_write(qkv.g, qng, kng, 1e-6f, NormKind::kPlain, rope, m, q.g, k.g, v.g,
                                  c.view);
        KvCacheView fview;
        fview.k = fc.g;
        fview.v = fcv.g;
        fview.dtype = DType::BF16;
        gpu_->qkv_norm_rope_write(qkv.g, qng, kng, 1e-6f, NormKind::kPlain, rope, m, q2.g, k2.g,
                                  v2.g, fview);
        const std::string what = std::string("qkv_norm_rope_write ") + kv_name(t) +
                                 " hq=" + std::to_string(cs.hq) + " hk=" + std::to_string(cs.hk) +
                                 " d=" + std::to_string(cs.d) +
                                 (rows_form ? " (register form)" : "");
        const std::vector<float> kg = down_gpu(k.g), vg = down_gpu(v.g);
        EXPECT_EQ(down_gpu(q.g), down_gpu(q2.g)) << what << ": q vs the bf16-cache op";
        EXPECT_EQ(kg, down_gpu(k2.g)) << what << ": k vs the bf16-cache op";
        EXPECT_EQ(vg, down_gpu(v2.g)) << what << ": v vs the bf16-cache op";
        const std::vector<int32_t> slots =
            build_host_batch_meta(batch, static_cast<int32_t>(page)).slot_mapping;
        expect_written(c, slots, kg, vg, what);
      }
    }
  cuda::set_rope_rows_form(false);
}

// Decode (one token per sequence) on quantized caches: head dims, GQA groups, page sizes,
// contexts crossing pages and splits, split policies, merged combine, batch-invariant mode.
TEST_F(KvQuantGpu, DecodeAttentionMatchesDequantizedReference) {
  const bool initial_merged = cuda::attention_merged_combine();
  // Both decode kernels: tensor cores (the default for groups >= 2) and CUDA cores; tensor cores
  // in both of their forms, each forced (key rows for groups <= 8, and head rows).
  for (int form = 0; form < 3; ++form)
    for (DType t : kDtypes) {
      const auto kernel =
          form == 1 ? cuda::AttentionDecodeKernel::kCudaCores : cuda::AttentionDecodeKernel::kAuto;
      cuda::set_decode_mma_form(form == 2 ? cuda::DecodeMmaForm::kHeadRows
                                          : cuda::DecodeMmaForm::kKeyRows);
      for (int64_t D : {64, 128, 256}) {
        for (int64_t group : {1, 2, 4, 6, 8, 16}) {
          for (int64_t page : {16, 64}) {
            cuda::set_attention_decode_kernel(kernel);
            const int64_t hk = 2, hq = hk * group;
            const std::vector<int> ctx = {1, 17, 64, 65, 300, 1500};
            const int pool = pool_for(ctx, page);
            QCache c = make_cache(t, pool, page, hk, D);
            Batch b = make_batch({1, 1, 1, 1, 1, 1}, ctx, static_cast<int>(page), pool, rng_);
            const std::string what =
                std::string("decode ") + kv_name(t) + " D " + std::to_string(D) + " group " +
                std::to_string(group) + " page " + std::to_string(page) +
                (cuda::decode_mma_heads_per_block(hq, hk, D) > 0
                     ? (form == 2 ? " (tensor cores, head rows)" : " (tensor cores, key rows)")
                     : " (CUDA cores)");
            check_attention(b, c, hq, what,
                            {[] { cuda::set_attention_decode_splits(1); },
                             [] { cuda::set_attention_decode_splits(7); },
                             [] { cuda::set_attention_decode_splits(64); },
                             [] {
                               cuda::set_attention_decode_splits(0);
                               cuda::set_attention_merged_combine(true);
                             },
                             [&] {
                               cuda::set_attention_merged_combine(initial_merged);
                               gpu_->set_batch_invariant(true);
                             }});
            gpu_->set_batch_invariant(false);
          }
        }
      }
    }
  cuda::set_attention_decode_splits(0);
  cuda::set_attention_merged_combine(initial_merged);
  cuda::set_attention_decode_kernel(cuda::AttentionDecodeKernel::kAuto);
  cuda::set_decode_mma_form(cuda::DecodeMmaForm::kAuto);
}

// Decode batches wide enough (tokens x head groups >= 256) for the tensor-core kernel's wide fp8
// form at head_dim 128 (4 blocks per SM), contexts of 1 to 700 keys, default and forced splits.
TEST_F(KvQuantGpu, DecodeAttentionWideBatchMatchesDequantizedReference) {
  for (DType t : kDtypes) {
    for (int64_t group : {2, 8, 16}) {
      const int64_t hk = 2, hq = hk * group, D = 128, page = 16;
      std::vector<int> ctx(160);
      std::uniform_int_distribution<int> len(1, 700);
      for (int& c : ctx) c = len(rng_);
      const int pool = pool_for(ctx, page);
      QCache c = make_cache(t, pool, page, hk, D);
      Batch b =
          make_batch(std::vector<int>(ctx.size(), 1), ctx, static_cast<int>(page), pool, rng_);
      const std::string what =
          std::string("wide decode ") + kv_name(t) + " group " + std::to_string(group);
      check_attention(b, c, hq, what,
                      {[] { cuda::set_attention_decode_splits(7); },
                       [] { cuda::set_attention_decode_splits(64); }});
    }
  }
  cuda::set_attention_decode_splits(0);
}

// Prefill chunks after a prefix (the tensor-core path: more than 16 tokens in a sequence), mixed
// with a decode token, on quantized caches.
TEST_F(KvQuantGpu, PrefillAttentionMatchesDequantizedReference) {
  for (DType t : kDtypes) {
    for (int64_t D : {64, 128, 256}) {
      for (int64_t group : {1, 4, 8}) {
        for (int64_t page : {16, 64}) {
          const int64_t hk = 2, hq = hk * group;
          // 200 new tokens after a 100-token prefix (two query tiles), 1 decode token, 37 from 0.
          const std::vector<int> news = {200, 1, 37}, ctx = {300, 130, 37};
          const int pool = pool_for(ctx, page);
          QCache c = make_cache(t, pool, page, hk, D);
          Batch b = make_batch(news, ctx, static_cast<int>(page), pool, rng_);
          const std::string what = std::string("prefill ") + kv_name(t) + " D " +
                                   std::to_string(D) + " group " + std::to_string(group) +
                                   " page " + std::to_string(page);
          check_attention(b, c, hq, what, {[&] { gpu_->set_batch_invariant(true); }});
          gpu_->set_batch_invariant(false);
        }
      }
    }
  }
}

// A CUDA graph of a quantized kv_write + decode attention replays the eager launch's bits.
TEST_F(KvQuantGpu, GraphReplayEqualsEager) {
  if (!gpu_->supports_graphs()) GTEST_SKIP() << "no graphs";
  for (DType t : kDtypes) {
    const int64_t hq = 32, hk = 8, D = 128, page = 64;
    const int n = 8;
    std::vector<int> ones(static_cast<size_t>(n), 1), ctx(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ctx[static_cast<size_t>(i)] = 100 + 111 * i;
    const int pool = pool_for(ctx, page);
    QCache c = make_cache(t, pool, page, hk, D);
    Batch b = make_batch(ones, ctx, static_cast<int>(page), pool, rng_);
    auto q = make(random_vec(static_cast<size_t>(n * hq * D), rng_, 2.f), {n, hq, D});
    auto k = make(random_vec(static_cast<size_t>(n * hk * D), rng_, 2.f), {n, hk, D});
    auto v = make(random_vec(static_cast<size_t>(n * hk * D), rng_), {n, hk, D});
    auto out = make_out({n, hq, D});
    const float scale = 1.f / std::sqrt(static_cast<float>(D));
    auto step = [&] {
      BatchMeta m = gpu_->prepare_batch(b, static_cast<int32_t>(page));
      gpu_->kv_write(k.g, v.g, c.view, m);
      gpu_->paged_attention(q.g, c.view, scale, m, out.g);
    };
    const int graph = gpu_->capture_graph(step);
    poison(out.g);
    step();
    const std::vector<float> eager = down_gpu(out.g);
    poison(out.g);
    gpu_->stage_batch(b, static_cast<int32_t>(page));
    gpu_->replay_graph(graph);
    EXPECT_EQ(down_gpu(out.g), eager) << kv_name(t) << ": graph replay vs eager";
    gpu_->destroy_graph(graph);
  }
}

}  // namespace
}  // namespace syv
