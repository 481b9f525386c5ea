// Tensor-core GEMM for quantized weights at tens of tokens (W4A16 and W8A16: the weight
// dequantized in registers, never in memory): where the GEMVs (quant_gemv_mma.cu, up to 16 tokens)
// stop and the dequantize path (the whole weight written to a bf16 scratch, then cuBLASLt) or the
// fp8 tensor-core GEMM would take over. Each weight fragment is decoded once and multiplied by up
// to 64 tokens, so the weight streams once per 64 tokens at the packed size.
//
// Shapes taken: those of quant_gemv_mma.cu (K % 128 == 0; int4 groups a multiple of 128 columns
// without g_idx; fp8 scale tiles a multiple of 128 columns wide); x and the weight 16-byte aligned.
//
// Work split: quant_gemm_tile.cuh's tile, a block per 64 weight rows (blockIdx.x) and 8 NT tokens
// (blockIdx.y); K split across blocks where the grid would not fill the GPU (split-K below:
// deterministic, but the split count depends on the token count: not for batch-invariant mode).
#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemm_split.h"
#include "backend/cuda/quant_gemm_tile.cuh"

namespace syv::cuda {
namespace {

// Blocks of Kernel (a kernel of the tile) an SM holds at once, by the CUDA runtime's occupancy
// (registers, shared memory); asked once per kernel.
template <auto Kernel, int FMT, int NT>
int qgemm_blocks_per_sm() {
  static const int blocks = [] {
    const size_t smem = qgemm_allow_smem<Kernel, FMT, NT>();
    int b = 0;
    SYV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, kQGemmWarps * 32, smem));
    return std::max(b, 1);
  }();
  return blocks;
}

// The tile's token width in mma columns of 8 (NT) fitted to a step of `tokens`: as many 64-token
// tiles as it needs, the fewest columns that cover each one's share (17-24 tokens 3, 33-40 5,
// 41-48 6, 96 two tiles of 6), rounded to the widths compiled (QTileWidths: 1 -> 2, 7 -> 8). The
// kernels' work grows with their columns whether these hold tokens or padding.
using QTileWidths = std::integer_sequence<int, 2, 3, 4, 5, 6, 8>;
inline int qgemm_fitted_nt(int64_t tokens) {
  const int64_t tiles = ceil_div(tokens, int64_t{64});
  const int nt = static_cast<int>(ceil_div(ceil_div(tokens, tiles), int64_t{8}));
  return nt <= 2 ? 2 : nt == 7 ? 8 : nt;
}
// Calls launch(std::integral_constant<int, NT>) for nt, one of QTileWidths (CUDA sources are
// C++17 here: no template lambdas).
template <typename Launch, int... NT>
void qgemm_dispatch_nt_in(int nt, Launch& launch, std::integer_sequence<int, NT...>) {
  ((nt == NT ? launch(std::integral_constant<int, NT>{}) : void()), ...);
}
template <typename Launch>
void qgemm_dispatch_nt(int nt, Launch&& launch) {
  qgemm_dispatch_nt_in(nt, launch, QTileWidths{});
}

// The grid of a tile GEMM of n rows, k columns and `tokens` tokens in tiles of 8 nt: 64-row
// blocks (x), token tiles (y), K splits (z) of chunks_per_split chunks each (quant_gemm_split.h).
constexpr QGemmSplitShape kQGemmSplitShape{kQGemmRows, kQuantChunk, kQStages, 4};
struct QGemmGrid {
  dim3 grid;
  int64_t splits = 1;
  int chunks_per_split = 0;
};
inline QGemmGrid qgemm_grid(int64_t n, int64_t k, int64_t tokens, int nt, int sm_count,
                            size_t workspace_bytes, int64_t slots) {
  const QGemmSplit split = qgemm_split(kQGemmSplitShape, n, k, tokens, int64_t{8} * nt, sm_count,
                                       workspace_bytes, slots);
  QGemmGrid g;
  g.splits = split.splits;
  g.chunks_per_split = static_cast<int>(split.chunks_per_split);
  g.grid = dim3(ceil_div(n, kQGemmRows), ceil_div(tokens, int64_t{8} * nt),
                static_cast<unsigned>(g.splits));
  return g;
}

