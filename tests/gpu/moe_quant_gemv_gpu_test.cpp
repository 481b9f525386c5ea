// Quantized MoE experts on CUDA (CudaBackend::moe_experts_quantized) against the CPU reference
// (cpu_quantized.cpp: the routed experts dequantized to f32, then the f32 experts), on random
// stacked expert weights in backend/weight.h's layouts: int4 groups of 32 with zero points, int4
// groups of 128 symmetric, fp8 128x128 tiles; int4 groups of 8 and act-order int4 permuted at load
// (which the GEMV does not take).
// At 1, 2, 5 and 8 tokens the grouped GEMVs of moe_quant_gemv.cu run (where the format allows),
// at 9 and 20 the dequantize-to-bf16 path (set_quant_moe_gemm off) or the tiled path on the
// packed rows (on, its default; at 9-300 tokens in the formats it takes); several tokens share
// experts. Also: the
// GEMV's results are run-to-run identical and a token's row does not depend on the batch around it;
// it counts the distinct experts routed to as the dense path does; a CUDA graph replays its bits.
// Skips cleanly without a CUDA device.
//
// Bounds. The GEMV takes the exact dequantized weights and sums in fp32; its act rows are rounded
// to bf16 (2^-9 relative each) and so is its output: 4e-3 relative L2 covers both. The dequantize
// path also rounds every weight to bf16 first: 6e-3 (quant_linear_gpu_test.cpp's bound for it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/moe.cuh"
#include "gpu/cuda_ops_fixture.h"
#include "gpu/host_quant.h"

namespace syv {
namespace {

constexpr int64_t kE = 8, kH = 256, kI = 128;

class MoeQuantGemvGpu : public CudaOps {
 protected:
  struct Ids {
    DeviceBuffer c, g;
    Tensor tc, tg;
  };
  // top_k distinct experts of `experts` per token (of kE: tokens share some).
  std::vector<int32_t> random_ids(int64_t T, int64_t top_k, int64_t experts) {
    std::vector<int32_t> ids, all(static_cast<size_t>(experts));
    std::iota(all.begin(), all.end(), 0);
    for (int64_t t = 0; t < T; ++t) {
      std::shuffle(all.begin(), all.end(), rng_);
      ids.insert(ids.end(), all.begin(), all.begin() + top_k);
    }
    return ids;
  }
  Ids routing(int64_t T, int64_t top_k, std::vector<int32_t>* host = nullptr) {
    const std::vector<int32_t> ids = random_ids(T, top_k, kE);
    if (host) *host = ids;
    Ids r;
    r.c = cpu_->allocate(ids.size() * 4 + 16);
    r.g = gpu_->allocate(ids.size() * 4 + 16);
    cpu_->upload(r.c.data(), ids.data(), ids.size() * 4);
    gpu_->upload(r.g.data(), ids.data(), ids.size() * 4);
    r.tc = Tensor(r.c.data(), DType::I32, {T, top_k});
    r.tg = Tensor(r.g.data(), DType::I32, {T, top_k});
    return r;
  }
  Pair routing_weights(int64_t T, int64_t top_k) {
    std::vector<float> w(static_cast<size_t>(T * top_k));
    std::uniform_real_distribution<float> d(0.05f, 1.f);
    for (float& v : w) v = d(rng_);
    return make(w, {T, top_k}, DType::F32);
  }

