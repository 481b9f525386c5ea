// The CUDA hybrid ops (Gated DeltaNet conv1d and delta rule, gated RMSNorm, sigmoid gate) against
// the CPU reference ops on random inputs, with state carried in from random slots (as after a
// checkpoint restore) and sequence lengths around the chunk boundaries (1, 63, 64, 65, 1000).
// Skipped cleanly without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "backend/memory_plan.h"
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

Tensor no_saves;  // the ops' state-save target when a batch saves nothing

// A batch of sequences with `news[s]` new tokens each, using state slots `slots` (distinct).
Batch hybrid_batch(const std::vector<int>& news, const std::vector<int32_t>& slots,
                   std::mt19937& rng) {
  std::vector<int> ctx;
  for (int n : news) ctx.push_back(n + static_cast<int>(rng() % 50));
  int pages = 0;
  for (int c : ctx) pages += (c + 15) / 16;
  Batch b = make_batch(news, ctx, 16, pages, rng);
  b.state_slots = slots;
  return b;
}

// In-pass state saves: saves[s] lists the `after` counts of sequence s; checkpoint i (in order over
// the batch) receives the i-th save. Returns the number of saves.
int64_t add_saves(Batch& b, const std::vector<std::vector<int32_t>>& saves) {
  if (saves.empty()) return 0;
  b.state_save_starts.assign(1, 0);
  for (const auto& list : saves) {
    for (int32_t after : list) {
      b.state_save_dests.push_back(static_cast<int32_t>(b.state_save_after.size()));
      b.state_save_after.push_back(after);
    }
    b.state_save_starts.push_back(static_cast<int32_t>(b.state_save_after.size()));
  }
  return static_cast<int64_t>(b.state_save_after.size());
}

class CudaHybridOps : public CudaOps {
 protected:
  void check_conv(const std::vector<int>& news, const std::vector<int32_t>& slots, int64_t C,
                  int64_t K, const std::vector<std::vector<int32_t>>& saves = {}) {
    const int64_t T = std::accumulate(news.begin(), news.end(), int64_t{0});
    const int64_t num_slots =
        std::max<int64_t>(8, *std::max_element(slots.begin(), slots.end()) + 1);
    Batch batch = hybrid_batch(news, slots, rng_);
    const int64_t N = std::max<int64_t>(add_saves(batch, saves), 1);
    BatchMeta mc = cpu_->prepare_batch(batch, 16);
    BatchMeta mg = gpu_->prepare_batch(batch, 16);
    auto x = make(random_vec(T * C, rng_), {T, C});
    auto w = make(random_vec(C * K, rng_, 0.5f), {C, K});
    auto state = make(random_vec(num_slots * (K - 1) * C, rng_), {num_slots, K - 1, C}, DType::F32);
    auto ckpt = make(random_vec(N * (K - 1) * C, rng_), {N, K - 1, C}, DType::F32);
    auto out = make_out({T, C});
    cpu_->causal_conv1d_silu(x.c, w.c, state.c, ckpt.c, mc, out.c);
    gpu_->causal_conv1d_silu(x.g, w.g, state.g, ckpt.g, mg, out.g);
    expect_close(out, 1e-2, "conv1d out");
    expect_close(state, 1e-6, "conv1d window");
    expect_close(ckpt, 1e-6, "conv1d saved windows");
  }

