// The CUDA MoE ops (moe_topk, moe_experts; backend/cuda/moe.cu, moe_gemv.cu) against the CPU
// reference ops on random inputs: T = 1, 2, kMoeGemvMaxTokens (the small-batch GEMVs outside
// batch-invariant mode), kMoeGemvMaxTokens + 1, 7, 64, 300 tokens (the decode and the prefill tile
// shapes), each in both modes (batch-invariant mode takes the tiled path at every T); top-1 /
// top-2 / top-8, renormalisation on and off, several tokens of a batch routed to one expert, one
// token routed to an expert in several slots, out-of-range ids, experts that get no token, the
// routed-experts counter, run-to-run identical results, and rows bit-identical to the token alone
// (batch-invariant mode at every T; the GEMVs up to kMoeGemvMaxTokens). Skipped cleanly without a
// CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/moe.cuh"
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

struct MoeDims {
  int64_t E, H, I;
};

constexpr int64_t kGemvMax = cuda::kMoeGemvMaxTokens;
// Token counts on both sides of the small-batch path's limit, and the tiled path's shapes.
const std::vector<int64_t> kTokenCounts = {1, 2, kGemvMax, kGemvMax + 1, 7, 64, 300};

class CudaMoeOps : public CudaOps {
 protected:
  // An i32 tensor pair holding `v` on both backends.
  Pair make_i32(const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
    Pair p;
    p.cbuf = cpu_->allocate(v.size() * 4 + 64);
    p.gbuf = gpu_->allocate(v.size() * 4 + 64);
    p.c = Tensor(p.cbuf.data(), DType::I32, dims);
    p.g = Tensor(p.gbuf.data(), DType::I32, dims);
    cpu_->upload(p.c.data, v.data(), v.size() * 4);
    gpu_->upload(p.g.data, v.data(), v.size() * 4);
    return p;
  }
  template <typename V>
  std::vector<V> down_raw(const Tensor& t, Backend& b) {
    std::vector<V> out(static_cast<size_t>(t.numel()));
    b.download(out.data(), t.data, out.size() * sizeof(V));
    return out;
  }

  // moe_topk on random logits: ids equal, weights within float rounding.
  void check_topk(int64_t T, int64_t E, int32_t k, bool renorm, float scale = 4.f) {
    SCOPED_TRACE("T=" + std::to_string(T) + " E=" + std::to_string(E) + " k=" + std::to_string(k) +
                 (renorm ? " renormalized" : ""));
    auto logits = make(random_vec(T * E, rng_, scale), {T, E}, DType::F32);
    auto ids = make_i32(std::vector<int32_t>(T * k, -7), {T, k});
    auto w = make_out({T, k}, DType::F32);
    cpu_->moe_topk(logits.c, k, renorm, ids.c, w.c);
    gpu_->moe_topk(logits.g, k, renorm, ids.g, w.g);
    EXPECT_EQ(down_raw<int32_t>(ids.g, *gpu_), down_raw<int32_t>(ids.c, *cpu_));
    const std::vector<float> wg = down_gpu(w.g), wc = down_cpu(w.c);
    for (size_t i = 0; i < wc.size(); ++i) ASSERT_NEAR(wg[i], wc[i], 1e-6f + 1e-5f * wc[i]) << i;
  }

  struct Experts {
    Pair gate_up, down;
  };
  Experts make_experts(const MoeDims& d) {
    return {make(random_vec(d.E * 2 * d.I * d.H, rng_, 0.2f), {d.E, 2 * d.I, d.H}),
            make(random_vec(d.E * d.H * d.I, rng_, 0.2f), {d.E, d.H, d.I})};
  }

