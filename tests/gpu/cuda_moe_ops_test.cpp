// The CUDA MoE ops (moe_topk, moe_experts; backend/cuda/moe.cu, moe_gemv.cu) against the CPU
// reference ops on random inputs: T = 1, 2, kMoeGemvMaxTokens (the small-batch GEMVs outside
// batch-invariant mode), kMoeGemvMaxTokens + 1, 7, 64, 300 tokens (the decode and the prefill tile
// shapes), each in both modes (batch-invariant mode takes the tiled path at every T); top-1 /
// top-2 / top-8, renormalisation on and off, several tokens of a batch routed to one expert, one
// token routed to an expert in several slots, out-of-range ids, experts that get no token, the
// routed-experts counter, run-to-run identical results, and rows bit-identical to the token alone
// (batch-invariant mode at every T; the GEMVs up to kMoeGemvMaxTokens). And the MoE block
// (Backend::moe_block; moe_block.cu at up to kMoeBlockMaxTokens tokens outside batch-invariant
// mode) against its op sequence on the GPU and the CPU's: router logits, ids, weights and out
// bit-identical to the sequence's (whose linears take the GEMV here), ties in the router, experts
// chosen by several tokens, shared experts of other widths, run-to-run identical; the cases it
// leaves to the sequence bit-identical to it.
// Skipped cleanly without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/moe.cuh"
#include "backend/weight.h"
#include "gpu/cuda_ops_fixture.h"