// out[t, n] = sum over the splits s (in order) of ws[s][t][n].
template <typename TO>
__global__ void qgemm_reduce_kernel(const float* __restrict__ ws, int splits, int64_t count,
                                    TO* __restrict__ out) {
  pdl_wait();  // the splits' kernel
  pdl_trigger();
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = ws[e];
    for (int s = 1; s < splits; ++s) v += ws[s * count + e];
    out[e] = from_f32<TO>(v);
  }
}
// out (bf16 or f32 [tokens, n]) = the sum of `splits` workspaces of tokens x n f32.
inline void launch_qgemm_reduce(const float* ws, int splits, int64_t count, void* out, DType out_t,
                                cudaStream_t s) {
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, 256), 4096));
  if (out_t == DType::BF16) {
    launch_k(qgemm_reduce_kernel<bf16>, blocks, 256, 0, s, ws, splits, count,
             static_cast<bf16*>(out));
  } else {
    launch_k(qgemm_reduce_kernel<float>, blocks, 256, 0, s, ws, splits, count,
             static_cast<float*>(out));
  }
}

// Runs one call of a tile GEMM: launch(TO{}, dst) with the output type and target each launch
// needs (f32 into the workspace when K is split, then the ordered reduce into out; else out in
// out_t, bf16 or f32).
template <typename Launch>
void qgemm_run(const QGemmGrid& g, void* workspace, void* out, DType out_t, int64_t count,
               cudaStream_t s, Launch&& launch) {
  if (g.splits > 1) {
    launch(float{}, workspace);
    launch_qgemm_reduce(static_cast<const float*>(workspace), static_cast<int>(g.splits), count,
                        out, out_t, s);
  } else if (out_t == DType::BF16) {
    launch(bf16{}, out);
  } else {
    launch(float{}, out);
  }
}

// The block's place in a tile GEMM's grid: rows [n0, + 64) (blockIdx.x), tokens [t0, + 8 NT)
// (blockIdx.y), chunks [c_begin, + nc) of K (split blockIdx.z).
struct QGemmBlock {
  int64_t n0, t0, c_begin;
  int nc;
};
template <int NT>
__device__ __forceinline__ QGemmBlock qgemm_block(int64_t k, int chunks_per_split) {
  QGemmBlock b;
  b.n0 = static_cast<int64_t>(blockIdx.x) * kQGemmRows;
  b.t0 = static_cast<int64_t>(blockIdx.y) * (8 * NT);
  b.c_begin = static_cast<int64_t>(blockIdx.z) * chunks_per_split;
  b.nc = static_cast<int>(min(static_cast<int64_t>(chunks_per_split), k / kQuantChunk - b.c_begin));
  return b;
}

// out [T, N] (TO) of the block's rows [n0, n0 + 64) and tokens [t0, t0 + 8 NT) from acc as the
// tile's main loops leave it (warp w's acc[q]: (row 16 w + g, tokens 8q + 2t, + 1), (row
// 16 w + g + 8, the same tokens)), where both are real.
template <int NT, typename TO>
__device__ __forceinline__ void qgemm_store(TO* out, const float (&acc)[NT][4], int64_t n0,
                                            int64_t t0, int64_t N, int64_t T) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t r = n0 + 16 * warp + g + (e >= 2 ? 8 : 0);
      const int64_t tok = t0 + 8 * q + 2 * t + (e & 1);
      if (tok < T && r < N) out[tok * N + r] = from_f32<TO>(acc[q][e]);
    }
}

struct GemmArgs {
  QuantWeight w;
  ChunkDiv cdiv;  // chunk -> scale column
  const bf16* x;  // [tokens, K]
  void* out;      // [tokens, N] (TO), or the f32 workspace [splits][tokens][N] when splits > 1
  int64_t tokens;
  int chunks_per_split;
};

