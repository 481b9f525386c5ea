// Quantized linear on CUDA (quant_linear.cu through CudaBackend::linear_quantized) against the CPU
// reference (backend/cpu/cpu_quantized.cpp: the weight dequantized to f32, one sgemm) on random
// weights in backend/weight.h's canonical layouts: fp8 block-scaled (128x128, per-row, per-tensor,
// K not a multiple of the block or of 16) and int4 groups (with and without zero points, zero 16,
// act-order g_idx, group sizes the GEMV does not take), at 1, 3, 8, 9, 12, 16 and 300 tokens, with
// the GEMV paths (tensor-core where K and the groups / scale tiles are multiples of 128: one token
// tile up to 8 tokens, two above, a single fp8 token with staged activations; SIMT elsewhere) and
// with everything through the dequantize + dense GEMM path; bf16 and f32 outputs; biases; the fused
// norm ops on quantized weights; the tensor-core GEMV's SiLU epilogue (bit for bit the unfused
// kernels); batch-invariant mode (a row's bits do not depend on the token
// count); a CUDA graph replays the same bits. Those run with --quantized-activations off (bf16
// activations: the CPU's exact product). The fp8 tensor-core GEMMs (W8A8 for fp8 weights, W4A8 for
// int4 group-128 weights; LtGemm::run_fp8) are held to a reference that quantizes the activations
// as the kernel does (one e4m3 scale per token and 128 columns, core/dtype.h's rounding) and sums
// in f64. Skips cleanly without a CUDA device.
//
// Bounds. The GPU computes each output in fp32 from the exact dequantized values (the GEMV folds
// the scale in per 16 / 32 products, the tensor-core GEMV per 128, so only the summation order and
// the scale's rounding differ from the reference): f32 outputs of the GEMV agree to 3e-5 relative
// L2. A bf16 output adds its rounding (2^-9 relative per element: 3e-3 relative L2 covers it with
// margin). The dequantize path rounds every weight to bf16 first (2^-9 relative each, summed over K
// with random signs: about 2^-9 relative per output), hence 6e-3 there. Per element, |gpu - cpu|
// must also be within 2^-7 |cpu| + 2^-6 rms(cpu) (the bf16 output's rounding, and 14 standard
// deviations of the dequantize path's, whose error has about 2^-9 / sqrt(3) rms(cpu) spread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "gpu/cuda_ops_fixture.h"
#include "gpu/host_quant.h"
#include "model/quant_weights.h"

namespace syv {
namespace {

class QuantLinearGpu : public CudaOps {
 protected:
  // GPU vs CPU for tokens in {1, 3, 8, 9, 12, 16, 300}, bf16 and f32 outputs, with and without a
  // bias. `gemv_path`: whether the GEMV takes this weight at <= 16 tokens (the bounds differ).
  void check(const HostQuant& h, bool gemv_path, const std::string& what) {
    ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
    OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
    for (int64_t T : {1, 3, 8, 9, 12, 16, 300}) {
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair bias = make(random_vec(static_cast<size_t>(h.n), rng_), {h.n});
      for (bool with_bias : {false, true}) {
        for (DType out_t : {DType::BF16, DType::F32}) {
          Pair out = make_out({T, h.n}, out_t);
          const Tensor b_c = with_bias ? bias.c : Tensor(), b_g = with_bias ? bias.g : Tensor();
          cpu_->linear(x.c, c.w, b_c, out.c);
          gpu_->linear(x.g, g.w, b_g, out.g);
          const bool gemv = gemv_path && T <= CudaBackend::kQuantGemvMaxTokens;
          const double bound = !gemv ? 6e-3 : out_t == DType::F32 ? 3e-5 : 3e-3;
          const std::string label =
              what + ", T " + std::to_string(T) + (with_bias ? ", bias" : "") + ", out " +
              std::string(dtype_name(out_t)) + (gemv ? " (gemv)" : " (dequant)");
          expect_close(out, bound, label);
          expect_elementwise(out, label);
        }
      }
    }
  }

  // A step of two linears, x [T, a.k] -> a -> mid -> b -> out, run once, captured, and replayed
  // with mid and out poisoned first: the replay must give the same bits.
  void expect_graph_replays(const Weight& a, const Weight& b, int64_t T, const std::string& what) {
    Pair x = make(random_vec(static_cast<size_t>(T * a.k), rng_), {T, a.k});
    Pair mid = make_out({T, a.n}), out = make_out({T, b.n});
    auto step = [&] {
      gpu_->linear(x.g, a, Tensor(), mid.g);
      gpu_->linear(mid.g, b, Tensor(), out.g);
    };
    step();
    const std::vector<float> want = down_gpu(out.g);
    const int id = gpu_->capture_graph(step);
    poison(mid.g);
    poison(out.g);
    gpu_->replay_graph(id);
    EXPECT_EQ(down_gpu(out.g), want) << what;
    gpu_->destroy_graph(id);
  }

  // Two runs of linear(x, w) on T random tokens give the same bits.
  void expect_run_to_run(const Weight& w, int64_t T, const std::string& what) {
    Pair x = make(random_vec(static_cast<size_t>(T * w.k), rng_), {T, w.k});
    Pair out = make_out({T, w.n});
    gpu_->linear(x.g, w, Tensor(), out.g);
    const std::vector<float> first = down_gpu(out.g);
    poison(out.g);
    gpu_->linear(x.g, w, Tensor(), out.g);
    EXPECT_EQ(down_gpu(out.g), first) << what << ": run to run";
  }