  // moe_experts with the given routing (ids [T, k]) and random routing weights, on the GPU in
  // both modes (the default: the small-batch GEMVs up to kGemvMax tokens, the tiled path above;
  // batch-invariant: the tiled path at every T): within 1e-2 relative L2 of the CPU's f32 (bf16
  // activations, fp32 accumulation), bit-identical over two runs, and the routed-experts counter
  // grown by the number of distinct valid experts. Out-of-range ids contribute nothing on the GPU;
  // the CPU reference refuses them, so it gets expert 0 with routing weight 0 in their place.
  void check_experts(const MoeDims& d, const Experts& ex, int64_t T, int32_t k,
                     const std::vector<int32_t>& routing) {
    SCOPED_TRACE("T=" + std::to_string(T) + " k=" + std::to_string(k) + " E=" +
                 std::to_string(d.E) + " H=" + std::to_string(d.H) + " I=" + std::to_string(d.I));
    ASSERT_EQ(routing.size(), static_cast<size_t>(T * k));
    auto x = make(random_vec(T * d.H, rng_), {T, d.H});
    auto ids = make_i32(routing, {T, k});
    std::vector<float> wv = random_vec(T * k, rng_);
    std::vector<int32_t> cpu_routing = routing, distinct;
    for (size_t i = 0; i < routing.size(); ++i) {
      if (routing[i] < 0 || routing[i] >= d.E) {
        cpu_routing[i] = 0;
        wv[i] = 0.f;
      } else {
        distinct.push_back(routing[i]);
      }
    }
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    auto w = make(wv, {T, k}, DType::F32);
    cpu_->upload(ids.c.data, cpu_routing.data(), cpu_routing.size() * 4);
    auto out = make_out({T, d.H});
    cpu_->moe_experts(x.c, ids.c, w.c, ex.gate_up.c, ex.down.c, out.c);
    for (bool invariant : {false, true}) {
      SCOPED_TRACE(invariant ? "batch-invariant mode (tiled)"
                             : (T <= kGemvMax ? "default mode (GEMV)" : "default mode (tiled)"));
      gpu_->set_batch_invariant(invariant);
      poison(out.g);
      const uint64_t routed_before = gpu_->moe_experts_routed();
      gpu_->moe_experts(x.g, ids.g, w.g, ex.gate_up.g, ex.down.g, out.g);
      EXPECT_EQ(gpu_->moe_experts_routed() - routed_before, distinct.size())
          << "routed-experts counter";
      expect_close(out, 1e-2, "moe_experts out");
      const std::vector<float> first = down_gpu(out.g);
      poison(out.g);
      gpu_->moe_experts(x.g, ids.g, w.g, ex.gate_up.g, ex.down.g, out.g);
      const std::vector<float> second = down_gpu(out.g);
      EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * 4))
          << "moe_experts differs between two runs";
    }
    gpu_->set_batch_invariant(false);
  }

  // Each row of moe_experts over T tokens is bit-identical to that token's row alone: in
  // batch-invariant mode at every T, in the default mode for T <= kGemvMax (the GEMVs sum each
  // output in one warp in a fixed order, whatever the other tokens).
  void check_rows_as_alone(const MoeDims& d, const Experts& ex, int64_t T, int32_t k,
                           const std::vector<int32_t>& routing, bool invariant) {
    SCOPED_TRACE("T=" + std::to_string(T) + (invariant ? " batch-invariant" : " default mode"));
    gpu_->set_batch_invariant(invariant);
    auto x = make(random_vec(T * d.H, rng_), {T, d.H});
    auto ids = make_i32(routing, {T, k});
    auto w = make(random_vec(T * k, rng_), {T, k}, DType::F32);
    auto out = make_out({T, d.H});
    gpu_->moe_experts(x.g, ids.g, w.g, ex.gate_up.g, ex.down.g, out.g);
    const std::vector<float> all = down_gpu(out.g);
    auto one = make_out({1, d.H});
    // Every row up to 9 tokens, then the first, a middle and the last.
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < T; ++r)
      if (T <= 9 || r == 0 || r == T / 2 || r == T - 1) rows.push_back(r);
    for (int64_t r : rows) {
      const Tensor xr(static_cast<char*>(x.g.data) + r * d.H * 2, DType::BF16, {1, d.H});
      const Tensor ir(static_cast<char*>(ids.g.data) + r * k * 4, DType::I32, {1, k});
      const Tensor wr(static_cast<char*>(w.g.data) + r * k * 4, DType::F32, {1, k});
      poison(one.g);
      gpu_->moe_experts(xr, ir, wr, ex.gate_up.g, ex.down.g, one.g);
      const std::vector<float> alone = down_gpu(one.g);
      EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + r * d.H, alone.size() * 4))
          << "row " << r << " of " << T << " differs from the token alone";
    }
    gpu_->set_batch_invariant(false);
  }

  // k distinct experts per token drawn from [0, limit).
  std::vector<int32_t> random_routing(int64_t T, int32_t k, int64_t limit) {
    std::vector<int32_t> all(static_cast<size_t>(limit)), out;
    std::iota(all.begin(), all.end(), 0);
    for (int64_t t = 0; t < T; ++t) {
      std::shuffle(all.begin(), all.end(), rng_);
      out.insert(out.end(), all.begin(), all.begin() + k);
    }
    return out;
  }
};