  // T tokens, top_k each, on gate_up / down: the routed-experts counter adds the number of
  // distinct experts; run-to-run identical bits; the first `first` tokens alone (their ids and
  // routing weights the batch's first rows) give the batch's first rows' bits; a graph replays
  // the same bits.
  void expect_bits(const HostQuant& gate_up, const HostQuant& down, int64_t T, int64_t top_k,
                   int64_t first) {
    OnBackend gg = put(*gpu_, gate_up), gd = put(*gpu_, down);
    const std::vector<float> xs = random_vec(static_cast<size_t>(T * kH), rng_);
    Pair x = make(xs, {T, kH});
    std::vector<int32_t> host_ids;
    Ids ids = routing(T, top_k, &host_ids);
    Pair w = routing_weights(T, top_k);
    Pair out = make_out({T, kH});
    const uint64_t routed0 = gpu_->moe_experts_routed();
    gpu_->moe_experts(x.g, ids.tg, w.g, gg.w, gd.w, out.g);
    const std::vector<float> all = down_gpu(out.g);
    std::vector<int32_t> distinct = host_ids;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    EXPECT_EQ(gpu_->moe_experts_routed() - routed0, distinct.size());

    poison(out.g);
    gpu_->moe_experts(x.g, ids.tg, w.g, gg.w, gd.w, out.g);
    EXPECT_EQ(down_gpu(out.g), all) << "run to run";

    Pair xf = make(std::vector<float>(xs.begin(), xs.begin() + first * kH), {first, kH});
    Ids idsf = routing(first, top_k);
    gpu_->upload(idsf.g.data(), host_ids.data(), static_cast<size_t>(first * top_k) * 4);
    Pair wf =
        make(std::vector<float>(static_cast<size_t>(first * top_k)), {first, top_k}, DType::F32);
    std::vector<float> wrows(static_cast<size_t>(first * top_k));
    gpu_->download(wrows.data(), w.g.data, wrows.size() * 4);
    gpu_->upload(wf.g.data, wrows.data(), wrows.size() * 4);
    Pair outf = make_out({first, kH});
    gpu_->moe_experts(xf.g, idsf.tg, wf.g, gg.w, gd.w, outf.g);
    EXPECT_EQ(down_gpu(outf.g), std::vector<float>(all.begin(), all.begin() + first * kH))
        << first << " tokens alone and among " << T;

    const int id =
        gpu_->capture_graph([&] { gpu_->moe_experts(x.g, ids.tg, w.g, gg.w, gd.w, out.g); });
    poison(out.g);
    gpu_->replay_graph(id);
    EXPECT_EQ(down_gpu(out.g), all) << "graph replay";
    gpu_->destroy_graph(id);
  }