// out[t, n] = sum_k x[t, k] dequant(w)[n, k] over the block's K range, for the block's 64 rows
// (blockIdx.x) and 8 NT tokens (blockIdx.y); split blockIdx.z of gridDim.z. TO: the output type
// (float for the workspace). FMT 0: fp8 tiles, 1: int4 groups.
template <int FMT, int NT, typename TO>
__global__ void __launch_bounds__(kQGemmWarps * 32, 2) quant_gemm_mma_kernel(const GemmArgs p) {
  extern __shared__ uint4 smem[];
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k, T = p.tokens;
  const QGemmBlock b = qgemm_block<NT>(K, p.chunks_per_split);
  float acc[NT][4];
  // Rows past N read the last one, tokens past T are zero-filled (their results are not stored).
  qgemm_tile_mainloop<FMT, NT>(
      w, p.cdiv, b.c_begin, b.nc, [&](int r) { return min(b.n0 + r, N - 1); },
      [&](int r) { return b.t0 + r < T ? p.x + (b.t0 + r) * K : nullptr; }, smem, acc);
  qgemm_store<NT>(static_cast<TO*>(p.out) + static_cast<int64_t>(blockIdx.z) * T * N, acc, b.n0,
                  b.t0, N, T);
}

// K splits by the wave rule (quant_gemm_split.h) unless SYV_QUANT_GEMM_WAVES=0 (the rule before
// 2026-12-05, for A/B; read once).
bool wave_splits() {
  static const bool on = [] {
    const char* env = std::getenv("SYV_QUANT_GEMM_WAVES");
    return env == nullptr || std::atoi(env) != 0;
  }();
  return on;
}

// One call at tile width NT: the grid and K splits, then the kernel (and the splits' reduce).
template <int FMT, int NT>
void run_gemm(GemmArgs p, void* out, DType out_t, int sm_count, void* workspace,
              size_t workspace_bytes, cudaStream_t s) {
  const int64_t slots =
      wave_splits() ? int64_t{sm_count} *
                          qgemm_blocks_per_sm<quant_gemm_mma_kernel<FMT, NT, float>, FMT, NT>()
                    : 0;
  const QGemmGrid g = qgemm_grid(p.w.n, p.w.k, p.tokens, NT, sm_count, workspace_bytes, slots);
  p.chunks_per_split = g.chunks_per_split;
  qgemm_run(g, workspace, out, out_t, p.tokens * p.w.n, s, [&](auto to, void* dst) {
    using TO = decltype(to);
    p.out = dst;
    launch_qgemm<quant_gemm_mma_kernel<FMT, NT, TO>, FMT, NT>(g.grid, s, p);
  });
}

}  // namespace

bool launch_quant_gemm_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, int sm_count, void* workspace, size_t workspace_bytes,
                           cudaStream_t s) {
  if (!quant_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  // The tile's token width fitted to the step (qgemm_fitted_nt): against 4 columns up to 32
  // tokens and 8 above, 1.25-1.35x faster at 48 and 96 tokens on an H200 (2026-12-05, bench
  // quant-kernels; gate_up int4 95.2 -> 70.4 us at 48, 173.8 -> 135.3 at 96), the same elsewhere.
  const int nt = qgemm_fitted_nt(tokens);
  const GemmArgs p{w, quant_chunk_div(w), static_cast<const bf16*>(x), nullptr, tokens, 0};
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  qgemm_dispatch_nt(nt, [&](auto width) {
    constexpr int NT = decltype(width)::value;
    if (fp8) {
      run_gemm<0, NT>(p, out, out_t, sm_count, workspace, workspace_bytes, s);
    } else {
      run_gemm<1, NT>(p, out, out_t, sm_count, workspace, workspace_bytes, s);
    }
  });
  return true;
}

}  // namespace syv::cuda