TEST_F(CudaMoeOps, TopkMatchesCpu) {
  for (int64_t T : {1, 7, 64, 300}) {
    for (bool renorm : {false, true}) {
      check_topk(T, 8, 1, renorm);
      check_topk(T, 8, 2, renorm);
      check_topk(T, 64, 8, renorm);
    }
  }
  check_topk(5, 512, 10, true);   // Qwen3-Next's router
  check_topk(3, 100, 32, false);  // the largest top_k, E not a multiple of 32
}

TEST_F(CudaMoeOps, TopkBreaksTiesByLowerIndex) {
  const int64_t T = 2, E = 16;
  const int32_t k = 4;
  std::vector<float> l(T * E, 0.5f);  // row 0: all equal
  l[E + 9] = l[E + 3] = 2.f;          // row 1: two equal leaders, then equal rest
  auto logits = make(l, {T, E}, DType::F32);
  auto ids = make_i32(std::vector<int32_t>(T * k, -1), {T, k});
  auto w = make_out({T, k}, DType::F32);
  gpu_->moe_topk(logits.g, k, true, ids.g, w.g);
  EXPECT_EQ(down_raw<int32_t>(ids.g, *gpu_), (std::vector<int32_t>{0, 1, 2, 3, 3, 9, 0, 1}));
}

TEST_F(CudaMoeOps, ExpertsMatchCpuAtEveryTokenCount) {
  const MoeDims d{8, 64, 24};  // the fixtures' shapes: I = 24 leaves a partial weight tile
  const Experts ex = make_experts(d);
  for (int64_t T : kTokenCounts) {
    for (int32_t k : {1, 2}) check_experts(d, ex, T, k, random_routing(T, k, d.E));
  }
}

// Rows longer than one 32-lane chunk of the GEMVs, with a partial last chunk (I = 264: 33 vectors)
// and H not a multiple of their 128-vector pipeline step (H = 1096: 137 vectors).
TEST_F(CudaMoeOps, ExpertsMatchCpuWithPartialChunks) {
  const MoeDims d{12, 1096, 264};
  const Experts ex = make_experts(d);
  for (int64_t T : {int64_t{1}, int64_t{3}, kGemvMax, kGemvMax + 1})
    check_experts(d, ex, T, 4, random_routing(T, 4, d.E));
}

TEST_F(CudaMoeOps, ManyTokensOnOneExpertAndIdleExperts) {
  const MoeDims d{16, 128, 64};
  const Experts ex = make_experts(d);
  for (int64_t T : kTokenCounts) {
    // Every token's first choice is expert 5; second choices among experts 0..3 only: experts
    // 4 and 6..15 get no token, expert 5 gets T rows (several tiles at T = 300).
    std::vector<int32_t> routing;
    for (int64_t t = 0; t < T; ++t) {
      routing.push_back(5);
      routing.push_back(static_cast<int32_t>(t % 4));
    }
    check_experts(d, ex, T, 2, routing);
    // Second choice first: the combine sums in expert order whatever the slot order.
    for (int64_t t = 0; t < T; ++t) std::swap(routing[2 * t], routing[2 * t + 1]);
    check_experts(d, ex, T, 2, routing);
  }
  check_experts(d, ex, 1, 2, {15, 0});
}

