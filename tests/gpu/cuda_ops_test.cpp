// Every CUDA op against the CPU reference op on random inputs. Inputs are drawn in f32, rounded to
// bf16 and given to both backends (bf16 on the GPU, the same values as f32 on the CPU), so the only
// difference is the GPU's arithmetic and its bf16 outputs. Outputs are poisoned (NaN) before each
// run so an unwritten element fails. Skipped cleanly when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/prefill_attention.h"
#include "core/dtype.h"

namespace syv {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));  // exactly representable in bf16
  return v;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cpu_ = make_cpu_backend();
    gpu_ = make_cuda_backend(0);
  }

  // A tensor on each backend holding the same values: f32 on the CPU, `gpu_dtype` on the GPU.
  struct Pair {
    DeviceBuffer cbuf, gbuf;
    Tensor c, g;
  };
  Pair make(const std::vector<float>& v, std::initializer_list<int64_t> dims,
            DType gpu_dtype = DType::BF16) {
    Pair p;
    p.cbuf = cpu_->allocate(v.size() * 4 + 64);
    p.gbuf = gpu_->allocate(v.size() * dtype_size(gpu_dtype) + 64);
    p.c = Tensor(p.cbuf.data(), DType::F32, dims);
    p.g = Tensor(p.gbuf.data(), gpu_dtype, dims);
    cpu_->upload(p.c.data, v.data(), v.size() * 4);
    upload_as(p.g, v);
    return p;
  }
  // Output pair, the GPU side poisoned with NaN.
  Pair make_out(std::initializer_list<int64_t> dims, DType gpu_dtype = DType::BF16) {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    Pair p = make(std::vector<float>(static_cast<size_t>(n), 0.f), dims, gpu_dtype);
    poison(p.g);
    return p;
  }
  void poison(const Tensor& t) {
    std::vector<uint8_t> nan(t.bytes(), 0xff);  // all-ones: NaN in f32, bf16 and f16
    gpu_->upload(t.data, nan.data(), nan.size());
  }
  void upload_as(const Tensor& t, const std::vector<float>& v) {
    if (t.dtype == DType::F32) {
      gpu_->upload(t.data, v.data(), v.size() * 4);
    } else if (t.dtype == DType::BF16) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
      gpu_->upload(t.data, b.data(), b.size() * 2);
    } else if (t.dtype == DType::F16) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_f16(v[i]);
      gpu_->upload(t.data, b.data(), b.size() * 2);
    } else {
      FAIL() << "upload_as: dtype";
    }
  }
  std::vector<float> down_gpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::F32) {
      gpu_->download(out.data(), t.data, out.size() * 4);
    } else {
      std::vector<uint16_t> b(out.size());
      gpu_->download(b.data(), t.data, b.size() * 2);
      for (size_t i = 0; i < b.size(); ++i)
        out[i] = t.dtype == DType::BF16 ? bf16_to_f32(b[i]) : f16_to_f32(b[i]);
    }
    return out;
  }
  std::vector<float> down_cpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    cpu_->download(out.data(), t.data, out.size() * 4);
    return out;
  }
  void expect_close(const Pair& p, double bound, const std::string& what) {
    const double e = rel_l2(down_gpu(p.g), down_cpu(p.c));
    EXPECT_LT(e, bound) << what << ": relative L2 error " << e;
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
  std::mt19937 rng_{1234};
};

// A batch of sequences with `news[s]` new tokens ending at context `ctx[s]`, pages scattered over a
// pool of `pool` pages in random order.
Batch make_batch(const std::vector<int>& news, const std::vector<int>& ctx, int page_size, int pool,
                 std::mt19937& rng) {
  Batch b;
  const int S = static_cast<int>(news.size());
  int max_pages = 1;
  for (int s = 0; s < S; ++s) max_pages = std::max(max_pages, (ctx[s] + page_size - 1) / page_size);
  b.max_pages_per_seq = max_pages;
  std::vector<int32_t> ids(static_cast<size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  b.seq_starts.push_back(0);
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < news[s]; ++i) {
      b.token_ids.push_back(static_cast<int32_t>(rng() % 1000));
      b.positions.push_back(ctx[s] - news[s] + i);
    }
    b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(ctx[s]);
    const int pages = (ctx[s] + page_size - 1) / page_size;
    for (int j = 0; j < max_pages; ++j) b.page_table.push_back(j < pages ? ids.at(next++) : -1);
    b.logit_rows.push_back(b.seq_starts.back() - 1);
  }
  return b;
}

