// The block tile of the tensor-core GEMMs for quantized weights (quant_gemm_mma.cu: a linear;
// moe_quant_gemm.cu: routed MoE experts): 64 weight rows (4 warps of 16: the mma's M) by 8 NT
// tokens (NT mma columns of 8), K walked in chunks of 128 columns (one int4 group or fp8 scale
// column) through a kQStages-deep cp.async ring in shared memory, each stage holding the chunk's
// packed weight rows and its tokens' activations. Every warp multiplies its 16 rows by all the
// tile's tokens, so a decoded weight fragment serves NT mmas and an activation vector in shared
// memory serves the block's 4 warps. Lane (g, t) = (lane / 4, lane % 4) reads 32 columns
// [32 t, + 32) of its rows g and g + 8 and of token 8 q + g (quant_mma_decode.cuh: the decode and
// the pair order). Which weight rows and which token rows the tile holds is the caller's.
//
// Shared memory (16-byte units), conflict-free for the lanes' 16-byte reads: a weight row's chunk
// is 4 units (int4) or 8 (fp8, padded to 9); a token's chunk is 16 units padded to 17, unit u
// stored at u ^ (2 (u >> 3 & 1)) so that lanes t = 0..3 reading units 4 t + i hit 4 different
// bank groups and the next token's 4 others (tools/emulate/quant_gemm_emulate.py checks both).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/quant_mma_decode.cuh"

