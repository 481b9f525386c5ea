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
// (blockIdx.y). Where the grid would not fill the GPU, the K range is split across blocks
// (grid.z): each split writes fp32 partial sums to a workspace and a second kernel adds the splits
// in order, so the result does not depend on timing (but does on the split count, hence on the
// token count: not for batch-invariant mode).
#include <algorithm>
#include <cstdlib>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemm_tile.cuh"

namespace syv::cuda {
namespace {

constexpr int kMinChunksPerSplit = 4;  // a split's K range at least (ring warm-up)

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
// (float for the workspace). FMT 0: fp8 tiles, 1: int4 groups. kPairs: qgemm_tile_mainloop's
// pair-order staging (gemm_variant()).
template <int FMT, int NT, typename TO, bool kPairs>
__global__ void __launch_bounds__(kQGemmWarps * 32, 2) quant_gemm_mma_kernel(const GemmArgs p) {
  extern __shared__ uint4 smem[];
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k, T = p.tokens;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kQGemmRows;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * (8 * NT);
  const int64_t chunks = K / kQuantChunk;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.z) * p.chunks_per_split;
  const int nc = static_cast<int>(min(static_cast<int64_t>(p.chunks_per_split), chunks - c_begin));
  float acc[NT][4];
  // Rows past N read the last one, tokens past T are zero-filled (their results are not stored).
  qgemm_tile_mainloop<FMT, NT, kPairs>(
      w, p.cdiv, c_begin, nc, [&](int r) { return min(n0 + r, N - 1); },
      [&](int r) { return t0 + r < T ? p.x + (t0 + r) * K : nullptr; }, smem, acc);

  TO* out = static_cast<TO*>(p.out) + static_cast<int64_t>(blockIdx.z) * T * N;
#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t r = n0 + 16 * warp + g + (e >= 2 ? 8 : 0);
      const int64_t tok = t0 + 8 * q + 2 * t + (e & 1);
      if (tok < T && r < N) out[tok * N + r] = from_f32<TO>(acc[q][e]);
    }
}

