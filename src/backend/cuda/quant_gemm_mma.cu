// Tensor-core GEMM for quantized weights at tens of tokens (W4A16 and W8A16: the weight
// dequantized in registers, never in memory): where the GEMVs (quant_gemv_mma.cu, up to 16 tokens)
// stop and the dequantize path (the whole weight written to a bf16 scratch, then cuBLASLt) or the
// fp8 tensor-core GEMM would take over. Each weight fragment is decoded once and multiplied by up
// to 64 tokens, so the weight streams once per 64 tokens at the packed size.
//
// Shapes taken: those of quant_gemv_mma.cu (K % 128 == 0; int4 groups a multiple of 128 columns
// without g_idx; fp8 scale tiles a multiple of 128 columns wide); x and the weight 16-byte aligned.
//
// Work split. A block owns 64 weight rows (4 warps of 16: the mma's M) and a tile of 8 NT tokens
// (NT mma columns of 8), and walks its K range in chunks of 128 columns (one int4 group or fp8
// scale column) through a kStages-deep cp.async ring in shared memory: each stage holds the
// chunk's packed weight rows and its tokens' activations. Every warp multiplies its 16 rows by
// all the tile's tokens, so a decoded weight fragment serves NT mmas and an activation vector in
// shared memory serves the block's 4 warps. Lane (g, t) = (lane / 4, lane % 4) reads 32 columns
// [32 t, + 32) of its rows g and g + 8 and of token 8 q + g (quant_mma_decode.cuh: the decode and
// the pair order). Where the grid would not fill the GPU, the K range is split across blocks
// (grid.z): each split writes fp32 partial sums to a workspace and a second kernel adds the splits
// in order, so the result does not depend on timing (but does on the split count, hence on the
// token count: not for batch-invariant mode).
//
// Shared memory (16-byte units), conflict-free for the lanes' 16-byte reads: a weight row's chunk
// is 4 units (int4) or 8 (fp8, padded to 9); a token's chunk is 16 units padded to 17, unit u
// stored at u ^ (2 (u >> 3 & 1)) so that lanes t = 0..3 reading units 4 t + i hit 4 different
// bank groups and the next token's 4 others.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/quant_mma_decode.cuh"

