// The batch-invariant GEMM (batch-invariant mode, docs/cuda-backend.md "Batch invariance"):
// out[t, n] = sum_k x[t, k] * w[n, k], bf16 operands, fp32 accumulation on tensor cores
// (mma.sync m16n8k16), bf16 or f32 output.
//
// Why every row is bit-identical for every T: each output element is ONE fp32 accumulator that
// takes the ceil(K / 16) k16-chunks of its dot product in increasing k order, one mma per chunk
// (mma computes each element of its 16x8 tile from that element's own row and column only). There
// is no split-K and no split of K between the warps of a block. The tile configuration decides
// only which thread owns an element and which rows share a block, never the order of an element's
// sum, so the dispatch may pick any tile for any T: the bits are the same.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace syv::cuda {
namespace {

// out[i] = a and, when `second`, out[i + 1] = b; one 2-element store when `pairs` allows it (the
// caller knows that even indices are aligned for it).
template <typename TO>
__device__ __forceinline__ void store_pair(TO* out, int64_t i, float a, float b, bool second,
                                           bool pairs);
template <>
__device__ __forceinline__ void store_pair<bf16>(bf16* out, int64_t i, float a, float b,
                                                 bool second, bool pairs) {
  if (second && pairs && (i & 1) == 0) {
    *reinterpret_cast<__nv_bfloat162*>(out + i) = __floats2bfloat162_rn(a, b);
  } else {
    out[i] = __float2bfloat16_rn(a);
    if (second) out[i + 1] = __float2bfloat16_rn(b);
  }
}
template <>
__device__ __forceinline__ void store_pair<float>(float* out, int64_t i, float a, float b,
                                                  bool second, bool pairs) {
  if (second && pairs && (i & 1) == 0) {
    *reinterpret_cast<float2*>(out + i) = make_float2(a, b);
  } else {
    out[i] = a;
    if (second) out[i + 1] = b;
  }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, typename TO>
__global__ void __launch_bounds__(Tile<BM, BN, BK, WM, WN, STAGES>::kThreads)
    gemm_invariant_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                          TO* __restrict__ out, int64_t T, int64_t N, int64_t K, bool pairs) {
  using L = Tile<BM, BN, BK, WM, WN, STAGES>;
  constexpr int LD = L::LD, CPR = BK / 8, MI = L::MI, NI = L::NI;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* smem = reinterpret_cast<bf16*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp / L::kWarpsN, wn = warp % L::kWarpsN;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int k_tiles = static_cast<int>((K + BK - 1) / BK);

  auto load_rows = [&](const bf16* src, int64_t row0, int64_t rows, int rows_in_tile, int kt,
                       bf16* dst) {
    const int64_t kb = static_cast<int64_t>(kt) * BK;
    for (int idx = tid; idx < rows_in_tile * CPR; idx += L::kThreads) {
      const int r = idx / CPR, c = idx % CPR;
      const int64_t row = row0 + r, k = kb + c * 8;
      const bool valid = row < rows && k < K;
      cp_async16(dst + r * LD + c * 8, valid ? src + row * K + k : src, valid);
    }
  };
  auto x_stage = [&](int s) { return L::a_stage(smem, s); };
  auto w_stage = [&](int s) { return L::w_stage(smem, s); };

  // Weights never change during a forward: the first stages' weight tiles are requested before
  // the dependency wait (programmatic dependent launch), the activations after it.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s)
    if (s < k_tiles) load_rows(w, n0, N, BN, s, w_stage(s));
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_rows(x, t0, T, BM, s, x_stage(s));
    cp_commit();
  }

  float acc[MI][NI][4];
  tile_mainloop<L>(acc, smem, k_tiles, K, wm, wn, lane, [&](int kt, int stage) {
    load_rows(w, n0, N, BN, kt, w_stage(stage));
    load_rows(x, t0, T, BM, kt, x_stage(stage));
  });