  void check_gdn(const std::vector<int>& news, const std::vector<int32_t>& slots, GdnShape g,
                 DType state_dtype, double out_bound, double state_bound,
                 const std::vector<std::vector<int32_t>>& saves = {}) {
    const int64_t T = std::accumulate(news.begin(), news.end(), int64_t{0});
    const int64_t num_slots =
        std::max<int64_t>(8, *std::max_element(slots.begin(), slots.end()) + 1);
    const int64_t Hv = g.num_v_heads, dk = g.k_head_dim, dv = g.v_head_dim;
    Batch batch = hybrid_batch(news, slots, rng_);
    const int64_t N = std::max<int64_t>(add_saves(batch, saves), 1);
    BatchMeta mc = cpu_->prepare_batch(batch, 16);
    BatchMeta mg = gpu_->prepare_batch(batch, 16);
    auto qkv = make(random_vec(T * g.conv_dim(), rng_), {T, g.conv_dim()});
    auto ba = make(random_vec(T * 2 * Hv, rng_, 3.f), {T, 2 * Hv}, DType::F32);
    auto a_log = make(random_vec(Hv, rng_), {Hv});
    auto dt_bias = make(random_vec(Hv, rng_), {Hv});
    // States as a checkpoint would hold them (bf16-exact so both dtypes start equal).
    auto state = make(random_vec(num_slots * Hv * dk * dv, rng_, 0.3f), {num_slots, Hv, dk, dv},
                      state_dtype);
    auto ckpt = make(random_vec(N * Hv * dk * dv, rng_, 0.3f), {N, Hv, dk, dv}, state_dtype);
    auto out = make_out({T, Hv * dv});
    cpu_->gated_delta_rule(qkv.c, ba.c, a_log.c, dt_bias.c, g, state.c, ckpt.c, mc, out.c);
    gpu_->gated_delta_rule(qkv.g, ba.g, a_log.g, dt_bias.g, g, state.g, ckpt.g, mg, out.g);
    expect_close(out, out_bound, "gdn out");
    expect_close(state, state_bound, "gdn state");
    expect_close(ckpt, state_bound, "gdn saved states");
  }
};

TEST_F(CudaHybridOps, Conv1dSequentialPath) {
  check_conv({1, 1, 3, 16}, {5, 0, 7, 2}, 96, 4);
  check_conv({1}, {3}, 40, 2);
}

TEST_F(CudaHybridOps, Conv1dParallelPathAcrossChunkBoundaries) {
  check_conv({1, 63, 64, 65, 17}, {1, 6, 3, 0, 4}, 96, 4);
  check_conv({1000, 2}, {7, 2}, 72, 3);
  check_conv({71}, {4}, 80, 4);
  // Channels not a multiple of 8 (the element-a-thread kernel) and more than one block of
  // channel vectors (the 8-channel kernel's grid y).
  check_conv({70, 3}, {2, 5}, 100, 4);
  check_conv({70, 3}, {2, 5}, 2056, 4);
}

TEST_F(CudaHybridOps, GatedDeltaRuleSmallHeads) {
  // dk 16, dv 12 (one fixture's shape: dv not a multiple of 8), GQA 2 value heads per key head.
  const GdnShape g{2, 4, 16, 12};
  check_gdn({1, 63, 64, 65}, {3, 0, 6, 1}, g, DType::F32, 1e-2, 1e-4);
  check_gdn({1, 1, 1, 2}, {7, 2, 4, 5}, g, DType::F32, 1e-2, 1e-4);
  check_gdn({71, 1}, {1, 0}, GdnShape{2, 4, 8, 12}, DType::F32, 1e-2, 1e-4);  // dk 8
}

// Runs `body` with the token-by-token kernel in each thread layout (kernels.h GdnRecurrentForm).
void for_each_recurrent_form(const std::function<void()>& body) {
  for (auto form : {cuda::GdnRecurrentForm::kRows, cuda::GdnRecurrentForm::kColumns}) {
    SCOPED_TRACE(form == cuda::GdnRecurrentForm::kRows ? "rows form" : "columns form");
    cuda::set_gdn_recurrent_form(form);
    body();
  }
  cuda::set_gdn_recurrent_form(cuda::GdnRecurrentForm::kAuto);
}