namespace syv {
namespace {

struct MoeDims {
  int64_t E, H, I;
};

constexpr int64_t kGemvMax = cuda::kMoeGemvMaxTokens;
// Token counts on both sides of the small-batch path's limit, and the tiled path's shapes.
const std::vector<int64_t> kTokenCounts = {1, 2, kGemvMax, kGemvMax + 1, 7, 64, 300};

// How many distinct experts `ids` names (what the routed-experts counter adds for one pass).
size_t distinct_experts(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

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

  // A moe_experts call of T tokens x k slots with random x, routing and routing weights, its CPU
  // result in out.c; gpu_run() runs it on the GPU into out.g (poisoned first) and downloads it.
  struct ExpertsCall {
    Pair x, ids, w, out;
  };
  ExpertsCall random_call(const MoeDims& d, const Experts& ex, int64_t T, int32_t k) {
    ExpertsCall c{make(random_vec(T * d.H, rng_), {T, d.H}),
                  make_i32(random_routing(T, k, d.E), {T, k}),
                  make(random_vec(T * k, rng_), {T, k}, DType::F32), make_out({T, d.H})};
    cpu_->moe_experts(c.x.c, c.ids.c, c.w.c, ex.gate_up.c, ex.down.c, c.out.c);
    return c;
  }
  std::vector<float> gpu_run(ExpertsCall& c, const Experts& ex) {
    poison(c.out.g);
    gpu_->moe_experts(c.x.g, c.ids.g, c.w.g, ex.gate_up.g, ex.down.g, c.out.g);
    return down_gpu(c.out.g);
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
    std::vector<int32_t> cpu_routing = routing, valid;
    for (size_t i = 0; i < routing.size(); ++i) {
      if (routing[i] < 0 || routing[i] >= d.E) {
        cpu_routing[i] = 0;
        wv[i] = 0.f;
      } else {
        valid.push_back(routing[i]);
      }
    }
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
      EXPECT_EQ(gpu_->moe_experts_routed() - routed_before, distinct_experts(valid))
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

  // ---- the MoE block (Backend::moe_block) ----

  // A MoE layer's weights on both backends: E experts of width I, a shared expert of width Is.
  struct Block {
    int64_t E, H, I, Is;
    Pair router, gate_up, down, shared_gate_up, shared_down, shared_gate;
    std::vector<Weight> cw, gw;  // dense views, MoeBlockWeights' order
    MoeBlockWeights weights(bool gpu) const {
      const std::vector<Weight>& v = gpu ? gw : cw;
      MoeBlockWeights w;
      w.router = &v[0];
      w.experts_gate_up = &v[1];
      w.experts_down = &v[2];
      w.shared_gate_up = &v[3];
      w.shared_down = &v[4];
      w.shared_gate = &v[5];
      return w;
    }
  };
  // Random weights; router_rows, when given, replaces the router's [E, H] values.
  Block make_block(int64_t E, int64_t H, int64_t I, int64_t Is,
                   const std::vector<float>& router_rows = {}) {
    Block b{E, H, I, Is, {}, {}, {}, {}, {}, {}, {}, {}};
    b.router = make(router_rows.empty() ? random_vec(E * H, rng_, 0.2f) : router_rows, {E, H});
    b.gate_up = make(random_vec(E * 2 * I * H, rng_, 0.2f), {E, 2 * I, H});
    b.down = make(random_vec(E * H * I, rng_, 0.2f), {E, H, I});
    b.shared_gate_up = make(random_vec(2 * Is * H, rng_, 0.2f), {2 * Is, H});
    b.shared_down = make(random_vec(H * Is, rng_, 0.2f), {H, Is});
    b.shared_gate = make(random_vec(H, rng_, 0.2f), {1, H});
    for (const Pair* p :
         {&b.router, &b.gate_up, &b.down, &b.shared_gate_up, &b.shared_down, &b.shared_gate}) {
      b.cw.push_back(Weight::dense(p->c));
      b.gw.push_back(Weight::dense(p->g));
    }
    return b;
  }
  // The outputs and scratch of one moe_block call on one backend.
  struct BlockRun {
    DeviceBuffer mem;
    MoeBlockBuffers buf;
    Tensor out;
  };
  // Buffers for T tokens of a block of E experts, hidden size H, shared expert width Is.
  BlockRun block_run(Backend& be, int64_t E, int64_t H, int64_t Is, int64_t T, int32_t k) {
    const DType act = be.activation_dtype();
    // logits, ids, weights, shared_gate_up, shared_act, shared, gate, out: [T, cols] each.
    const std::vector<std::pair<DType, int64_t>> parts = {
        {DType::F32, E}, {DType::I32, k}, {DType::F32, k}, {act, 2 * Is},
        {act, Is},       {act, H},        {act, 1},        {act, H}};
    auto bytes_of = [&](const std::pair<DType, int64_t>& p) {
      return (static_cast<size_t>(T * p.second) * dtype_size(p.first) + 255) / 256 * 256;
    };
    size_t bytes = 0;
    for (const auto& p : parts) bytes += bytes_of(p);
    BlockRun r;
    r.mem = be.allocate(bytes);
    std::vector<uint8_t> nan(bytes, 0xff);  // all-ones: NaN floats, id -1
    be.upload(r.mem.data(), nan.data(), bytes);
    char* at = static_cast<char*>(r.mem.data());
    std::vector<Tensor> ts;
    for (const auto& p : parts) {
      ts.push_back(Tensor(at, p.first, {T, p.second}));
      at += bytes_of(p);
    }
    r.buf.logits = ts[0];
    r.buf.ids = ts[1];
    r.buf.weights = ts[2];
    r.buf.shared_gate_up = ts[3];
    r.buf.shared_act = ts[4];
    r.buf.shared = ts[5];
    r.buf.gate = ts[6];
    r.out = ts[7];
    return r;
  }
  template <typename V>
  static bool same_bits(const std::vector<V>& a, const std::vector<V>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0;
  }

  // moe_block on the GPU against its op sequence on the GPU (Backend::moe_block, the linear()s
  // through the GEMV at every T here: the fused path's summation orders and roundings, so the
  // same bits) and on the CPU. `fused`: whether the GPU call takes the fused path for T <=
  // kMoeBlockMaxTokens (checked: it leaves the sequence's scratch untouched). Returns the GPU's
  // ids.
  std::vector<int32_t> check_block(const Block& b, int64_t T, int32_t k, bool renorm, bool fused,
                                   bool invariant = false) {
    SCOPED_TRACE("moe_block T=" + std::to_string(T) + " k=" + std::to_string(k) +
                 " E=" + std::to_string(b.E) + " H=" + std::to_string(b.H) +
                 " I=" + std::to_string(b.I) + " Is=" + std::to_string(b.Is) +
                 (renorm ? " renormalized" : "") + (invariant ? " batch-invariant" : ""));
    fused = fused && T <= cuda::kMoeBlockMaxTokens;
    auto x = make(random_vec(T * b.H, rng_), {T, b.H});
    gpu_->set_gemv_max_tokens(static_cast<int>(kGemvMax));
    gpu_->set_batch_invariant(invariant);
    BlockRun seq = block_run(*gpu_, b.E, b.H, b.Is, T, k);
    BlockRun one = block_run(*gpu_, b.E, b.H, b.Is, T, k);
    BlockRun cpu = block_run(*cpu_, b.E, b.H, b.Is, T, k);
    const MoeBlockWeights gw = b.weights(true), cw = b.weights(false);
    gpu_->Backend::moe_block(x.g, gw, k, renorm, seq.buf, seq.out);
    const uint64_t routed_before = gpu_->moe_experts_routed();
    gpu_->moe_block(x.g, gw, k, renorm, one.buf, one.out);
    const uint64_t routed = gpu_->moe_experts_routed() - routed_before;
    cpu_->moe_block(x.c, cw, k, renorm, cpu.buf, cpu.out);
    // Which path ran: the fused one leaves the sequence's scratch as block_run() poisoned it.
    const std::vector<float> gate = down_gpu(one.buf.gate);
    const bool untouched =
        std::all_of(gate.begin(), gate.end(), [](float v) { return std::isnan(v); });
    EXPECT_EQ(untouched, fused) << (fused ? "the op sequence ran, not the fused path"
                                          : "the fused path ran, not the op sequence");
    const auto ids = down_raw<int32_t>(one.buf.ids, *gpu_);
    const auto weights = down_raw<float>(one.buf.weights, *gpu_);
    EXPECT_TRUE(
        same_bits(down_raw<float>(one.buf.logits, *gpu_), down_raw<float>(seq.buf.logits, *gpu_)))
        << "router logits differ from linear()'s";
    EXPECT_EQ(ids, down_raw<int32_t>(seq.buf.ids, *gpu_)) << "ids differ from moe_topk's";
    EXPECT_TRUE(same_bits(weights, down_raw<float>(seq.buf.weights, *gpu_)))
        << "routing weights differ from moe_topk's";
    EXPECT_EQ(ids, down_raw<int32_t>(cpu.buf.ids, *cpu_)) << "ids differ from the CPU's";
    const std::vector<float> got = down_gpu(one.out), ref = down_gpu(seq.out);
    EXPECT_EQ(routed, distinct_experts(ids)) << "routed-experts counter";
    EXPECT_TRUE(same_bits(got, ref))
        << "out differs from the op sequence's: relative L2 " << rel_l2(got, ref);
    const double ec = rel_l2(got, down_cpu(cpu.out));
    EXPECT_LT(ec, 1e-2) << "out vs the CPU: relative L2 " << ec;
    // Run to run (and the router's ticket back at 0 after each launch): the same bits twice more.
    for (int rep = 0; rep < 2; ++rep) {
      poison(one.out);
      gpu_->moe_block(x.g, gw, k, renorm, one.buf, one.out);
      EXPECT_TRUE(same_bits(down_gpu(one.out), got)) << "moe_block differs between runs";
      EXPECT_EQ(down_raw<int32_t>(one.buf.ids, *gpu_), ids) << "ids differ between runs";
    }
    gpu_->set_batch_invariant(false);
    gpu_->set_gemv_max_tokens(4);
    return ids;
  }

  // A device buffer of n random values of type t (scale 0.2).
  DeviceBuffer random_device(int64_t n, DType t) {
    DeviceBuffer b = gpu_->allocate(static_cast<size_t>(n) * dtype_size(t));
    gpu_->fill_random(b.data(), t, n, rng_(), 0.2f);
    return b;
  }

  // Random routed experts of a timing test's shape: gate_up [E, 2I, H] and down [E, H, I].
  struct TimingExperts {
    DeviceBuffer gate_up_buf, down_buf;
    Tensor gate_up, down;
  };
  TimingExperts timing_experts(const MoeDims& d) {
    TimingExperts e{random_device(d.E * 2 * d.I * d.H, DType::BF16),
                    random_device(d.E * d.H * d.I, DType::BF16),
                    {},
                    {}};
    e.gate_up = Tensor(e.gate_up_buf.data(), DType::BF16, {d.E, 2 * d.I, d.H});
    e.down = Tensor(e.down_buf.data(), DType::BF16, {d.E, d.H, d.I});
    return e;
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

// The tiled path at prefill sizes, 37, 75 and 150 rows an expert, none a whole number of tiles: in
// the default mode the warpgroup-MMA GEMMs where the device has them, else moe_gemm_kernel's tiles
// (64 x 128 below kLargeTileRows rows an expert on average, 128 x 128 from there; 64 x 64 on
// devices with less shared memory), which batch-invariant mode always takes.
TEST_F(CudaMoeOps, ExpertsMatchCpuOnEveryPrefillTile) {
  const MoeDims d{8, 64, 24};
  const Experts ex = make_experts(d);
  check_experts(d, ex, 300, 1, random_routing(300, 1, d.E));
  check_experts(d, ex, 300, 2, random_routing(300, 2, d.E));
  check_experts(d, ex, 600, 2, random_routing(600, 2, d.E));
}

// Every prefill tile of moe_gemm_kernel forced in turn (moe.cuh MoeTile, SYV_MOE_TILE) gives the
// bits of its default tile, and those match the CPU: 128 and 37 rows an expert, gate_up's 2I = 192
// and down's H = 200 columns leaving partial weight tiles for every BN, K = 200 and 96 partial K
// steps for BK 64. (The warpgroup-MMA GEMMs, the default where the device has them, are off here:
// the next test has them.)
TEST_F(CudaMoeOps, ExpertsBitIdenticalOnEveryPrefillTile) {
  const MoeDims d{8, 200, 96};
  const Experts ex = make_experts(d);
  const bool wgmma = cuda::moe_wgmma_enabled();
  cuda::set_moe_wgmma(false);
  for (const auto& [T, k] : {std::pair<int64_t, int32_t>{512, 2}, {300, 1}}) {
    SCOPED_TRACE("T=" + std::to_string(T) + " k=" + std::to_string(k));
    ExpertsCall c = random_call(d, ex, T, k);
    cuda::set_moe_tile(cuda::MoeTile::kAuto);
    const std::vector<float> ref = gpu_run(c, ex);
    expect_close(c.out, 1e-2, "moe_experts out, default tile");
    for (const cuda::MoeTile tile : cuda::kMoeTiles) {
      SCOPED_TRACE(cuda::moe_tile_name(tile));
      cuda::set_moe_tile(tile);
      EXPECT_TRUE(same_bits(gpu_run(c, ex), ref)) << "differs from the default tile's bits";
    }
  }
  cuda::set_moe_tile(cuda::MoeTile::kAuto);
  cuda::set_moe_wgmma(wgmma);
}

// The warpgroup-MMA GEMMs (moe_wgmma.cu) in tiles of 32, 64 and 128 token rows: each within the
// CPU's tolerance, and the three bit for bit the same (each element one f32 sum over K in K order
// whatever tile it lands in). Shapes that leave partial weight boxes (2I = 192: a gate box of 64
// rows running into the up rows; H = 200: a down block of 128 rows running into the next
// expert's), partial K chunks (K = 200 and 96 over chunks of 64), 32-300 rows an expert (several
// tiles of each size, none whole). The tile is pinned to auto (a forced MoeTile takes
// moe_gemm_kernel) and the path switched on whatever SYV_MOE_WGMMA says (both restored); skipped
// where the device has no warpgroup MMA.
TEST_F(CudaMoeOps, WgmmaGemmsMatchCpuAtEveryTileSize) {
  const MoeDims d{8, 200, 96};
  if (!cuda::moe_wgmma_supports({1, 1, d.E, d.H, d.I})) GTEST_SKIP() << "no warpgroup MMA here";
  const Experts ex = make_experts(d);
  const bool wgmma = cuda::moe_wgmma_enabled();
  cuda::set_moe_wgmma(true);
  cuda::set_moe_tile(cuda::MoeTile::kAuto);
  for (const auto& [T, k] : {std::pair<int64_t, int32_t>{512, 2}, {300, 1}, {1200, 2}, {64, 4}}) {
    SCOPED_TRACE("T=" + std::to_string(T) + " k=" + std::to_string(k));
    ExpertsCall c = random_call(d, ex, T, k);
    std::vector<float> first;
    for (int rows : {32, 64, 128}) {
      SCOPED_TRACE("tiles of " + std::to_string(rows) + " rows");
      cuda::set_moe_wgmma_rows(rows);
      const std::vector<float> got = gpu_run(c, ex);
      expect_close(c.out, 1e-2, "moe_experts out, warpgroup MMA");
      if (first.empty()) {
        first = got;
      } else {
        EXPECT_TRUE(same_bits(got, first)) << "differs from the 32-row tiles' bits";
      }
    }
  }
  cuda::set_moe_wgmma_rows(0);
  cuda::set_moe_wgmma(wgmma);
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

// ---- the MoE block ------------------------------------------------------------------------------

// Qwen3-Next's router (512 experts, top 10, H 2048; the experts 64 wide instead of 512, which keeps
// the host copies small) at 1, 2 and kGemvMax tokens (the fused path up to kMoeBlockMaxTokens).
TEST_F(CudaMoeOps, BlockMatchesSequenceAtQwenNextRouterShape) {
  const Block b = make_block(512, 2048, 64, 64);
  for (int64_t T : {int64_t{1}, int64_t{2}, kGemvMax}) check_block(b, T, 10, true, true);
}

// Every token count of the GEMVs (the fused path up to kMoeBlockMaxTokens, the sequence above),
// renormalisation on and off, small experts shared by the batch's tokens (16 experts, top 4 of 2
// and 8 tokens: experts several times), E not a multiple of 32, rows with partial chunks (H = 1096,
// I = 264), the largest top_k, more than 512 experts.
TEST_F(CudaMoeOps, BlockMatchesSequenceAtEverySmallTokenCount) {
  const Block b = make_block(64, 256, 64, 64);
  for (int64_t T = 1; T <= kGemvMax; ++T)
    for (bool renorm : {false, true}) check_block(b, T, 8, renorm, true);
  const Block shared_experts = make_block(16, 128, 32, 32);
  for (int64_t T : {int64_t{2}, int64_t{5}, kGemvMax})
    check_block(shared_experts, T, 4, true, true);
  const Block odd = make_block(40, 1096, 264, 264);
  for (int64_t T : {int64_t{1}, int64_t{2}, kGemvMax}) check_block(odd, T, 4, true, true);
  const Block wide = make_block(100, 128, 32, 32);
  for (int64_t T : {int64_t{1}, int64_t{2}}) check_block(wide, T, 32, false, true);
  // More experts than the top-k's 16 entries a lane take (512): its 32-entry instance.
  const Block many = make_block(1000, 64, 16, 16);
  for (int64_t T : {int64_t{1}, int64_t{2}}) check_block(many, T, 10, true, true);
}

// Ties in the router: every row zero but experts 5 and 37 (one row, twice), so each token's logits
// are 0 but for two equal ones: top 8 = {5, 37, 0, 1, 2, 3, 4, 6} when they are positive, else the
// eight lowest ids but 5 and 37; every token of the batch shares most of its experts.
TEST_F(CudaMoeOps, BlockBreaksRouterTiesByLowerIndex) {
  const int64_t E = 64, H = 256, T = cuda::kMoeBlockMaxTokens;
  std::vector<float> rows(E * H, 0.f);
  const std::vector<float> lead = random_vec(H, rng_, 0.2f);
  std::copy(lead.begin(), lead.end(), rows.begin() + 5 * H);
  std::copy(lead.begin(), lead.end(), rows.begin() + 37 * H);
  const Block b = make_block(E, H, 64, 64, rows);
  const std::vector<int32_t> ids = check_block(b, T, 8, true, true);
  ASSERT_EQ(ids.size(), static_cast<size_t>(T * 8));
  const std::vector<int32_t> high = {5, 37, 0, 1, 2, 3, 4, 6}, low = {0, 1, 2, 3, 4, 6, 7, 8};
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int32_t> got(ids.begin() + t * 8, ids.begin() + (t + 1) * 8);
    EXPECT_TRUE(got == high || got == low)
        << "token " << t << " ids " << ::testing::PrintToString(got);
  }
}

// A shared expert of another width than the routed ones (the fixtures' shapes: Qwen3.5 MoE 24 /
// 40, Qwen3-Next 32 / 48), wider by more than a 32-lane chunk of the down rows, and narrower.
TEST_F(CudaMoeOps, BlockWithASharedExpertOfAnotherWidth) {
  for (const auto& [I, Is] :
       std::vector<std::pair<int64_t, int64_t>>{{24, 40}, {32, 48}, {64, 320}, {264, 40}}) {
    const Block b = make_block(16, 264, I, Is);
    for (int64_t T : {int64_t{1}, int64_t{2}, kGemvMax}) check_block(b, T, 2, true, true);
  }
}

// What moe_block leaves to its op sequence runs it bit for bit: more tokens than the GEMVs take,
// batch-invariant mode, more experts than the fused top-k holds (kMoeBlockMaxExperts).
TEST_F(CudaMoeOps, BlockFallsBackToTheSequence) {
  const Block b = make_block(64, 256, 64, 64);
  check_block(b, kGemvMax + 1, 8, true, false);
  check_block(b, 1, 8, true, false, /*invariant=*/true);
  check_block(b, kGemvMax, 8, true, false, /*invariant=*/true);
  const Block many = make_block(cuda::kMoeBlockMaxExperts + 76, 64, 16, 16);
  check_block(many, 1, 4, true, false);
}

// Not a check: prints moe_topk and moe_experts times at Qwen3-Next's shape (512 experts, top 10,
// H 2048, I 512) for 1, 2, 4, 8 and 64 tokens with random distinct experts per token, and the
// routed experts' weight bytes per microsecond against the device copy rate (the decode floor's
// part for the experts; benchmark: tools/device/moe_check.sh bench). Up to kGemvMax tokens both
// paths: the small-batch GEMVs (the default mode) and the tiled path (batch-invariant mode); and
// the whole MoE block (moe_block: router, top-k, routed and shared experts) fused (3 launches)
// against its op sequence (9 launches), launched eagerly.
TEST_F(CudaMoeOps, QwenNextExpertsTiming) {
  const MoeDims d{512, 2048, 512};
  const int32_t k = 10;
  const double copy_gbps = gpu_->measure_copy_gbps(size_t{1} << 30, 10);
  std::printf("device copy %.0f GB/s\n", copy_gbps);
  auto dev = [&](int64_t n, DType t) { return random_device(n, t); };
  const TimingExperts ex = timing_experts(d);
  const Tensor &gate_up = ex.gate_up, &down = ex.down;
  DeviceBuffer rb = dev(d.E * d.H, DType::BF16), sgub = dev(2 * d.I * d.H, DType::BF16),
               sdnb = dev(d.H * d.I, DType::BF16), sgb = dev(d.H, DType::BF16);
  const std::vector<Weight> bw = {Weight::dense(Tensor(rb.data(), DType::BF16, {d.E, d.H})),
                                  Weight::dense(gate_up),
                                  Weight::dense(down),
                                  Weight::dense(Tensor(sgub.data(), DType::BF16, {2 * d.I, d.H})),
                                  Weight::dense(Tensor(sdnb.data(), DType::BF16, {d.H, d.I})),
                                  Weight::dense(Tensor(sgb.data(), DType::BF16, {1, d.H}))};
  MoeBlockWeights block_w;
  block_w.router = &bw[0];
  block_w.experts_gate_up = &bw[1];
  block_w.experts_down = &bw[2];
  block_w.shared_gate_up = &bw[3];
  block_w.shared_down = &bw[4];
  block_w.shared_gate = &bw[5];
  for (int64_t T : {1, 2, 4, 8, 64}) {
    const std::vector<int32_t> routing = random_routing(T, k, d.E);
    const size_t routed = distinct_experts(routing);
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
    const double bytes = static_cast<double>(routed) * 3 * d.I * d.H * 2;
    for (bool invariant : {false, true}) {
      if (invariant && T > kGemvMax) break;  // both modes take the tiled path
      gpu_->set_batch_invariant(invariant);
      const double experts_us = us([&] { gpu_->moe_experts(x, ids, w, gate_up, down, out); });
      std::printf(
          "moe, %3lld tokens: topk %6.1f us | experts (%s) %7.1f us for %3zu experts (%.1f MB: "
          "%.0f GB/s = %.0f%% of copy)\n",
          static_cast<long long>(T), topk_us, T <= kGemvMax && !invariant ? "gemv " : "tiled",
          experts_us, routed, bytes / 1e6, bytes / (experts_us * 1e3),
          100.0 * bytes / (experts_us * 1e3) / copy_gbps);
    }
    gpu_->set_batch_invariant(false);
    if (T > cuda::kMoeBlockMaxTokens) continue;  // both run the op sequence
    BlockRun run = block_run(*gpu_, d.E, d.H, d.I, T, k);
    const double fused_us = us([&] { gpu_->moe_block(x, block_w, k, true, run.buf, run.out); });
    const double seq_us =
        us([&] { gpu_->Backend::moe_block(x, block_w, k, true, run.buf, run.out); });
    std::printf("moe block, %3lld tokens: fused %6.1f us | op sequence %6.1f us\n",
                static_cast<long long>(T), fused_us, seq_us);
  }
}

// A timing more than a check: the routed experts at prefill sizes (2K and 8K tokens, Qwen3-Next's
// shape, random distinct experts per token: ~40 and ~160 rows an expert) in TFLOP/s of their
// active FLOPs (6 H I a token and slot: gate/up and down) against cuBLASLt's bf16 GEMM measured in
// the same process (8192^3), eager, median of 10 (the tiled path's prefill tiles: moe.cu). It
// fails only where a call did not route every token in one pass (the routed-experts counter).
TEST_F(CudaMoeOps, QwenNextPrefillTiming) {
  const MoeDims d{512, 2048, 512};
  const int32_t k = 10;
  const double gemm = gpu_->measure_gemm_tflops(8192, 8192, 8192, 10);
  auto dev = [&](int64_t n, DType t) { return random_device(n, t); };
  const TimingExperts ex = timing_experts(d);
  const Tensor &gate_up = ex.gate_up, &down = ex.down;
  for (int64_t T : {2048, 8192}) {
    const std::vector<int32_t> routing = random_routing(T, k, d.E);
    DeviceBuffer xb = dev(T * d.H, DType::BF16), wb = dev(T * k, DType::F32),
                 ob = dev(T * d.H, DType::BF16),
                 ib = gpu_->allocate(static_cast<size_t>(T * k) * 4);
    gpu_->upload(ib.data(), routing.data(), routing.size() * 4);
    Tensor x(xb.data(), DType::BF16, {T, d.H}), w(wb.data(), DType::F32, {T, k});
    Tensor out(ob.data(), DType::BF16, {T, d.H}), ids(ib.data(), DType::I32, {T, k});
    const uint64_t routed_before = gpu_->moe_experts_routed();
    gpu_->moe_experts(x, ids, w, gate_up, down, out);
    EXPECT_EQ(gpu_->moe_experts_routed() - routed_before, distinct_experts(routing))
        << T << " tokens: one pass over the routed experts";
    auto time_one = [&](const char* name) {
      std::vector<float> ms =
          gpu_->time_ms([&] { gpu_->moe_experts(x, ids, w, gate_up, down, out); }, 2, 10);
      std::sort(ms.begin(), ms.end());
      const double t_ms = ms[ms.size() / 2];
      const double tflops = 6.0 * static_cast<double>(T * k) * d.H * d.I / (t_ms * 1e9);
      std::printf(
          "moe prefill, %5lld tokens, tile %-10s: experts %8.3f ms, %6.1f TFLOP/s = %.1f%% of "
          "the GEMM's %.0f\n",
          static_cast<long long>(T), name, t_ms, tflops, 100.0 * tflops / gemm, gemm);
    };
    for (const cuda::MoeTile tile : cuda::kMoeTiles) {  // the default's, then each forced
      cuda::set_moe_tile(tile);
      time_one(cuda::moe_tile_name(tile));
    }
    cuda::set_moe_tile(cuda::MoeTile::kAuto);
    if (cuda::moe_wgmma_supports({T, k, d.E, d.H, d.I})) {  // the warpgroup-MMA tiles forced
      for (int rows : {32, 64, 128}) {
        cuda::set_moe_wgmma_rows(rows);
        time_one(rows == 32 ? "wgmma-32" : rows == 64 ? "wgmma-64" : "wgmma-128");
      }
      cuda::set_moe_wgmma_rows(0);
      cuda::set_moe_wgmma(false);
      time_one("auto-mma");  // the default without them
      cuda::set_moe_wgmma(true);
    }
  }
}

}  // namespace
}  // namespace syv
