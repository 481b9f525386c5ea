// The CUDA MoE ops (moe_topk, moe_experts; backend/cuda/moe.cu) against the CPU reference ops on
// random inputs: T = 1, 7, 64, 300 tokens (the decode and the prefill tile shapes), top-1 / top-2 /
// top-8, renormalisation on and off, several tokens of a batch routed to one expert, experts that
// get no token, and run-to-run identical results. Skipped cleanly without a CUDA device.
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
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

struct MoeDims {
  int64_t E, H, I;
};

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

  // moe_experts with the given routing (ids [T, k]) and random routing weights: the GPU (bf16
  // activations, fp32 accumulation) within 1e-2 relative L2 of the CPU's f32, and bit-identical
  // over two runs.
  void check_experts(const MoeDims& d, const Experts& ex, int64_t T, int32_t k,
                     const std::vector<int32_t>& routing) {
    SCOPED_TRACE("T=" + std::to_string(T) + " k=" + std::to_string(k) + " E=" +
                 std::to_string(d.E) + " H=" + std::to_string(d.H) + " I=" + std::to_string(d.I));
    ASSERT_EQ(routing.size(), static_cast<size_t>(T * k));
    auto x = make(random_vec(T * d.H, rng_), {T, d.H});
    auto ids = make_i32(routing, {T, k});
    auto w = make(random_vec(T * k, rng_), {T, k}, DType::F32);
    auto out = make_out({T, d.H});
    cpu_->moe_experts(x.c, ids.c, w.c, ex.gate_up.c, ex.down.c, out.c);
    gpu_->moe_experts(x.g, ids.g, w.g, ex.gate_up.g, ex.down.g, out.g);
    expect_close(out, 1e-2, "moe_experts out");
    const std::vector<float> first = down_gpu(out.g);
    poison(out.g);
    gpu_->moe_experts(x.g, ids.g, w.g, ex.gate_up.g, ex.down.g, out.g);
    const std::vector<float> second = down_gpu(out.g);
    EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * 4))
        << "moe_experts differs between two runs";
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
  for (int64_t T : {1, 7, 64, 300}) {
    for (int32_t k : {1, 2}) check_experts(d, ex, T, k, random_routing(T, k, d.E));
  }
}

TEST_F(CudaMoeOps, ManyTokensOnOneExpertAndIdleExperts) {
  const MoeDims d{16, 128, 64};
  const Experts ex = make_experts(d);
  for (int64_t T : {7, 64, 300}) {
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

TEST_F(CudaMoeOps, ManyExpertsLargeTopK) {
  const MoeDims d{128, 128, 64};
  const Experts ex = make_experts(d);
  for (int64_t T : {1, 64, 300}) check_experts(d, ex, T, 8, random_routing(T, 8, d.E));
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
// H 2048, I 512) for 1, 8 and 64 tokens with random distinct experts per token, and the routed
// experts' weight bytes per microsecond against the device copy rate (the decode floor's part
// for the experts; benchmark: tools/device/moe_check.sh bench).
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
  for (int64_t T : {1, 8, 64}) {
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
    const double experts_us = us([&] { gpu_->moe_experts(x, ids, w, gate_up, down, out); });
    const double bytes = static_cast<double>(distinct.size()) * 3 * d.I * d.H * 2;
    std::printf(
        "moe, %3lld tokens: topk %6.1f us | experts %7.1f us for %3zu experts (%.1f MB: %.0f GB/s "
        "= %.0f%% of copy)\n",
        static_cast<long long>(T), topk_us, experts_us, distinct.size(), bytes / 1e6,
        bytes / (experts_us * 1e3), 100.0 * bytes / (experts_us * 1e3) / copy_gbps);
  }
}

}  // namespace
}  // namespace syv
