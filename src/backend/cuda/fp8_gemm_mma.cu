// W8A8 GEMM for tens of tokens on mma.sync e4m3 (sm_89 and later): fp8 block-scaled weights as
// loaded and activations quantized per (token, 128 columns) by launch_quantize_fp8_groups, both
// fed to the tensor cores as they are (no decode, no PRMT), the fp32 sums of each 128-column
// chunk scaled by the weight tile's and the token group's scales. The same product as cuBLASLt's
// block-scaled fp8 GEMM (the W8A8 path above 16 tokens), for the decode batch sizes where that
// one reads the narrower projections' weights far below the copy rate (o_proj at 64 tokens: 32%
// on an H100, 2026-12-05; why is not profiled): K split across blocks where the grid would not
// fill the GPU.
//
// Work split as quant_gemm_mma.cu's: a block per 64 weight rows (4 warps of 16) and 8 NT tokens,
// K in 128-column chunks through a kQStages-deep cp.async ring (each stage the chunk's 128 bytes
// of 64 weight rows and of the tile's tokens, rows padded to 9 16-byte units: conflict-free
// 16-byte reads), quant_gemm_tile.cuh's split-K. Lane (g, t) reads bytes [32 t, + 32) of its rows
// g and g + 8 and of token 8 q + g; mma step s (0..3) takes their words 2 s (k positions
// 4t..4t + 3) and 2 s + 1 (k positions 4t + 16..4t + 19), the same columns for both operands, so
// the four steps are the chunk's dot product (tools/emulate/quant_gemm_emulate.py checks it).
//
// Shapes taken: fp8 tiles whose width is a multiple of 128 (any height), K % 128 == 0, the weight
// and x 16-byte aligned.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemm_tile.cuh"

namespace syv::cuda {
namespace {

constexpr int kFp8RowUnits = 9;  // a row's 128-byte chunk (8 units) padded

struct Fp8GemmArgs {
  QuantWeight w;
  ChunkDiv cdiv;          // chunk -> weight scale column
  const uint8_t* x;       // e4m3 [tokens, K]
  const float* x_scales;  // [K / 128][x_scale_stride]
  int64_t x_scale_stride;
  void* out;  // [tokens, N] (TO), or the f32 workspace [splits][tokens][N] when splits > 1
  int64_t tokens;
  int chunks_per_split;
};

template <int NT>
constexpr size_t fp8_gemm_smem_bytes() {
  return static_cast<size_t>(kQGemmRows + 8 * NT) * kFp8RowUnits * kQStages * 16;
}

// out[t, n] = the sum over the block's chunks c of x_scale[c, t] w_scale(n, c) times the chunk's
// sum of x8[t, k] w8[n, k], for the block's 64 rows (blockIdx.x) and 8 NT tokens (blockIdx.y);
// split blockIdx.z.
template <int NT, typename TO>
__global__ void __launch_bounds__(kQGemmWarps * 32, 2) fp8_gemm_mma_kernel(const Fp8GemmArgs p) {
  extern __shared__ uint4 smem[];
  constexpr int kTileTokens = 8 * NT;
  constexpr int kStageUnits = (kQGemmRows + kTileTokens) * kFp8RowUnits;
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k, T = p.tokens;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const QGemmBlock b = qgemm_block<NT>(K, p.chunks_per_split);
  const int64_t n0 = b.n0, t0 = b.t0, c_begin = b.c_begin;
  const int nc = b.nc;
  const auto* wdata = static_cast<const uint8_t*>(w.data);

  auto w_stage = [&](int s) { return smem + s * kStageUnits; };
  auto x_stage = [&](int s) { return w_stage(s) + kQGemmRows * kFp8RowUnits; };
  // The cp.async copies of chunk c_begin + j into stage s: rows past N read the last one, tokens
  // past T are zero-filled (not read).
  auto load = [&](int j, int s) {
    const int64_t c = c_begin + j;
    uint4* ws = w_stage(s);
    for (int i = threadIdx.x; i < kQGemmRows * 8; i += kQGemmWarps * 32) {
      const int r = i >> 3, u = i & 7;
      const int64_t row = min(n0 + r, N - 1);
      cp_async16(ws + r * kFp8RowUnits + u, wdata + row * K + c * kQuantChunk + u * 16, true);
    }
    uint4* xs = x_stage(s);
    for (int i = threadIdx.x; i < kTileTokens * 8; i += kQGemmWarps * 32) {
      const int r = i >> 3, u = i & 7;
      const bool real = t0 + r < T;
      cp_async16(xs + r * kFp8RowUnits + u,
                 real ? p.x + (t0 + r) * K + c * kQuantChunk + u * 16 : p.x, real);
    }
  };

  // This lane's weight rows (g and g + 8 of the warp's 16): their scale rows.
  const float* w_scale_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = min(n0 + 16 * warp + g + 8 * r, N - 1);
    w_scale_row[r] = w.scales + (row / w.block_n) * w.scale_cols;
  }
  // The scales of chunk j + 1, loaded during chunk j: the rows' weight scales, the tokens'
  // (8 q + 2 t and + 1, this lane's accumulator columns) activation scales.
  float wsc_next[2], xsc_next[NT][2];
  auto load_scales = [&](int j) {
    const int64_t c = c_begin + j;
    const uint32_t col = p.cdiv(static_cast<uint32_t>(c));
#pragma unroll
    for (int r = 0; r < 2; ++r) wsc_next[r] = __ldg(w_scale_row[r] + col);
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t tok = t0 + 8 * q + 2 * t + e;
        xsc_next[q][e] = tok < T ? __ldg(p.x_scales + c * p.x_scale_stride + tok) : 0.f;
      }
  };