  void expect_elementwise(const Pair& out, const std::string& what) {
    const std::vector<float> got = down_gpu(out.g), ref = down_cpu(out.c);
    double ss = 0;
    for (float v : ref) ss += double(v) * v;
    const double rms = std::sqrt(ss / std::max<size_t>(ref.size(), 1));
    int bad = 0;
    for (size_t i = 0; i < ref.size() && bad < 3; ++i) {
      const double tol = std::ldexp(std::fabs(ref[i]), -7) + std::ldexp(rms, -6);
      if (!(std::fabs(double(got[i]) - ref[i]) <= tol)) {
        ADD_FAILURE() << what << ": element " << i << " gpu " << got[i] << " cpu " << ref[i];
        ++bad;
      }
    }
  }
};

TEST_F(QuantLinearGpu, Fp8Block128MatchesCpu) {
  check(random_fp8(300, 448, 128, 128, rng_), true, "fp8 128x128, K 448");
  check(random_fp8(257, 1024, 128, 128, rng_), true, "fp8 128x128, N 257");
  check(random_fp8(150, 2560, 128, 128, rng_), true, "fp8 128x128, K 2560");
}

TEST_F(QuantLinearGpu, Fp8PerRowAndPerTensorScalesMatchCpu) {
  check(random_fp8(96, 256, 1, 256, rng_), true, "fp8 per-row");
  check(random_fp8(64, 320, 64, 320, rng_), true, "fp8 per-tensor");
}

TEST_F(QuantLinearGpu, Fp8OddShapesTakeTheDequantizePath) {
  check(random_fp8(33, 200, 128, 128, rng_), false, "fp8 K 200 (not a multiple of 16)");
  check(random_fp8(40, 192, 128, 8, rng_), false, "fp8 8-wide blocks");
}

// Every e4m3 code (but NaN) decodes to the CPU's value, through the tensor-core GEMV (K 128)
// at every byte position of a 32-bit word and both 16-byte vectors of a lane: row n holds code n
// at column j and zeros elsewhere, x is all ones, scale 1.
TEST_F(QuantLinearGpu, Fp8TensorCoreGemvDecodesEveryCodeExactly) {
  HostQuant h = random_fp8(256, 128, 128, 128, rng_);
  for (auto& s : h.scales) s = 1.f;
  for (int64_t j : {0, 1, 2, 3, 21, 127}) {
    std::fill(h.data.begin(), h.data.end(), uint8_t{0});
    for (int64_t n = 0; n < 256; ++n)
      h.data[static_cast<size_t>(n * 128 + j)] = (n & 0x7f) == 0x7f ? 0 : static_cast<uint8_t>(n);
    OnBackend g = put(*gpu_, h);
    Pair x = make(std::vector<float>(128, 1.f), {1, 128});
    Pair out = make_out({1, 256}, DType::F32);
    gpu_->linear(x.g, g.w, Tensor(), out.g);
    const std::vector<float> got = down_gpu(out.g);
    for (int n = 0; n < 256; ++n) {
      const float want = (n & 0x7f) == 0x7f ? 0.f : fp8_e4m3_to_f32(static_cast<uint8_t>(n));
      EXPECT_EQ(got[static_cast<size_t>(n)], want) << "e4m3 code " << n << " at column " << j;
    }
  }
}

// The same through the SIMT GEMV (K 16): row n holds code n, x = e_0, scale 1.
TEST_F(QuantLinearGpu, Fp8DecodesEveryCodeExactly) {
  HostQuant h = random_fp8(256, 16, 128, 128, rng_);
  for (int64_t n = 0; n < 256; ++n)
    for (int64_t k = 0; k < 16; ++k)
      h.data[static_cast<size_t>(n * 16 + k)] = (n & 0x7f) == 0x7f ? 0 : static_cast<uint8_t>(n);
  for (auto& s : h.scales) s = 1.f;
  OnBackend g = put(*gpu_, h);
  std::vector<float> e0(16, 0.f);
  e0[0] = 1.f;
  Pair x = make(e0, {1, 16});
  Pair out = make_out({1, 256}, DType::F32);
  gpu_->linear(x.g, g.w, Tensor(), out.g);
  const std::vector<float> got = down_gpu(out.g);
  for (int n = 0; n < 256; ++n) {
    const float want = (n & 0x7f) == 0x7f ? 0.f : fp8_e4m3_to_f32(static_cast<uint8_t>(n));
    EXPECT_EQ(got[static_cast<size_t>(n)], want) << "e4m3 code " << n;
  }
}

TEST_F(QuantLinearGpu, Int4GroupsMatchCpu) {
  check(random_int4(300, 384, 128, true, false, rng_), true, "int4 g128 zeros");
  check(random_int4(200, 2560, 128, false, false, rng_), true, "int4 g128 symmetric, K 2560");
  check(random_int4(100, 1024, 256, true, false, rng_), true, "int4 g256 zeros");
  check(random_int4(40, 1152, 384, true, false, rng_), true, "int4 g384 zeros (3 chunks a group)");
  check(random_int4(70, 256, 32, false, false, rng_), true, "int4 g32 symmetric");
  check(random_int4(129, 320, 64, true, false, rng_), true, "int4 g64 zeros");
  check(random_int4(64, 160, 160, true, false, rng_), true, "int4 one group per row");
}

// Act-order permuted at load: linear_quantized() gathers x by perm, then the GEMVs (plain
// contiguous groups) at up to 16 tokens and the dequantize path above, against the CPU, which
// dequantizes the permuted layout itself.
TEST_F(QuantLinearGpu, Int4ActOrderPermutedTakesTheGemvAfterAGather) {
  check(permuted(random_int4(64, 256, 64, true, true, rng_)), true, "int4 g64 act-order permuted");
  check(permuted(random_int4(96, 1024, 128, false, true, rng_)), true,
        "int4 g128 symmetric act-order permuted");
}

TEST_F(QuantLinearGpu, Int4ActOrderAndOddGroupsTakeTheDequantizePath) {
  check(random_int4(64, 256, 64, true, true, rng_), false, "int4 g64 act-order");
  check(random_int4(50, 96, 16, true, false, rng_), false, "int4 g16");
  check(random_int4(48, 80, 40, false, false, rng_), false, "int4 K 80 g40");
}

// The fused ops on quantized weights (their plain sequence around linear_quantized(); CUDA's norm
// kernel writes residual_out itself): add_rmsnorm_linear (residual in place and into another
// buffer, with a bias) and add_rmsnorm_linear_silu_mul against the CPU's, at 1 and 300 tokens.
// Bounds as the dense fused ops' in cuda_ops_test (bf16 residual, normed and outputs).
TEST_F(QuantLinearGpu, FusedNormOpsOnQuantizedWeightsMatchCpu) {
  const int64_t H = 256, I = 192, N = 320;
  const HostQuant gate_up = random_int4(2 * I, H, 64, true, false, rng_);
  const HostQuant qkv = random_fp8(N, H, 128, 128, rng_);
  OnBackend gu_c = put(*cpu_, gate_up), gu_g = put(*gpu_, gate_up);
  OnBackend qkv_c = put(*cpu_, qkv), qkv_g = put(*gpu_, qkv);
  Pair nw = make(random_vec(static_cast<size_t>(H), rng_), {H});
  Pair bias = make(random_vec(static_cast<size_t>(N), rng_), {N});
  for (int64_t T : {1, 300}) {
    const std::string at = ", T " + std::to_string(T);
    const std::vector<float> res0 = random_vec(static_cast<size_t>(T * H), rng_);
    Pair add = make(random_vec(static_cast<size_t>(T * H), rng_, 2.f), {T, H});
    for (bool in_place : {false, true}) {
      Pair res = make(res0, {T, H});
      Pair other = make_out({T, H});
      Pair& ro = in_place ? res : other;
      Pair normed = make_out({T, H}), out = make_out({T, N});
      cpu_->add_rmsnorm_linear(res.c, add.c, nw.c, 1e-6f, NormKind::kPlain, ro.c, normed.c, qkv_c.w,
                               bias.c, out.c);
      gpu_->add_rmsnorm_linear(res.g, add.g, nw.g, 1e-6f, NormKind::kPlain, ro.g, normed.g, qkv_g.w,
                               bias.g, out.g);
      const std::string what = std::string(in_place ? " (in place)" : "") + at;
      expect_close(ro, 8e-3, "add_rmsnorm_linear residual" + what);
      expect_close(normed, 1.2e-2, "add_rmsnorm_linear normed" + what);
      expect_close(out, 1.2e-2, "add_rmsnorm_linear out" + what);
    }
    Pair res = make(res0, {T, H});
    Pair ro = make_out({T, H}), normed = make_out({T, H});
    Pair gu = make_out({T, 2 * I}), act = make_out({T, I});
    cpu_->add_rmsnorm_linear_silu_mul(res.c, add.c, nw.c, 1e-6f, NormKind::kOnePlus, ro.c, normed.c,
                                      gu_c.w, gu.c, act.c);
    gpu_->add_rmsnorm_linear_silu_mul(res.g, add.g, nw.g, 1e-6f, NormKind::kOnePlus, ro.g, normed.g,
                                      gu_g.w, gu.g, act.g);
    expect_close(ro, 8e-3, "add_rmsnorm_linear_silu_mul residual" + at);
    expect_close(normed, 1.2e-2, "add_rmsnorm_linear_silu_mul normed" + at);
    expect_close(gu, 1.2e-2, "add_rmsnorm_linear_silu_mul gate_up" + at);
    expect_close(act, 1.2e-2, "add_rmsnorm_linear_silu_mul out" + at);
  }
}

// The tensor-core GEMV's SiLU epilogue (K 512, int4 groups of 128 with zero points, fp8 128x128;
// I = 200 leaves a partial block) at 1, 3 and 12 tokens, through linear_silu_mul and behind the
// norm (add_rmsnorm_linear_silu_mul): against the CPU, and bit for bit against the same GPU with
// the fusion off (the same sums, then silu_mul's own kernel); the fused runs counted as epilogue
// calls (quant_path_calls), the unfused ones not. bf16 activations: with fp8 ones fp8 weights
// leave the GEMV from 9 tokens (kFp8GemvMaxTokens) for the GEMMs.
TEST_F(QuantLinearGpu, SiluEpilogueMatchesCpuAndTheUnfusedKernelsBitForBit) {
  const int64_t H = 512, I = 200;
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  for (const bool fp8 : {false, true}) {
    const HostQuant gate_up =
        fp8 ? random_fp8(2 * I, H, 128, 128, rng_) : random_int4(2 * I, H, 128, true, false, rng_);
    OnBackend gu_c = put(*cpu_, gate_up), gu_g = put(*gpu_, gate_up);
    Pair nw = make(random_vec(static_cast<size_t>(H), rng_), {H});
    for (int64_t T : {1, 3, 12}) {
      const std::string at = std::string(fp8 ? "fp8" : "int4") + ", T " + std::to_string(T);
      Pair res = make(random_vec(static_cast<size_t>(T * H), rng_), {T, H});
      Pair add = make(random_vec(static_cast<size_t>(T * H), rng_, 2.f), {T, H});
      // Index 0: the CPU and the fused GPU run (Pair::c, Pair::g); 1: the unfused GPU run (g).
      Pair ro[2] = {make_out({T, H}), make_out({T, H})};
      Pair normed[2] = {make_out({T, H}), make_out({T, H})};
      Pair gu[2] = {make_out({T, 2 * I}), make_out({T, 2 * I})};
      Pair act[2] = {make_out({T, I}), make_out({T, I})};
      auto expect_same_on_gpu = [&](const std::string& what) {
        EXPECT_EQ(down_gpu(gu[0].g), down_gpu(gu[1].g)) << what << " gate_up, " << at;
        EXPECT_EQ(down_gpu(act[0].g), down_gpu(act[1].g)) << what << " out, " << at;
      };
      // Run u = 0 fused (one epilogue call more), u = 1 unfused (none).
      auto expect_fused = [&](int u, uint64_t before, const std::string& what) {
        EXPECT_EQ(gpu_->quant_path_calls().silu_epilogues, before + (u == 0 ? 1 : 0))
            << what << (u == 0 ? " did not run the epilogue, " : " ran the epilogue, ") << at;
      };
      cpu_->add_rmsnorm_linear_silu_mul(res.c, add.c, nw.c, 1e-6f, NormKind::kOnePlus, ro[0].c,
                                        normed[0].c, gu_c.w, gu[0].c, act[0].c);
      for (int u = 0; u < 2; ++u) {
        gpu_->set_quant_fuse(u == 0);
        const uint64_t before = gpu_->quant_path_calls().silu_epilogues;
        gpu_->add_rmsnorm_linear_silu_mul(res.g, add.g, nw.g, 1e-6f, NormKind::kOnePlus, ro[u].g,
                                          normed[u].g, gu_g.w, gu[u].g, act[u].g);
        expect_fused(u, before, "add_rmsnorm_linear_silu_mul");
      }
      expect_close(ro[0], 8e-3, "add_rmsnorm_linear_silu_mul residual, " + at);
      expect_close(normed[0], 1.2e-2, "add_rmsnorm_linear_silu_mul normed, " + at);
      expect_close(gu[0], 1.2e-2, "add_rmsnorm_linear_silu_mul gate_up, " + at);
      expect_close(act[0], 1.2e-2, "add_rmsnorm_linear_silu_mul out, " + at);
      expect_same_on_gpu("add_rmsnorm_linear_silu_mul");

      cpu_->linear_silu_mul(normed[0].c, gu_c.w, gu[0].c, act[0].c);
      for (int u = 0; u < 2; ++u) {
        gpu_->set_quant_fuse(u == 0);
        const uint64_t before = gpu_->quant_path_calls().silu_epilogues;
        gpu_->linear_silu_mul(normed[0].g, gu_g.w, gu[u].g, act[u].g);
        expect_fused(u, before, "linear_silu_mul");
      }
      gpu_->set_quant_fuse(true);
      expect_close(gu[0], 1.2e-2, "linear_silu_mul gate_up, " + at);
      expect_close(act[0], 1.2e-2, "linear_silu_mul out, " + at);
      expect_same_on_gpu("linear_silu_mul");
    }
  }
}

// With the GEMV and the GEMM off every token count goes through dequantize + dense GEMM.
TEST_F(QuantLinearGpu, DequantizePathAtFewTokensMatchesCpu) {
  gpu_->set_quant_gemv_max_tokens(0);
  gpu_->set_quant_gemm_max_tokens(0);
  check(random_fp8(128, 256, 128, 128, rng_), false, "fp8, gemv off");
  check(random_int4(128, 256, 128, true, false, rng_), false, "int4, gemv off");
}

// A weight larger than both the dequantization scratch and the row-chunk cap (one announced with
// row chunks) dequantizes 128 rows at a time into a scratch of that size (the cap set to nothing
// here): within the dequantize path's bounds, in every format, with and without zero points and a
// bias. Past the dense GEMV's 4 tokens each chunk's GEMM writes its columns of out in place where
// cuBLASLt plans the strided output (out rows of 384 and 320 elements); else (fewer tokens, or no
// plan) it is copied there.
TEST_F(QuantLinearGpu, DequantizePathInRowChunksMatchesCpu) {
  gpu_->set_quant_gemv_max_tokens(0);
  gpu_->set_quant_gemm_max_tokens(0);
  gpu_->set_dequant_row_chunk_cap(0);
  const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
  check(random_fp8(300, 256, 128, 128, rng_), false, "fp8 128 x 128 tiles, row chunks");
  check(random_fp8(300, 256, 1, 256, rng_), false, "fp8 per row, row chunks");
  check(random_fp8(260, 256, 64, 128, rng_), false, "fp8 64-row tiles, row chunks");
  check(random_int4(300, 256, 128, true, false, rng_), false, "int4 with zeros, row chunks");
  check(random_int4(300, 256, 64, false, false, rng_), false, "int4, row chunks");
  const uint64_t in_place_before = gpu_->quant_path_calls().dequant_rows_in_place;
  check(random_int4(384, 256, 128, true, false, rng_), false, "int4 with zeros, 384 rows");
  check(random_fp8(320, 256, 128, 128, rng_), false, "fp8 128 x 128 tiles, 320 rows");
  const CudaBackend::QuantPathCalls after = gpu_->quant_path_calls();
  // 7 weights x 7 token counts x 4 (bias, out dtype): every call took the row chunks; the last
  // two weights' 5 token counts past 4 in place.
  EXPECT_EQ(after.dequant_row_chunks - before.dequant_row_chunks, 7u * 7 * 4);
  EXPECT_EQ(after.dequant_rows_in_place - in_place_before, 2u * 5 * 4);
  EXPECT_LE(after.dequant_rows_in_place - before.dequant_rows_in_place, 7u * 5 * 4);
}

// The dequantize path 8 columns a thread (set_quant_dequant_vectorized) writes the same bf16
// weights as one element a thread, so the GEMM after it gives the same bits, in every format and
// shape (those it does not take, g_idx and K % 8 != 0, fall back to the element kernel); and it
// matches the CPU within the dequantize path's bounds.
TEST_F(QuantLinearGpu, VectorizedDequantizeGivesTheElementKernelsBits) {
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  gpu_->set_quant_gemv_max_tokens(0);
  gpu_->set_quant_gemm_max_tokens(0);
  const HostQuant weights[] = {random_fp8(300, 448, 128, 128, rng_),
                               random_fp8(96, 256, 1, 256, rng_),
                               random_fp8(64, 320, 64, 320, rng_),
                               random_fp8(40, 192, 128, 8, rng_),
                               random_fp8(33, 200, 128, 128, rng_),
                               random_int4(300, 384, 128, true, false, rng_),
                               random_int4(70, 256, 32, false, false, rng_),
                               random_int4(50, 96, 16, true, false, rng_),
                               random_int4(48, 80, 40, false, false, rng_),
                               random_int4(64, 256, 64, true, true, rng_),
                               permuted(random_int4(96, 1024, 128, false, true, rng_))};
  for (const HostQuant& h : weights) {
    OnBackend g = put(*gpu_, h);
    const std::string what = std::string(weight_format_name(h.format)) + " [" +
                             std::to_string(h.n) + ", " + std::to_string(h.k) + "]";
    for (int64_t T : {3, 300}) {
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair out = make_out({T, h.n}, DType::F32);
      gpu_->set_quant_dequant_vectorized(false);
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      const std::vector<float> element = down_gpu(out.g);
      poison(out.g);
      gpu_->set_quant_dequant_vectorized(true);
      const uint64_t vectorized = gpu_->quant_path_calls().dequant_vectorized;
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      EXPECT_EQ(down_gpu(out.g), element) << what << ", T " << T;
      // Every shape here but the g_idx one takes the 8-column kernel.
      EXPECT_EQ(gpu_->quant_path_calls().dequant_vectorized - vectorized, h.g_idx.empty() ? 1u : 0u)
          << what << ", T " << T;
    }
  }
  gpu_->set_quant_dequant_vectorized(true);
  check(random_fp8(128, 256, 128, 128, rng_), false, "fp8, vectorized dequantize");
  check(random_int4(128, 256, 128, true, false, rng_), false, "int4, vectorized dequantize");
  gpu_->set_quant_dequant_vectorized(false);
}

// The tensor-core GEMM (set_quant_gemm_max_tokens; quant_gemm_mma.cu) above the GEMVs' 16 tokens,
// against the CPU within the GEMVs' bounds (exact weights, fp32 sums): one token tile of 32 and of
// 64, part-filled ones, several tiles (the fitted tile's widths of 3, 4, 5, 6 and 8 mma columns),
// rows past a multiple of 64, and K split across blocks where the grid would not fill the GPU (2
// splits for [300, 1024] at 17 tokens, 5 for [200, 2560]: the splits' sums added by the second
// kernel) or not (K 512: 4 chunks; 300 tokens on K 1024: the workspace, N x K x 2 bytes, holds one
// split's sums); both outputs; a bias.
TEST_F(QuantLinearGpu, TensorCoreGemmMatchesCpu) {
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  gpu_->set_quant_gemm_max_tokens(1024);
  const HostQuant weights[] = {random_int4(300, 1024, 128, true, false, rng_),
                               random_int4(200, 2560, 128, false, false, rng_),
                               random_int4(100, 1024, 256, true, false, rng_),
                               random_int4(40, 1152, 384, true, false, rng_),
                               random_int4(4096, 512, 128, true, false, rng_),
                               random_fp8(257, 1024, 128, 128, rng_),
                               random_fp8(150, 2560, 128, 128, rng_),
                               random_fp8(96, 256, 1, 256, rng_),
                               permuted(random_int4(96, 1024, 128, false, true, rng_))};
  for (const HostQuant& h : weights) {
    OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
    const std::string what = std::string(weight_format_name(h.format)) + " [" +
                             std::to_string(h.n) + ", " + std::to_string(h.k) + "]";
    for (int64_t T : {17, 24, 32, 33, 48, 64, 65, 96, 100, 300}) {
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair bias = make(random_vec(static_cast<size_t>(h.n), rng_), {h.n});
      for (DType out_t : {DType::BF16, DType::F32}) {
        const bool with_bias = out_t == DType::BF16;
        Pair out = make_out({T, h.n}, out_t);
        const uint64_t calls = gpu_->quant_path_calls().gemm;
        cpu_->linear(x.c, c.w, with_bias ? bias.c : Tensor(), out.c);
        gpu_->linear(x.g, g.w, with_bias ? bias.g : Tensor(), out.g);
        const std::string label =
            what + ", T " + std::to_string(T) + ", out " + std::string(dtype_name(out_t));
        EXPECT_EQ(gpu_->quant_path_calls().gemm, calls + 1) << label << ": the GEMM did not run";
        expect_close(out, out_t == DType::F32 ? 3e-5 : 3e-3, label);
        expect_elementwise(out, label);
      }
    }
  }
}

// The GEMM's bits do not change run to run, and a CUDA graph replays them (one split and several).
TEST_F(QuantLinearGpu, TensorCoreGemmIsDeterministicAndReplays) {
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  gpu_->set_quant_gemm_max_tokens(1024);
  for (int64_t T : {40, 200}) {
    OnBackend a = put(*gpu_, random_int4(256, 1024, 128, true, false, rng_));
    OnBackend b = put(*gpu_, random_fp8(4096, 256, 128, 128, rng_));
    expect_run_to_run(a.w, T, "quantized GEMM, T " + std::to_string(T));
    expect_graph_replays(a.w, b.w, T, "quantized GEMM, T " + std::to_string(T));
  }
}

// Batch-invariant mode: a token's row has the same bits alone and among 300 tokens.
TEST_F(QuantLinearGpu, BatchInvariantRowsDoNotDependOnTheTokenCount) {
  gpu_->set_batch_invariant(true);
  for (const HostQuant& h :
       {random_fp8(192, 512, 128, 128, rng_), random_int4(192, 512, 128, true, false, rng_)}) {
    OnBackend g = put(*gpu_, h);
    const std::vector<float> xs = random_vec(static_cast<size_t>(300 * h.k), rng_);
    Pair x = make(xs, {300, h.k});
    Pair x1 = make(std::vector<float>(xs.begin(), xs.begin() + h.k), {1, h.k});
    Pair all = make_out({300, h.n}), one = make_out({1, h.n});
    gpu_->linear(x.g, g.w, Tensor(), all.g);
    gpu_->linear(x1.g, g.w, Tensor(), one.g);
    const std::vector<float> a = down_gpu(all.g), o = down_gpu(one.g);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + h.n), o) << weight_format_name(h.format);
  }
}