TEST_F(CudaHybridOps, GatedDeltaRuleQwen35Heads) {
  const GdnShape g{16, 32, 128, 128};  // Qwen3.5 9B-class / Qwen3-Next
  for_each_recurrent_form([&] {
    check_gdn({1, 1, 1}, {4, 1, 6}, g, DType::F32, 1e-2, 1e-4);
    check_gdn({5, 64, 1000}, {0, 7, 3}, g, DType::F32, 1e-2, 1e-4);
    // The rows form's other key head dims (dk 64 and 32 at dv 128).
    check_gdn({1, 3, 2}, {2, 0, 5}, GdnShape{4, 8, 64, 128}, DType::F32, 1e-2, 1e-4);
    check_gdn({2, 1}, {1, 3}, GdnShape{2, 4, 32, 128}, DType::F32, 1e-2, 1e-4);
  });
}

// The chunked kernel (sequences of >= CudaBackend::kGdnChunkedFrom tokens) beside the
// token-by-token one in one batch: lengths on both sides of the split and of the 64-token chunks.
TEST_F(CudaHybridOps, GatedDeltaRuleChunkedAndTokenByTokenInOneBatch) {
  const GdnShape g{16, 32, 128, 128};
  ASSERT_EQ(CudaBackend::kGdnChunkedFrom, 16);
  check_gdn({15, 16, 17, 128, 129, 1}, {5, 0, 7, 2, 3, 6}, g, DType::F32, 1e-2, 1e-4);
  check_gdn({300, 64}, {1, 4}, GdnShape{4, 8, 64, 96}, DType::F32, 1e-2, 1e-4);  // dk 64, dv 96
  check_gdn({200}, {2}, GdnShape{2, 4, 16, 12}, DType::F32, 1e-2, 1e-4);  // dv < one block slice
  // Every sequence token by token (the batch-invariant path) on the same shapes.
  gpu_->set_gdn_chunked_from(0);
  check_gdn({15, 16, 17, 128, 129, 1}, {5, 0, 7, 2, 3, 6}, g, DType::F32, 1e-2, 1e-4);
  gpu_->set_gdn_chunked_from(CudaBackend::kGdnChunkedFrom);
}

// In-pass state saves (Batch::state_save_*): the windows and states after given token counts,
// inside 64-token chunks and on their edges, on both GDN kernels and both conv paths.
TEST_F(CudaHybridOps, StateSavesInsideTheChunks) {
  check_conv({1, 3, 16}, {5, 0, 7}, 96, 4, {{1}, {1, 2}, {3, 16}});
  check_conv({70, 2, 130}, {1, 6, 3}, 96, 4, {{1, 2, 3, 64}, {}, {48, 129}});
  const GdnShape g{16, 32, 128, 128};
  check_gdn({15, 200, 3}, {5, 0, 7}, g, DType::F32, 1e-2, 1e-4,
            {{4, 15}, {1, 63, 64, 100, 199, 200}, {2}});
  check_gdn({130, 1}, {2, 4}, g, DType::BF16, 2e-2, 1e-2, {{16, 80, 128}, {}});
  gpu_->set_gdn_chunked_from(0);  // the batch-invariant path: token by token
  for_each_recurrent_form([&] {
    check_gdn({15, 200}, {5, 0}, g, DType::F32, 1e-2, 1e-4, {{4, 15}, {63, 64, 100}});
    check_gdn({3, 9}, {1, 2}, g, DType::BF16, 2e-2, 1e-2, {{1, 3}, {8}});
  });
  gpu_->set_gdn_chunked_from(CudaBackend::kGdnChunkedFrom);
}

TEST_F(CudaHybridOps, GatedDeltaRuleBf16State) {
  // The state rounded to bf16 once per launch: the outputs of a short step stay close.
  const GdnShape g{16, 32, 128, 128};
  for_each_recurrent_form([&] { check_gdn({1, 1, 4}, {2, 5, 0}, g, DType::BF16, 2e-2, 1e-2); });
  check_gdn({100, 3}, {1, 6}, g, DType::BF16, 2e-2, 1e-2);  // the chunked kernel too
}