  // acc[i][j]: rows (tokens) g and g + 8 of the i-th 16-row block, columns (weight rows) 2 tq and
  // 2 tq + 1 of the j-th 8-column block.
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int64_t n = n0 + wn * WN + j * 8 + tq * 2;
      if (n >= N) continue;
      const bool second = n + 1 < N;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t t = t0 + wm * WM + i * 16 + g + h * 8;
        if (t < T)
          store_pair<TO>(out, t * N + n, acc[i][j][2 * h], acc[i][j][2 * h + 1], second, pairs);
      }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, typename TO>
void launch_tile(const bf16* x, const bf16* w, TO* out, int64_t T, int64_t N, int64_t K,
                 cudaStream_t s) {
  using L = Tile<BM, BN, BK, WM, WN, STAGES>;
  auto kernel = gemm_invariant_kernel<BM, BN, BK, WM, WN, STAGES, TO>;
  allow_dynamic_smem(kernel, L::kSmem);
  // Pairs of adjacent outputs are stored together when every row starts 8-byte aligned.
  const bool pairs = N % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const dim3 grid(ceil_div(T, BM), ceil_div(N, BN));
  launch_k(kernel, grid, L::kThreads, L::kSmem, s, x, w, out, T, N, K, pairs);
}

// The three tile configurations (identical results, see the top of the file).
//   small:  16 tokens x 32 weight rows, 2 warps, BK 128, 6 stages: few tokens, bandwidth-bound;
//           many blocks and ~40 KB of weights in flight per block.
//   medium: 64 x 64, 4 warps (32 x 32 each), BK 64, 4 stages.
//   large:  128 x 128, 8 warps (64 x 32 each), BK 64, 3 stages: prefill-sized T.
template <typename TO>
void launch_typed(const bf16* x, const bf16* w, TO* out, int64_t T, int64_t N, int64_t K, int tile,
                  int sm_count, cudaStream_t s) {
  if (tile == kInvariantTileAuto) {
    const int64_t large_blocks = ((T + 127) / 128) * ((N + 127) / 128);
    if (T <= 64)  // weight-bandwidth-bound: many blocks; a weight tile's 4 readers share L2
      tile = kInvariantTileSmall;
    else if (large_blocks >= 2 * static_cast<int64_t>(sm_count))
      tile = kInvariantTileLarge;
    else
      tile = kInvariantTileMedium;
  }
  // The large tile's 108 KiB of shared memory exceed sm_86 / 89 / 120's 99 KiB: the medium tile
  // takes its shapes there (any tile gives the same bits, see above).
  if (tile == kInvariantTileLarge && Tile<128, 128, 64, 64, 32, 3>::kSmem > device_smem_optin()) {
    tile = kInvariantTileMedium;
  }
  switch (tile) {
    case kInvariantTileSmall:
      return launch_tile<16, 32, 128, 16, 16, 6>(x, w, out, T, N, K, s);
    case kInvariantTileMedium:
      return launch_tile<64, 64, 64, 32, 32, 4>(x, w, out, T, N, K, s);
    default:
      return launch_tile<128, 128, 64, 64, 32, 3>(x, w, out, T, N, K, s);
  }
}

}  // namespace

bool launch_gemm_invariant(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                           int64_t n, int64_t k, int tile, int sm_count, cudaStream_t s) {
  if ((k % 8) != 0 || (reinterpret_cast<uintptr_t>(x) % 16) != 0 ||
      (reinterpret_cast<uintptr_t>(w) % 16) != 0)
    return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || n == 0) return true;
  const bf16* xb = static_cast<const bf16*>(x);
  const bf16* wb = static_cast<const bf16*>(w);
  if (out_t == DType::BF16)
    launch_typed(xb, wb, static_cast<bf16*>(out), tokens, n, k, tile, sm_count, s);
  else
    launch_typed(xb, wb, static_cast<float*>(out), tokens, n, k, tile, sm_count, s);
  return true;
}

}  // namespace syv::cuda