TEST_F(CudaOps, Embedding) {
  const int64_t V = 1000, H = 96, T = 37;
  auto table = make(random_vec(V * H, rng_), {V, H});
  std::vector<int32_t> ids(T);
  for (auto& i : ids) i = static_cast<int32_t>(rng_() % V);
  auto idc = cpu_->allocate(T * 4);
  auto idg = gpu_->allocate(T * 4);
  cpu_->upload(idc.data(), ids.data(), T * 4);
  gpu_->upload(idg.data(), ids.data(), T * 4);
  auto out = make_out({T, H});
  cpu_->embedding(table.c, idc.view(DType::I32, {T}), out.c);
  gpu_->embedding(table.g, idg.view(DType::I32, {T}), out.g);
  EXPECT_EQ(down_gpu(out.g), down_cpu(out.c));  // a gather is exact
}

TEST_F(CudaOps, RmsNormAndAddRmsNorm) {
  for (int64_t H : {64, 1024, 4096, 5120}) {
    for (NormKind kind : {NormKind::kPlain, NormKind::kOnePlus}) {
      for (DType out_t : {DType::BF16, DType::F32}) {
        const int64_t T = 7;
        auto x = make(random_vec(T * H, rng_, 3.f), {T, H});
        auto w = make(random_vec(H, rng_), {H}, DType::F32);
        auto out = make_out({T, H}, out_t);
        cpu_->rmsnorm(x.c, w.c, 1e-6f, kind, out.c);
        gpu_->rmsnorm(x.g, w.g, 1e-6f, kind, out.g);
        expect_close(out, out_t == DType::F32 ? 1e-5 : 8e-3, "rmsnorm H=" + std::to_string(H));

        auto res = make(random_vec(T * H, rng_, 2.f), {T, H});
        auto wb = make(random_vec(H, rng_), {H}, DType::BF16);
        auto out2 = make_out({T, H}, out_t);
        cpu_->add_rmsnorm(res.c, x.c, wb.c, 1e-6f, kind, out2.c);
        gpu_->add_rmsnorm(res.g, x.g, wb.g, 1e-6f, kind, out2.g);
        expect_close(res, 8e-3, "add_rmsnorm residual");
        expect_close(out2, 1.2e-2, "add_rmsnorm out");
      }
    }
  }
}

TEST_F(CudaOps, LinearGemvAndGemm) {
  struct Shape {
    int64_t T, N, K;
  };
  for (Shape s : {Shape{1, 384, 512}, Shape{2, 1000, 1024}, Shape{3, 96, 72}, Shape{4, 512, 4096},
                  Shape{5, 300, 256}, Shape{64, 768, 1024}, Shape{257, 640, 512},
                  Shape{16, 100, 40}, Shape{1, 1001, 2056}, Shape{4, 7, 3000}}) {
    for (int variant = 0; variant <= 4; ++variant) {  // every GEMV launch shape + auto (kernels.h)
      gpu_->set_gemv_variant(variant);
      for (DType out_t : {DType::BF16, DType::F32}) {
        auto x = make(random_vec(s.T * s.K, rng_), {s.T, s.K});
        auto w = make(random_vec(s.N * s.K, rng_, 0.05f), {s.N, s.K});
        auto out = make_out({s.T, s.N}, out_t);
        cpu_->linear(x.c, w.c, Tensor(), out.c);
        gpu_->linear(x.g, w.g, Tensor(), out.g);
        expect_close(out, out_t == DType::F32 ? 1e-4 : 8e-3,
                     "linear T=" + std::to_string(s.T) + " N=" + std::to_string(s.N) +
                         " K=" + std::to_string(s.K) + " out " + std::string(dtype_name(out_t)) +
                         " gemv variant " + std::to_string(variant));
      }
    }
  }
  gpu_->set_gemv_variant(4);  // back to auto (kGemvAuto)
  // bias, and f32 weights (generic path)
  const int64_t T = 9, N = 130, K = 200;
  auto x = make(random_vec(T * K, rng_), {T, K});
  auto w = make(random_vec(N * K, rng_, 0.05f), {N, K}, DType::F32);
  auto b = make(random_vec(N, rng_), {N}, DType::F32);
  auto out = make_out({T, N});
  cpu_->linear(x.c, w.c, b.c, out.c);
  gpu_->linear(x.g, w.g, b.g, out.g);
  expect_close(out, 8e-3, "linear f32 weights + bias");
}

TEST_F(CudaOps, SiluMulAndAdd) {
  for (int64_t I : {8, 100, 3072}) {
    const int64_t T = 5;
    auto gu = make(random_vec(T * 2 * I, rng_, 4.f), {T, 2 * I});
    auto out = make_out({T, I});
    cpu_->silu_mul(gu.c, out.c);
    gpu_->silu_mul(gu.g, out.g);
    expect_close(out, 1.2e-2, "silu_mul I=" + std::to_string(I));
  }
  const int64_t n = 12345;
  auto a = make(random_vec(n, rng_), {n});
  auto b = make(random_vec(n, rng_), {n});
  auto out = make_out({n});
  cpu_->add(a.c, b.c, out.c);
  gpu_->add(a.g, b.g, out.g);
  expect_close(out, 8e-3, "add");
}