// The chunked rule's kernels (CudaBackend::set_gdn_phases, cuda::set_gdn_mma): the three phases
// on the CUDA cores, each phase's tensor-core form (the walk's is the default, so the cases above
// took it) and all three, and the one-kernel walk (gated_delta_chunked.cu), on the same cases:
// beside token-by-token sequences, other head dims, dv under one slice, state saves inside and on
// the edges of chunks, a bf16 state. A batch of many short sequences takes the one kernel even with
// the phases on (memory_plan.h kGdnPhasesSpareChunks).
TEST_F(CudaHybridOps, GatedDeltaRuleOneKernelAndThreePhases) {
  const GdnShape g{16, 32, 128, 128};
  struct Form {
    const char* name;
    bool phases;
    unsigned mma;
    cuda::GdnWuForm wu = cuda::GdnWuForm::kBlocked;  // phase 1 on the CUDA cores
    bool out_products = false;                       // phase 3 on the CUDA cores by products
  };
  for (const Form& f : {Form{"one kernel", false, 0}, Form{"three phases on CUDA cores", true, 0},
                        Form{"phase 1 on tensor cores", true, cuda::kGdnMmaWu},
                        Form{"walk on tensor cores", true, cuda::kGdnMmaWalk},
                        Form{"phase 3 on tensor cores", true, cuda::kGdnMmaOutput},
                        Form{"all on tensor cores", true, cuda::kGdnMmaAll},
                        Form{"phase 1 by columns", true, 0, cuda::GdnWuForm::kColumns},
                        Form{"phase 1 by columns, walk on tensor cores", true, cuda::kGdnMmaWalk,
                             cuda::GdnWuForm::kColumns},
                        Form{"phase 1 by products", true, 0, cuda::GdnWuForm::kProducts},
                        Form{"phase 1 by products, walk on tensor cores", true, cuda::kGdnMmaWalk,
                             cuda::GdnWuForm::kProducts},
                        Form{"phase 3 by products", true, 0, cuda::GdnWuForm::kBlocked, true},
                        Form{"phases 1 and 3 by products, walk on tensor cores", true,
                             cuda::kGdnMmaWalk, cuda::GdnWuForm::kProducts, true}}) {
    SCOPED_TRACE(f.name);
    gpu_->set_gdn_phases(f.phases);
    cuda::set_gdn_mma(f.mma);
    cuda::set_gdn_wu_form(f.wu);
    cuda::set_gdn_output_products(f.out_products);
    const bool phases = f.phases;
    const uint64_t calls0 = gpu_->gdn_phases_calls();
    check_gdn({15, 16, 17, 128, 129, 1}, {5, 0, 7, 2, 3, 6}, g, DType::F32, 1e-2, 1e-4);
    check_gdn({5, 64, 1000}, {0, 7, 3}, g, DType::F32, 1e-2, 1e-4);
    check_gdn({300, 64}, {1, 4}, GdnShape{4, 8, 64, 96}, DType::F32, 1e-2, 1e-4);
    check_gdn({200}, {2}, GdnShape{2, 4, 16, 12}, DType::F32, 1e-2, 1e-4);
    check_gdn({71, 1}, {1, 0}, GdnShape{2, 4, 8, 12}, DType::F32, 1e-2, 1e-4);  // dk 8
    check_gdn({15, 200, 3}, {5, 0, 7}, g, DType::F32, 1e-2, 1e-4,
              {{4, 15}, {1, 63, 64, 100, 199, 200}, {2}});
    check_gdn({130, 1}, {2, 4}, g, DType::BF16, 2e-2, 1e-2, {{16, 80, 128}, {}});
    check_gdn({100, 3}, {1, 6}, g, DType::BF16, 2e-2, 1e-2);
    // dv 160: the tensor-core phases 1 and 3 take dv <= 128 (the CUDA cores' do this one).
    check_gdn({130, 2}, {3, 1}, GdnShape{2, 4, 32, 160}, DType::F32, 1e-2, 1e-4);
    EXPECT_EQ(gpu_->gdn_phases_calls() - calls0, phases ? 9u : 0u);
  }
  cuda::set_gdn_mma(cuda::kGdnMmaDefault);
  cuda::set_gdn_wu_form(cuda::kGdnWuFormDefault);
  cuda::set_gdn_output_products(cuda::kGdnOutputProductsDefault);
  // 60 sequences of 16 tokens: 60 chunks > ceil(960 / 64) + kGdnPhasesSpareChunks.
  const uint64_t calls0 = gpu_->gdn_phases_calls();
  std::vector<int32_t> slots(60);
  std::iota(slots.begin(), slots.end(), 0);
  check_gdn(std::vector<int>(60, 16), slots, GdnShape{2, 4, 32, 32}, DType::F32, 1e-2, 1e-4);
  EXPECT_EQ(gpu_->gdn_phases_calls(), calls0);
  EXPECT_GT(60, gdn_phases_max_chunks(60 * 16));
}