namespace syv::cuda {

constexpr int kQGemmWarps = 4;                // warps per block, 16 weight rows each
constexpr int kQGemmRows = 16 * kQGemmWarps;  // weight rows per block
constexpr int kQStages = 3;                   // cp.async ring depth
constexpr int kQXUnits = kQuantChunk / 8;     // 16-byte units of a token's chunk
constexpr int kQXRowUnits = kQXUnits + 1;     // padded

template <int FMT>
constexpr int qgemm_w_units() {  // 16-byte units of a weight row's chunk
  return FMT == 0 ? 8 : 4;
}
template <int FMT>
constexpr int qgemm_w_row_units() {  // padded (fp8: lanes g and g + 1 on other bank groups)
  return FMT == 0 ? 9 : 4;
}
template <int FMT, int NT>
constexpr int qgemm_stage_units() {
  return kQGemmRows * qgemm_w_row_units<FMT>() + 8 * NT * kQXRowUnits;
}
// Dynamic shared memory of a block (64 x 8 NT tile, kQStages stages).
template <int FMT, int NT>
constexpr size_t qgemm_smem_bytes() {
  return static_cast<size_t>(qgemm_stage_units<FMT, NT>()) * kQStages * 16;
}

// Launches Kernel, a kernel of kQGemmWarps warps with kSmem bytes of dynamic shared memory
// (allowed on its first launch), with its one argument.
template <auto Kernel, size_t kSmem, typename Args>
void launch_qgemm_smem(dim3 grid, cudaStream_t s, const Args& args) {
  static const bool allowed = [] {
    SYV_CUDA_CHECK(
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)allowed;
  launch_k(Kernel, grid, kQGemmWarps * 32, kSmem, s, args);
}
// The same for a kernel of this tile (qgemm_smem_bytes<FMT, NT>()).
template <auto Kernel, int FMT, int NT, typename Args>
void launch_qgemm(dim3 grid, cudaStream_t s, const Args& args) {
  launch_qgemm_smem<Kernel, qgemm_smem_bytes<FMT, NT>()>(grid, s, args);
}
// Blocks of Kernel (kQGemmWarps warps, kSmem bytes of dynamic shared memory) an SM holds at once,
// by the CUDA runtime's occupancy (registers, shared memory); asked once per kernel.
template <auto Kernel, size_t kSmem>
int qgemm_blocks_per_sm() {
  static const int blocks = [] {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
    int b = 0;
    SYV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, kQGemmWarps * 32, kSmem));
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

// Split-K of the tile GEMMs (quant_gemm_mma.cu, fp8_gemm_mma.cu): where the grid would not give
// two blocks per SM, K is split across blocks (grid.z), each split writing fp32 partial sums
// [split][tokens][n] to a workspace that a second kernel adds in split order (deterministic, but
// the split count depends on the token count). Chunks of K each split takes: two blocks per SM
// at least where the K range allows, each split kQMinChunksPerSplit chunks or more (the ring's
// warm-up), the splits' sums within the workspace; equal ranges, so the last split is not left
// with a sliver. All of K (one split) where the grid fills the GPU.
constexpr int kQMinChunksPerSplit = 4;
// slots > 0 (the blocks the GPU holds at once: SMs x the kernel's blocks per SM): the split count
// instead minimizes the waves times each block's chunks (plus the ring's kQStages - 1 chunks of
// fill), over 1 .. chunks / kQMinChunksPerSplit splits within the workspace, the fewest splits on
// ties. The default rule ignores the last wave: 384 blocks of the 8B's int4 gate_up at 64 tokens
// on 132 SMs holding 2 blocks each (176 registers a thread) take two waves, the second 45% full
// (arithmetic, 2026-12-05); two splits would make it 3 waves of half the chunks. An A/B not yet
// run on a GPU (SYV_QUANT_GEMM_WAVES=1, quant_gemm_mma.cu).
inline int64_t qgemm_chunks_per_split(int64_t n, int64_t k, int64_t tokens, int64_t tile_tokens,
                                      int sm_count, size_t workspace_bytes, int64_t slots = 0) {
  const int64_t blocks = int64_t{ceil_div(n, kQGemmRows)} * ceil_div(tokens, tile_tokens);
  const int64_t chunks = k / kQuantChunk;
  auto fits = [&](int64_t splits) {
    return splits == 1 || static_cast<size_t>(splits * tokens * n * 4) <= workspace_bytes;
  };
  if (slots > 0) {
    int64_t best_per = chunks, best_cost = -1;
    for (int64_t splits = 1; splits <= std::max<int64_t>(1, chunks / kQMinChunksPerSplit);
         ++splits) {
      const int64_t per = ceil_div(chunks, splits), used = ceil_div(chunks, per);
      if (!fits(used)) break;
      const int64_t cost = ceil_div(blocks * used, slots) * (per + kQStages - 1);
      if (best_cost < 0 || cost < best_cost) best_cost = cost, best_per = per;
    }
    return best_per;
  }
  int64_t splits = std::max<int64_t>(1, ceil_div(2 * static_cast<int64_t>(sm_count), blocks));
  splits = std::min(splits, std::max<int64_t>(1, chunks / kQMinChunksPerSplit));
  while (!fits(splits)) --splits;
  return ceil_div(chunks, splits);
}

// The grid of a tile GEMM of n rows, k columns and `tokens` tokens in tiles of 8 nt: 64-row
// blocks (x), token tiles (y), K splits (z) of chunks_per_split chunks each.
struct QGemmGrid {
  dim3 grid;
  int64_t splits = 1;
  int chunks_per_split = 0;
};
inline QGemmGrid qgemm_grid(int64_t n, int64_t k, int64_t tokens, int nt, int sm_count,
                            size_t workspace_bytes, int64_t slots = 0) {
  QGemmGrid g;
  const int64_t per_split =
      qgemm_chunks_per_split(n, k, tokens, int64_t{8} * nt, sm_count, workspace_bytes, slots);
  g.splits = ceil_div(k / kQuantChunk, per_split);
  g.chunks_per_split = static_cast<int>(per_split);
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

// The ring's step after chunk j has landed for this thread (cp_wait): everyone's copies of it
// visible and stage (j - 1) % kQStages free, then chunk j + kQStages - 1's copies issued into it
// (load(chunk, stage)) and committed (a possibly empty group keeps the count uniform).
template <typename Load>
__device__ __forceinline__ void qgemm_ring_advance(int j, int nc, Load&& load) {
  __syncthreads();
  const int next = j + kQStages - 1;
  if (next < nc) load(next, next % kQStages);
  cp_commit();
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

__device__ __forceinline__ int qgemm_x_unit(int u) {
  return u ^ (((u >> 3) & 1) << 1);
}

// The tile's main loop over chunks [c_begin, c_begin + nc) of K (nc >= 0): acc[q] (zeroed here)
// gets (row g, tokens 8q + 2t, + 1) and (row g + 8, the same tokens) of the warp's 16 rows.
// weight_row(r): the row of w (0 <= row < w.n) that tile row r < 64 reads (rows past the real
// ones map to valid ones; their results are not stored); x_row(r): the activations (K bf16,
// 16-byte aligned) of tile token r < 8 NT, nullptr for tokens past the real ones, which are
// zero-filled without a read (mapping them all to one real token made every block read that row
// up to 32 more times, an L2 hot spot: 17 tokens took twice as long as 32 on an H100, 2026-12-05).
// Reads the weight's scales before pdl_wait() (weights never change), everything else after. All
// the block's threads must call it.
template <int FMT, int NT, typename WeightRow, typename XRow>
__device__ __forceinline__ void qgemm_tile_mainloop(const QuantWeight& w, const ChunkDiv& cdiv,
                                                    int64_t c_begin, int nc, WeightRow weight_row,
                                                    XRow x_row, uint4* smem, float (&acc)[NT][4]) {
  constexpr int WU = qgemm_w_units<FMT>(), WRU = qgemm_w_row_units<FMT>();
  constexpr int kTileTokens = 8 * NT;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row_bytes = FMT == 0 ? w.k : w.k / 2;
  const auto* wdata = static_cast<const uint8_t*>(w.data);

  // Stage s: weight rows [0, 64) x WRU units, then tokens [0, 8 NT) x kQXRowUnits units.
  auto w_stage = [&](int s) { return smem + s * qgemm_stage_units<FMT, NT>(); };
  auto x_stage = [&](int s) { return w_stage(s) + kQGemmRows * WRU; };
  // The cp.async copies of chunk c_begin + j into stage s.
  auto load = [&](int j, int s) {
    const int64_t c = c_begin + j;
    uint4* ws = w_stage(s);
    for (int i = threadIdx.x; i < kQGemmRows * WU; i += kQGemmWarps * 32) {
      const int r = i / WU, u = i % WU;
      cp_async16(ws + r * WRU + u, wdata + weight_row(r) * row_bytes + c * (WU * 16) + u * 16,
                 true);
    }
    uint4* xs = x_stage(s);
    for (int i = threadIdx.x; i < kTileTokens * kQXUnits; i += kQGemmWarps * 32) {
      const int r = i / kQXUnits, u = i % kQXUnits;
      const bf16* xr = x_row(r);
      cp_async16(xs + r * kQXRowUnits + qgemm_x_unit(u),
                 xr ? static_cast<const void*>(xr + c * kQuantChunk + u * 8) : wdata,
                 xr != nullptr);
    }
  };

  // This lane's rows (g and g + 8 of the warp's 16), for their scales and zero points.
  const float* srow[2];
  const uint8_t* zrow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = weight_row(16 * warp + g + 8 * r);
    srow[r] = w.scales + (FMT == 0 ? row / w.block_n : row) * w.scale_cols;
    zrow[r] = FMT == 1 && w.zeros ? w.zeros + row * w.scale_cols : nullptr;
  }
  // The scales (and int4 zero-point words) of chunk j + 1, loaded during chunk j.
  float sc_next[2] = {0.f, 0.f};
  uint32_t zc_next[2] = {0u, 0u};
  auto load_scales = [&](int j) {
    const uint32_t col = cdiv(static_cast<uint32_t>(c_begin + j));
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sc_next[r] = __ldg(srow[r] + col);
      if constexpr (FMT == 1) zc_next[r] = int4_zero_pair(zrow[r] ? __ldg(zrow[r] + col) : 8u);
    }
  };
  if (nc > 0) load_scales(0);

  pdl_wait();  // the activations come from the kernel before; the outputs may still be read
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < kQStages - 1; ++s) {
    if (s < nc) load(s, s);
    cp_commit();
  }

#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[q][e] = 0.f;
  for (int j = 0; j < nc; ++j) {
    const float sc[2] = {sc_next[0], sc_next[1]};
    const uint32_t zc[2] = {zc_next[0], zc_next[1]};
    if (j + 1 < nc) load_scales(j + 1);
    cp_wait<kQStages - 2>();  // chunk j has landed (this thread's copies)
    qgemm_ring_advance(j, nc, load);

    const uint4* ws = w_stage(j % kQStages);
    const uint4* xs = x_stage(j % kQStages);
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
        const uint4 xv = xs[(8 * q + g) * kQXRowUnits + qgemm_x_unit(4 * t + i)];
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
}

}  // namespace syv::cuda