namespace syv::cuda {
namespace {

constexpr int kGemmWarps = 4;               // warps per block, 16 weight rows each
constexpr int kGemmRows = 16 * kGemmWarps;  // weight rows per block
constexpr int kStages = 3;                  // cp.async ring depth
constexpr int64_t kChunk = 128;             // columns per chunk
constexpr int kXUnits = kChunk / 8;         // 16-byte units of a token's chunk
constexpr int kXRowUnits = kXUnits + 1;     // padded
constexpr int kMinChunksPerSplit = 4;       // a split's K range at least (ring warm-up)

template <int FMT>
constexpr int w_units() {  // 16-byte units of a weight row's chunk
  return FMT == 0 ? 8 : 4;
}
template <int FMT>
constexpr int w_row_units() {  // padded (fp8: lanes g and g + 1 on other bank groups)
  return FMT == 0 ? 9 : 4;
}
template <int FMT, int NT>
constexpr int stage_units() {
  return kGemmRows * w_row_units<FMT>() + 8 * NT * kXRowUnits;
}
template <int FMT, int NT>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(stage_units<FMT, NT>()) * kStages * 16;
}

__device__ __forceinline__ int x_unit(int u) {
  return u ^ (((u >> 3) & 1) << 1);
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
__global__ void __launch_bounds__(kGemmWarps * 32, 2) quant_gemm_mma_kernel(const GemmArgs p) {
  extern __shared__ uint4 smem[];
  constexpr int WU = w_units<FMT>(), WRU = w_row_units<FMT>();
  constexpr int kTileTokens = 8 * NT;
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k, T = p.tokens;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kGemmRows;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTileTokens;
  const int64_t chunks = K / kChunk;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.z) * p.chunks_per_split;
  const int nc = static_cast<int>(min(static_cast<int64_t>(p.chunks_per_split), chunks - c_begin));
  const int64_t row_bytes = FMT == 0 ? K : K / 2;
  const auto* wdata = static_cast<const uint8_t*>(w.data);

  // Stage s: weight rows [0, 64) x WRU units, then tokens [0, 8 NT) x kXRowUnits units.
  auto w_stage = [&](int s) { return smem + s * stage_units<FMT, NT>(); };
  auto x_stage = [&](int s) { return w_stage(s) + kGemmRows * WRU; };
  // The cp.async copies of chunk c_begin + j into stage s (rows past N and tokens past T read
  // the last ones: their results are never stored).
  auto load = [&](int j, int s) {
    const int64_t c = c_begin + j;
    uint4* ws = w_stage(s);
    for (int i = threadIdx.x; i < kGemmRows * WU; i += kGemmWarps * 32) {
      const int r = i / WU, u = i % WU;
      const int64_t n = min(n0 + r, N - 1);
      cp_async16(ws + r * WRU + u, wdata + n * row_bytes + c * (WU * 16) + u * 16, true);
    }
    uint4* xs = x_stage(s);
    for (int i = threadIdx.x; i < kTileTokens * kXUnits; i += kGemmWarps * 32) {
      const int r = i / kXUnits, u = i % kXUnits;
      const int64_t tok = min(t0 + r, T - 1);
      cp_async16(xs + r * kXRowUnits + x_unit(u), p.x + tok * K + c * kChunk + u * 8, true);
    }
  };

  // This lane's rows (g and g + 8 of the warp's 16), clamped, for their scales and zero points.
  int64_t rows[2];
  const float* srow[2];
  const uint8_t* zrow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rows[r] = min(n0 + 16 * warp + g + 8 * r, N - 1);
    srow[r] = w.scales + (FMT == 0 ? rows[r] / w.block_n : rows[r]) * w.scale_cols;
    zrow[r] = FMT == 1 && w.zeros ? w.zeros + rows[r] * w.scale_cols : nullptr;
  }
  // The scales (and int4 zero-point words) of chunk j + 1, loaded during chunk j.
  float sc_next[2] = {0.f, 0.f};
  uint32_t zc_next[2] = {0u, 0u};
  auto load_scales = [&](int j) {
    const uint32_t col = p.cdiv(static_cast<uint32_t>(c_begin + j));
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sc_next[r] = __ldg(srow[r] + col);
      if constexpr (FMT == 1) zc_next[r] = int4_zero_pair(zrow[r] ? __ldg(zrow[r] + col) : 8u);
    }
  };
  if (nc > 0) load_scales(0);

  pdl_wait();  // x comes from the kernel before; the workspace / out may still be read
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nc) load(s, s);
    cp_commit();
  }

  float acc[NT][4] = {};
  for (int j = 0; j < nc; ++j) {
    const float sc[2] = {sc_next[0], sc_next[1]};
    const uint32_t zc[2] = {zc_next[0], zc_next[1]};
    if (j + 1 < nc) load_scales(j + 1);
    cp_wait<kStages - 2>();  // chunk j has landed (this thread's copies)
    __syncthreads();         // everyone's; and stage (j - 1) % kStages is no longer read
    const int next = j + kStages - 1;
    if (next < nc) load(next, next % kStages);
    cp_commit();  // possibly empty: keeps the group count uniform

    const uint4* ws = w_stage(j % kStages);
    const uint4* xs = x_stage(j % kStages);
    uint4 wlo[FMT == 0 ? 2 : 1], whi[FMT == 0 ? 2 : 1];
#pragma unroll
    for (int v = 0; v < (FMT == 0 ? 2 : 1); ++v) {
      wlo[v] = ws[(16 * warp + g) * WRU + t * (WU / 4) + v];
      whi[v] = ws[(16 * warp + g + 8) * WRU + t * (WU / 4) + v];
    }
    float part[NT][4] = {};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t a[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        weight_fragment<FMT>(reinterpret_cast<const uint32_t*>(wlo),
                             reinterpret_cast<const uint32_t*>(whi), zc[0], zc[1], i, h, a[h]);
#pragma unroll
      for (int q = 0; q < NT; ++q) {
        const uint4 xv = xs[(8 * q + g) * kXRowUnits + x_unit(4 * t + i)];
        const uint32_t(&xw)[4] = reinterpret_cast<const uint32_t(&)[4]>(xv);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t b0, b1;
          activation_fragment<FMT>(xw, h, b0, b1);
          mma(part[q], a[h], b0, b1);
        }
      }
    }
    // part[q]: (row g, tokens 8q + 2t, + 1), (row g + 8, the same tokens).
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[q][e] = fmaf(part[q][e], sc[e >> 1], acc[q][e]);
  }
  cp_wait<0>();

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