// The single-token GEMV with its weight on the bulk-copy engine (quant_gemv_bulk.cu, switched on
// here) against the CPU and bit for bit against the eight-warp single-token kernel: int4 with and
// without zero points, groups of 128 and 256, fp8 128x128 and per-row tiles; K of 5 chunks (one
// partial stage) and of 9 (a full stage and a partial one), N not a multiple of 16 and N of 6,400
// rows (several row tiles per resident block on any GPU of up to 200 multiprocessors), K 7168 (the
// ring wraps within a tile); the bulk output poisoned first; bf16 and
// f32 outputs, and the SiLU epilogue. Compute capability 9.x only (elsewhere it is refused).
TEST_F(QuantLinearGpu, BulkCopySingleTokenGemvGivesTheDefaultKernelsBits) {
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major != 9) GTEST_SKIP() << "the bulk-copy GEMV runs on compute capability 9.x only";
  const bool four_before = cuda::quant_gemv_four_warps();
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  struct Shape {
    HostQuant h;
    std::string what;
  };
  std::vector<Shape> shapes;
  for (int64_t k : {640, 1152}) {
    const std::string kk = ", K " + std::to_string(k);
    shapes.push_back({random_int4(200, k, 128, true, false, rng_), "int4 g128 zeros, N 200" + kk});
    shapes.push_back({random_fp8(200, k, 128, 128, rng_), "fp8 128x128, N 200" + kk});
  }
  shapes.push_back({random_int4(6400, 1024, 256, false, false, rng_), "int4 g256, N 6400"});
  shapes.push_back({random_fp8(6400, 1024, 1, 1024, rng_), "fp8 per-row, N 6400"});
  // 7 stages a tile over two tiles a block: the ring (4 or 6 stages) wraps mid-tile.
  shapes.push_back({random_int4(6400, 7168, 128, true, false, rng_), "int4 g128 zeros, K 7168"});
  shapes.push_back({random_fp8(6400, 7168, 128, 128, rng_), "fp8 128x128, K 7168"});
  for (const Shape& sh : shapes) {
    const HostQuant& h = sh.h;
    OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
    Pair x = make(random_vec(static_cast<size_t>(h.k), rng_), {1, h.k});
    for (DType out_t : {DType::BF16, DType::F32}) {
      const std::string what = sh.what + ", out " + std::string(dtype_name(out_t));
      Pair out = make_out({1, h.n}, out_t);
      cpu_->linear(x.c, c.w, Tensor(), out.c);
      cuda::set_quant_gemv_four_warps(false);  // the bulk kernel sums in the eight-warp order
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      cuda::set_quant_gemv_four_warps(four_before);
      const std::vector<float> want = down_gpu(out.g);
      poison(out.g);
      cuda::set_quant_gemv_bulk(true);
      const uint64_t launches = cuda::quant_gemv_bulk_launches();
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      cuda::set_quant_gemv_bulk(false);
      EXPECT_EQ(cuda::quant_gemv_bulk_launches(), launches + 1) << what << ": it did not run";
      EXPECT_EQ(down_gpu(out.g), want) << what;
      expect_close(out, out_t == DType::F32 ? 3e-5 : 3e-3, what);
    }
    const int64_t I = h.n / 2;
    Pair gu[2] = {make_out({1, h.n}), make_out({1, h.n})};
    Pair act[2] = {make_out({1, I}), make_out({1, I})};
    cpu_->linear_silu_mul(x.c, c.w, gu[0].c, act[0].c);
    const uint64_t launches = cuda::quant_gemv_bulk_launches();
    cuda::set_quant_gemv_four_warps(false);
    for (int u = 0; u < 2; ++u) {
      cuda::set_quant_gemv_bulk(u == 1);
      gpu_->linear_silu_mul(x.g, g.w, gu[u].g, act[u].g);
    }
    cuda::set_quant_gemv_bulk(false);
    cuda::set_quant_gemv_four_warps(four_before);
    EXPECT_EQ(cuda::quant_gemv_bulk_launches(), launches + 1) << sh.what << ": SiLU did not run it";
    EXPECT_EQ(down_gpu(gu[1].g), down_gpu(gu[0].g)) << sh.what << ", SiLU epilogue's gate_up";
    EXPECT_EQ(down_gpu(act[1].g), down_gpu(act[0].g)) << sh.what << ", SiLU epilogue's out";
    expect_close(act[0], 1.2e-2, sh.what + ", SiLU epilogue");
  }
}

