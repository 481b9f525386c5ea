// Every CUDA op against the CPU reference op on random inputs. Inputs are drawn in f32, rounded to
// bf16 and given to both backends (bf16 on the GPU, the same values as f32 on the CPU), so the only
// difference is the GPU's arithmetic and its bf16 outputs. Outputs are poisoned (NaN) before each
// run so an unwritten element fails. Skipped cleanly when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/host_batch_meta.h"
#include "core/dtype.h"
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

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
  for (int64_t H : {64, 100, 1024, 4096, 5120, 12288, 20000}) {  // bf16 form: 1 / 2 chunks, neither
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
    for (int variant = 0; variant <= cuda::kGemvLastVariant; ++variant) {  // + auto (kernels.h)
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

// linear_pair (the GDN z and b|a projections in one launch) gives exactly what two linear() calls
// give, the few-row output in f32 or bf16, at token counts in one and in two GEMV chunks.
TEST_F(CudaOps, LinearPairEqualsTwoLinears) {
  for (int64_t T : {1, 3, 4, 6}) {
    for (DType small_t : {DType::F32, DType::BF16}) {
      const int64_t K = 1024, N1 = 768, N2 = 64;
      auto x = make(random_vec(T * K, rng_), {T, K});
      auto w1 = make(random_vec(N1 * K, rng_, 0.05f), {N1, K});
      auto w2 = make(random_vec(N2 * K, rng_, 0.05f), {N2, K});
      auto big = make_out({T, N1}), small = make_out({T, N2}, small_t);
      auto big_ref = make_out({T, N1}), small_ref = make_out({T, N2}, small_t);
      gpu_->linear_pair(x.g, w1.g, big.g, w2.g, small.g);
      gpu_->linear(x.g, w1.g, Tensor(), big_ref.g);
      gpu_->linear(x.g, w2.g, Tensor(), small_ref.g);
      const std::string what =
          "T=" + std::to_string(T) + " small " + std::string(dtype_name(small_t));
      EXPECT_EQ(down_gpu(big.g), down_gpu(big_ref.g)) << what;
      EXPECT_EQ(down_gpu(small.g), down_gpu(small_ref.g)) << what;
      cpu_->linear(x.c, w2.c, Tensor(), small.c);
      expect_close(small, small_t == DType::F32 ? 1e-4 : 8e-3, "linear_pair small " + what);
    }
  }
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

// ---- fused ops (backend.h): each against the CPU backend's default (the plain op sequence) and
// against the CUDA backend's own plain sequence.

TEST_F(CudaOps, QkvNormRopeWrite) {
  struct Case {
    int64_t hq, hk, d;
    int rotary;
    bool norm;
  };
  // hq + 2 hk = 5: a kernel block of 4 rows spans two tokens (its first token's rotations come from
  // the block's table, the other's are computed per element: rope_kv.cu).
  for (Case c : {Case{8, 2, 128, 128, true}, Case{8, 2, 128, 64, false}, Case{4, 4, 64, 64, true},
                 Case{32, 8, 128, 128, true}, Case{3, 1, 128, 96, true}}) {
    const int64_t page = 16, pool = 700;
    Batch batch = make_batch({3, 1, 20}, {3, 9000, 40}, page, pool, rng_);
    const int64_t T = batch.num_tokens(), W = (c.hq + 2 * c.hk) * c.d;
    BatchMeta mc = cpu_->prepare_batch(batch, page);
    BatchMeta mg = gpu_->prepare_batch(batch, page);
    auto qkv = make(random_vec(T * W, rng_, 2.f), {T, W});
    auto qn = make(random_vec(c.d, rng_), {c.d}, DType::BF16);
    auto kn = make(random_vec(c.d, rng_), {c.d}, DType::BF16);
    const std::vector<float> kc0 = random_vec(pool * page * c.hk * c.d, rng_);
    const std::vector<float> vc0 = random_vec(pool * page * c.hk * c.d, rng_);
    auto kc = make(kc0, {pool, page, c.hk, c.d});
    auto vc = make(vc0, {pool, page, c.hk, c.d});
    auto q = make_out({T, c.hq, c.d});
    auto k = make_out({T, c.hk, c.d});
    auto v = make_out({T, c.hk, c.d});
    RopeParams rope{1e6, c.rotary};
    Tensor none;
    const Tensor& qnc = c.norm ? qn.c : none;
    const Tensor& knc = c.norm ? kn.c : none;
    const Tensor& qng = c.norm ? qn.g : none;
    const Tensor& kng = c.norm ? kn.g : none;
    cpu_->qkv_norm_rope_write(qkv.c, qnc, knc, 1e-6f, NormKind::kPlain, rope, mc, q.c, k.c, v.c,
                              kc.c, vc.c);
    gpu_->qkv_norm_rope_write(qkv.g, qng, kng, 1e-6f, NormKind::kPlain, rope, mg, q.g, k.g, v.g,
                              kc.g, vc.g);
    const std::string what = "qkv_norm_rope_write hq=" + std::to_string(c.hq) +
                             " hk=" + std::to_string(c.hk) + " d=" + std::to_string(c.d);
    expect_close(q, 1e-2, what + " q");
    expect_close(k, 1e-2, what + " k");
    EXPECT_EQ(down_gpu(v.g), down_cpu(v.c)) << what << " v";  // a copy is exact
    EXPECT_EQ(down_gpu(vc.g), down_cpu(vc.c)) << what << " v cache";
    // The key cache: the rows at the batch's slots hold k; every other row keeps its value.
    const std::vector<int32_t> slots = build_host_batch_meta(batch, page).slot_mapping;
    const size_t row = static_cast<size_t>(c.hk * c.d);
    std::vector<char> written(kc0.size() / row, 0);
    for (int32_t slot : slots) written[static_cast<size_t>(slot)] = 1;
    std::vector<float> kcg = down_gpu(kc.g), kcc = down_cpu(kc.c);
    std::vector<float> got, ref;
    size_t changed = 0;
    for (size_t i = 0; i < kc0.size(); ++i) {
      if (written[i / row]) {
        got.push_back(kcg[i]);
        ref.push_back(kcc[i]);
      } else {
        changed += kcg[i] != kc0[i];
      }
    }
    EXPECT_EQ(changed, 0u) << what << ": key cache rows outside the batch's slots changed";
    EXPECT_EQ(static_cast<int64_t>(ref.size()), T * c.hk * c.d) << what << ": key rows written";
    EXPECT_LT(rel_l2(got, ref), 1e-2) << what << " k cache";

    // Bit-identical to the CUDA plain sequence (split, qk_norm_rope, kv_write).
    auto kc2 = make(kc0, {pool, page, c.hk, c.d});
    auto vc2 = make(vc0, {pool, page, c.hk, c.d});
    auto q2 = make_out({T, c.hq, c.d});
    auto k2 = make_out({T, c.hk, c.d});
    auto v2 = make_out({T, c.hk, c.d});
    gpu_->Backend::qkv_norm_rope_write(qkv.g, qng, kng, 1e-6f, NormKind::kPlain, rope, mg, q2.g,
                                       k2.g, v2.g, kc2.g, vc2.g);
    EXPECT_EQ(down_gpu(q2.g), down_gpu(q.g)) << what << ": fused vs plain sequence, q";
    EXPECT_EQ(down_gpu(k2.g), down_gpu(k.g)) << what << ": fused vs plain sequence, k";
    EXPECT_EQ(down_gpu(kc2.g), kcg) << what << ": fused vs plain sequence, k cache";

    // The register form (four rows a warp; rotary pairs in one lane), where it applies: the
    // same bits as the shared-memory kernel above.
    const bool applies = (c.d == 64 || c.d == 128 || c.d == 256) && (c.rotary / 2) % 32 == 0;
    auto kc3 = make(kc0, {pool, page, c.hk, c.d});
    auto vc3 = make(vc0, {pool, page, c.hk, c.d});
    auto q3 = make_out({T, c.hq, c.d});
    auto k3 = make_out({T, c.hk, c.d});
    auto v3 = make_out({T, c.hk, c.d});
    const uint64_t before = cuda::rope_rows_launches();
    cuda::set_rope_rows_form(true);
    gpu_->qkv_norm_rope_write(qkv.g, qng, kng, 1e-6f, NormKind::kPlain, rope, mg, q3.g, k3.g, v3.g,
                              kc3.g, vc3.g);
    cuda::set_rope_rows_form(false);
    EXPECT_EQ(cuda::rope_rows_launches() - before, applies ? 1u : 0u) << what;
    EXPECT_EQ(down_gpu(q3.g), down_gpu(q.g)) << what << ": register form, q";
    EXPECT_EQ(down_gpu(k3.g), down_gpu(k.g)) << what << ": register form, k";
    EXPECT_EQ(down_gpu(v3.g), down_gpu(v.g)) << what << ": register form, v";
    EXPECT_EQ(down_gpu(kc3.g), kcg) << what << ": register form, k cache";
    EXPECT_EQ(down_gpu(vc3.g), down_gpu(vc.g)) << what << ": register form, v cache";
  }
}

// add_rmsnorm_linear, linear_silu_mul and add_rmsnorm_linear_silu_mul at every GEMV launch shape
// (T <= 4: the fused GEMV) and above (the plain sequence), with and without a bias, in place and
// ping-pong residuals.
TEST_F(CudaOps, FusedNormLinearSilu) {
  struct Shape {
    int64_t T, N, H;
  };
  // H = 2048 at one token (Qwen3-Next's hidden size); 8,192 and 6,144 rows: more tiles than a
  // persistent grid has blocks (each block walks several).
  for (Shape s : {Shape{1, 384, 512}, Shape{1, 200, 2048}, Shape{1, 4096, 2048},
                  Shape{1, 3072, 4096}, Shape{2, 1000, 1024}, Shape{3, 96, 256},
                  Shape{4, 520, 4096}, Shape{5, 300, 256}, Shape{9, 128, 512}}) {
    for (int variant : {0, 1, 2, 3, 4, 5, 6, 7, 8, 99}) {  // 99: auto, non-persistent norm GEMV
      if (s.T > 4 && variant != 4 && variant != 5) continue;
      if (variant == 99 && (s.H % 1024 != 0 || s.T > 4)) continue;
      gpu_->set_gemv_variant(variant == 99 ? 4 : variant);
      cuda::set_gemv_norm_persistent(variant != 99);
      const std::string what = "T=" + std::to_string(s.T) + " N=" + std::to_string(s.N) +
                               " H=" + std::to_string(s.H) + " variant " + std::to_string(variant);
      const std::vector<float> res0 = random_vec(s.T * s.H, rng_, 2.f);
      auto add = make(random_vec(s.T * s.H, rng_, 2.f), {s.T, s.H});
      auto nw = make(random_vec(s.H, rng_), {s.H}, DType::BF16);
      auto w = make(random_vec(2 * s.N * s.H, rng_, 0.05f), {2 * s.N, s.H});
      auto bias = make(random_vec(2 * s.N, rng_), {2 * s.N}, DType::F32);
      for (bool in_place : {false, true}) {
        for (bool with_bias : {false, true}) {
          const std::string w2 =
              what + (in_place ? " in place" : " ping-pong") + (with_bias ? " + bias" : "");
          auto res = make(res0, {s.T, s.H});
          auto res_out = make_out({s.T, s.H});
          auto normed = make_out({s.T, s.H});
          auto out = make_out({s.T, 2 * s.N});
          Pair& ro = in_place ? res : res_out;
          cpu_->add_rmsnorm_linear(res.c, add.c, nw.c, 1e-6f, NormKind::kPlain, ro.c, normed.c, w.c,
                                   with_bias ? bias.c : Tensor(), out.c);
          gpu_->add_rmsnorm_linear(res.g, add.g, nw.g, 1e-6f, NormKind::kPlain, ro.g, normed.g, w.g,
                                   with_bias ? bias.g : Tensor(), out.g);
          expect_close(ro, 8e-3, "add_rmsnorm_linear residual " + w2);
          expect_close(normed, 1.2e-2, "add_rmsnorm_linear normed " + w2);
          expect_close(out, 1.2e-2, "add_rmsnorm_linear out " + w2);
          if (!in_place) {
            EXPECT_EQ(down_gpu(res.g), res0) << "residual in changed, " << w2;
          }
        }
      }
      // silu variants: w is [2N, H] = gate rows then up rows.
      auto x = make(random_vec(s.T * s.H, rng_), {s.T, s.H});
      auto gu = make_out({s.T, 2 * s.N});
      auto act = make_out({s.T, s.N});
      cpu_->linear_silu_mul(x.c, w.c, gu.c, act.c);
      gpu_->linear_silu_mul(x.g, w.g, gu.g, act.g);
      expect_close(gu, 8e-3, "linear_silu_mul gate_up " + what);
      expect_close(act, 1.2e-2, "linear_silu_mul out " + what);
      auto gu2 = make_out({s.T, 2 * s.N});
      auto act2 = make_out({s.T, s.N});
      gpu_->Backend::linear_silu_mul(x.g, w.g, gu2.g, act2.g);  // linear + silu_mul on the GPU
      EXPECT_EQ(down_gpu(gu2.g), down_gpu(gu.g)) << "linear_silu_mul vs plain, gate_up " << what;
      EXPECT_EQ(down_gpu(act2.g), down_gpu(act.g)) << "linear_silu_mul vs plain, out " << what;

      auto res = make(res0, {s.T, s.H});
      auto res_out = make_out({s.T, s.H});
      auto normed = make_out({s.T, s.H});
      auto gu3 = make_out({s.T, 2 * s.N});
      auto act3 = make_out({s.T, s.N});
      cpu_->add_rmsnorm_linear_silu_mul(res.c, add.c, nw.c, 1e-6f, NormKind::kOnePlus, res_out.c,
                                        normed.c, w.c, gu3.c, act3.c);
      gpu_->add_rmsnorm_linear_silu_mul(res.g, add.g, nw.g, 1e-6f, NormKind::kOnePlus, res_out.g,
                                        normed.g, w.g, gu3.g, act3.g);
      expect_close(res_out, 8e-3, "add_rmsnorm_linear_silu_mul residual " + what);
      expect_close(normed, 1.2e-2, "add_rmsnorm_linear_silu_mul normed " + what);
      expect_close(gu3, 1.2e-2, "add_rmsnorm_linear_silu_mul gate_up " + what);
      expect_close(act3, 1.5e-2, "add_rmsnorm_linear_silu_mul out " + what);
    }
  }
  gpu_->set_gemv_variant(4);  // back to auto (kGemvAuto)
  cuda::set_gemv_norm_persistent(true);
}

// Decode attention merges its splits in the decode kernel (arrival counters) or in a second
// kernel: the same output bit for bit, and the counters are ready for the next launch. (The
// CUDA-core kernel's feature: the tensor-core one always takes the combine kernel.)
TEST_F(CudaOps, AttentionMergedCombineEqualsSeparate) {
  cuda::set_attention_decode_kernel(cuda::AttentionDecodeKernel::kCudaCores);
  struct C {
    std::vector<int> ctx;
    int64_t hq, hk, d;
  };
  const bool initial = cuda::attention_merged_combine();
  for (const C& c : {C{{512}, 32, 8, 128}, C{{9000, 17, 3000}, 64, 8, 128}, C{{200, 130}, 8, 2, 64},
                     C{{777}, 4, 4, 256}, C{{300, 65}, 12, 4, 128}, C{{1, 64, 65, 63}, 32, 8, 128},
                     C{{8192}, 32, 8, 128}}) {
    const int page = 64;
    int pool = 3;
    for (int x : c.ctx) pool += (x + page - 1) / page;
    std::vector<int> news(c.ctx.size(), 1);
    Batch batch = make_batch(news, c.ctx, page, pool, rng_);
    const int64_t T = batch.num_tokens();
    BatchMeta mg = gpu_->prepare_batch(batch, page);
    auto q = make(random_vec(T * c.hq * c.d, rng_, 2.f), {T, c.hq, c.d});
    auto kc =
        make(random_vec(int64_t{pool} * page * c.hk * c.d, rng_, 2.f), {pool, page, c.hk, c.d});
    auto vc = make(random_vec(int64_t{pool} * page * c.hk * c.d, rng_), {pool, page, c.hk, c.d});
    auto out = make_out({T, c.hq, c.d});
    const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
    cuda::set_attention_merged_combine(false);
    gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
    const std::vector<float> separate = down_gpu(out.g);
    cuda::set_attention_merged_combine(true);
    for (int run = 0; run < 3; ++run) {
      poison(out.g);
      gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
      EXPECT_EQ(down_gpu(out.g), separate)
          << "merged vs separate combine, hq " << c.hq << " d " << c.d << ", run " << run;
    }
  }
  cuda::set_attention_merged_combine(initial);
  cuda::set_attention_decode_kernel(cuda::AttentionDecodeKernel::kAuto);
}

// A decode batch of one token per sequence at context ctx[s], page-table width `width`: every
// sequence maps pages of one shared pool of `pool` pages (attention only reads them), each row a
// random arrangement, so long contexts in large batches need no large cache.
Batch make_shared_decode_batch(const std::vector<int>& ctx, int page_size, int pool, int width,
                               std::mt19937& rng) {
  Batch b;
  const int S = static_cast<int>(ctx.size());
  b.max_pages_per_seq = width;
  std::vector<int32_t> ids(static_cast<size_t>(pool));
  std::iota(ids.begin(), ids.end(), 0);
  b.seq_starts.push_back(0);
  for (int s = 0; s < S; ++s) {
    std::shuffle(ids.begin(), ids.end(), rng);
    b.token_ids.push_back(static_cast<int32_t>(rng() % 1000));
    b.positions.push_back(ctx[s] - 1);
    b.seq_starts.push_back(s + 1);
    b.context_lens.push_back(ctx[s]);
    const int pages = (ctx[s] + page_size - 1) / page_size;
    for (int j = 0; j < width; ++j) b.page_table.push_back(j < pages ? ids.at(j) : -1);
    b.logit_rows.push_back(s);
  }
  return b;
}

// Decode attention's split layout: the grid's split count follows the batch shape (or is forced),
// each block derives its key range from its own token's context on the device. Contexts around the
// 64-key split granularity and long ones, alone and mixed in batches of 8 and 64, for the default
// policy and forced split counts (1, 3, 7, 64): close to the CPU, deterministic, and the merged
// combine equal to the combine kernel bit for bit.
TEST_F(CudaOps, DecodeAttentionSplitsFollowEachTokensContext) {
  const std::vector<int> contexts = {1, 63, 64, 65, 1000, 5000};
  const int page = 64, pool = 5000 / page + 2;
  const bool initial_merged = cuda::attention_merged_combine();
  struct Shape {
    int64_t hq, hk, d;
    bool cuda_cores = false;  // the CUDA-core decode kernel (else tensor cores where it applies)
  };
  for (const Shape& sh : {Shape{32, 8, 128}, Shape{16, 2, 64}, Shape{32, 8, 128, true}}) {
    cuda::set_attention_decode_kernel(sh.cuda_cores ? cuda::AttentionDecodeKernel::kCudaCores
                                                    : cuda::AttentionDecodeKernel::kAuto);
    auto kc =
        make(random_vec(int64_t{pool} * page * sh.hk * sh.d, rng_, 2.f), {pool, page, sh.hk, sh.d});
    auto vc =
        make(random_vec(int64_t{pool} * page * sh.hk * sh.d, rng_), {pool, page, sh.hk, sh.d});
    const float scale = 1.f / std::sqrt(static_cast<float>(sh.d));
    std::vector<std::vector<int>> batches;
    for (int c : contexts) batches.push_back({c});
    for (int n : {8, 64}) {
      std::vector<int> ctx(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) ctx[static_cast<size_t>(i)] = contexts[(i * 5 + n) % 6];
      batches.push_back(ctx);
    }
    for (const std::vector<int>& ctx : batches) {
      Batch batch = make_shared_decode_batch(ctx, page, pool, pool, rng_);
      const int64_t T = batch.num_tokens();
      BatchMeta mc = cpu_->prepare_batch(batch, page);
      BatchMeta mg = gpu_->prepare_batch(batch, page);
      auto q = make(random_vec(T * sh.hq * sh.d, rng_, 2.f), {T, sh.hq, sh.d});
      auto out = make_out({T, sh.hq, sh.d});
      cpu_->paged_attention(q.c, kc.c, vc.c, scale, mc, out.c);
      for (int splits : {0, 1, 3, 7, 64, -16, -32, -128}) {  // -n: auto splits, n-key alignment
        cuda::set_attention_split_align(splits < 0 ? -splits : 0);
        cuda::set_attention_decode_splits(std::max(splits, 0));
        const std::string what = std::string(sh.cuda_cores ? "CUDA cores" : "auto kernel") +
                                 ", hq " + std::to_string(sh.hq) + " d " + std::to_string(sh.d) +
                                 ", " + std::to_string(T) + " tokens from context " +
                                 std::to_string(ctx[0]) + ", splits " +
                                 (splits ? std::to_string(splits) : std::string("auto"));
        cuda::set_attention_merged_combine(false);
        poison(out.g);
        gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
        expect_close(out, 1.2e-2, "decode attention, " + what);
        const std::vector<float> first = down_gpu(out.g);
        poison(out.g);
        gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
        EXPECT_EQ(down_gpu(out.g), first) << "re-run, " << what;
        // The merged combine is the CUDA-core kernel's (the tensor-core one always launches the
        // combine kernel).
        if (cuda::decode_mma_heads_per_block(sh.hq, sh.hk, sh.d) > 0) continue;
        cuda::set_attention_merged_combine(true);
        for (int run = 0; run < 2; ++run) {
          poison(out.g);
          gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
          EXPECT_EQ(down_gpu(out.g), first) << "merged combine run " << run << ", " << what;
        }
      }
    }
  }
  cuda::set_attention_decode_splits(0);
  cuda::set_attention_split_align(0);
  cuda::set_attention_merged_combine(initial_merged);
  cuda::set_attention_decode_kernel(cuda::AttentionDecodeKernel::kAuto);
}

// One captured decode attention (a CUDA graph of prepare_batch + paged_attention, as the engine's
// decode buckets) replayed on batches of the same shape at other contexts gives exactly what the
// eager launch gives for them (the split count does not depend on the context, so no fixed
// context is set), and stays close to the CPU; for batches of 1, 8 and 64 sequences.
TEST_F(CudaOps, DecodeAttentionGraphServesEveryContext) {
  if (!gpu_->supports_graphs()) GTEST_SKIP() << "no graphs";
  const int64_t hq = 32, hk = 8, d = 128;
  const int page = 64, pool = 5000 / page + 2, width = pool;
  auto kc = make(random_vec(int64_t{pool} * page * hk * d, rng_, 2.f), {pool, page, hk, d});
  auto vc = make(random_vec(int64_t{pool} * page * hk * d, rng_), {pool, page, hk, d});
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const std::vector<int> contexts = {1, 63, 64, 65, 1000, 5000};
  for (int n : {1, 8, 64}) {
    auto q = make(random_vec(n * hq * d, rng_, 2.f), {n, hq, d});
    auto out = make_out({n, hq, d});
    auto batch_at = [&](int shift) {
      std::vector<int> ctx(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) ctx[static_cast<size_t>(i)] = contexts[(i + shift) % 6];
      return make_shared_decode_batch(ctx, page, pool, width, rng_);
    };
    Batch captured = batch_at(2);  // contexts 64, 65, ...: one or two splits of keys
    const int graph = gpu_->capture_graph([&] {
      BatchMeta m = gpu_->prepare_batch(captured, page);
      gpu_->paged_attention(q.g, kc.g, vc.g, scale, m, out.g);
    });
    for (int shift = 0; shift < 6; ++shift) {
      const Batch b = batch_at(shift);
      const std::string what =
          std::to_string(n) + " sequences, first context " + std::to_string(b.context_lens[0]);
      BatchMeta mg = gpu_->prepare_batch(b, page);
      poison(out.g);
      gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
      const std::vector<float> eager = down_gpu(out.g);
      poison(out.g);
      gpu_->stage_batch(b, page);
      gpu_->replay_graph(graph);
      EXPECT_EQ(down_gpu(out.g), eager) << "graph replay vs eager, " << what;
      BatchMeta mc = cpu_->prepare_batch(b, page);
      cpu_->paged_attention(q.c, kc.c, vc.c, scale, mc, out.c);
      expect_close(out, 1.2e-2, "graph replay vs CPU, " + what);
    }
    gpu_->destroy_graph(graph);
  }
}

// Per-call cost of the decode ops at the Qwen3-8B shapes (one token), plain vs fused, on the GPU:
// each op enqueued 8 times on rotating weight copies (more than the L2 holds) inside a CUDA graph,
// the median replay / 8. Prints a table (docs/cuda-backend-notes.md); checks only that the fused
// and plain sequences agree.
TEST_F(CudaOps, DecodeOpsTiming8B) {
  const int64_t H = 4096, Hq = 32, Hk = 8, D = 128, I = 12288, W = (Hq + 2 * Hk) * D;
  const int kRuns = 8;
  const int kFused16x2 = cuda::kGemv16x2;
  auto buf = [&](int64_t n, float scale = 1.f) {
    DeviceBuffer b = gpu_->allocate(static_cast<size_t>(n) * 2);
    gpu_->fill_random(b.data(), DType::BF16, n, rng_(), scale);
    return b;
  };
  // Weight copies: ceil(1 GiB / bytes) + 1 of each shape.
  struct Weights {
    DeviceBuffer b;
    int64_t n, k;
    int copies;
    Tensor at(int i) const {
      return Tensor(static_cast<char*>(b.data()) + static_cast<size_t>(i % copies) * n * k * 2,
                    DType::BF16, {n, k});
    }
  };
  auto weights = [&](int64_t n, int64_t k) {
    Weights w;
    w.n = n;
    w.k = k;
    w.copies = static_cast<int>((int64_t{1} << 30) / (n * k * 2) + 2);
    w.b = buf(n * k * w.copies, 0.02f);
    return w;
  };
  Weights wqkv = weights(W, H), wo = weights(H, Hq * D), wgu = weights(2 * I, H),
          wdown = weights(H, I);
  DeviceBuffer hb = buf(H), h2b = buf(H), ob = buf(H), xb = buf(H), qkvb = buf(W), qb = buf(Hq * D),
               kb = buf(Hk * D), vb = buf(Hk * D), attnb = buf(Hq * D), gub = buf(2 * I),
               actb = buf(I), normw = buf(H), qnw = buf(D), knw = buf(D);
  Tensor h(hb.data(), DType::BF16, {1, H}), h2(h2b.data(), DType::BF16, {1, H});
  Tensor o(ob.data(), DType::BF16, {1, H}), x(xb.data(), DType::BF16, {1, H});
  Tensor qkv(qkvb.data(), DType::BF16, {1, W}), q(qb.data(), DType::BF16, {1, Hq, D});
  Tensor k(kb.data(), DType::BF16, {1, Hk, D}), v(vb.data(), DType::BF16, {1, Hk, D});
  Tensor attn(attnb.data(), DType::BF16, {1, Hq, D}), gu(gub.data(), DType::BF16, {1, 2 * I});
  Tensor attn2 = attn.reshape({1, Hq * D});
  Tensor act(actb.data(), DType::BF16, {1, I}), nw(normw.data(), DType::BF16, {H});
  Tensor qn(qnw.data(), DType::BF16, {D}), kn(knw.data(), DType::BF16, {D});
  const Tensor none;
  const RopeParams rope{1e6, static_cast<int32_t>(D)};

  for (int ctx : {512, 8192}) {
    const int page = 64, pages = (ctx + page - 1) / page + 1;
    Batch batch = make_batch({1}, {ctx}, page, pages, rng_);
    DeviceBuffer kcb = buf(int64_t{pages} * page * Hk * D),
                 vcb = buf(int64_t{pages} * page * Hk * D);
    Tensor kc(kcb.data(), DType::BF16, {pages, page, Hk, D});
    Tensor vc(vcb.data(), DType::BF16, {pages, page, Hk, D});
    gpu_->reserve_attention_scratch(1, Hq, D, ctx);
    BatchMeta meta = gpu_->prepare_batch(batch, page);
    auto time_us = [&](const std::function<void(int)>& op) {
      auto step = [&] {
        for (int i = 0; i < kRuns; ++i) op(i);
      };
      std::vector<float> ms;
      if (gpu_->supports_graphs()) {
        const int id = gpu_->capture_graph(step);
        ms = gpu_->time_ms([&] { gpu_->replay_graph(id); }, 3, 20);
        gpu_->destroy_graph(id);
      } else {
        ms = gpu_->time_ms(step, 3, 20);
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2] * 1e3 / kRuns;
    };
    struct Row {
      std::string name;
      double us;
    };
    std::vector<Row> rows;
    auto add = [&](const std::string& name, const std::function<void(int)>& op) {
      rows.push_back({name, time_us(op)});
    };
    const std::string c = " (ctx " + std::to_string(ctx) + ")";
    const bool merged = cuda::attention_merged_combine();
    cuda::set_attention_merged_combine(true);
    add("attention decode, merged combine" + c,
        [&](int) { gpu_->paged_attention(q, kc, vc, 0.088f, meta, attn); });
    cuda::set_attention_merged_combine(false);
    add("attention decode + combine kernel" + c,
        [&](int) { gpu_->paged_attention(q, kc, vc, 0.088f, meta, attn); });
    for (int waves : {1, 2, 4, 8}) {  // the split policy's target (default kDecodeSplitWaves)
      cuda::set_attention_split_waves(waves);
      add("attention decode + combine, " + std::to_string(waves) + " waves" + c,
          [&](int) { gpu_->paged_attention(q, kc, vc, 0.088f, meta, attn); });
    }
    cuda::set_attention_split_waves(-1);
    for (int align : {16, 32, 128}) {  // keys per split a multiple of this (default 64)
      cuda::set_attention_split_align(align);
      add("attention decode + combine, align " + std::to_string(align) + c,
          [&](int) { gpu_->paged_attention(q, kc, vc, 0.088f, meta, attn); });
    }
    cuda::set_attention_split_align(0);
    cuda::set_attention_merged_combine(merged);
    if (ctx == 512) {
      auto norm = [&] { gpu_->add_rmsnorm(h, o, nw, 1e-6f, NormKind::kPlain, x); };
      add("add_rmsnorm", [&](int) { norm(); });
      add("linear q 4096x4096",
          [&](int i) { gpu_->linear(x, wqkv.at(i).rows(0, Hq * D), none, q); });
      add("linear k 1024x4096",
          [&](int i) { gpu_->linear(x, wqkv.at(i).rows(Hq * D, Hk * D), none, k); });
      add("linear q, k, v (3 GEMVs)", [&](int i) {
        gpu_->linear(x, wqkv.at(i).rows(0, Hq * D), none, q);
        gpu_->linear(x, wqkv.at(i).rows(Hq * D, Hk * D), none, k);
        gpu_->linear(x, wqkv.at(i).rows((Hq + Hk) * D, Hk * D), none, v);
      });
      add("linear qkv 6144x4096", [&](int i) { gpu_->linear(x, wqkv.at(i), none, qkv); });
      add("add_rmsnorm + linear qkv", [&](int i) {
        norm();
        gpu_->linear(x, wqkv.at(i), none, qkv);
      });
      for (int variant : {-1, kFused16x2, -2}) {  // -2: auto, not persistent
        cuda::set_gemv_fused_variant(variant == -2 ? -1 : variant);
        cuda::set_gemv_norm_persistent(variant != -2);
        add("add_rmsnorm_linear qkv (fused" + std::string(variant == -1   ? ")"
                                                          : variant == -2 ? ", not persistent)"
                                                                          : ", 16x2)"),
            [&](int i) {
              gpu_->add_rmsnorm_linear(h, o, nw, 1e-6f, NormKind::kPlain, h2, x, wqkv.at(i), none,
                                       qkv);
            });
      }
      cuda::set_gemv_fused_variant(-1);
      cuda::set_gemv_norm_persistent(true);
      add("qk_norm_rope + kv_write", [&](int) {
        Tensor q1 = q, k1 = k;
        gpu_->qk_norm_rope(q1, k1, qn, kn, 1e-6f, NormKind::kPlain, rope, meta);
        gpu_->kv_write(k, v, kc, vc, meta);
      });
      add("qkv_norm_rope_write", [&](int) {
        gpu_->qkv_norm_rope_write(qkv, qn, kn, 1e-6f, NormKind::kPlain, rope, meta, q, k, v, kc,
                                  vc);
      });
      add("linear o 4096x4096", [&](int i) { gpu_->linear(attn2, wo.at(i), none, o); });
      add("qkv_norm_rope_write + attention + linear o", [&](int i) {
        gpu_->qkv_norm_rope_write(qkv, qn, kn, 1e-6f, NormKind::kPlain, rope, meta, q, k, v, kc,
                                  vc);
        gpu_->paged_attention(q, kc, vc, 0.088f, meta, attn);
        gpu_->linear(attn2, wo.at(i), none, o);
      });
      add("linear gate_up 24576x4096", [&](int i) { gpu_->linear(x, wgu.at(i), none, gu); });
      add("silu_mul", [&](int) { gpu_->silu_mul(gu, act); });
      add("linear_silu_mul", [&](int i) { gpu_->linear_silu_mul(x, wgu.at(i), gu, act); });
      add("add_rmsnorm + linear gate_up + silu_mul", [&](int i) {
        norm();
        gpu_->linear(x, wgu.at(i), none, gu);
        gpu_->silu_mul(gu, act);
      });
      add("add_rmsnorm + linear_silu_mul", [&](int i) {
        norm();
        gpu_->linear_silu_mul(x, wgu.at(i), gu, act);
      });
      for (int variant : {-1, kFused16x2, -2}) {  // -2: auto, not persistent
        cuda::set_gemv_fused_variant(variant == -2 ? -1 : variant);
        cuda::set_gemv_norm_persistent(variant != -2);
        add("add_rmsnorm_linear_silu_mul (fused" + std::string(variant == -1   ? ")"
                                                               : variant == -2 ? ", not persistent)"
                                                                               : ", 16x2)"),
            [&](int i) {
              gpu_->add_rmsnorm_linear_silu_mul(h, o, nw, 1e-6f, NormKind::kPlain, h2, x, wgu.at(i),
                                                gu, act);
            });
      }
      cuda::set_gemv_fused_variant(-1);
      cuda::set_gemv_norm_persistent(true);
      add("linear down 4096x12288", [&](int i) { gpu_->linear(act, wdown.at(i), none, o); });
      for (int variant : {6, 7, 8}) {  // K split over 2 / 4 warps per row pair (kernels.h)
        const std::string v = " (variant " + std::to_string(variant) + ")";
        gpu_->set_gemv_variant(variant);
        add("linear o 4096x4096" + v, [&](int i) { gpu_->linear(attn2, wo.at(i), none, o); });
        add("linear down 4096x12288" + v, [&](int i) { gpu_->linear(act, wdown.at(i), none, o); });
        add("add_rmsnorm_linear qkv" + v, [&](int i) {
          gpu_->add_rmsnorm_linear(h, o, nw, 1e-6f, NormKind::kPlain, h2, x, wqkv.at(i), none, qkv);
        });
        add("add_rmsnorm_linear_silu_mul" + v, [&](int i) {
          gpu_->add_rmsnorm_linear_silu_mul(h, o, nw, 1e-6f, NormKind::kPlain, h2, x, wgu.at(i), gu,
                                            act);
        });
      }
      gpu_->set_gemv_variant(4);
    }
    for (const Row& r : rows)
      std::printf("| decode op (8B, T=1) | %-48s | %8.2f us |\n", r.name.c_str(), r.us);
    std::fflush(stdout);
  }
}

struct AttnCase {
  std::vector<int> news, ctx;
  int64_t hq, hk, d;
  int page;
};

class CudaAttention : public CudaOps, public ::testing::WithParamInterface<AttnCase> {};

// A prefill form of the attention (prefill_attention.h): a variant, wgmma128's switches, the
// kernel form that must run (kNone: not checked) and its name.
struct PrefillFormCase {
  int variant;
  bool head_dim_256, tma, overlap;
  cuda::PrefillForm expect;
  std::string what;
};

// The prefill forms for a case of head_dim d and page size `page`: every variant as it is, then
// wgmma128's TMA form and its softmax-under-P-V form (head_dim 64 / 128), and at head_dim 256
// wgmma128's 64-key-tile form. Where wgmma128 cannot run (compute capability other than 9.0) its
// forms run mma8w; a page size that is not a power of two from 8 keeps the cp.async form.
std::vector<PrefillFormCase> prefill_forms(int64_t d, int page) {
  std::vector<PrefillFormCase> forms;
  for (int v = 0; v < cuda::prefill_attention_variant_count(); ++v)
    forms.push_back({v, false, false, false, cuda::PrefillForm::kNone,
                     std::string("prefill kernel ") + cuda::prefill_attention_variant_name(v)});
  const int wgmma = cuda::find_prefill_attention_variant("wgmma128");
  const bool hopper = cuda::prefill_wgmma_available();
  const bool tma_pages = page >= 8 && (page & (page - 1)) == 0;
  auto on_hopper = [&](cuda::PrefillForm f) { return hopper ? f : cuda::PrefillForm::kMma8w; };
  const cuda::PrefillForm tma =
      on_hopper(tma_pages ? cuda::PrefillForm::kWgmmaTma : cuda::PrefillForm::kWgmma);
  forms.push_back(
      {wgmma, d == 256, true, false, tma, "prefill kernel wgmma128, K/V by tensor-map loads"});
  if (d == 256) {
    forms.push_back({wgmma, true, false, false, on_hopper(cuda::PrefillForm::kWgmma),
                     "prefill kernel wgmma128, head_dim 256 form"});
  } else {
    forms.push_back(
        {wgmma, false, false, true,
         on_hopper(tma_pages ? cuda::PrefillForm::kWgmmaOverlap : cuda::PrefillForm::kWgmma),
         "prefill kernel wgmma128, softmax under P V"});
  }
  return forms;
}

TEST_P(CudaAttention, MatchesCpu) {
  const AttnCase& c = GetParam();
  int pages_needed = 0;
  for (int x : c.ctx) pages_needed += (x + c.page - 1) / c.page;
  const int pool = pages_needed + 3;
  Batch batch = make_batch(c.news, c.ctx, c.page, pool, rng_);
  const int64_t T = batch.num_tokens();
  BatchMeta mc = cpu_->prepare_batch(batch, c.page);
  BatchMeta mg = gpu_->prepare_batch(batch, c.page);
  // Batches with a run of more than 16 new tokens take the prefill kernels: check every form
  // (prefill_forms()); the others take the decode kernel whatever the variant.
  // Decode batches: the tensor-core kernel (variant 0, where the shape allows; variant 2 forced
  // to its key-rows form) and the CUDA-core one (variant 1).
  const bool prefill = *std::max_element(c.news.begin(), c.news.end()) > 16;
  const int64_t row = c.hk * c.d;  // elements of one cache slot
  std::vector<float> kv[2] = {random_vec(int64_t{pool} * c.page * row, rng_, 2.f),
                              random_vec(int64_t{pool} * c.page * row, rng_)};
  if (prefill) {
    // Every cache slot no sequence has a key in (the rest of each last page, the spare pages)
    // holds NaN: a prefill kernel that reads past a sequence's keys, even to multiply by a zero
    // probability, turns its rows into NaN.
    std::vector<bool> used(static_cast<size_t>(pool) * c.page, false);
    for (size_t sq = 0; sq < c.ctx.size(); ++sq)
      for (int k = 0; k < c.ctx[sq]; ++k) {
        const int32_t pg = batch.page_table[sq * batch.max_pages_per_seq + k / c.page];
        used[static_cast<size_t>(pg) * c.page + k % c.page] = true;
      }
    for (size_t slot = 0; slot < used.size(); ++slot)
      if (!used[slot])
        for (auto& v : kv)
          std::fill_n(v.begin() + static_cast<int64_t>(slot) * row, row, std::nanf(""));
  }
  auto q = make(random_vec(T * c.hq * c.d, rng_, 2.f), {T, c.hq, c.d});
  auto kc = make(kv[0], {pool, c.page, c.hk, c.d});
  auto vc = make(kv[1], {pool, c.page, c.hk, c.d});
  auto out = make_out({T, c.hq, c.d});
  const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
  cpu_->paged_attention(q.c, kc.c, vc.c, scale, mc, out.c);
  const int initial = cuda::prefill_attention_variant();
  const std::vector<PrefillFormCase> forms =
      prefill ? prefill_forms(c.d, c.page) : std::vector<PrefillFormCase>{};
  const int runs = prefill ? static_cast<int>(forms.size()) : 3;
  for (int v = 0; v < runs; ++v) {
    if (prefill) {
      const PrefillFormCase& f = forms[static_cast<size_t>(v)];
      cuda::set_prefill_attention_variant(f.variant);
      cuda::set_prefill_wgmma_head_dim_256(f.head_dim_256);
      cuda::set_prefill_wgmma_tma(f.tma);
      cuda::set_prefill_wgmma_overlap(f.overlap);
    } else {
      cuda::set_attention_decode_kernel(v == 1 ? cuda::AttentionDecodeKernel::kCudaCores
                                               : cuda::AttentionDecodeKernel::kAuto);
      cuda::set_decode_mma_form(v == 2 ? cuda::DecodeMmaForm::kKeyRows
                                       : cuda::DecodeMmaForm::kAuto);
    }
    const std::string what =
        prefill ? forms[static_cast<size_t>(v)].what
        : cuda::decode_mma_heads_per_block(c.hq, c.hk, c.d) > 0
            ? std::string("decode kernel, tensor cores") + (v == 2 ? ", key rows forced" : "")
            : std::string("decode kernel, CUDA cores");
    poison(out.g);
    gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
    expect_close(out, 1.2e-2, "paged_attention, " + what);
    if (prefill && forms[static_cast<size_t>(v)].expect != cuda::PrefillForm::kNone) {
      EXPECT_EQ(static_cast<int>(cuda::last_prefill_form()),
                static_cast<int>(forms[static_cast<size_t>(v)].expect))
          << what << ": another kernel form ran";
    }
    // Determinism: the same inputs give bit-identical output.
    auto first = down_gpu(out.g);
    poison(out.g);
    gpu_->paged_attention(q.g, kc.g, vc.g, scale, mg, out.g);
    EXPECT_EQ(down_gpu(out.g), first) << what;
  }
  cuda::set_prefill_attention_variant(initial);
  cuda::set_prefill_wgmma_head_dim_256(false);
  cuda::set_prefill_wgmma_tma(false);
  cuda::set_prefill_wgmma_overlap(false);
  cuda::set_attention_decode_kernel(cuda::AttentionDecodeKernel::kAuto);
  cuda::set_decode_mma_form(cuda::DecodeMmaForm::kAuto);
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
// Page sizes against the K/V tiles of 128 keys (wgmma128's TMA boxes are a page, or 128 keys of a
// larger one): pages of 256 keys with the chunk starting mid-page, a page of exactly one tile at
// head_dim 64, the smallest TMA page (8 keys: 16 boxes a panel) and a page of 24 keys (not a
// power of two: the cp.async form).
INSTANTIATE_TEST_SUITE_P(PrefillPages, CudaAttention,
                         ::testing::Values(AttnCase{{300}, {1300}, 8, 2, 128, 256},
                                           AttnCase{{257}, {900}, 8, 2, 64, 128},
                                           AttnCase{{200}, {700}, 8, 2, 128, 8},
                                           AttnCase{{150}, {500}, 8, 2, 128, 24}));
// head_dim 256 (Qwen3.5's gated attention, GQA 4:1): the mma.sync kernel with Q in shared memory
// and wgmma128's 64-key-tile form, a long prompt, a chunk continuing a cached prefix mid-tile, and
// decode tokens mixed in.
INSTANTIATE_TEST_SUITE_P(PrefillHeadDim256, CudaAttention,
                         ::testing::Values(AttnCase{{2100}, {2100}, 16, 4, 256, 64},
                                           AttnCase{
                                               {300, 1, 130}, {300, 900, 1130}, 16, 4, 256, 64},
                                           AttnCase{{65, 20}, {65, 20}, 8, 8, 256, 16}));

TEST_F(CudaOps, Argmax) {
  // 151936: the vectorized path (16-byte rows); 1001 and a row start off 16 bytes: the scalar one.
  for (const int64_t V : {int64_t{151936}, int64_t{1001}}) {
    for (const DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("V=" + std::to_string(V) + " " + std::string(dtype_name(dtype)));
      const int64_t R = 5;
      std::vector<float> logits = random_vec(R * V, rng_, 5.f);
      logits[3 * V + 77] = 9.f;  // ties: the lower index wins (also within one 16-byte vector)
      logits[3 * V + 78] = 9.f;
      logits[3 * V + 777] = 9.f;
      logits[4 * V + V - 1] = 9.f;  // the last element
      Pair lg = make(logits, {R, V}, dtype);
      const std::vector<float> rounded = down_gpu(lg.g);
      auto ids = gpu_->allocate(R * 4);
      Tensor idt = ids.view(DType::I32, {R});
      gpu_->argmax(lg.g, idt);
      std::vector<int32_t> got(R);
      gpu_->download(got.data(), ids.data(), R * 4);
      for (int64_t r = 0; r < R; ++r) {
        auto row = rounded.begin() + r * V;
        EXPECT_EQ(got[r], std::max_element(row, row + V) - row) << "row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace syv
