// cuBLASLt GEMMs for prefill and larger batches: row-major out[T, N] = x[T, K] · w[N, K]ᵀ with bf16
// operands, fp32 accumulation, bf16 or f32 output. Plans (layouts + the heuristic's algorithm) are
// cached per shape, so a step pays the heuristic once. Also the block-scaled fp8 GEMM of quantized
// weights (run_fp8; operands from fp8_operands.cu) and the batch-invariant GEMMs (a fixed cuBLASLt
// algorithm, and our own kernel in gemm_invariant.cu).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "core/dtype.h"

namespace syv::cuda {

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void init(void* workspace, size_t workspace_bytes);
  // Returns false (running nothing) when cuBLASLt has no algorithm for the shape. `ldc`: the
  // elements between out's rows (n when 0): out may be n columns of a wider row-major matrix.
  bool run(const void* x, const void* w, void* out, DType out_t, int64_t tokens, int64_t n,
           int64_t k, cudaStream_t stream, int64_t ldc = 0);
  // Whether run() has an algorithm for the shape (its plan is made and kept).
  bool runs(int64_t tokens, int64_t n, int64_t k, DType out_t, int64_t ldc = 0) {
    return (out_t == DType::F32 || out_t == DType::BF16) &&
           plan(tokens, n, k, out_t, ldc == 0 ? n : ldc).ok;
  }
  // Batch-invariant mode: ONE algorithm per (n, k, out dtype) for every token count, the
  // heuristic's first at kFixedAlgoTokens tokens among those without split-K or a reduction
  // scheme, kept only if it also runs 1, 3 and 2048 tokens. Each output element is then summed by
  // one block in that kernel's fixed order whatever T is (rows measured bit-identical, T = 1 ..
  // 2048, tests/gpu/batch_invariance_test.cpp). Returns false (running nothing) when the shape
  // has no such algorithm (the caller takes gemm_invariant.cu for every T of it).
  bool run_fixed(const void* x, const void* w, void* out, DType out_t, int64_t tokens, int64_t n,
                 int64_t k, cudaStream_t stream);
  static constexpr int64_t kFixedAlgoTokens = 256;

  // Block-scaled fp8 GEMM (cuBLASLt's 1x128 / 128x128 scaling, sm_90; CUDA 12.9+):
  // out[T, N] = (x8 * sx)[T, K] · (w8 * sw)[N, K]ᵀ, fp32 accumulation, bf16 or f32 out.
  // x8 e4m3 [T, K], x_scales f32 [K / 128][T] (one per token and 128 columns, tokens contiguous);
  // w8 e4m3 [N, K] with w_scales per `w_scales_kind`:
  //   kTile128   f32 [ceil(N / 128)][K / 128], one per 128 x 128 tile (Qwen's FP8 checkpoints);
  //   kRow128    f32 [K / 128][N], one per weight row and 128 columns (int4 groups as e4m3).
  // K % 128 == 0; T a multiple of 8 (cuBLASLt 13.0 on the H200 refuses others). Precondition:
  // fp8_runs() said yes for the shape.
  enum class Fp8WeightScales : uint8_t { kTile128, kRow128 };
  void run_fp8(const void* x8, const float* x_scales, const void* w8, const float* w_scales,
               Fp8WeightScales w_scales_kind, void* out, DType out_t, int64_t tokens, int64_t n,
               int64_t k, cudaStream_t stream);
  // Whether run_fp8 has an algorithm for the shape (the plan is made and kept).
  bool fp8_runs(int64_t tokens, int64_t n, int64_t k, DType out_t, Fp8WeightScales w_scales_kind) {
    return (out_t == DType::F32 || out_t == DType::BF16) && k % 128 == 0 &&
           fp8_plan(tokens, n, k, out_t, w_scales_kind).ok;
  }
  // The fp8 plan's algorithm for the shape in words (cuBLASLt's config attributes and the wave
  // count), or "" where fp8_runs() says no (`syv bench quant-kernels` prints it).
  std::string fp8_algorithm(int64_t tokens, int64_t n, int64_t k, DType out_t,
                            Fp8WeightScales w_scales_kind);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    float waves = 0;  // cuBLASLt's wavesCount for algo
    bool ok = false;
  };
  Plan& plan(int64_t tokens, int64_t n, int64_t k, DType out_t, int64_t ldc);
  Plan& fp8_plan(int64_t tokens, int64_t n, int64_t k, DType out_t, Fp8WeightScales ws);
  void create_plan(Plan& p, cudaDataType_t in_t, int64_t tokens, int64_t n, int64_t k, DType out_t,
                   const int32_t* a_scale_mode, const int32_t* b_scale_mode, int64_t ldc);
  static void destroy(Plan& p);
  struct Fixed {
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
  };
  Fixed& fixed(int64_t n, int64_t k, DType out_t);
  // Whether f's algorithm runs `tokens` tokens of the shape (cached; with `warn`, says so once
  // when it does not: that call then takes another kernel).
  bool algo_runs(Fixed& f, int64_t tokens, int64_t n, int64_t k, DType out_t, bool warn);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int64_t>, Plan> plans_;  // + ldc
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, Plan> fp8_plans_;  // + weight scales
  std::map<std::tuple<int64_t, int64_t, int>, Fixed> fixed_;                   // (n, k, out dtype)
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, bool> fixed_ok_;  // it runs (tokens, ...)
};

// gemm_invariant.cu: the batch-invariant GEMM, out[T, N] = x[T, K] · w[N, K]ᵀ, bf16 in, fp32
// accumulation, bf16 or f32 out. Every element sums its ceil(K / 16) k16-chunks in increasing
// order into one accumulator (mma.sync m16n8k16), whatever T and the tile are, so each row is
// bit-identical for every T. `tile`: one of the configurations below (tests) or auto (by T, N
// and the SM count; speed only). Needs K % 8 == 0 and 16-byte aligned x and w; returns false
// (running nothing) otherwise, or for another output dtype.
constexpr int kInvariantTileAuto = -1;
constexpr int kInvariantTileSmall = 0;   // 16 tokens x 32 weight rows per block
constexpr int kInvariantTileMedium = 1;  // 64 x 64
constexpr int kInvariantTileLarge = 2;   // 128 x 128
bool launch_gemm_invariant(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                           int64_t n, int64_t k, int tile, int sm_count, cudaStream_t s);

}  // namespace syv::cuda