// The single-token GEMV's four-warp blocks (the default where the eight-warp grid passes a wave:
// K split four ways a row tile) and the eight-warp form each match the CPU and give the same bits
// run to run; under either the fused SiLU epilogue gives the unfused kernels' bits (the choice of
// four warps is the plain launch's for both). Shapes past the wave rule on this GPU (N from its
// multiprocessor count; eight-warp blocks two an SM up to 8192 rows, three above, as their
// registers allow on every GPU syv builds for, 64K registers an SM): int4 g128 with
// zero points and fp8 128x128, K 1,152 (9 chunks: warps of 3 and 2 chunks), N up to 8192 (four
// chunks in flight) and above (two), the plain epilogue in bf16 and f32, and the SiLU one.
TEST_F(QuantLinearGpu, SingleTokenGemvFormsMatchCpu) {
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kOff).ok());
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const bool four_before = cuda::quant_gemv_four_warps();
  const int64_t k = 1152;
  // run() writes `checked` (the CPU's reference of it already there) under both forms; `bound`:
  // its relative L2 bound against the CPU.
  auto forms = [&](const std::string& what, const std::function<void()>& run, Pair& checked,
                   double bound) {
    for (int four = 1; four >= 0; --four) {
      const std::string form = what + (four ? ", four warps" : ", eight warps");
      cuda::set_quant_gemv_four_warps(four == 1);
      const uint64_t launches = cuda::quant_gemv_four_warp_launches();
      poison(checked.g);
      run();
      const std::vector<float> first = down_gpu(checked.g);
      poison(checked.g);
      run();
      EXPECT_EQ(cuda::quant_gemv_four_warp_launches(), launches + 2 * four) << form;
      EXPECT_EQ(down_gpu(checked.g), first) << form << ": run to run";
      expect_close(checked, bound, form);
    }
    cuda::set_quant_gemv_four_warps(four_before);
  };
  const int64_t wide = std::max<int64_t>(3 * int64_t{sms} + 9, 8192 / 16 + 1);  // row tiles
  for (int fmt = 0; fmt < 2; ++fmt) {
    auto weight = [&](int64_t n) {
      return fmt == 0 ? random_int4(n, k, 128, true, false, rng_)
                      : random_fp8(n, k, 128, 128, rng_);
    };
    const std::string name = fmt == 0 ? "int4 g128 zeros" : "fp8 128x128";
    Pair x = make(random_vec(static_cast<size_t>(k), rng_), {1, k});
    for (int64_t tiles : {2 * int64_t{sms} + 9, wide}) {
      const std::string what = name + ", N " + std::to_string(16 * tiles);
      const HostQuant h = weight(16 * tiles);
      OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
      for (DType out_t : {DType::BF16, DType::F32}) {
        Pair out = make_out({1, h.n}, out_t);
        cpu_->linear(x.c, c.w, Tensor(), out.c);
        forms(
            what + ", out " + std::string(dtype_name(out_t)),
            [&] { gpu_->linear(x.g, g.w, Tensor(), out.g); }, out,
            out_t == DType::F32 ? 3e-5 : 3e-3);
      }
      Pair gu[2] = {make_out({1, h.n}), make_out({1, h.n})};
      Pair act[2] = {make_out({1, h.n / 2}), make_out({1, h.n / 2})};
      cpu_->linear_silu_mul(x.c, c.w, gu[0].c, act[0].c);
      forms(
          what + ", SiLU", [&] { gpu_->linear_silu_mul(x.g, g.w, gu[0].g, act[0].g); }, act[0],
          1.2e-2);
      expect_close(gu[0], 1.2e-2, what + ", SiLU's gate_up");
      for (const bool four : {true, false}) {  // fused, then linear() and silu_mul(): the same bits
        const std::string form = what + (four ? ", four warps" : ", eight warps");
        cuda::set_quant_gemv_four_warps(four);
        gpu_->linear_silu_mul(x.g, g.w, gu[0].g, act[0].g);
        gpu_->set_quant_fuse(false);
        gpu_->linear_silu_mul(x.g, g.w, gu[1].g, act[1].g);
        gpu_->set_quant_fuse(true);
        EXPECT_EQ(down_gpu(gu[1].g), down_gpu(gu[0].g)) << form << ", unfused gate_up";
        EXPECT_EQ(down_gpu(act[1].g), down_gpu(act[0].g)) << form << ", unfused SiLU";
      }
      cuda::set_quant_gemv_four_warps(four_before);
    }
  }
}