// The memory plan's estimate of the three phases' scratch bounds what they take for any batch
// allowed them: as many sequences as tokens, the most chunks (memory_plan.h).
TEST(CudaHybridScratch, GdnPhasesScratchWithinThePlan) {
  for (const int64_t T : {1, 16, 17, 1000, 8192, 32768}) {
    for (const int32_t dv : {12, 128}) {
      cuda::GdnArgs a{};
      a.hv = 32;
      a.dv = dv;
      a.num_seqs = static_cast<int32_t>(T);
      const int64_t chunks = gdn_phases_max_chunks(T);
      EXPECT_LE(cuda::gdn_phases_scratch_bytes(a, chunks),
                static_cast<int64_t>(estimate_gdn_phases_scratch_bytes(T, 32, dv)))
          << T << " tokens, dv " << dv;
    }
  }
}

TEST_F(CudaHybridOps, GatedRmsNorm) {
  for (int64_t D : {128, 12}) {
    const int64_t N = 301;
    auto x = make(random_vec(N * D, rng_), {N, D});
    auto z = make(random_vec(N * D, rng_, 3.f), {N, D});
    auto w = make(random_vec(D, rng_), {D});
    auto out = make_out({N, D});
    cpu_->gated_rmsnorm(x.c, z.c, w.c, 1e-6f, out.c);
    gpu_->gated_rmsnorm(x.g, z.g, w.g, 1e-6f, out.g);
    expect_close(out, 1e-2, "gated_rmsnorm D=" + std::to_string(D));
  }
}

// The GDN output norm fused into out_proj's GEMV (few tokens) gives the unfused pair's output
// (the prologue repeats gated_rmsnorm's sums in its order, so the GEMV's input is the same; the
// GEMV's launch shape may split K differently from linear()'s: bf16 rounding apart), and
// GEMM-sized batches take the pair itself; both agree with the CPU.
TEST_F(CudaHybridOps, GatedRmsNormLinearEqualsNormThenLinear) {
  for (int64_t T : {1, 2, 4, 5, 40}) {
    for (int64_t D : {128, 64}) {
      const int64_t K = 8 * D, N = 520;
      auto x = make(random_vec(T * K, rng_), {T * K / D, D});
      auto z = make(random_vec(T * K, rng_, 3.f), {T * K / D, D});
      auto nw = make(random_vec(D, rng_), {D});
      auto w = make(random_vec(N * K, rng_, 0.05f), {N, K});
      auto normed = make_out({T, K}), out = make_out({T, N});
      auto normed_ref = make_out({T * K / D, D}), out_ref = make_out({T, N});
      gpu_->gated_rmsnorm_linear(x.g, z.g, nw.g, 1e-6f, w.g, normed.g, out.g);
      gpu_->gated_rmsnorm(x.g, z.g, nw.g, 1e-6f, normed_ref.g);
      gpu_->linear(normed_ref.g.reshape({T, K}), w.g, Tensor(), out_ref.g);
      const std::string what = "T=" + std::to_string(T) + " D=" + std::to_string(D);
      EXPECT_LT(rel_l2(down_gpu(out.g), down_gpu(out_ref.g)), 4e-3) << what;
      cpu_->gated_rmsnorm_linear(x.c, z.c, nw.c, 1e-6f, w.c, normed.c, out.c);
      expect_close(out, 2e-2, "gated_rmsnorm_linear " + what);
    }
  }
}