template <int FMT, int NT, typename TO>
void launch_gemm(const GemmArgs& p, dim3 grid, cudaStream_t s) {
  auto* kernel = quant_gemm_mma_kernel<FMT, NT, TO>;
  constexpr size_t smem = smem_bytes<FMT, NT>();
  static const bool attr = [kernel] {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)attr;
  launch_k(kernel, grid, kGemmWarps * 32, smem, s, p);
}

template <int FMT, typename TO>
void launch_gemm_tokens(const GemmArgs& p, int nt, dim3 grid, cudaStream_t s) {
  nt == 4 ? launch_gemm<FMT, 4, TO>(p, grid, s) : launch_gemm<FMT, 8, TO>(p, grid, s);
}

}  // namespace

bool quant_gemm_mma_supports(const QuantWeight& w) {
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || w.k % kChunk != 0) return false;
  if (w.kind == QuantKind::kFp8Block) return w.block_k % kChunk == 0 && w.block_n > 0;
  return w.g_idx == nullptr && w.group_size > 0 && w.group_size % kChunk == 0;
}

int quant_gemm_mma_splits(const QuantWeight& w, int64_t tokens, int sm_count,
                          size_t workspace_bytes) {
  const int64_t tile_tokens = tokens <= 32 ? 32 : 64;
  const int64_t blocks = ceil_div(w.n, kGemmRows) * ceil_div(tokens, tile_tokens);
  const int64_t chunks = w.k / kChunk;
  // Two blocks per SM at least where the K range allows, each split kMinChunksPerSplit chunks or
  // more, and the workspace within its bytes.
  int64_t splits = std::max<int64_t>(1, ceil_div(2 * static_cast<int64_t>(sm_count), blocks));
  splits = std::min(splits, std::max<int64_t>(1, chunks / kMinChunksPerSplit));
  while (splits > 1 && static_cast<size_t>(splits * tokens * w.n * 4) > workspace_bytes) --splits;
  // Equal ranges: the last split is not left with a sliver.
  const int64_t per = ceil_div(chunks, splits);
  return static_cast<int>(ceil_div(chunks, per));
}

bool launch_quant_gemm_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, int sm_count, void* workspace, size_t workspace_bytes,
                           cudaStream_t s) {
  if (!quant_gemm_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  const int splits = quant_gemm_mma_splits(w, tokens, sm_count, workspace_bytes);
  const int64_t chunks = w.k / kChunk;
  const int nt = tokens <= 32 ? 4 : 8;
  const dim3 grid(static_cast<unsigned>(ceil_div(w.n, kGemmRows)),
                  static_cast<unsigned>(ceil_div(tokens, 8 * nt)), static_cast<unsigned>(splits));
  GemmArgs p{w,
             ChunkDiv(static_cast<uint32_t>(
                 (w.kind == QuantKind::kFp8Block ? w.block_k : w.group_size) / kChunk)),
             static_cast<const bf16*>(x),
             splits > 1 ? workspace : out,
             tokens,
             static_cast<int>(ceil_div(chunks, splits))};
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (splits > 1) {
    fp8 ? launch_gemm_tokens<0, float>(p, nt, grid, s)
        : launch_gemm_tokens<1, float>(p, nt, grid, s);
    const int64_t count = tokens * w.n;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, 256), 4096));
    const auto* ws = static_cast<const float*>(workspace);
    if (out_t == DType::BF16) {
      launch_k(quant_gemm_reduce_kernel<bf16>, blocks, 256, 0, s, ws, splits, count,
               static_cast<bf16*>(out));
    } else {
      launch_k(quant_gemm_reduce_kernel<float>, blocks, 256, 0, s, ws, splits, count,
               static_cast<float*>(out));
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