// A captured step (GEMV at 1 token, dequantize + GEMM at 300: int4 [256, 512], then fp8
// [256, 256] on its output) replays to the same bits.
TEST_F(QuantLinearGpu, CudaGraphReplaysTheSameBits) {
  for (int64_t T : {1, 300}) {
    OnBackend a = put(*gpu_, random_int4(256, 512, 128, true, false, rng_));
    OnBackend b = put(*gpu_, random_fp8(256, 256, 128, 128, rng_));
    expect_graph_replays(a.w, b.w, T, "T " + std::to_string(T));
  }
}

// The weight of `h` dequantized to f32 [n, k] (fp8 tiles; int4 groups without g_idx).
std::vector<float> dequantized(const HostQuant& h) {
  std::vector<float> w(static_cast<size_t>(h.n * h.k));
  for (int64_t n = 0; n < h.n; ++n) {
    for (int64_t k = 0; k < h.k; ++k) {
      float v;
      if (h.format == WeightFormat::kFp8Block) {
        v = fp8_e4m3_to_f32(h.data[static_cast<size_t>(n * h.k + k)]) *
            h.scales[static_cast<size_t>((n / h.block_n) * h.scale_cols + k / h.block_k)];
      } else {
        const int64_t g = k / h.group_size;
        const uint8_t byte = h.data[static_cast<size_t>(n * (h.k / 2) + k / 2)];
        const int q = (k & 1) ? byte >> 4 : byte & 0xf;
        const int z = h.zeros.empty() ? 8 : h.zeros[static_cast<size_t>(n * h.scale_cols + g)];
        v = static_cast<float>(q - z) * h.scales[static_cast<size_t>(n * h.scale_cols + g)];
      }
      w[static_cast<size_t>(n * h.k + k)] = v;
    }
  }
  return w;
}

// x [T, K] as the fp8 GEMM's activations: per (token, 128 columns), amax / 448 and the codes of
// x * (448 / amax), rounded as launch_quantize_fp8_groups rounds them; dequantized.
std::vector<float> fp8_activations(const std::vector<float>& x, int64_t T, int64_t K) {
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g0 = 0; g0 < K; g0 += 128) {
      const float* v = &x[static_cast<size_t>(t * K + g0)];
      float amax = 0.f;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float scale = amax > 0.f ? amax / 448.f : 1.f, inv = amax > 0.f ? 448.f / amax : 0.f;
      for (int i = 0; i < 128; ++i)
        out[static_cast<size_t>(t * K + g0 + i)] =
            fp8_e4m3_to_f32(f32_to_fp8_e4m3(v[i] * inv)) * scale;
    }
  }
  return out;
}

// The relative L2 distance of got [T, N] from the f64 product of xq [T, K] and w [N, K]
// (row-major f32); *ref_ss: the product's sum of squares.
double relative_l2_to_product(const std::vector<float>& got, const std::vector<float>& xq,
                              const std::vector<float>& w, int64_t T, int64_t N, int64_t K,
                              double* ref_ss = nullptr) {
  double err = 0, ref = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(xq[static_cast<size_t>(t * K + k)]) * w[static_cast<size_t>(n * K + k)];
      const double d = got[static_cast<size_t>(t * N + n)] - acc;
      err += d * d;
      ref += acc * acc;
    }
  }
  if (ref_ss != nullptr) *ref_ss = ref;
  return std::sqrt(err / std::max(ref, 1e-30));
}