// One token routed to the same expert in several slots (more pairs on one expert than the GEMV
// groups hold: 2 tokens x 4 slots on expert 5 in groups of 2), and ids out of range (-1, E, a
// large negative): they contribute nothing and are not counted as routed.
TEST_F(CudaMoeOps, RepeatedAndOutOfRangeIds) {
  const MoeDims d{16, 128, 64};
  const Experts ex = make_experts(d);
  check_experts(d, ex, 2, 4, {5, 5, 5, 5, 5, 5, 5, 5});
  check_experts(d, ex, 1, 4, {3, 3, 9, 3});
  for (int64_t T : {int64_t{1}, int64_t{2}, kGemvMax, kGemvMax + 1, int64_t{64}}) {
    std::vector<int32_t> routing = random_routing(T, 3, d.E);
    for (int64_t t = 0; t < T; ++t)
      routing[t * 3 + t % 3] = t % 3 == 0 ? -1 : (t % 3 == 1 ? static_cast<int32_t>(d.E) : -77777);
    check_experts(d, ex, T, 3, routing);
  }
  check_experts(d, ex, 1, 2, {-1, static_cast<int32_t>(d.E)});  // nothing routed: zeros
}

// Batch-invariant mode keeps the tiled path at every T: each row bit-identical to the token alone;
// the default mode's GEMVs give the same guarantee up to kGemvMax tokens (several tokens share
// experts here).
TEST_F(CudaMoeOps, RowsAreTheTokenAloneBatchInvariantAndSmallBatch) {
  const MoeDims d{16, 128, 64};
  const Experts ex = make_experts(d);
  for (int64_t T : {int64_t{1}, int64_t{2}, int64_t{3}, kGemvMax, kGemvMax + 1, int64_t{17},
                    int64_t{64}, int64_t{300}})
    check_rows_as_alone(d, ex, T, 4, random_routing(T, 4, 6), /*invariant=*/true);
  for (int64_t T = 2; T <= kGemvMax; ++T)
    check_rows_as_alone(d, ex, T, 4, random_routing(T, 4, 6), /*invariant=*/false);
}

TEST_F(CudaMoeOps, ManyExpertsLargeTopK) {
  const MoeDims d{128, 128, 64};
  const Experts ex = make_experts(d);
  for (int64_t T : kTokenCounts) check_experts(d, ex, T, 8, random_routing(T, 8, d.E));
}

// The router's output feeds the experts on the device (as in a model's MoE block).
TEST_F(CudaMoeOps, TopkThenExpertsOnDevice) {
  const MoeDims d{32, 64, 32};
  const Experts ex = make_experts(d);
  const int64_t T = 64;
  const int32_t k = 4;
  auto logits = make(random_vec(T * d.E, rng_, 4.f), {T, d.E}, DType::F32);
  auto ids = make_i32(std::vector<int32_t>(T * k, 0), {T, k});
  auto w = make_out({T, k}, DType::F32);
  auto x = make(random_vec(T * d.H, rng_), {T, d.H});
  auto out = make_out({T, d.H});
  for (Backend* b : {cpu_.get(), static_cast<Backend*>(gpu_.get())}) {
    const bool g = b != cpu_.get();
    b->moe_topk(g ? logits.g : logits.c, k, true, g ? ids.g : ids.c, g ? w.g : w.c);
    b->moe_experts(g ? x.g : x.c, g ? ids.g : ids.c, g ? w.g : w.c, g ? ex.gate_up.g : ex.gate_up.c,
                   g ? ex.down.g : ex.down.c, g ? out.g : out.c);
  }
  EXPECT_EQ(down_raw<int32_t>(ids.g, *gpu_), down_raw<int32_t>(ids.c, *cpu_));
  expect_close(out, 1e-2, "router + experts out");
}