// The fused GEMVs' norm prologues store the norm weights in shared memory and read them from
// other warps: a missing barrier between (the gated prologue's, found 2026-12-06) reads what the
// previous kernel left there, which the PDL wait's stall hides. So: launches serialized (no PDL),
// every SM's shared memory left full of NaN just before each fused launch, several times, at K =
// 4096 (Qwen3-Next's out_proj: the persistent grid) and 1024 (one block a tile); the result must
// equal the unfused ops'.
TEST_F(CudaHybridOps, FusedNormGemvsReadNoStaleSharedMemory) {
  struct PdlRestore {  // PDL is process-wide: back on for later tests however this one ends
    CudaBackend* b;
    bool on;
    ~PdlRestore() { b->set_pdl(on); }
  } restore{gpu_.get(), gpu_->pdl()};
  gpu_->set_pdl(false);
  auto* stream = static_cast<cudaStream_t>(gpu_->cuda_stream());
  for (int64_t K : {4096, 1024}) {
    const int64_t D = 128, N = 520, T = 1;
    const std::string what = "K=" + std::to_string(K);
    auto x = make(random_vec(T * K, rng_), {T * K / D, D});
    auto z = make(random_vec(T * K, rng_, 3.f), {T * K / D, D});
    auto nw = make(random_vec(D, rng_), {D});
    auto w = make(random_vec(N * K, rng_, 0.05f), {N, K});
    auto normed = make_out({T * K / D, D}), out_ref = make_out({T, N}), out = make_out({T, N});
    gpu_->gated_rmsnorm(x.g, z.g, nw.g, 1e-6f, normed.g);
    gpu_->linear(normed.g.reshape({T, K}), w.g, Tensor(), out_ref.g);
    const std::vector<float> ref = down_gpu(out_ref.g);
    // The plain prologue: residual + add, RMSNorm, GEMV against add_rmsnorm() then linear().
    const std::vector<float> res0 = random_vec(T * K, rng_, 2.f);
    auto res = make(res0, {T, K}), res_ref = make(res0, {T, K});
    auto add = make(random_vec(T * K, rng_), {T, K}), nwk = make(random_vec(K, rng_), {K});
    auto res_out = make_out({T, K}), xn = make_out({T, K}), xn_ref = make_out({T, K});
    auto plain_ref = make_out({T, N}), plain = make_out({T, N});
    gpu_->add_rmsnorm(res_ref.g, add.g, nwk.g, 1e-6f, NormKind::kPlain, xn_ref.g);
    gpu_->linear(xn_ref.g, w.g, Tensor(), plain_ref.g);
    const std::vector<float> plain_want = down_gpu(plain_ref.g);
    for (int rep = 0; rep < 8; ++rep) {
      cuda::launch_poison_shared_memory(stream);
      gpu_->gated_rmsnorm_linear(x.g, z.g, nw.g, 1e-6f, w.g, normed.g, out.g);
      const std::vector<float> got = down_gpu(out.g);
      EXPECT_LT(rel_l2(got, ref), 4e-3) << "gated, " << what << ", run " << rep;  // NaN: inf
      cuda::launch_poison_shared_memory(stream);
      gpu_->add_rmsnorm_linear(res.g, add.g, nwk.g, 1e-6f, NormKind::kPlain, res_out.g, xn.g, w.g,
                               Tensor(), plain.g);
      const std::vector<float> got2 = down_gpu(plain.g);
      EXPECT_LT(rel_l2(got2, plain_want), 4e-3) << "plain, " << what << ", run " << rep;
    }
  }
}

