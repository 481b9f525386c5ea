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

#include <cstddef>
#include <cstdint>

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

// Kernel (a kernel of the tile: kQGemmWarps warps, qgemm_smem_bytes<FMT, NT>() of dynamic
// shared memory) allowed that much shared memory on the current device; returns the size.
template <auto Kernel, int FMT, int NT>
size_t qgemm_allow_smem() {
  constexpr size_t bytes = qgemm_smem_bytes<FMT, NT>();
  allow_dynamic_smem(Kernel, bytes);
  return bytes;
}
// Launches Kernel, a kernel of the tile, with its one argument.
template <auto Kernel, int FMT, int NT, typename Args>
void launch_qgemm(dim3 grid, cudaStream_t s, const Args& args) {
  launch_k(Kernel, grid, kQGemmWarps * 32, qgemm_allow_smem<Kernel, FMT, NT>(), s, args);
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