class QuantLinearFp8Gemm : public QuantLinearGpu {
 protected:
  void SetUp() override {
    QuantLinearGpu::SetUp();
    if (IsSkipped()) return;
    if (!gpu_->set_quantized_activations(Backend::QuantizedActivations::kFp8).ok())
      GTEST_SKIP() << "this GPU has no block-scaled fp8 GEMMs (compute capability 9.x)";
  }
  // The GPU's [T, N] bf16 output of `mode` against the f64 product of the quantized activations
  // and the dequantized weight, for T in {9, 16, 17, 99, 1000} for fp8 weights (they take that GEMM
  // from kFp8GemvMaxTokens + 1 tokens, before the GEMV; at 9-16 tokens here also where a weight of
  // fewer 128-row tiles than SMs takes the W8A16 GEMM by default,
  // Fp8WeightsOfFewRowTilesTakeTheGemmFirst), {65, 99, 1000} for int4 (up to
  // kQuantGemmBeforeW4A8MaxTokens it takes the W4A16 GEMM, Int4TakesTheGemmBeforeW4A8). The
  // first call on a fresh backend sizes the scratch for this weight alone (N x K x 2 bytes), so
  // 1000 tokens run in row chunks. Bound: bf16 output rounding (2^-9 relative per element) plus
  // fp32 accumulation: 3e-3 relative L2; bf16 activations instead of fp8 (the other path) would
  // be ~2e-2 off. Each call must take an fp8 GEMM.
  void check_fp8(const HostQuant& h, Backend::QuantizedActivations mode, const std::string& what) {
    ASSERT_TRUE(gpu_->set_quantized_activations(mode).ok());
    gpu_->set_quant_gemm_before_fp8_max_tokens(0);
    gpu_->set_fp8_gemv_max_tokens(CudaBackend::kFp8GemvMaxTokens);
    OnBackend g = put(*gpu_, h);
    const std::vector<float> w = dequantized(h);
    const bool int4 = h.format != WeightFormat::kFp8Block;
    std::vector<int64_t> tokens = {99, 1000};
    if (int4)
      tokens.insert(tokens.begin(), 65);
    else
      tokens.insert(tokens.begin(), {CudaBackend::kFp8GemvMaxTokens + 1, 16, 17});
    for (int64_t T : tokens) {
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair out = make_out({T, h.n});
      const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, before.fp8_gemm + 1) << what << ", T " << T;
      const std::vector<float> xq = fp8_activations(down_gpu(x.g), T, h.k);
      const std::vector<float> got = down_gpu(out.g);
      const double rel = relative_l2_to_product(got, xq, w, T, h.n, h.k);
      EXPECT_LT(rel, 3e-3) << what << ", T " << T << ": relative L2 error " << rel;
    }
  }
};

TEST_F(QuantLinearFp8Gemm, Fp8WeightsTakeFp8ActivationsByDefault) {
  check_fp8(random_fp8(256, 512, 128, 128, rng_), Backend::QuantizedActivations::kAuto,
            "fp8 [256, 512]");
  check_fp8(random_fp8(200, 1024, 128, 128, rng_), Backend::QuantizedActivations::kAuto,
            "fp8 [200, 1024]");
}

// With set_fp8_norm_quant the add + RMSNorm before an fp8 weight's W8A8 GEMM writes that GEMM's
// e4m3 activations itself (cuda::launch_add_rmsnorm_fp8) and the GEMM skips its quantization:
// the residual, the normed rows and the outputs bit for bit the unfused sequence's, through
// add_rmsnorm_linear (residual in place or not) and its SiLU form. A weight of 2 row tiles at 17
// and 99 tokens (one row chunk: fused) and 1000 (row chunks of the scratch sized for this weight
// alone: not fused, the same bits); then one of as many row tiles as SMs at 9 and 16 tokens
// (the W8A8 GEMM before the GEMV: fused; 9 pads 7 rows). Before each run another x through the
// same weight overwrites the scratch, so a run that wrote nothing there would read wrong codes.
// The routing limits are pinned to their defaults (an A/B run's SYV_* variables cannot move
// them).
TEST_F(QuantLinearFp8Gemm, NormWritingFp8ActivationsGivesTheUnfusedBits) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  gpu_->set_quant_gemv_max_tokens(CudaBackend::kQuantGemvMaxTokens);
  gpu_->set_fp8_gemv_max_tokens(CudaBackend::kFp8GemvMaxTokens);
  gpu_->set_quant_gemm_max_tokens(CudaBackend::kQuantGemmMaxTokens);
  gpu_->set_quant_gemm_before_fp8_max_tokens(CudaBackend::kQuantGemmBeforeFp8MaxTokens);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kAuto).ok());
  const int64_t H = 512;
  const HostQuant narrow_h = random_fp8(256, H, 128, 128, rng_);
  const HostQuant wide_h = random_fp8(128 * int64_t{sms}, H, 128, 128, rng_);
  const OnBackend narrow = put(*gpu_, narrow_h), wide = put(*gpu_, wide_h);
  Pair nw = make(random_vec(static_cast<size_t>(H), rng_), {H});
  struct Case {
    const OnBackend* w;
    int64_t n, tokens;
    bool fused;
  };
  const int64_t t0 = CudaBackend::kQuantGemvMaxTokens + 1, t1 = CudaBackend::kFp8GemvMaxTokens + 1;
  // The narrow weight's first: the scratch only grows, and the wide weight's would hold 1000 rows.
  const Case cases[] = {{&narrow, 256, t0, true},
                        {&narrow, 256, 99, true},
                        {&narrow, 256, 1000, false},
                        {&wide, 128 * int64_t{sms}, t1, true},
                        {&wide, 128 * int64_t{sms}, CudaBackend::kQuantGemvMaxTokens, true}};
  for (const Case& c : cases) {
    const int64_t T = c.tokens, N = c.n;
    for (int form = 0; form < 3; ++form) {  // plain, plain in place, SiLU
      const std::string what =
          "N " + std::to_string(N) + ", T " + std::to_string(T) + ", form " + std::to_string(form);
      const std::vector<float> res0 = random_vec(static_cast<size_t>(T * H), rng_);
      Pair add = make(random_vec(static_cast<size_t>(T * H), rng_, 2.f), {T, H});
      Pair other_x = make(random_vec(static_cast<size_t>(T * H), rng_), {T, H});
      Pair other_out = make_out({T, N});
      std::vector<float> got[2][4];  // [fused][residual, normed, out, SiLU out]
      for (int fused = 1; fused >= 0; --fused) {
        gpu_->set_fp8_norm_quant(fused == 1);
        gpu_->linear(other_x.g, c.w->w, Tensor(), other_out.g);  // the scratch: another x's codes
        Pair res = make(res0, {T, H});
        Pair other = make_out({T, H}), normed = make_out({T, H});
        Pair out = make_out({T, N}), act = make_out({T, N / 2});
        Pair& ro = form == 1 ? res : other;
        const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
        if (form == 2) {
          gpu_->add_rmsnorm_linear_silu_mul(res.g, add.g, nw.g, 1e-6f, NormKind::kOnePlus, ro.g,
                                            normed.g, c.w->w, out.g, act.g);
        } else {
          gpu_->add_rmsnorm_linear(res.g, add.g, nw.g, 1e-6f, NormKind::kPlain, ro.g, normed.g,
                                   c.w->w, Tensor(), out.g);
        }
        const CudaBackend::QuantPathCalls after = gpu_->quant_path_calls();
        EXPECT_EQ(after.fp8_gemm, before.fp8_gemm + 1) << what;
        EXPECT_EQ(after.fp8_norm_fused - before.fp8_norm_fused, fused == 1 && c.fused ? 1u : 0u)
            << what << (fused == 1 ? ", fused" : ", unfused");
        got[fused][0] = down_gpu(ro.g);
        got[fused][1] = down_gpu(normed.g);
        got[fused][2] = down_gpu(out.g);
        if (form == 2) got[fused][3] = down_gpu(act.g);
      }
      for (int k = 0; k < 4; ++k) EXPECT_EQ(got[1][k], got[0][k]) << what << ", tensor " << k;
    }
  }
}

// Up to kFp8GemvMaxTokens tokens fp8 weights keep the GEMV (bf16 activations: the CPU's
// product within check()'s bounds), fp8 activations or not.
TEST_F(QuantLinearFp8Gemm, Fp8WeightsKeepTheGemvUpToEightTokens) {
  const HostQuant h = random_fp8(256, 512, 128, 128, rng_);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kAuto).ok());
  OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
  for (int64_t T : {int64_t{1}, int64_t{CudaBackend::kFp8GemvMaxTokens}}) {
    Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
    Pair out = make_out({T, h.n}, DType::F32);
    const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
    cpu_->linear(x.c, c.w, Tensor(), out.c);
    gpu_->linear(x.g, g.w, Tensor(), out.g);
    EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, before.fp8_gemm) << "T " << T;
    expect_close(out, 3e-5, "fp8 weights, auto activations, T " + std::to_string(T));
  }
}