TEST_F(CudaHybridOps, SigmoidMulFullAndBroadcast) {
  const int64_t T = 37, N = 520;
  auto x = make(random_vec(T * N, rng_, 4.f), {T, N});
  auto gate = make(random_vec(T * N, rng_, 6.f), {T, N});
  auto gate1 = make(random_vec(T, rng_, 6.f), {T, 1});
  auto out = make_out({T, N});
  cpu_->sigmoid_mul(x.c, gate.c, out.c);
  gpu_->sigmoid_mul(x.g, gate.g, out.g);
  expect_close(out, 1e-2, "sigmoid_mul");
  auto out1 = make_out({T, N});
  cpu_->sigmoid_mul(x.c, gate1.c, out1.c);
  gpu_->sigmoid_mul(x.g, gate1.g, out1.g);
  expect_close(out1, 1e-2, "sigmoid_mul broadcast");
}

// Not a check: prints the hybrid ops' times at the Qwen3.5 9B-class shape (Hk 16, Hv 32, dk = dv =
// 128, conv 8192 channels x 4) for decode (1 and 64 sequences) and a 2048-token prefill, with the
// recurrent state's bytes read + written per microsecond against the device copy rate.
TEST_F(CudaHybridOps, Qwen35OpsTiming) {
  const GdnShape g{16, 32, 128, 128};
  const int64_t C = g.conv_dim(), K = 4, Hv = g.num_v_heads, dk = g.k_head_dim, dv = g.v_head_dim;
  const double copy_gbps = gpu_->measure_copy_gbps(size_t{1} << 30, 10);
  std::printf("device copy %.0f GB/s\n", copy_gbps);
  struct Case {
    int seqs, tokens_each;
  };
  for (Case cs :
       {Case{1, 1}, Case{64, 1}, Case{256, 1}, Case{1, 2048}, Case{1, 8192}, Case{8, 512}}) {
    const int64_t T = int64_t{cs.seqs} * cs.tokens_each, S = cs.seqs;
    std::vector<int> news(static_cast<size_t>(S), cs.tokens_each);
    std::vector<int32_t> slots(static_cast<size_t>(S));
    std::iota(slots.begin(), slots.end(), 0);
    Batch batch = hybrid_batch(news, slots, rng_);
    BatchMeta meta = gpu_->prepare_batch(batch, 16);
    auto dev = [&](int64_t n, DType t) {
      DeviceBuffer b = gpu_->allocate(static_cast<size_t>(n) * dtype_size(t));
      gpu_->fill_random(b.data(), t, n, rng_(), 0.5f);
      return b;
    };
    DeviceBuffer xb = dev(T * C, DType::BF16), mb = dev(T * C, DType::BF16),
                 wb = dev(C * K, DType::BF16), cs_b = dev(S * (K - 1) * C, DType::F32),
                 bab = dev(T * 2 * Hv, DType::F32), alb = dev(Hv, DType::BF16),
                 dtb = dev(Hv, DType::BF16), sb = dev(S * Hv * dk * dv, DType::F32),
                 ob = dev(T * Hv * dv, DType::BF16);
    Tensor x(xb.data(), DType::BF16, {T, C}), mixed(mb.data(), DType::BF16, {T, C});
    Tensor w(wb.data(), DType::BF16, {C, K}), conv(cs_b.data(), DType::F32, {S, K - 1, C});
    Tensor ba(bab.data(), DType::F32, {T, 2 * Hv}), a_log(alb.data(), DType::BF16, {Hv});
    Tensor dt(dtb.data(), DType::BF16, {Hv}), state(sb.data(), DType::F32, {S, Hv, dk, dv});
    Tensor out(ob.data(), DType::BF16, {T, Hv * dv});
    auto us = [&](const std::function<void()>& op) {
      std::vector<float> ms = gpu_->time_ms(op, 3, 20);
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2] * 1e3;
    };
    const double conv_us = us([&] { gpu_->causal_conv1d_silu(x, w, conv, no_saves, meta, mixed); });
    auto gdn = [&] { gpu_->gated_delta_rule(mixed, ba, a_log, dt, g, state, no_saves, meta, out); };
    const double gdn_us = us(gdn);
    const double state_bytes = 2.0 * S * Hv * dk * dv * 4;
    std::printf(
        "hybrid ops, %3d seqs x %4d tokens: conv1d %8.1f us | delta rule %8.1f us (state %.0f "
        "GB/s = %.0f%% of copy)\n",
        cs.seqs, cs.tokens_each, conv_us, gdn_us, state_bytes / (gdn_us * 1e3),
        100.0 * state_bytes / (gdn_us * 1e3) / copy_gbps);
    if (cs.tokens_each >=
        CudaBackend::kGdnChunkedFrom) {  // the one kernel's, the tensor-core forms'
      gpu_->set_gdn_phases(false);
      std::printf("hybrid ops, %3d seqs x %4d tokens: delta rule in one kernel %8.1f us\n", cs.seqs,
                  cs.tokens_each, us(gdn));
      gpu_->set_gdn_phases(true);
      for (const unsigned mma :
           {0u, cuda::kGdnMmaWu, cuda::kGdnMmaWalk, cuda::kGdnMmaOutput, cuda::kGdnMmaAll}) {
        cuda::set_gdn_mma(mma);
        std::printf("hybrid ops, %3d seqs x %4d tokens: delta rule, SYV_GDN_MMA mask %u %8.1f us\n",
                    cs.seqs, cs.tokens_each, mma, us(gdn));
      }
      cuda::set_gdn_mma(cuda::kGdnMmaDefault);
      // (Above, phases 1 and 3 on the CUDA cores take their default forms.)
      cuda::set_gdn_output_products(false);
      for (const auto& [form, name] :
           {std::pair{cuda::GdnWuForm::kBlocked, "blocked (the default before 2026-12-07)"},
            std::pair{cuda::GdnWuForm::kColumns, "by columns"},
            std::pair{cuda::GdnWuForm::kProducts, "by products"}}) {
        cuda::set_gdn_wu_form(form);
        std::printf(
            "hybrid ops, %3d seqs x %4d tokens: delta rule, phase 1 %s, phase 3 by dots "
            "%8.1f us\n",
            cs.seqs, cs.tokens_each, name, us(gdn));
      }
      cuda::set_gdn_output_products(true);
      std::printf(
          "hybrid ops, %3d seqs x %4d tokens: delta rule, phases 1 and 3 by products %8.1f us\n",
          cs.seqs, cs.tokens_each, us(gdn));
      cuda::set_gdn_wu_form(cuda::kGdnWuFormDefault);
      cuda::set_gdn_output_products(cuda::kGdnOutputProductsDefault);
    }
    if (cs.tokens_each == 1) {  // the token-by-token kernel's two thread layouts (kernels.h)
      for (auto form : {cuda::GdnRecurrentForm::kRows, cuda::GdnRecurrentForm::kColumns}) {
        cuda::set_gdn_recurrent_form(form);
        const double f_us = us(gdn);
        std::printf("  %s form: %8.1f us (%.0f%% of copy)\n",
                    form == cuda::GdnRecurrentForm::kRows ? "rows" : "columns", f_us,
                    100.0 * state_bytes / (f_us * 1e3) / copy_gbps);
      }
      cuda::set_gdn_recurrent_form(cuda::GdnRecurrentForm::kAuto);
    }
    if (cs.tokens_each >= CudaBackend::kGdnChunkedFrom && cs.tokens_each <= 2048) {
      gpu_->set_gdn_chunked_from(0);
      std::printf("  token by token instead: %8.1f us\n", us(gdn));
      gpu_->set_gdn_chunked_from(CudaBackend::kGdnChunkedFrom);
    }
  }
}

}  // namespace
}  // namespace syv
