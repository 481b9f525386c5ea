// The routed experts' grouped GEMMs at prefill on Hopper's warpgroup MMA (sm_90a): the tiled
// path's two GEMMs (moe.cu's moe_gemm_kernel, mma.sync) for blocks of 128 weight rows x a tile of
// up to NT token rows of one expert (moe.cuh launch_moe_route's tile list, bm = NT).
//
// Swap AB: the weight rows are wgmma's M (64 a warpgroup, two warpgroups), the tile's tokens its N
// (m64nNTk16, bf16 in, f32 out), K in chunks of 64 (128 bytes: one 128-byte-swizzled panel). Each
// chunk's weight tile (two boxes of 64 rows x 64 columns) comes by one thread's tensor-map load
// completing on the stage's mbarrier; the tokens' rows (gathered: a token's x row for gate_up, the
// sorted act row for down) by every thread's cp.async, zero past the tile's rows and past K; into
// a ring of kStages shared-memory stages, kStages - 2 chunks in flight ahead of the one multiplied
// while the previous chunk's wgmmas may still run (wgmma.wait_group 1).
//   gate_up: warpgroup 0 takes gate rows [i0, i0 + 64) of the expert, warpgroup 1 the same up rows
//     (I + i0 ...); the up sums meet the gate sums through shared memory and act[row, i] =
//     bf16(SiLU(gate) * up) (moe_gemm_kernel's epilogue, the same formula), staged in shared
//     memory and stored 16 bytes at a time.
//   down: hidden rows [n0, n0 + 128); y[pair, n] = the f32 sum rounded to bf16, staged and
//     stored 8 bytes at a time (y's rows by pair, as moe_gemm_kernel).
// Each output element is one f32 accumulator over K, chunk after chunk in K order, whatever tile
// or row it lands in; the rounding within a k16 step is the tensor core's, so the sums need not be
// moe_gemm_kernel's bits (the tests compare both with the CPU; batch-invariant mode keeps
// moe_gemm_kernel).
#include <atomic>

#include <cuda.h>

#include "backend/cuda/bulk_copy_ptx.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"
#include "core/check.h"

namespace syv::cuda {
namespace {

constexpr int kThreads = 256;                    // two warpgroups
constexpr int kWgRows = 64;                      // weight rows a warpgroup (wgmma's M)
constexpr int kChunk = 64;                       // K elements a stage: 128 bytes, one panel
constexpr uint32_t kBoxBytes = kWgRows * 128;    // one tensor-map box: 64 rows x 128 bytes
constexpr uint32_t kWTileBytes = 2 * kBoxBytes;  // a stage's weight tile (both warpgroups')
constexpr int kOutPitch = 72;                    // bf16 a staged act row (64 + 8: 16-byte rows)
constexpr int kYPitch = 132;                     // floats a staged y row (128 + 4)

constexpr uint32_t stage_bytes(int nt) {
  return kWTileBytes + static_cast<uint32_t>(nt) * 128;
}
// Stages, the ring's depth: NT = 128 one block an SM (6 stages, 192 KB), NT <= 64 two (4 stages,
// 96 KB each).
constexpr int stages_of(int nt) {
  return nt >= 128 ? 6 : 4;
}
constexpr size_t smem_bytes(int nt) {
  return size_t(stages_of(nt)) * stage_bytes(nt) + 1024;  // + alignment slack for the swizzle
}
static_assert(64 * 128 * 4 + 128 * kOutPitch * 2 <= 6 * stage_bytes(128), "epilogue fits");
static_assert(128 * kYPitch * 4 <= 6 * stage_bytes(128), "epilogue fits");
static_assert(64 * kYPitch * 4 <= 4 * stage_bytes(64), "epilogue fits");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int NT>
__device__ __forceinline__ void wgmma_nt(float (&d)[NT / 2], uint64_t da, uint64_t db) {
  if constexpr (NT == 32) {
    wgmma_ss_n32(d, da, db, 1);
  } else if constexpr (NT == 64) {
    wgmma_ss_n64(d, da, db, 1);
  } else {
    static_assert(NT == 128, "token tiles of 32, 64 or 128 rows");
    wgmma_ss_n128(d, da, db, 1);
  }
}
#endif

// Grid (weight-row blocks, g.max_tiles): block (x, y) = tile y of the list (blocks past
// *num_tiles exit) x weight rows x * 64 of gate and up (gate_up) or x * 128 (down).
template <int NT, bool kGateUp>
__global__ void __launch_bounds__(kThreads, NT >= 128 ? 1 : 2)
    moe_wgmma_kernel(const __grid_constant__ CUtensorMap w_map, MoeWgmmaGemm g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kStages = stages_of(NT), kAhead = kStages - 2;
  constexpr uint32_t kStage = stage_bytes(NT);
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[kStages];
  __shared__ const bf16* a_rows[NT];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;  // stage s at base + s kStage
  uint8_t* gbase = smem_raw + (base - raw);
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int gq = lane >> 2, t4 = lane & 3;
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < kStages; ++i) mbar_init(smem_addr(&full[i]), 1);
    mbar_init_fence();
  }
  pdl_wait();  // the tile list and the rows are the previous kernels'
  pdl_trigger();
  if (static_cast<int>(blockIdx.y) >= *g.num_tiles) return;  // the whole block
  const int4 tile = g.tiles[blockIdx.y];
  const int expert = tile.x, r0 = tile.y, rows = tile.z;
  const int64_t K = g.k;
  const bf16* a = static_cast<const bf16*>(g.a);
  for (int r = tid; r < NT; r += kThreads) {
    const bf16* row = nullptr;
    if (r < rows)
      row = kGateUp ? a + static_cast<int64_t>(g.sorted[r0 + r] / g.top_k) * K
                    : a + static_cast<int64_t>(r0 + r) * K;
    a_rows[r] = row;
  }
  __syncthreads();  // a_rows; the barriers' initialization