  pdl_wait();  // x and its scales come from the kernel before; the outputs may still be read
  pdl_trigger();
  if (nc > 0) load_scales(0);
#pragma unroll
  for (int s = 0; s < kQStages - 1; ++s) {
    if (s < nc) load(s, s);
    cp_commit();
  }

  float acc[NT][4];
#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[q][e] = 0.f;
  for (int j = 0; j < nc; ++j) {
    float wsc[2] = {wsc_next[0], wsc_next[1]};
    float xsc[NT][2];
#pragma unroll
    for (int q = 0; q < NT; ++q) xsc[q][0] = xsc_next[q][0], xsc[q][1] = xsc_next[q][1];
    if (j + 1 < nc) load_scales(j + 1);
    cp_wait<kQStages - 2>();  // chunk j has landed (this thread's copies)
    qgemm_ring_advance(j, nc, load);

    const uint4* ws = w_stage(j % kQStages);
    const uint4* xs = x_stage(j % kQStages);
    uint4 wv[2][2];  // [row g, g + 8][unit 2t, 2t + 1]
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int v = 0; v < 2; ++v) wv[r][v] = ws[(16 * warp + g + 8 * r) * kFp8RowUnits + 2 * t + v];
    const auto* lo = reinterpret_cast<const uint32_t*>(wv[0]);
    const auto* hi = reinterpret_cast<const uint32_t*>(wv[1]);
    float part[NT][4] = {};
#pragma unroll
    for (int q = 0; q < NT; ++q) {
      uint4 xv[2];
#pragma unroll
      for (int v = 0; v < 2; ++v) xv[v] = xs[(8 * q + g) * kFp8RowUnits + 2 * t + v];
      const auto* xw = reinterpret_cast<const uint32_t*>(xv);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t a[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1], hi[2 * s + 1]};
        mma_e4m3(part[q], a, xw[2 * s], xw[2 * s + 1]);
      }
    }
    // part[q]: (row g, tokens 8q + 2t, + 1), (row g + 8, the same tokens).
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[q][e] = fmaf(part[q][e], wsc[e >> 1] * xsc[q][e & 1], acc[q][e]);
  }
  cp_wait<0>();

  qgemm_store<NT>(static_cast<TO*>(p.out) + static_cast<int64_t>(blockIdx.z) * T * N, acc, n0, t0,
                  N, T);
}

template <typename TO>
void launch_fp8_tokens(const Fp8GemmArgs& p, int nt, dim3 grid, cudaStream_t s) {
  qgemm_dispatch_nt(nt, [&](auto width) {
    constexpr int NT = decltype(width)::value;
    launch_qgemm_smem<fp8_gemm_mma_kernel<NT, TO>, fp8_gemm_smem_bytes<NT>()>(grid, s, p);
  });
}

}  // namespace

bool fp8_gemm_mma_supports(const QuantWeight& w) {
  return w.kind == QuantKind::kFp8Block && quant_mma_supports(w);
}

bool launch_fp8_gemm_mma(const QuantWeight& w, const uint8_t* x, const float* x_scales,
                         int64_t x_scale_stride, void* out, DType out_t, int64_t tokens,
                         int sm_count, void* workspace, size_t workspace_bytes, cudaStream_t s) {
  if (!fp8_gemm_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  const int nt = qgemm_fitted_nt(tokens);
  const QGemmGrid g = qgemm_grid(w.n, w.k, tokens, nt, sm_count, workspace_bytes);
  Fp8GemmArgs p{w,      quant_chunk_div(w), x, x_scales, x_scale_stride, nullptr,
                tokens, g.chunks_per_split};
  qgemm_run(g, workspace, out, out_t, tokens * w.n, s, [&](auto to, void* dst) {
    p.out = dst;
    launch_fp8_tokens<decltype(to)>(p, nt, g.grid, s);
  });
  return true;
}

}  // namespace syv::cuda