TEST_F(CudaOps, QkNormRope) {
  for (int rotary : {128, 64}) {
    for (bool with_norm : {true, false}) {
      const int64_t D = 128, Hq = 8, Hk = 2;
      Batch batch = make_batch({3, 1, 40}, {3, 9000, 40}, 64, 400, rng_);
      const int64_t T = batch.num_tokens();
      BatchMeta mc = cpu_->prepare_batch(batch, 64);
      BatchMeta mg = gpu_->prepare_batch(batch, 64);
      auto q = make(random_vec(T * Hq * D, rng_, 2.f), {T, Hq, D});
      auto k = make(random_vec(T * Hk * D, rng_, 2.f), {T, Hk, D});
      auto qn = make(random_vec(D, rng_), {D}, DType::BF16);
      auto kn = make(random_vec(D, rng_), {D}, DType::BF16);
      RopeParams rope{1e6, rotary};
      Tensor none;
      cpu_->qk_norm_rope(q.c, k.c, with_norm ? qn.c : none, with_norm ? kn.c : none, 1e-6f,
                         NormKind::kPlain, rope, mc);
      gpu_->qk_norm_rope(q.g, k.g, with_norm ? qn.g : none, with_norm ? kn.g : none, 1e-6f,
                         NormKind::kPlain, rope, mg);
      expect_close(q, 1e-2, "qk_norm_rope q rotary=" + std::to_string(rotary));
      expect_close(k, 1e-2, "qk_norm_rope k rotary=" + std::to_string(rotary));
    }
  }
}

TEST_F(CudaOps, KvWriteAndGatherRows) {
  const int64_t Hk = 4, D = 64, page = 16, pool = 40;
  Batch batch = make_batch({5, 1, 20}, {5, 33, 60}, page, pool, rng_);
  const int64_t T = batch.num_tokens();
  BatchMeta mc = cpu_->prepare_batch(batch, page);
  BatchMeta mg = gpu_->prepare_batch(batch, page);
  auto k = make(random_vec(T * Hk * D, rng_), {T, Hk, D});
  auto v = make(random_vec(T * Hk * D, rng_), {T, Hk, D});
  auto kc = make(random_vec(pool * page * Hk * D, rng_), {pool, page, Hk, D});
  auto vc = make(random_vec(pool * page * Hk * D, rng_), {pool, page, Hk, D});
  cpu_->kv_write(k.c, v.c, kc.c, vc.c, mc);
  gpu_->kv_write(k.g, v.g, kc.g, vc.g, mg);
  EXPECT_EQ(down_gpu(kc.g), down_cpu(kc.c));
  EXPECT_EQ(down_gpu(vc.g), down_cpu(vc.c));

  auto x = make(random_vec(T * 48, rng_), {T, 48});
  const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
  auto out = make_out({R, 48});
  cpu_->gather_rows(x.c, mc, out.c);
  gpu_->gather_rows(x.g, mg, out.g);
  EXPECT_EQ(down_gpu(out.g), down_cpu(out.c));
}

struct AttnCase {
  std::vector<int> news, ctx;
  int64_t hq, hk, d;
  int page;
};

class CudaAttention : public CudaOps, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(CudaAttention, MatchesCpu) {
  const AttnCase& c = GetParam();
  int pages_needed = 0;
  for (int x : c.ctx) pages_needed += (x + c.page - 1) / c.page;
  const int pool = pages_needed + 3;
  Batch batch = make_batch(c.news, c.ctx, c.page, pool, rng_);
  const int64_t T = batch.num_tokens();
  BatchMeta mc = cpu_->prepare_batch(batch, c.page);
  BatchMeta mg = gpu_->prepare_batch(batch, c.page);
  auto q = make(random_vec(T * c.hq * c.d, rng_, 2.f), {T, c.hq, c.d});
  auto kc =
      make(random_vec(int64_t{pool} * c.page * c.hk * c.d, rng_, 2.f), {pool, c.page, c.hk, c.d});
  auto vc = make(random_vec(int64_t{pool} * c.page * c.hk * c.d, rng_), {pool, c.page, c.hk, c.d});
  auto out = make_out({T, c.hq, c.d});
  const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
  cpu_->paged_attention(q.c, kc.c, vc.c, scale, mc, out.c);
  // Batches with a run of more than 16 new tokens take the prefill kernels: check every variant
  // (prefill_attention.h); the others take the decode kernel whatever the variant.
  const bool prefill = *std::max_element(c.news.begin(), c.news.end()) > 16;
  const int initial = cuda::prefill_attention_variant();
  const int variants = prefill ? cuda::prefill_attention_variant_count() : 1;
  for (int v = 0; v < variants; ++v) {
    if (prefill) cuda::set_prefill_attention_variant(v);
    const std::string what =
        prefill ? std::string("prefill kernel ") + cuda::prefill_attention_variant_name(v)
                : std::string("decode kernel");
    poison(out.g);
    gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
    expect_close(out, 1.2e-2, "paged_attention, " + what);
    // Determinism: the same inputs give bit-identical output.
    auto first = down_gpu(out.g);
    poison(out.g);
    gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
    EXPECT_EQ(down_gpu(out.g), first) << what;
  }
  cuda::set_prefill_attention_variant(initial);
}