// out[t, n] = sum over the splits s (in order) of ws[s][t][n].
template <typename TO>
__global__ void quant_gemm_reduce_kernel(const float* __restrict__ ws, int splits, int64_t count,
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

// The variant for an A/B not yet run on a GPU (SYV_QUANT_GEMM_VARIANT, read once; 0 the measured
// kernel, the default): bit 0 (kVariantPairs), the activations staged in the mma's pair order (no
// PRMT per mma, 2 per staged vector instead); bit 1 (kVariantFittedTile), the tile's token width
// fitted to the step (below). tools/device/gemm_variant_ab.sh times them; the loser goes.
constexpr int kVariantPairs = 1, kVariantFittedTile = 2;
int gemm_variant() {
  static const int v = [] {
    const char* env = std::getenv("SYV_QUANT_GEMM_VARIANT");
    return env ? std::atoi(env) : 0;
  }();
  return v;
}

template <int FMT, int NT, typename TO>
void launch_gemm(const GemmArgs& p, dim3 grid, cudaStream_t s) {
  if (gemm_variant() & kVariantPairs) {
    launch_qgemm<quant_gemm_mma_kernel<FMT, NT, TO, true>, FMT, NT>(grid, s, p);
  } else {
    launch_qgemm<quant_gemm_mma_kernel<FMT, NT, TO, false>, FMT, NT>(grid, s, p);
  }
}

// The tile widths compiled (NT): tile_nt() returns one of them.
using TileWidths = std::integer_sequence<int, 2, 3, 4, 5, 6, 8>;

template <int FMT, typename TO>
void launch_gemm_tokens(const GemmArgs& p, int nt, dim3 grid, cudaStream_t s) {
  [&]<int... NT>(std::integer_sequence<int, NT...>) {
    ((nt == NT ? launch_gemm<FMT, NT, TO>(p, grid, s) : void()), ...);
  }
  (TileWidths{});
}

// The tile's width in mma columns of 8 tokens (NT). Measured kernel: 4 (32 tokens) up to 32
// tokens, else 8. The kernel is bound by its mma and decode work, which grows with NT whether the
// columns hold tokens or padding (gate_up int4 on an H100: 55 us at 17 and at 32 tokens, 95 at 48
// and at 64), so kVariantFittedTile takes as many 64-token tiles as the step needs and the fewest
// columns that cover each one's share: 17-24 tokens 3, 33-40 5, 41-48 6, 96 two tiles of 6 (the
// graph buckets 24, 48 and 96 pad 8, 16 and 32 tokens a tile now). NT 1 becomes 2, 7 becomes 8
// (the widths compiled).
int tile_nt(int64_t tokens) {
  if (!(gemm_variant() & kVariantFittedTile)) return tokens <= 32 ? 4 : 8;
  const int64_t tiles = ceil_div(tokens, int64_t{64});
  const int nt = static_cast<int>(ceil_div(ceil_div(tokens, tiles), int64_t{8}));
  return nt <= 2 ? 2 : nt == 7 ? 8 : nt;
}

// Chunks of K each split takes: two blocks per SM at least where the K range allows, each split
// kMinChunksPerSplit chunks or more, the splits' sums within the workspace; equal ranges, so the
// last split is not left with a sliver. All of K (one split) where the grid fills the GPU.
int64_t chunks_per_split(const QuantWeight& w, int64_t tokens, int sm_count,
                         size_t workspace_bytes) {
  const int64_t blocks = ceil_div(w.n, kQGemmRows) * ceil_div(tokens, int64_t{8} * tile_nt(tokens));
  const int64_t chunks = w.k / kQuantChunk;
  int64_t splits = std::max<int64_t>(1, ceil_div(2 * static_cast<int64_t>(sm_count), blocks));
  splits = std::min(splits, std::max<int64_t>(1, chunks / kMinChunksPerSplit));
  while (splits > 1 && static_cast<size_t>(splits * tokens * w.n * 4) > workspace_bytes) --splits;
  return ceil_div(chunks, splits);
}

}  // namespace

bool launch_quant_gemm_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, int sm_count, void* workspace, size_t workspace_bytes,
                           cudaStream_t s) {
  if (!quant_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  const int64_t per_split = chunks_per_split(w, tokens, sm_count, workspace_bytes);
  const int64_t splits = ceil_div(w.k / kQuantChunk, per_split);
  const int nt = tile_nt(tokens);
  const dim3 grid(static_cast<unsigned>(ceil_div(w.n, kQGemmRows)),
                  static_cast<unsigned>(ceil_div(tokens, 8 * nt)), static_cast<unsigned>(splits));
  GemmArgs p{
      w,      quant_chunk_div(w),         static_cast<const bf16*>(x), splits > 1 ? workspace : out,
      tokens, static_cast<int>(per_split)};
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (splits > 1) {
    fp8 ? launch_gemm_tokens<0, float>(p, nt, grid, s)
        : launch_gemm_tokens<1, float>(p, nt, grid, s);
    const int64_t count = tokens * w.n;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, 256), 4096));
    const auto* ws = static_cast<const float*>(workspace);
    if (out_t == DType::BF16) {
      launch_k(quant_gemm_reduce_kernel<bf16>, blocks, 256, 0, s, ws, static_cast<int>(splits),
               count, static_cast<bf16*>(out));
    } else {
      launch_k(quant_gemm_reduce_kernel<float>, blocks, 256, 0, s, ws, static_cast<int>(splits),
               count, static_cast<float*>(out));
    }
  } else if (out_t == DType::BF16) {
    fp8 ? launch_gemm_tokens<0, bf16>(p, nt, grid, s) : launch_gemm_tokens<1, bf16>(p, nt, grid, s);
  } else {
    fp8 ? launch_gemm_tokens<0, float>(p, nt, grid, s)
        : launch_gemm_tokens<1, float>(p, nt, grid, s);
  }
  return true;
}

}  // namespace syv::cuda