// Past the GEMV's share and up to kQuantGemmBeforeFp8MaxTokens tokens, fp8 weights whose 128-row
// tiles are fewer than the SMs take the W8A16 tensor-core GEMM (bf16 activations: the CPU's
// product within check()'s bounds) where the fp8 GEMM would be cuBLASLt's, not the fp8 GEMM;
// past that, the fp8 GEMM. Where syv's own fp8 kernel takes those steps (Hopper, up to
// kFp8SkinnyMaxTokens), the fp8 GEMM throughout. (The default limits, whatever the SYV_*
// variables of an A/B run say.)
TEST_F(QuantLinearFp8Gemm, Fp8WeightsOfFewRowTilesTakeTheGemmFirst) {
  const HostQuant h = random_fp8(256, 512, 128, 128, rng_);
  gpu_->set_quant_gemm_max_tokens(CudaBackend::kQuantGemmMaxTokens);
  gpu_->set_quant_gemm_before_fp8_max_tokens(CudaBackend::kQuantGemmBeforeFp8MaxTokens);
  gpu_->set_fp8_gemv_max_tokens(CudaBackend::kFp8GemvMaxTokens);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kAuto).ok());
  OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
  int major = 0;  // syv's own fp8 kernel: compute capability 9 (this weight's layout it takes)
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  for (int skinny : {0, int{CudaBackend::kFp8SkinnyMaxTokens}}) {
    gpu_->set_fp8_skinny_max_tokens(skinny);
    for (int64_t T : {int64_t{CudaBackend::kFp8GemvMaxTokens + 1},
                      int64_t{CudaBackend::kQuantGemmBeforeFp8MaxTokens},
                      int64_t{CudaBackend::kQuantGemmBeforeFp8MaxTokens + 1}}) {
      const std::string what =
          "T " + std::to_string(T) + ", skinny up to " + std::to_string(skinny);
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair out = make_out({T, h.n}, DType::F32);
      const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
      cpu_->linear(x.c, c.w, Tensor(), out.c);
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      const bool own = T <= skinny && major == 9;
      const bool gemm = T <= CudaBackend::kQuantGemmBeforeFp8MaxTokens && !own;
      EXPECT_EQ(gpu_->quant_path_calls().gemm, before.gemm + (gemm ? 1 : 0)) << what;
      EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, before.fp8_gemm + (gemm ? 0 : 1)) << what;
      EXPECT_EQ(gpu_->quant_path_calls().fp8_skinny, before.fp8_skinny + (own ? 1 : 0)) << what;
      if (gemm) expect_close(out, 3e-5, "fp8 weights, W8A16 GEMM, " + what);
    }
  }
  gpu_->set_fp8_skinny_max_tokens(CudaBackend::kFp8SkinnyMaxTokens);
}

// ... and a weight of as many 128-row tiles as the SMs takes the fp8 GEMM there (its bound:
// Fp8WeightsTakeFp8ActivationsByDefault; here the path alone).
TEST_F(QuantLinearFp8Gemm, Fp8WeightsOfManyRowTilesTakeTheFp8Gemm) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t N = 128 * int64_t{sms}, K = 512, T = CudaBackend::kFp8GemvMaxTokens + 1;
  const HostQuant h = random_fp8(N, K, 128, 128, rng_);
  gpu_->set_quant_gemm_max_tokens(CudaBackend::kQuantGemmMaxTokens);
  gpu_->set_quant_gemm_before_fp8_max_tokens(CudaBackend::kQuantGemmBeforeFp8MaxTokens);
  gpu_->set_fp8_gemv_max_tokens(CudaBackend::kFp8GemvMaxTokens);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kAuto).ok());
  OnBackend g = put(*gpu_, h);
  Pair x = make(random_vec(static_cast<size_t>(T * K), rng_), {T, K});
  Pair out = make_out({T, N});
  const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
  gpu_->linear(x.g, g.w, Tensor(), out.g);
  EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, before.fp8_gemm + 1);
  EXPECT_EQ(gpu_->quant_path_calls().gemm, before.gemm);
}

TEST_F(QuantLinearFp8Gemm, Int4Group128TakesFp8ActivationsWhenAsked) {
  check_fp8(random_int4(256, 512, 128, true, false, rng_), Backend::QuantizedActivations::kFp8,
            "int4 g128 zeros");
  check_fp8(random_int4(136, 1024, 128, false, false, rng_), Backend::QuantizedActivations::kFp8,
            "int4 g128 symmetric");
}

// With fp8 activations asked for, int4 steps of 17 to kQuantGemmBeforeW4A8MaxTokens tokens take
// the W4A16 tensor-core GEMM (faster there, and exact: the CPU's product within the GEMVs'
// bounds), not the fp8 GEMM. (The GEMM's own default token limit, whatever
// SYV_QUANT_GEMM_MAX_TOKENS says: an A/B run with the GEMM off would otherwise fail this.)
TEST_F(QuantLinearFp8Gemm, Int4TakesTheGemmBeforeW4A8) {
  const HostQuant h = random_int4(256, 512, 128, true, false, rng_);
  gpu_->set_quant_gemm_max_tokens(CudaBackend::kQuantGemmMaxTokens);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kFp8).ok());
  OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
  for (int64_t T : {int64_t{17}, int64_t{CudaBackend::kQuantGemmBeforeW4A8MaxTokens}}) {
    Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
    Pair out = make_out({T, h.n}, DType::F32);
    const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
    cpu_->linear(x.c, c.w, Tensor(), out.c);
    gpu_->linear(x.g, g.w, Tensor(), out.g);
    EXPECT_EQ(gpu_->quant_path_calls().gemm, before.gemm + 1) << "T " << T;
    EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, before.fp8_gemm) << "T " << T;
    expect_close(out, 3e-5, "int4 with fp8 activations asked for, T " + std::to_string(T));
  }
}

// auto leaves int4 weights on bf16 activations (the dequantize path: the CPU's product within
// check()'s bounds), as off does for fp8 weights.
TEST_F(QuantLinearFp8Gemm, AutoKeepsInt4OnBf16Activations) {
  const HostQuant h = random_int4(128, 512, 128, true, false, rng_);
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kAuto).ok());
  OnBackend c = put(*cpu_, h), g = put(*gpu_, h);
  Pair x = make(random_vec(static_cast<size_t>(300 * h.k), rng_), {300, h.k});
  Pair out = make_out({300, h.n});
  cpu_->linear(x.c, c.w, Tensor(), out.c);
  gpu_->linear(x.g, g.w, Tensor(), out.g);
  expect_close(out, 6e-3, "int4 auto, T 300");
}

