// Prefill attention on Hopper warpgroup MMA (wgmma, sm_90a), FlashAttention-3 style without warp
// specialisation: one block of two warpgroups per (128-row query tile of one sequence, query head);
// each warpgroup owns 64 query rows. K/V tiles of 128 keys come from the pages by tensor-map loads
// (one thread's TMA boxes; by default) or every thread's cp.async gather (a block's partial last
// tile, page sizes TMA does not take, SYV_PREFILL_WGMMA_TMA=0) into a double buffer laid out as
// wgmma wants it (128-byte swizzle, 64-column panels), so
// the tensor cores read Q, K and V straight from shared memory: S = Q Kᵀ with both operands in
// shared memory (or Q in registers), O += P V with P taken from the S accumulators as register A
// fragments and V as an MN-major (transposed) B operand. Online softmax in fp32 with exp2 and the
// scale·log2(e) folded into one FMA; the causal mask is applied only on tiles that cross a row's
// position, and warpgroups skip tiles none of their rows can see. Head_dim 256 (Qwen3.5 / Qwen3-
// Next's gated attention) takes 64-key tiles so that Q and two K/V stages fit shared memory, and O
// += P V as two m64n128 halves (set_wgmma_head_dim_256; on by default: 8K tokens of Qwen3-Next's
// heads 1.50 against mma8w's 2.16 ms a layer, H100, 2026-12-07). At head_dim 64 and 128 the
// default is attention_prefill_wgmma_overlap.cu's kernel (the softmax under P V); this one runs
// at 256 and where that is switched off.
#include <cuda_runtime.h>

#include <atomic>

#include "backend/cuda/attention_prefill_wgmma.cuh"
#include "backend/cuda/tensor_map.h"

namespace syv::cuda::prefill {
namespace {

using namespace wg;  // NOLINT: the kernel pieces of attention_prefill_wgmma.cuh

template <int D>
constexpr int wgmma_smem_bytes() {
  return kBM * D * 2 + 2 * (2 * tile_keys<D>() * D * 2) + 1024;  // Q, 2 K + V stages, slack
}

// Grid: num_tiles * hq blocks, the heads of one tile adjacent (tiles come longest first, so the
// longest work starts first; the q heads sharing a kv head run side by side and share K/V in L2).
// Each iteration: the next K/V tile's loads, S = Q Kᵀ, wait, softmax, O += P V, wait. Two K/V
// stages. (Issuing the loads behind S instead measured 5% slower on an H200.)
// TMA: the K/V tiles whose keys all exist come by tensor-map loads (tma_kv, maps mk / mv, boxes
// of tma_rows keys, page_shift = log2(page_size)), the last partial one by load_kv; else every
// tile by load_kv (the maps unused).
template <int D, bool TMA>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_kernel(AttentionArgs a, const int32_t* __restrict__ tiles,
                 const __grid_constant__ CUtensorMap mk, const __grid_constant__ CUtensorMap mv,
                 int tma_rows, int page_shift) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D == 64 || D == 128 || D == 256);
  constexpr int BN = tile_keys<D>();
  constexpr uint32_t kQBytes = kBM * D * 2, kTileBytes = BN * D * 2;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[2];  // TMA: stage s's loads landed (phase per use)
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
  auto sK = [&](int stage) { return sQ + kQBytes + stage * 2 * kTileBytes; };
  if constexpr (TMA) {
    if (threadIdx.x == 0) {
      mbar_init(smem_addr(&full[0]), 1);
      mbar_init(smem_addr(&full[1]), 1);
      mbar_init_fence();
    }
  }
  pdl_wait();
  pdl_trigger();
  const Work w = work_of<BN>(a, tiles);
  const int wg = threadIdx.x >> 7;
  const int n_keys = a.positions[w.t0 + w.rows - 1] + 1;
  // Tile j by TMA: all its keys exist.
  auto by_tma = [&](int j) { return TMA && (j + 1) * BN <= n_keys; };
  // Loads of tile j into stage j % 2 (one thread's TMA, or every thread's cp.async).
  auto load = [&](int j) {
    load_tile<D, BN>(a, w, j, by_tma(j), sK(j & 1), sK(j & 1) + kTileBytes, smem_addr(&full[j & 1]),
                     &mk, &mv, tma_rows, page_shift);
  };
  if constexpr (TMA) __syncthreads();  // the barriers' initialisation, before any thread waits
  load_q<D>(a, w, sQ);
  load(0);
  cp_commit();

  const float sl2 = a.scale * kLog2e;
  float o[D / 2], s[BN / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int it = 0; it < w.n_tiles; ++it) {
    // Tile `it` by TMA: its stage's barrier completes its (it / 2)-th phase (only the last tile
    // of a block can come by cp.async, so every earlier use of the stage was a TMA phase).
    if (by_tma(it)) mbar_wait(smem_addr(&full[it & 1]), (it >> 1) & 1);
    cp_wait<0>();         // this thread's copies of tile `it` (and Q) have landed
    fence_proxy_async();  // ... and are visible to the tensor cores
    __syncthreads();      // everyone's copies; every warpgroup is done with tile it - 1
    if (it + 1 < w.n_tiles) load(it + 1);
    cp_commit();
    if (it >= w.wg_tiles) continue;  // warpgroup-uniform: no row of ours sees this tile
    const uint32_t k0 = sK(it & 1);

    fence_regs(s);
    wgmma_fence();
    issue_s<D, BN>(s, sQ, k0, wg);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);