INSTANTIATE_TEST_SUITE_P(
    Decode, CudaAttention,
    ::testing::Values(AttnCase{{1}, {1}, 8, 8, 128, 64}, AttnCase{{1}, {512}, 32, 8, 128, 64},
                      AttnCase{{1, 1, 1}, {70, 3000, 129}, 16, 8, 128, 64},
                      AttnCase{{1, 1}, {9000, 17}, 64, 8, 128, 64},
                      AttnCase{{1, 1}, {300, 65}, 12, 4, 128, 16},  // group 3 -> generic G=1
                      AttnCase{{1, 2}, {200, 130}, 8, 2, 64, 64},
                      AttnCase{{1}, {777}, 4, 4, 256, 64},
                      AttnCase{{3, 16}, {3, 1000}, 32, 8, 128, 64}));
INSTANTIATE_TEST_SUITE_P(
    Prefill, CudaAttention,
    ::testing::Values(AttnCase{{17}, {17}, 8, 8, 128, 64}, AttnCase{{300}, {300}, 32, 8, 128, 64},
                      AttnCase{{64, 1, 130}, {64, 500, 1130}, 16, 8, 128, 64},  // chunked + decode
                      AttnCase{{129, 77}, {129, 77}, 8, 2, 64, 16},
                      AttnCase{{1000}, {1000}, 16, 4, 128, 64},
                      AttnCase{{40, 33}, {40, 2000}, 12, 4, 128, 64}));
// The 128-row query tiles: a long prompt over many pages (the 8B GQA 4:1 shape), lengths that are
// not multiples of the tile, several sequences of different lengths in one batch (tiles of all
// sequences sorted together), prompts whose cached prefix makes the query tiles start mid-page
// and mid-key-tile, decode tokens mixed in, head_dim 64 and page size 16.
INSTANTIATE_TEST_SUITE_P(
    PrefillTiles, CudaAttention,
    ::testing::Values(AttnCase{{2500}, {2500}, 32, 8, 128, 64},
                      AttnCase{{129}, {129}, 8, 2, 128, 64}, AttnCase{{255}, {255}, 4, 1, 128, 64},
                      AttnCase{{200, 513, 77, 128, 1}, {200, 513, 77, 128, 90}, 8, 2, 128, 64},
                      AttnCase{{200, 130}, {1000, 4100}, 16, 4, 128, 64},
                      AttnCase{{300, 1, 17}, {333, 4000, 3000}, 32, 8, 128, 64},
                      AttnCase{{257}, {1500}, 8, 8, 64, 16},
                      AttnCase{{150, 600}, {150, 901}, 16, 4, 64, 64},
                      AttnCase{{700, 45}, {1701, 45}, 16, 2, 128, 16}));

TEST_F(CudaOps, Argmax) {
  const int64_t R = 5, V = 151936;
  std::vector<float> logits = random_vec(R * V, rng_, 5.f);
  logits[3 * V + 777] = 9.f;  // tie: the lower index wins
  logits[3 * V + 1777] = 9.f;
  auto lg = gpu_->allocate(R * V * 4);
  gpu_->upload(lg.data(), logits.data(), logits.size() * 4);
  auto ids = gpu_->allocate(R * 4);
  Tensor idt = ids.view(DType::I32, {R});
  gpu_->argmax(lg.view(DType::F32, {R, V}), idt);
  std::vector<int32_t> got(R);
  gpu_->download(got.data(), ids.data(), R * 4);
  for (int64_t r = 0; r < R; ++r) {
    auto row = logits.begin() + r * V;
    EXPECT_EQ(got[r], std::max_element(row, row + V) - row) << "row " << r;
  }
}

}  // namespace
}  // namespace syv