// fp8_skinny_gemm.cu (set_fp8_skinny_max_tokens), every token tile (1-8, 9-16, 17-32, 33-64
// tokens), through linear_fp8 (the GEMVs and the W8A16 GEMM off): within check_fp8()'s bound of
// the f64 product of the quantized operands, bf16 and f32 out; on weights whose K is split in
// clusters (one block an SM, 8 stages: 4 chunks in 4 splits, 8 chunks of 200 rows in 8, 32 in 8,
// 33 row tiles of 64 chunks in a few splits of more chunks than stages, so the ring wraps, and a
// split giving some rank an odd count of 3 or more chunks) and on weights of more row tiles than
// half the SMs (unsplit, two blocks an SM, 4 stages: 8 chunks, and 68: past the 64 staged
// scales);
// each call on the kernel, the same bits run to run (the splits summed in rank order), with the
// weights by the other loads (set_fp8_skinny_tma: tensor-map or cp.async), with the pipelined
// multiply (set_fp8_skinny_pipe) switched, and pipelined with the weight scales' staging
// (set_fp8_skinny_stage_scales) switched, and within the same bound of cuBLASLt's W8A8 GEMM on the
// same operands (T >= 8, which it takes).
TEST_F(QuantLinearFp8Gemm, SkinnyKernelMatchesTheQuantizedProduct) {
  gpu_->set_quant_gemv_max_tokens(0);
  gpu_->set_quant_gemm_max_tokens(0);
  gpu_->set_quant_gemm_before_fp8_max_tokens(0);
  const bool tma_before = cuda::fp8_skinny_tma(), pipe_before = cuda::fp8_skinny_pipe();
  const bool stage_before = cuda::fp8_skinny_stage_scales();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Shape {
    int64_t n, k;
    DType out_t;
    std::vector<int64_t> tokens;
  };
  const std::vector<int64_t> all = {1, 7, 9, 16, 24, 33, 64};
  std::vector<Shape> shapes = {{256, 512, DType::BF16, all},
                               {200, 1024, DType::F32, all},
                               {384, 4096, DType::BF16, all},
                               {128 * 33, 8192, DType::BF16, {9, 64}},
                               {128 * (sms / 2 + 1), 1024, DType::BF16, {16, 64}}};
  // A rank of an odd count of chunks, 3 or more (the pipelined loop's odd tail after its loop):
  // the first weight of 2, 3 or 5 row tiles and K of a multiple of 4 chunks (cuBLASLt's scale
  // layout, which linear_fp8 wants) whose split on this GPU's plan gives one.
  int64_t odd_n = 0, odd_k = 0;
  for (int64_t n : {256, 384, 640}) {
    for (int64_t chunks = 12; chunks <= 64 && odd_k == 0; chunks += 4) {
      const int s = cuda::fp8_skinny_plan(n, chunks * 128, sms).splits;
      for (int r = 0; r < s && odd_k == 0; ++r) {
        const int64_t c = chunks * (r + 1) / s - chunks * r / s;
        if (c >= 3 && c % 2 == 1) {
          odd_n = n;
          odd_k = chunks * 128;
        }
      }
    }
    if (odd_k > 0) break;
  }
  // (None where SYV_FP8_SKINNY_SPLITS caps the splits at 2 or less: then every rank's count is
  // even.)
  if (odd_k > 0) shapes.push_back({odd_n, odd_k, DType::BF16, {8, 16, 33}});
  // Unsplit over 68 chunks: the staged weight scales' first 64, then scales loaded by the fold.
  shapes.push_back({128 * (sms / 2 + 1), 68 * 128, DType::BF16, {16}});
  for (const Shape& sh : shapes) {
    const HostQuant h = random_fp8(sh.n, sh.k, 128, 128, rng_);
    OnBackend g = put(*gpu_, h);
    const std::vector<float> w = dequantized(h);
    for (int64_t T : sh.tokens) {
      const std::string what = "fp8 [" + std::to_string(sh.n) + ", " + std::to_string(sh.k) +
                               "], " + std::string(dtype_name(sh.out_t)) + " out, T " +
                               std::to_string(T);
      Pair x = make(random_vec(static_cast<size_t>(T * h.k), rng_), {T, h.k});
      Pair out = make_out({T, h.n}, sh.out_t);
      gpu_->set_fp8_skinny_max_tokens(64);  // the kernel's limit, past the default
      const CudaBackend::QuantPathCalls before = gpu_->quant_path_calls();
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      ASSERT_EQ(gpu_->quant_path_calls().fp8_skinny, before.fp8_skinny + 1) << what;
      const std::vector<float> got = down_gpu(out.g);
      poison(out.g);
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      EXPECT_EQ(down_gpu(out.g), got) << what << ": run to run";
      poison(out.g);
      cuda::set_fp8_skinny_tma(!tma_before);  // the other weight loads: the same bits
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      cuda::set_fp8_skinny_tma(tma_before);
      EXPECT_EQ(down_gpu(out.g), got)
          << what << ": weights by " << (tma_before ? "cp.async" : "TMA");
      poison(out.g);
      cuda::set_fp8_skinny_tma(true);  // the pipelined multiply (tensor-map loads): the same bits
      cuda::set_fp8_skinny_pipe(!pipe_before);
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      cuda::set_fp8_skinny_pipe(pipe_before);
      cuda::set_fp8_skinny_tma(tma_before);
      EXPECT_EQ(down_gpu(out.g), got) << what << ": pipelined " << (pipe_before ? "off" : "on");
      poison(out.g);
      cuda::set_fp8_skinny_tma(true);  // pipelined, the weight scales staged or not: the same bits
      cuda::set_fp8_skinny_pipe(true);
      cuda::set_fp8_skinny_stage_scales(!stage_before);
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      cuda::set_fp8_skinny_stage_scales(stage_before);
      cuda::set_fp8_skinny_pipe(pipe_before);
      cuda::set_fp8_skinny_tma(tma_before);
      EXPECT_EQ(down_gpu(out.g), got)
          << what << ": weight scales " << (stage_before ? "loaded by each fold" : "staged");
      const std::vector<float> xq = fp8_activations(down_gpu(x.g), T, h.k);
      double ref = 0;
      const double rel = relative_l2_to_product(got, xq, w, T, h.n, h.k, &ref);
      EXPECT_LT(rel, 3e-3) << what << ": relative L2 error " << rel;
      if (T < 8) continue;
      gpu_->set_fp8_skinny_max_tokens(0);  // cuBLASLt's GEMM on the same operands
      const CudaBackend::QuantPathCalls mid = gpu_->quant_path_calls();
      gpu_->linear(x.g, g.w, Tensor(), out.g);
      EXPECT_EQ(gpu_->quant_path_calls().fp8_skinny, mid.fp8_skinny) << what;
      EXPECT_EQ(gpu_->quant_path_calls().fp8_gemm, mid.fp8_gemm + 1) << what;
      const std::vector<float> lt = down_gpu(out.g);
      double diff = 0;
      for (size_t i = 0; i < lt.size(); ++i) diff += (double(lt[i]) - got[i]) * (lt[i] - got[i]);
      EXPECT_LT(std::sqrt(diff / std::max(ref, 1e-30)), 3e-3) << what << ": against cuBLASLt";
    }
  }
}

// ... and a step of two such GEMMs at 40 tokens captured in a graph replays the same bits, the
// weights by cp.async and by tensor-map loads, the latter with the pipelined multiply too, and
// that with the weight scales staged.
TEST_F(QuantLinearFp8Gemm, SkinnyKernelReplaysInAGraph) {
  gpu_->set_quant_gemv_max_tokens(0);
  gpu_->set_quant_gemm_max_tokens(0);
  gpu_->set_fp8_skinny_max_tokens(64);  // the kernel's limit, past the default
  const bool tma_before = cuda::fp8_skinny_tma(), pipe_before = cuda::fp8_skinny_pipe();
  const bool stage_before = cuda::fp8_skinny_stage_scales();
  OnBackend a = put(*gpu_, random_fp8(512, 1024, 128, 128, rng_));
  OnBackend b = put(*gpu_, random_fp8(256, 512, 128, 128, rng_));
  for (int mode : {0, 1, 2, 3}) {  // cp.async; TMA; TMA, pipelined; and the scales staged
    cuda::set_fp8_skinny_tma(mode > 0);
    cuda::set_fp8_skinny_pipe(mode >= 2);
    cuda::set_fp8_skinny_stage_scales(mode == 3);
    const uint64_t calls = gpu_->quant_path_calls().fp8_skinny;
    const char* names[] = {"cp.async", "TMA", "TMA, pipelined", "TMA, pipelined, scales staged"};
    expect_graph_replays(a.w, b.w, 40, std::string("W8A8 skinny twice, T 40, ") + names[mode]);
    EXPECT_GT(gpu_->quant_path_calls().fp8_skinny, calls) << "the skinny kernel did not run";
  }
  cuda::set_fp8_skinny_tma(tma_before);
  cuda::set_fp8_skinny_pipe(pipe_before);
  cuda::set_fp8_skinny_stage_scales(stage_before);
}

// A step of two fp8 GEMMs at 96 tokens (W4A8 int4 [512, 512], then W8A8 fp8 [256, 512] on its
// output) captured in a graph replays the same bits.
TEST_F(QuantLinearFp8Gemm, CudaGraphReplaysTheSameBits) {
  ASSERT_TRUE(gpu_->set_quantized_activations(Backend::QuantizedActivations::kFp8).ok());
  OnBackend a = put(*gpu_, random_int4(512, 512, 128, true, false, rng_));
  OnBackend b = put(*gpu_, random_fp8(256, 512, 128, 128, rng_));
  const uint64_t fp8_calls = gpu_->quant_path_calls().fp8_gemm;
  expect_graph_replays(a.w, b.w, 96, "W4A8 then W8A8, T 96");
  EXPECT_GT(gpu_->quant_path_calls().fp8_gemm, fp8_calls) << "the fp8 GEMMs did not run";
}

}  // namespace
}  // namespace syv
