// The block tile of the tensor-core GEMMs that compute each output element in one fp32
// accumulator over K in increasing order (gemm_invariant.cu, moe.cu): the shared-memory layout of
// a STAGES-deep cp.async ring and the main loop that runs a warp's mma.sync tiles over it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace syv::cuda {

// Block tile BM rows x BN weight rows, K in steps of BK through a STAGES-deep cp.async ring in
// shared memory (stage s: BM A rows, then BN weight rows, each LD bf16 wide); warps tile the block
// as (BM / WM) x (BN / WN), each owning WM x WN outputs. Needs K % 8 == 0 and 16-byte aligned
// operands (rows then start on 16-byte boundaries).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = (BM / WM) * kWarpsN * 32;
  static constexpr int LD = BK + 8;  // row stride in bf16: +16 bytes keeps ldmatrix conflict-free
  static constexpr int kStage = (BM + BN) * LD;
  static constexpr size_t kSmem = static_cast<size_t>(STAGES) * kStage * 2;
  static constexpr int MI = WM / 16, NI = WN / 8;  // a warp's 16-row x 8-column mma blocks
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "mma tile shape");

  // Stage s of the ring: its A rows, then its weight rows.
  __device__ static bf16* a_stage(bf16* smem, int s) { return smem + s * kStage; }
  __device__ static bf16* w_stage(bf16* smem, int s) { return smem + s * kStage + BM * LD; }
};

// The main loop, after the caller committed the first STAGES - 1 stages (one cp.async group each,
// possibly empty): for each k-tile kt, waits for it, requests tile kt + STAGES - 1 through
// load(tile, stage) (the cp.async copies of both operands into that ring stage), and accumulates
// warp (wm, wn)'s tile into `acc` (zeroed here). Each element takes the ceil(K / 16) k16-chunks
// of its dot product in increasing k order, one mma per chunk, whatever the tile shape.
// acc[i][j]: rows g and g + 8 (g = lane / 4) of the warp's i-th 16-row block, columns 2 (lane % 4)
// and that + 1 of its j-th 8-column block.
template <typename L, typename Load>
__device__ __forceinline__ void tile_mainloop(float (&acc)[L::MI][L::NI][4], bf16* smem,
                                              int k_tiles, int64_t K, int wm, int wn, int lane,
                                              Load load) {
  constexpr int LD = L::LD, MI = L::MI, NI = L::NI, STAGES = L::STAGES, BK = L::BK;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_wait<STAGES - 2>();  // tile kt has landed (this thread's part)
    __syncthreads();        // everyone's part; and stage (kt - 1) % STAGES is no longer read
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load(next, next % STAGES);
    cp_commit();  // possibly empty: keeps the group count uniform
    const bf16* as = L::a_stage(smem, kt % STAGES);
    const bf16* ws = L::w_stage(smem, kt % STAGES);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // Exactly ceil(K / 16) chunks per element, whatever BK is (the same in every tile).
      if (static_cast<int64_t>(kt) * BK + kk * 16 >= K) break;
      uint32_t a[MI][4], b[NI / 2][4];
#pragma unroll
      for (int i = 0; i < MI; ++i)
        ldsm_x4(a[i], as + (wm * L::WM + i * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int p = 0; p < NI / 2; ++p)
        ldsm_x4(b[p], ws + (wn * L::WN + p * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 +
                          ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int p = 0; p < NI / 2; ++p) {
          mma(acc[i][2 * p], a[i], b[p][0], b[p][1]);
          mma(acc[i][2 * p + 1], a[i], b[p][2], b[p][3]);
        }
    }
  }
}

}  // namespace syv::cuda