    float al[2];
    softmax_tile<BN>(s, it * BN, w, sl2, m, l, al);
    uint32_t pa[BN / 16][4];
    pack_p<BN>(s, pa);
    rescale<D>(o, al);

    fence_regs(o);
    wgmma_fence();
    issue_pv<D, BN>(o, pa, k0 + kTileBytes);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);
  }
  store_o<D>(a, w, o, l);
#else
  __trap();  // built without sm_90a code: launch_wgmma() only launches on compute capability 9.0
#endif
}

std::atomic<int> g_head_dim_256{-1};
std::atomic<int> g_tma{-1};
std::atomic<int> g_overlap{-1};

// SYV_PREFILL_WGMMA_TMA (default on since 2026-12-07: H100, one layer of the 8B shape at 32K
// tokens 23.9 -> 18.0 ms): the K/V tiles by tensor-map loads; =0 (with
// SYV_PREFILL_WGMMA_OVERLAP=0) every thread's cp.async gather, as before.
bool wgmma_tma() {
  return env_switch(g_tma, "SYV_PREFILL_WGMMA_TMA", true);
}
// SYV_PREFILL_WGMMA_OVERLAP (default on since 2026-12-07: the same layer 18.0 -> 17.5 ms): the
// TMA form with the softmax under P V (attention_prefill_wgmma_overlap.cu) at head_dim 64 and 128.
bool wgmma_overlap() {
  return env_switch(g_overlap, "SYV_PREFILL_WGMMA_OVERLAP", true);
}

template <int D>
void launch_t(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  constexpr int smem = wgmma_smem_bytes<D>();
  static_assert(smem <= 227 * 1024, "shared memory per block");
  constexpr int BN = tile_keys<D>();
  const dim3 grid(static_cast<unsigned>(num_tiles) * a.hq);
  // TMA boxes: a whole page (BN keys of a larger one): page sizes that are powers of two from 8
  // keys (the 128-byte swizzle's 8-row atoms) and a known cache extent.
  const int ps = a.page_size;
  const bool pow2 = ps >= 8 && (ps & (ps - 1)) == 0;
  const bool overlap = D != 256 && wgmma_overlap();
  if ((wgmma_tma() || overlap) && pow2 && a.cache_pages > 0) {
    const int rows = ps < BN ? ps : BN;
    const int64_t cache_rows = a.cache_pages * ps;
    const CUtensorMap mk = tensor_map_heads(a.k_cache, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                            cache_rows, a.hk, D, rows, 64, "K cache");
    const CUtensorMap mv = tensor_map_heads(a.v_cache, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                            cache_rows, a.hk, D, rows, 64, "V cache");
    if constexpr (D != 256) {
      if (overlap) {
        launch_overlap<D>(a, tiles, num_tiles, mk, mv, rows,
                          __builtin_ctz(static_cast<unsigned>(ps)), s);
        note_form(PrefillForm::kWgmmaOverlap);
        return;
      }
    }
    allow_dynamic_smem(wgmma_kernel<D, true>, smem);
    launch_k(wgmma_kernel<D, true>, grid, kThreads, static_cast<size_t>(smem), s, a, tiles, mk, mv,
             rows, __builtin_ctz(static_cast<unsigned>(ps)));
    note_form(PrefillForm::kWgmmaTma);
    return;
  }
  allow_dynamic_smem(wgmma_kernel<D, false>, smem);
  launch_k(wgmma_kernel<D, false>, grid, kThreads, static_cast<size_t>(smem), s, a, tiles,
           CUtensorMap{}, CUtensorMap{}, 0, 0);
  note_form(PrefillForm::kWgmma);
}

// SYV_PREFILL_WGMMA_256 (default on): head_dim 256 on this kernel (64-key tiles), else mma8w's.
bool wgmma_head_dim_256() {
  return env_switch(g_head_dim_256, "SYV_PREFILL_WGMMA_256", true);
}

}  // namespace

void set_wgmma_head_dim_256(bool on) {
  g_head_dim_256.store(on ? 1 : 0, std::memory_order_relaxed);
}
void set_wgmma_tma(bool on) {
  g_tma.store(on ? 1 : 0, std::memory_order_relaxed);
}
void set_wgmma_overlap(bool on) {
  g_overlap.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool wgmma_available() {
  static const bool hopper = [] {  // the sm_90a code runs on compute capability 9.0 only
    int dev = 0, major = 0, minor = 0;
    SYV_CUDA_CHECK(cudaGetDevice(&dev));
    SYV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    SYV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0;
  }();
  return hopper;
}

bool launch_wgmma(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  if (!wgmma_available()) return false;
  switch (a.head_dim) {
    case 64:
      launch_t<64>(a, tiles, num_tiles, s);
      return true;
    case 128:
      launch_t<128>(a, tiles, num_tiles, s);
      return true;
    case 256:
      if (!wgmma_head_dim_256()) return false;
      launch_t<256>(a, tiles, num_tiles, s);
      return true;
    default:
      return false;
  }
}

}  // namespace syv::cuda::prefill
