// Prefill attention on Hopper warpgroup MMA with the softmax of K/V tile j under O += P V of tile
// j - 1 (FlashAttention-3's intra-warpgroup overlap), K/V by tensor-map loads: the kernel of
// attention_prefill_wgmma.cu (one block of two warpgroups per 128-row query tile and head, 128-key
// tiles) with three K/V stages, so that while a warpgroup's P V reads tile j - 1 and its S reads
// tile j, tile j + 1 lands in the third. The default at head_dim 64 and 128 where the TMA form
// applies (SYV_PREFILL_WGMMA_OVERLAP=0 turns it off; at 256 two stages already take 193 KB). H100,
// 2026-12-07, one layer of the 8B shape: 32K tokens 17.5 ms against the TMA lockstep kernel's
// 18.0 and the cp.async one's 23.9 (docs/performance.md).
//
// A warpgroup's tiles in three kinds: the first (no P V before it), the open ones (every row of
// the warpgroup sees all 128 keys: no mask, so the softmax has no branch and may run while both
// wgmmas are in flight; ptxas serialises wgmmas around branches, info C7520) and the masked ones
// near the diagonal (P V of the tile before, then S, in turn).
#include <cuda_runtime.h>

#include "backend/cuda/attention_prefill_wgmma.cuh"

namespace syv::cuda::prefill::wg {
namespace {

constexpr int kOverlapStages = 3;

template <int D>
constexpr int overlap_smem_bytes() {
  return kBM * D * 2 + kOverlapStages * (2 * tile_keys<D>() * D * 2) + 1024;  // + alignment
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_overlap_kernel(AttentionArgs a, const int32_t* __restrict__ tiles,
                         const __grid_constant__ CUtensorMap mk,
                         const __grid_constant__ CUtensorMap mv, int tma_rows, int page_shift) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D == 64 || D == 128);
  constexpr int BN = tile_keys<D>();
  constexpr uint32_t kQBytes = kBM * D * 2, kTileBytes = BN * D * 2;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kOverlapStages];  // stage s's TMA loads landed
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
  auto sK = [&](int j) { return sQ + kQBytes + (j % kOverlapStages) * 2 * kTileBytes; };
  if (threadIdx.x == 0) {
    for (int i = 0; i < kOverlapStages; ++i) mbar_init(smem_addr(&full[i]), 1);
    mbar_init_fence();
  }
  pdl_wait();
  pdl_trigger();
  const Work w = work_of<BN>(a, tiles);
  const int wg = threadIdx.x >> 7;
  const int n_keys = a.positions[w.t0 + w.rows - 1] + 1;
  auto by_tma = [&](int j) { return (j + 1) * BN <= n_keys; };
  auto load = [&](int j) {
    load_tile<D, BN>(a, w, j, by_tma(j), sK(j), sK(j) + kTileBytes,
                     smem_addr(&full[j % kOverlapStages]), &mk, &mv, tma_rows, page_shift);
  };
  __syncthreads();  // the barriers' initialisation, before any thread waits
  load_q<D>(a, w, sQ);
  load(0);
  cp_commit();

  // Tiles [0, open) are whole for every row of this warpgroup: their last key is at most its
  // first row's position (positions ascend within a sequence).
  const int first_pos = wg * 64 < w.rows ? a.positions[w.t0 + wg * 64] : -1;
  const int open = min(w.wg_tiles, (first_pos + 1) / BN);
  const float sl2 = a.scale * kLog2e;
  float o[D / 2], s[BN / 2];
  uint32_t pa[BN / 16][4];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.f;
#pragma unroll
  for (int i = 0; i < BN / 16; ++i) pa[i][0] = pa[i][1] = pa[i][2] = pa[i][3] = 0u;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  // O += P V of tile j alone (issued and waited).
  auto pv_alone = [&](int j) {
    fence_regs(o);
    fence_regs(pa);
    wgmma_fence();
    issue_pv<D, BN>(o, pa, sK(j) + kTileBytes);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);
  };
  for (int it = 0; it < w.n_tiles; ++it) {
    // Tile `it` by TMA: its stage's barrier completes its (it / 3)-th phase (only a block's last
    // tile can come by cp.async).
    if (by_tma(it)) mbar_wait(smem_addr(&full[it % kOverlapStages]), (it / kOverlapStages) & 1);
    cp_wait<0>();         // this thread's copies of tile `it` (and Q) have landed
    fence_proxy_async();  // ... and are visible to the tensor cores
    __syncthreads();      // everyone's; every warpgroup is done with tile it - 2 (P V waited)
    if (it + 1 < w.n_tiles) load(it + 1);
    cp_commit();
    if (it > w.wg_tiles) continue;  // warpgroup-uniform: nothing of ours left
    if (it == w.wg_tiles) {         // the warpgroup's last tile's P V
      if (it > 0) pv_alone(it - 1);
      continue;
    }
    float al[2];
    if (it >= 1 && it < open) {
      // S of tile it and P V of tile it - 1 in flight together; the softmax of S under P V.
      fence_regs(s);
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
      issue_s<D, BN>(s, sQ, sK(it), wg);
      wgmma_commit();
      issue_pv<D, BN>(o, pa, sK(it - 1) + kTileBytes);
      wgmma_commit();
      wgmma_wait<1>();
      fence_regs(s);
      softmax_tile<BN, false>(s, it * BN, w, sl2, m, l, al);
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(pa);
    } else {
      if (it >= 1) pv_alone(it - 1);
      fence_regs(s);
      wgmma_fence();
      issue_s<D, BN>(s, sQ, sK(it), wg);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(s);
      softmax_tile<BN>(s, it * BN, w, sl2, m, l, al);
    }
    rescale<D>(o, al);  // P V of tile it - 1 is in O: now at tile it's maxima
    pack_p<BN>(s, pa);
  }
  if (w.wg_tiles == w.n_tiles) pv_alone(w.n_tiles - 1);
  store_o<D>(a, w, o, l);
#else
  __trap();  // built without sm_90a code: launched only on compute capability 9.0
#endif
}

}  // namespace

template <int D>
void launch_overlap(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                    const CUtensorMap& mk, const CUtensorMap& mv, int tma_rows, int page_shift,
                    cudaStream_t s) {
  constexpr int smem = overlap_smem_bytes<D>();
  static_assert(smem <= 226 * 1024, "shared memory per block, with the static barriers");
  allow_dynamic_smem(wgmma_overlap_kernel<D>, smem);
  launch_k(wgmma_overlap_kernel<D>, dim3(static_cast<unsigned>(num_tiles) * a.hq), kThreads,
           static_cast<size_t>(smem), s, a, tiles, mk, mv, tma_rows, page_shift);
}

template void launch_overlap<64>(const AttentionArgs&, const int32_t*, int32_t, const CUtensorMap&,
                                 const CUtensorMap&, int, int, cudaStream_t);
template void launch_overlap<128>(const AttentionArgs&, const int32_t*, int32_t, const CUtensorMap&,
                                  const CUtensorMap&, int, int, cudaStream_t);

}  // namespace syv::cuda::prefill::wg