// Not a check: prints moe_topk and moe_experts times at Qwen3-Next's shape (512 experts, top 10,
// H 2048, I 512) for 1, 2, 4, 8 and 64 tokens with random distinct experts per token, and the
// routed experts' weight bytes per microsecond against the device copy rate (the decode floor's
// part for the experts; benchmark: tools/device/moe_check.sh bench). Up to kGemvMax tokens both
// paths: the small-batch GEMVs (the default mode) and the tiled path (batch-invariant mode).
TEST_F(CudaMoeOps, QwenNextExpertsTiming) {
  const MoeDims d{512, 2048, 512};
  const int32_t k = 10;
  const double copy_gbps = gpu_->measure_copy_gbps(size_t{1} << 30, 10);
  std::printf("device copy %.0f GB/s\n", copy_gbps);
  auto dev = [&](int64_t n, DType t) {
    DeviceBuffer b = gpu_->allocate(static_cast<size_t>(n) * dtype_size(t));
    gpu_->fill_random(b.data(), t, n, rng_(), 0.2f);
    return b;
  };
  DeviceBuffer gub = dev(d.E * 2 * d.I * d.H, DType::BF16), dnb = dev(d.E * d.H * d.I, DType::BF16);
  Tensor gate_up(gub.data(), DType::BF16, {d.E, 2 * d.I, d.H});
  Tensor down(dnb.data(), DType::BF16, {d.E, d.H, d.I});
  for (int64_t T : {1, 2, 4, 8, 64}) {
    const std::vector<int32_t> routing = random_routing(T, k, d.E);
    std::vector<int32_t> distinct = routing;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    DeviceBuffer xb = dev(T * d.H, DType::BF16), lb = dev(T * d.E, DType::F32),
                 wb = dev(T * k, DType::F32), ob = dev(T * d.H, DType::BF16),
                 ib = gpu_->allocate(static_cast<size_t>(T * k) * 4);
    gpu_->upload(ib.data(), routing.data(), routing.size() * 4);
    Tensor x(xb.data(), DType::BF16, {T, d.H}), logits(lb.data(), DType::F32, {T, d.E});
    Tensor w(wb.data(), DType::F32, {T, k}), out(ob.data(), DType::BF16, {T, d.H});
    Tensor ids(ib.data(), DType::I32, {T, k});
    DeviceBuffer scratch_ids = gpu_->allocate(static_cast<size_t>(T * k) * 4);
    Tensor topk_ids(scratch_ids.data(), DType::I32, {T, k});
    auto us = [&](const std::function<void()>& op) {
      std::vector<float> ms = gpu_->time_ms(op, 3, 50);
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2] * 1e3;
    };
    const double topk_us = us([&] { gpu_->moe_topk(logits, k, true, topk_ids, w); });
    const double bytes = static_cast<double>(distinct.size()) * 3 * d.I * d.H * 2;
    for (bool invariant : {false, true}) {
      if (invariant && T > kGemvMax) break;  // both modes take the tiled path
      gpu_->set_batch_invariant(invariant);
      const double experts_us = us([&] { gpu_->moe_experts(x, ids, w, gate_up, down, out); });
      std::printf(
          "moe, %3lld tokens: topk %6.1f us | experts (%s) %7.1f us for %3zu experts (%.1f MB: "
          "%.0f GB/s = %.0f%% of copy)\n",
          static_cast<long long>(T), topk_us, T <= kGemvMax && !invariant ? "gemv " : "tiled",
          experts_us, distinct.size(), bytes / 1e6, bytes / (experts_us * 1e3),
          100.0 * bytes / (experts_us * 1e3) / copy_gbps);
    }
    gpu_->set_batch_invariant(false);
  }
}

}  // namespace
}  // namespace syv