  // The block's weight rows in the [E * N, K] map: warpgroup 0's box from row y0, warpgroup 1's
  // from y1 (rows past the expert's N belong to the next expert or past the map's end, zero there:
  // computed, never stored).
  const int64_t n_rows = kGateUp ? 2 * g.inter : g.n;
  const int64_t o0 = kGateUp ? int64_t{blockIdx.x} * kWgRows : int64_t{blockIdx.x} * 2 * kWgRows;
  const int y0 = static_cast<int>(expert * n_rows + o0);
  const int y1 = kGateUp ? static_cast<int>(y0 + g.inter) : y0 + kWgRows;
  const int nc = static_cast<int>((K + kChunk - 1) / kChunk);

  auto load_w = [&](int j) {
    if (j >= nc || tid != 0) return;
    const uint32_t dst = base + (j % kStages) * kStage, bar = smem_addr(&full[j % kStages]);
    mbar_arrive_expect_tx(bar, kWTileBytes);  // the boxes' whole bytes, zero-filled ones too
    tma_load_2d(dst, &w_map, j * kChunk, y0, bar);
    tma_load_2d(dst + kBoxBytes, &w_map, j * kChunk, y1, bar);
  };
  // Chunk j's token rows, then the commit: one group an iteration, empty or not.
  auto load_x = [&](int j) {
    if (j < nc) {
      const uint32_t dst = base + (j % kStages) * kStage + kWTileBytes;
      for (int i = tid; i < NT * 8; i += kThreads) {
        const int r = i >> 3, c = i & 7;
        const int64_t k = int64_t{j} * kChunk + c * 8;
        const bool valid = r < rows && k < K;
        cp_async16_s(dst + sw128<NT>(r, c), valid ? a_rows[r] + k : a, valid);
      }
    }
    cp_commit();
  };
#pragma unroll
  for (int j = 0; j < kAhead; ++j) {
    load_w(j);
    load_x(j);
  }
  float acc[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) acc[i] = 0.f;
  for (int j = 0; j < nc; ++j) {
    cp_wait<kAhead - 1>();  // this thread's rows of chunk j have landed
    fence_proxy_async();    // ... and are visible to the tensor cores
    __syncthreads();        // everyone's; chunk j - 2's wgmmas are done in both warpgroups
    load_w(j + kAhead);     // into chunk j - 2's stage
    load_x(j + kAhead);
    mbar_wait(smem_addr(&full[j % kStages]), (j / kStages) & 1);
    const uint32_t sw = base + (j % kStages) * kStage + wg * kBoxBytes;
    const uint32_t sx = base + (j % kStages) * kStage + kWTileBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
      wgmma_nt<NT>(acc, desc(sw + kk * 32, 16, 1024), desc(sx + kk * 32, 16, 1024));
    wgmma_commit();
    wgmma_wait<1>();  // chunk j - 1's are done: its stage is free after the next barrier
  }
  wgmma_wait<0>();
  fence_regs(acc);
  cp_wait<0>();
  __syncthreads();  // the stages are free for the epilogue's staging