  // GPU vs CPU at every token count; `gemv`: whether the format takes the GEMV at <= 8 tokens.
  // tiled_path: 9-300 tokens on the tiled path over the packed rows (set_quant_moe_gemm), whose
  // bound is the GEMV's.
  void check(const HostQuant& gate_up, const HostQuant& down, bool gemv, const std::string& what,
             bool tiled_path = false) {
    OnBackend cg = put(*cpu_, gate_up), cd = put(*cpu_, down);
    OnBackend gg = put(*gpu_, gate_up), gd = put(*gpu_, down);
    gpu_->set_quant_moe_gemm(tiled_path);  // on by default: off, 9 and 20 take the dequantize path
    const std::vector<int64_t> tokens =
        tiled_path ? std::vector<int64_t>{9, 20, 64, 300} : std::vector<int64_t>{1, 2, 5, 8, 9, 20};
    for (int64_t top_k : {2, 4}) {
      for (int64_t T : tokens) {
        Pair x = make(random_vec(static_cast<size_t>(T * kH), rng_), {T, kH});
        Ids ids = routing(T, top_k);
        Pair w = routing_weights(T, top_k);
        Pair out = make_out({T, kH});
        cpu_->moe_experts(x.c, ids.tc, w.c, cg.w, cd.w, out.c);
        const uint64_t tiled = gpu_->quant_path_calls().moe_tiled;
        gpu_->moe_experts(x.g, ids.tg, w.g, gg.w, gd.w, out.g);
        EXPECT_EQ(gpu_->quant_path_calls().moe_tiled - tiled, tiled_path ? 1u : 0u)
            << what << ", T " << T << ": the tiled path " << (tiled_path ? "did not run" : "ran");
        const bool on_gemv = gemv && T <= cuda::kMoeGemvMaxTokens;
        const char* path = tiled_path ? " (tiled)" : on_gemv ? " (gemv)" : " (dequantize)";
        expect_close(out, on_gemv || tiled_path ? 4e-3 : 6e-3,
                     what + ", top_k " + std::to_string(top_k) + ", T " + std::to_string(T) + path);
      }
    }
  }
};

TEST_F(MoeQuantGemvGpu, Int4Group32WithZeros) {
  check(random_int4(kE * 2 * kI, kH, 32, true, false, rng_),
        random_int4(kE * kH, kI, 32, true, false, rng_), true, "int4 g32 zeros");
}

TEST_F(MoeQuantGemvGpu, Int4Group128Symmetric) {
  check(random_int4(kE * 2 * kI, kH, 128, false, false, rng_),
        random_int4(kE * kH, kI, 128, false, false, rng_), true, "int4 g128");
}

TEST_F(MoeQuantGemvGpu, Fp8Tiles128) {
  check(random_fp8(kE * 2 * kI, kH, 128, 128, rng_), random_fp8(kE * kH, kI, 128, 128, rng_), true,
        "fp8 128x128");
}

TEST_F(MoeQuantGemvGpu, Int4Group8TakesTheDequantizePath) {
  check(random_int4(kE * 2 * kI, kH, 8, true, false, rng_),
        random_int4(kE * kH, kI, 8, true, false, rng_), false, "int4 g8");
}

// Act-order int4 permuted at load (SYV_ACT_ORDER_PERM=1; every expert of a weight sharing one
// order, as concat_quantized requires): the GEMV does not take it, the dequantize path writes the
// rows back in input column order.
TEST_F(MoeQuantGemvGpu, ActOrderPermutedTakesTheDequantizePath) {
  check(permuted(random_int4(kE * 2 * kI, kH, 32, true, true, rng_)),
        permuted(random_int4(kE * kH, kI, 32, false, true, rng_)), false, "int4 g32 act-order");
}

// The tiled path on the packed rows (set_quant_moe_gemm; moe_quant_gemm.cu) above 8 tokens, in the
// formats its tile takes, against the CPU (the GEMV's bound: exact weights, bf16 act rows): tiles
// of 16 (few rows per expert), 32 and 64 rows; then run to run, a token's row alone in a batch of
// 9 and among 100, the routed-experts counter, and a graph replay.
TEST_F(MoeQuantGemvGpu, TiledPathOnPackedRowsMatchesCpu) {
  gpu_->set_quant_moe_gemm(true);
  check(random_int4(kE * 2 * kI, kH, 128, false, false, rng_),
        random_int4(kE * kH, kI, 128, false, false, rng_), true, "int4 g128", true);
  check(random_int4(kE * 2 * kI, kH, 128, true, false, rng_),
        random_int4(kE * kH, kI, 128, true, false, rng_), true, "int4 g128 zeros", true);
  check(random_fp8(kE * 2 * kI, kH, 128, 128, rng_), random_fp8(kE * kH, kI, 128, 128, rng_), true,
        "fp8 128x128", true);
  expect_bits(random_int4(kE * 2 * kI, kH, 128, true, false, rng_),
              random_int4(kE * kH, kI, 128, true, false, rng_), 100, 4, 9);
}

// Run-to-run identical bits; token 0 alone gives the bits of token 0 in a batch of 5; the
// routed-experts counter adds the number of distinct experts; a graph replays the same bits.
TEST_F(MoeQuantGemvGpu, DeterministicBatchIndependentCountedAndCapturable) {
  expect_bits(random_int4(kE * 2 * kI, kH, 128, false, false, rng_),
              random_int4(kE * kH, kI, 128, false, false, rng_), 5, 2, 1);
}

// Qwen3-Next's expert shape (512 experts of [2 x 512, 2048] and [2048, 512], top-10) in int4
// groups of 128: the grouped GEMVs (1-8 tokens) and the tiled path on the packed rows (16-256)
// against the dequantize path (SYV_QUANT_MOE_GEMV=0; one element and 8 columns a thread) and the
// bf16 experts, per call, with the routed experts' packed bytes per second against the device's
// copy rate (a benchmark: it prints, and fails only where the tiled path did not run; the
// correctness runs filter it out).
TEST_F(MoeQuantGemvGpu, QwenNextInt4Timing) {
  constexpr int64_t E = 512, H = 2048, I = 512, k = 10, group = 128;
  const double copy_gbps = gpu_->measure_copy_gbps(size_t{1} << 30, 10);
  std::printf("device copy %.0f GB/s\n", copy_gbps);
  setenv("SYV_QUANT_MOE_GEMV", "0", 1);
  std::unique_ptr<CudaBackend> dequant_path = make_cuda_backend(0);
  unsetenv("SYV_QUANT_MOE_GEMV");
  dequant_path->set_quant_moe_gemm(false);
  const HostQuant gu = random_int4(E * 2 * I, H, group, false, false, rng_);
  const HostQuant dn = random_int4(E * H, I, group, false, false, rng_);
  OnBackend gg = put(*gpu_, gu), gd = put(*gpu_, dn);
  OnBackend qg = put(*dequant_path, gu), qd = put(*dequant_path, dn);
  DeviceBuffer gub = gpu_->allocate(static_cast<size_t>(E * 2 * I * H) * 2);
  DeviceBuffer dnb = gpu_->allocate(static_cast<size_t>(E * H * I) * 2);
  gpu_->fill_random(gub.data(), DType::BF16, E * 2 * I * H, 1, 0.2f);
  gpu_->fill_random(dnb.data(), DType::BF16, E * H * I, 2, 0.2f);
  const Tensor bf16_gu(gub.data(), DType::BF16, {E, 2 * I, H});
  const Tensor bf16_dn(dnb.data(), DType::BF16, {E, H, I});
  auto us = [](CudaBackend& b, const std::function<void()>& op) {
    std::vector<float> ms = b.time_ms(op, 3, 50);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e3;
  };
  gpu_->set_quant_moe_gemm(true);  // above 8 tokens: the tiled path on the packed rows
  for (int64_t T : {1, 2, 4, 8, 16, 32, 64, 256}) {
    const std::vector<int32_t> routing = random_ids(T, k, E);
    std::vector<int32_t> distinct = routing;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    // Per backend: x, ids, weights, out.
    struct Io {
      DeviceBuffer x, ids, w, out;
      Tensor tx, tids, tw, tout;
    };
    auto io = [&](CudaBackend& b) {
      Io r;
      r.x = b.allocate(static_cast<size_t>(T * H) * 2);
      r.ids = b.allocate(routing.size() * 4);
      r.w = b.allocate(routing.size() * 4);
      r.out = b.allocate(static_cast<size_t>(T * H) * 2);
      b.fill_random(r.x.data(), DType::BF16, T * H, 3, 1.f);
      b.upload(r.ids.data(), routing.data(), routing.size() * 4);
      const std::vector<float> w(routing.size(), 0.1f);
      b.upload(r.w.data(), w.data(), w.size() * 4);
      r.tx = Tensor(r.x.data(), DType::BF16, {T, H});
      r.tids = Tensor(r.ids.data(), DType::I32, {T, k});
      r.tw = Tensor(r.w.data(), DType::F32, {T, k});
      r.tout = Tensor(r.out.data(), DType::BF16, {T, H});
      return r;
    };
    Io a = io(*gpu_), b = io(*dequant_path);
    const uint64_t tiled = gpu_->quant_path_calls().moe_tiled;
    const double gemv_us =
        us(*gpu_, [&] { gpu_->moe_experts(a.tx, a.tids, a.tw, gg.w, gd.w, a.tout); });
    // The path the packed rows took (the tiled one's call counter says whether it ran).
    const char* path = T <= cuda::kMoeGemvMaxTokens                 ? "gemv"
                       : gpu_->quant_path_calls().moe_tiled > tiled ? "tiled"
                                                                    : "dequantize (not tiled)";
    // Timed as what it is, but a fallback from the path this shape should take is a failure.
    EXPECT_STRNE(path, "dequantize (not tiled)") << T << " tokens";
    auto dequant_op = [&] { dequant_path->moe_experts(b.tx, b.tids, b.tw, qg.w, qd.w, b.tout); };
    dequant_path->set_quant_dequant_vectorized(false);
    const double dequant_us = us(*dequant_path, dequant_op);
    dequant_path->set_quant_dequant_vectorized(true);
    const double dequant_vec_us = us(*dequant_path, dequant_op);
    const double bf16_us =
        us(*gpu_, [&] { gpu_->moe_experts(a.tx, a.tids, a.tw, bf16_gu, bf16_dn, a.tout); });
    // Packed nibbles plus one f32 scale per 128 of them, of the experts routed to.
    const double bytes = static_cast<double>(distinct.size()) * 3 * I * H * (0.5 + 4.0 / group);
    std::printf(
        "int4 moe, %lld tokens, %3zu experts (%.1f MB packed): %s %6.1f us (%.0f GB/s = %.0f%% "
        "of copy) | dequantize path %6.1f us (8 columns a thread: %6.1f) | bf16 experts %6.1f us "
        "(%.2fx slower)\n",
        static_cast<long long>(T), distinct.size(), bytes / 1e6, path, gemv_us,
        bytes / (gemv_us * 1e3), 100.0 * bytes / (gemv_us * 1e3) / copy_gbps, dequant_us,
        dequant_vec_us, bf16_us, bf16_us / gemv_us);
  }
}

}  // namespace
}  // namespace syv