  // acc[4 q + e]: weight row 16 warp + gq + 8 (e >> 1) of the warpgroup's 64, token 8 q + 2 t4 +
  // (e & 1) of the tile.
  if constexpr (kGateUp) {
    float* up_s = reinterpret_cast<float*>(gbase);  // [NT / 2][128]: warpgroup 1's sums by thread
    bf16* out_s = reinterpret_cast<bf16*>(gbase + NT * 256);  // [NT][kOutPitch]
    if (wg == 1) {
#pragma unroll
      for (int i = 0; i < NT / 2; ++i) up_s[i * 128 + (tid - 128)] = acc[i];
    }
    __syncthreads();
    if (wg == 0) {
#pragma unroll
      for (int q = 0; q < NT / 8; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float gate = acc[4 * q + e], up = up_s[(4 * q + e) * 128 + tid];
          const float silu = gate / (1.f + expf(-gate));  // as moe_gemm_kernel's epilogue
          out_s[(8 * q + 2 * t4 + (e & 1)) * kOutPitch + 16 * warp + gq + 8 * (e >> 1)] =
              __float2bfloat16_rn(silu * up);
        }
    }
    __syncthreads();
    const int64_t I = g.inter;
    for (int idx = tid; idx < NT * 8; idx += kThreads) {
      const int r = idx >> 3, c = idx & 7;
      const int64_t i = o0 + c * 8;
      if (r >= rows || i >= I) continue;
      const bf16* src = out_s + r * kOutPitch + c * 8;
      bf16* dst = static_cast<bf16*>(g.act) + static_cast<int64_t>(r0 + r) * I + i;
      if (i + 8 <= I) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        for (int e = 0; e < I - i; ++e) dst[e] = src[e];
      }
    }
  } else {
    float* y_s = reinterpret_cast<float*>(gbase);  // [NT][kYPitch]
#pragma unroll
    for (int q = 0; q < NT / 8; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        y_s[(8 * q + 2 * t4 + (e & 1)) * kYPitch + wg * kWgRows + 16 * warp + gq + 8 * (e >> 1)] =
            acc[4 * q + e];
    __syncthreads();
    const int64_t N = g.n;
    for (int idx = tid; idx < NT * 32; idx += kThreads) {
      const int r = idx >> 5, c = idx & 31;
      const int64_t n = o0 + c * 4;
      if (r >= rows || n >= N) continue;
      const float* src = y_s + r * kYPitch + c * 4;
      bf16* dst = static_cast<bf16*>(g.y) + static_cast<int64_t>(g.sorted[r0 + r]) * N + n;
      if (g.y_vec4 && n + 4 <= N) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        uint2 packed;
        *reinterpret_cast<__nv_bfloat162*>(&packed.x) = __floats2bfloat162_rn(v.x, v.y);
        *reinterpret_cast<__nv_bfloat162*>(&packed.y) = __floats2bfloat162_rn(v.z, v.w);
        *reinterpret_cast<uint2*>(dst) = packed;
      } else {
        for (int e = 0; e < 4 && n + e < N; ++e) dst[e] = __float2bfloat16_rn(src[e]);
      }
    }
  }
#else
  __trap();  // sm_90a only (moe_wgmma_supports() is false elsewhere)
#endif
}

// The experts' weights [rows = E * N, k] bf16 as the stages hold them: boxes of 64 rows x 64
// columns (128 bytes), 128-byte swizzle (wgmma's layout), reads past either end zero-filled.
CUtensorMap weight_map(const bf16* w, int64_t rows, int64_t k) {
  return tensor_map_2d(w, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, rows, k, kWgRows, kChunk,
                       "MoE expert weights");
}

template <int NT, bool kGateUp>
void launch_nt(const MoeWgmmaGemm& g, int64_t max_tiles, cudaStream_t s) {
  auto* kernel = moe_wgmma_kernel<NT, kGateUp>;
  allow_dynamic_smem(kernel, smem_bytes(NT));
  const int64_t n_rows = kGateUp ? 2 * g.inter : g.n;
  const CUtensorMap map = weight_map(static_cast<const bf16*>(g.w), g.experts * n_rows, g.k);
  const int64_t blocks_x = kGateUp ? ceil_div(g.inter, kWgRows) : ceil_div(g.n, 2 * kWgRows);
  MoeWgmmaGemm a = g;
  a.y_vec4 = !kGateUp && g.n % 4 == 0 && reinterpret_cast<uintptr_t>(g.y) % 8 == 0;
  launch_k(kernel, dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(max_tiles)),
           kThreads, smem_bytes(NT), s, map, a);
}

std::atomic<int> g_on{-1};

}  // namespace

bool moe_wgmma_enabled() {
  return env_switch(g_on, "SYV_MOE_WGMMA", true);
}
void set_moe_wgmma(bool on) {
  g_on.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool moe_wgmma_supports(const MoeShape& s) {
  return moe_wgmma_enabled() && device_cc_major() == 9 && device_smem_optin() >= smem_bytes(128) &&
         s.hidden % 8 == 0 && s.inter % 8 == 0 && s.experts * 2 * s.inter < INT32_MAX &&
         s.experts * s.hidden < INT32_MAX;
}

void launch_moe_wgmma(const MoeWgmmaGemm& g, int tile_rows, int64_t max_tiles, cudaStream_t s) {
  SYV_CHECK(reinterpret_cast<uintptr_t>(g.w) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(g.a) % 16 == 0)
      << "moe wgmma: weights and rows must be 16-byte aligned";
  if (max_tiles == 0) return;
  SYV_CHECK(max_tiles <= 65535) << "moe wgmma: " << max_tiles << " tiles (gridDim.y <= 65535)";
  auto go = [&](auto nt) {
    constexpr int kNt = decltype(nt)::value;
    if (g.gate_up) {
      launch_nt<kNt, true>(g, max_tiles, s);
    } else {
      launch_nt<kNt, false>(g, max_tiles, s);
    }
  };
  switch (tile_rows) {
    case 32:
      return go(std::integral_constant<int, 32>{});
    case 64:
      return go(std::integral_constant<int, 64>{});
    case 128:
      return go(std::integral_constant<int, 128>{});
    default:
      SYV_CHECK(false) << "moe wgmma: tiles of " << tile_rows << " rows (32, 64 or 128)";
  }
}

}  // namespace syv::cuda
