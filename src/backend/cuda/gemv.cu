// Bandwidth-bound small-batch linear: every weight byte is read once per call with 16-byte loads,
// several in flight per thread; the few activation rows come through L1 (or shared memory when the
// residual add + RMSNorm that produces them is fused in front). Optionally SiLU·mul is fused
// behind it (gate_up projections).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_norm.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// Everything a GEMV launch needs; the kNorm / kSilu fields are only read by those variants.
struct GemvParams {
  const bf16* x;   // [NT, k] (ignored with kNorm: the input is the normalised residual)
  const bf16* w;   // [n_rows, k]; [2 n_rows, k] with kSilu (gate rows, then up rows)
  void* out;       // [NT, out_stride]
  int64_t n_rows;  // outputs per token
  int64_t k;
  int64_t out_stride;
  // kNorm: input = rmsnorm(res_in + add) * norm_w, computed by every block into shared memory;
  // block 0 also writes res_out and normed (both [NT, k]).
  const bf16* res_in;
  const bf16* add;
  bf16* res_out;
  bf16* normed;
  const void* norm_w;
  DType norm_t;
  float eps;
  bool one_plus;
  // kSilu: gate_up [NT, 2 n_rows] receives the bf16 gate and up dot products.
  bf16* gate_up;
  // kNorm, gated form (gate_z != nullptr): input = gated_rmsnorm(res_in, gate_z) instead, each
  // run of `group` elements of res_in normalised alone, times norm_w [group] and silu(gate_z)
  // (the GDN output norm, as launch_gated_rmsnorm computes it); add, res_out, normed unused.
  const bf16* gate_z;
  int64_t group;
};

// The norm weights (1 + w for one_plus) into shared memory: weights, so read before the dependency
// wait, while the previous kernel still runs.
__device__ __forceinline__ void norm_weights(const GemvParams& p, float* gs) {
  const int64_t n = p.gate_z != nullptr ? p.group : p.k;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float g = load_any(p.norm_w, p.norm_t, i);
    if (p.one_plus) g += 1.f;
    gs[i] = g;
  }
}

// The gated form of the prologue: one warp per run of `group` elements, by gated_rmsnorm_row()
// as gated_rmsnorm_kernel (hybrid_elementwise.cu), so the input rows equal its output bit for bit.
template <int NT>
__device__ __forceinline__ void gated_prologue(const GemvParams& p, bf16* xs, const float* gs) {
  const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t D = p.group, runs = NT * (p.k / D);
  // gs was written by the threads below `group` (norm_weights()) and every warp reads all of it:
  // without this barrier a warp could read a weight before its store (a race the PDL wait hid,
  // the wait returning long after the stores; exposed wherever launches are serialized: without
  // PDL, as off Hopper by default, or under ncu).
  __syncthreads();
  for (int64_t r = warp; r < runs; r += warps)
    gated_rmsnorm_row(
        p.res_in + r * D, p.gate_z + r * D, [&](int64_t d) { return gs[d]; }, p.eps, D, xs + r * D);
  __syncthreads();
}

// The fused residual add + RMSNorm in front of the GEMV, as launch_rmsnorm computes it: the sum is
// rounded to bf16, the norm is of the rounded sum, the output rounded to bf16. Every block computes
// the same values in the same order (so all blocks agree bit for bit). gs: norm_weights().
template <int NT>
__device__ __forceinline__ void norm_prologue(const GemvParams& p, bf16* xs, const float* gs) {
  if (p.gate_z != nullptr) return gated_prologue<NT>(p, xs, gs);
  const int64_t k = p.k, kv = k / 8;
  const bool writer = blockIdx.x == 0;
  float ss[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    ss[t] = 0.f;
    const uint4* r = reinterpret_cast<const uint4*>(p.res_in + t * k);
    const uint4* a = reinterpret_cast<const uint4*>(p.add + t * k);
    uint4* xo = reinterpret_cast<uint4*>(xs + t * k);
    for (int64_t i = threadIdx.x; i < kv; i += blockDim.x) {
      float rf[8], af[8];
      unpack8(__ldg(r + i), rf);
      unpack8(__ldg(a + i), af);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        rf[j] = __bfloat162float(__float2bfloat16_rn(rf[j] + af[j]));
        ss[t] += rf[j] * rf[j];
      }
      const uint4 packed = pack8(rf);  // exact: the values are bf16 already
      xo[i] = packed;
      if (writer) reinterpret_cast<uint4*>(p.res_out + t * k)[i] = packed;
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    // block_sum()'s leading barrier also orders norm_weights()' stores of gs (other threads')
    // before the reads below: keep it first.
    const float rstd = rsqrtf(block_sum(ss[t]) / static_cast<float>(k) + p.eps);
    uint4* xo = reinterpret_cast<uint4*>(xs + t * k);
    for (int64_t i = threadIdx.x; i < kv; i += blockDim.x) {
      float v[8];
      unpack8(xo[i], v);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] * rstd * gs[i * 8 + j];
      const uint4 packed = pack8(v);
      xo[i] = packed;
      if (writer) reinterpret_cast<uint4*>(p.normed + t * k)[i] = packed;
    }
  }
  __syncthreads();
}

// The GEMV epilogue: warp sums, then lane 0 stores (kSilu: gate_up and silu(gate) * up, as
// linear() then silu_mul(): gate and up rounded to bf16, the activation rounded to bf16 before
// the product). n0: the warp's first output.
template <int NT, int ROWS, bool kSilu, typename TO>
__device__ __forceinline__ void store_outputs(const GemvParams& p, TO* out,
                                              const float (&acc)[ROWS][NT], int64_t n0, int lane) {
  const int64_t n_rows = p.n_rows;
  if constexpr (kSilu) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float g = warp_sum(acc[0][t]), u = warp_sum(acc[1][t]);
      if (lane == 0 && n0 < n_rows) {
        const bf16 gb = __float2bfloat16_rn(g), ub = __float2bfloat16_rn(u);
        p.gate_up[t * 2 * n_rows + n0] = gb;
        p.gate_up[t * 2 * n_rows + n_rows + n0] = ub;
        const float gf = __bfloat162float(gb);
        const float act = __bfloat162float(__float2bfloat16_rn(gf / (1.f + __expf(-gf))));
        out[t * p.out_stride + n0] = from_f32<TO>(act * __bfloat162float(ub));
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0 && n0 + r < n_rows) out[t * p.out_stride + n0 + r] = from_f32<TO>(v);
      }
  }
}

// Split-K across the warps of a block (KS > 1): KS consecutive warps share ROWS rows, each summing
// a contiguous K / KS slice. The partial sums meet in shared memory and the first warp of each
// group adds them in part order (deterministic); afterwards its lane 0 holds the total and its
// other lanes 0, so store_outputs()'s warp sum returns the total exactly. Every thread of the
// block must call it (two barriers).
template <int WARPS, int ROWS, int NT, int KS>
__device__ __forceinline__ void reduce_parts(float (&acc)[ROWS][NT], int warp, int lane) {
  __shared__ float red[WARPS][ROWS][NT];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = v;
    }
  __syncthreads();
  if (warp % KS == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float sum = 0.f;
#pragma unroll
        for (int q = 0; q < KS; ++q) sum += red[warp + q][r][t];
        acc[r][t] = lane == 0 ? sum : 0.f;
      }
  }
  __syncthreads();  // red may be written again (persistent kernel: the next tile)
}

// out[t, n] = dot(x[t, :], w[n, :]) for t < NT; each warp owns ROWS consecutive rows, WARPS warps
// per block. K % 8 == 0. Software-pipelined: the next kUnroll weight vectors of every row are in
// flight while the current ones are used. The first batch is loaded before pdl_wait(): weights
// never change during a forward, so with programmatic dependent launch these loads overlap the
// previous kernel's tail (and, with kNorm, this kernel's own prologue).
// kSilu (ROWS == 2): warp i owns output i and reads gate row i and up row n_rows + i.
// KS > 1: KS warps per unit, each over a K / KS slice (reduce_parts(); k / 8 % KS == 0).
// The kernel's body, as block `block` of the grid (gemv_pair_kernel runs two GEMVs in one grid).
template <int NT, typename TO, int WARPS, int ROWS, bool kNorm, bool kSilu, int KS = 1>
__device__ __forceinline__ void gemv_body(const GemvParams& p, int64_t block) {
  static_assert(!kSilu || ROWS == 2, "SiLU fusion pairs a gate row with an up row");
  static_assert(WARPS % KS == 0, "a block holds whole units");
  extern __shared__ uint4 smem_x[];  // kNorm: the normalised input rows [NT, k]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = p.k, n_rows = p.n_rows;
  const int64_t unit = block * (WARPS / KS) + warp / KS;
  const int64_t n0 = kSilu ? unit : unit * ROWS;
  const bool active = n0 < n_rows;
  const int64_t kvp = k / 8 / KS;          // 16-byte vectors per row slice
  const int64_t koff = (warp % KS) * kvp;  // this warp's slice, in vectors
  const uint4* wr[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    int64_t row = 0;
    if (active) row = kSilu ? n0 + r * n_rows : min(n0 + r, n_rows - 1);  // clamped: not stored
    wr[r] = reinterpret_cast<const uint4*>(p.w + row * k) + koff;
  }
  const int64_t kv = active ? kvp : 0;
  constexpr int64_t kStep = 32 * kUnroll;
  uint4 wv[ROWS][kUnroll];
  int64_t i = lane;
  if (i + kStep - 32 < kv) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + i + 32 * u);  // read once
  }
  if constexpr (kNorm) norm_weights(p, reinterpret_cast<float*>(smem_x + NT * k / 8));
  pdl_wait();
  pdl_trigger();
  const bf16* x = p.x;
  if constexpr (kNorm) {
    bf16* xs = reinterpret_cast<bf16*>(smem_x);
    norm_prologue<NT>(p, xs, reinterpret_cast<const float*>(smem_x + NT * k / 8));
    x = xs;
  }
  if (KS == 1 && !active) return;  // KS > 1: every warp reaches reduce_parts()'s barriers
  float acc[ROWS][NT];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  auto fma_step = [&](const uint4(&wcur)[ROWS], int64_t at) {
    float xf[NT][8];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4* xp = reinterpret_cast<const uint4*>(x + t * k) + koff + at;
      if constexpr (kNorm) {
        unpack8(*xp, xf[t]);  // shared memory
      } else {
        unpack8(__ldg(xp), xf[t]);
      }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float wf[8];
      unpack8(wcur[r], wf);
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[j], xf[t][j], acc[r][t]);
    }
  };
  for (; i + kStep - 32 < kv; i += kStep) {
    uint4 cur[kUnroll][ROWS];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) cur[u][r] = wv[r][u];
    if (i + kStep + kStep - 32 < kv) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + i + kStep + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_step(cur[u], i + 32 * u);
  }
  for (; i < kv; i += 32) {
    uint4 one[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) one[r] = __ldcs(wr[r] + i);
    fma_step(one, i);
  }
  if constexpr (KS > 1) {
    reduce_parts<WARPS, ROWS, NT, KS>(acc, warp, lane);
    if (warp % KS != 0 || !active) return;
  }
  store_outputs<NT, ROWS, kSilu>(p, static_cast<TO*>(p.out), acc, n0, lane);
}

template <int NT, typename TO, int WARPS, int ROWS, bool kNorm, bool kSilu, int KS = 1>
__global__ void __launch_bounds__(WARPS * 32) gemv_bf16_kernel(const GemvParams p) {
  gemv_body<NT, TO, WARPS, ROWS, kNorm, kSilu, KS>(p, blockIdx.x);
}

// Two GEMVs of one input in one grid: blocks [0, small_blocks) compute `small` (TS out), the rest
// `big` (TB out). For a projection of a few rows beside a large one (the GDN layers' b|a beside
// z): alone, the few rows' launch costs more than reading them (~5 us for 0.5 MB); here their
// blocks are scheduled first and run beside the large GEMV's.
template <int NT, typename TB, typename TS, int WARPS, int ROWS, int KS>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_pair_kernel(const GemvParams big, const GemvParams small, unsigned small_blocks) {
  if (blockIdx.x < small_blocks) {
    gemv_body<NT, TS, WARPS, ROWS, false, false, KS>(small, blockIdx.x);
  } else {
    gemv_body<NT, TB, WARPS, ROWS, false, false, KS>(big, blockIdx.x - small_blocks);
  }
}

// The kNorm GEMV as a persistent grid (at most one wave of blocks): each block computes the
// normalised input once, then walks tiles blockIdx.x, + gridDim.x, ... (each warp ROWS rows of a
// tile; kSilu: one output, its gate and up rows), with the weight loads pipelined across tile
// boundaries. Amortises the prologue over all of a block's rows. Needs
// persistent_k(k, KS) (below). KS > 1: KS warps per unit, as in gemv_bf16_kernel.
template <int NT, int WARPS, int ROWS, bool kSilu, int KS = 1>
__global__ void __launch_bounds__(WARPS * 32) gemv_norm_persistent_kernel(const GemvParams p) {
  static_assert(!kSilu || ROWS == 2, "SiLU fusion pairs a gate row with an up row");
  static_assert(WARPS % KS == 0, "a block holds whole units");
  extern __shared__ uint4 smem_x[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = p.k, n_rows = p.n_rows, kv = k / 8 / KS;  // vectors per row slice
  const int64_t koff = (warp % KS) * kv;
  constexpr int64_t kStep = 32 * kUnroll;
  constexpr int64_t kPerTile = kSilu ? WARPS / KS : WARPS / KS * ROWS;
  const int64_t tiles = (n_rows + kPerTile - 1) / kPerTile;
  // This warp's first output of `tile` and its weight rows (clamped: rows past the end are read,
  // never stored).
  auto rows_of = [&](int64_t tile, const uint4*(&wr)[ROWS]) {
    const int64_t unit = tile * (WARPS / KS) + warp / KS;
    const int64_t n0 = kSilu ? unit : unit * ROWS;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int64_t row = kSilu ? min(n0, n_rows - 1) + r * n_rows : min(n0 + r, n_rows - 1);
      wr[r] = reinterpret_cast<const uint4*>(p.w + row * k) + koff;
    }
    return n0;
  };
  int64_t tile = blockIdx.x;  // the grid has at most `tiles` blocks
  const uint4* wr[ROWS];
  int64_t n0 = rows_of(tile, wr);
  uint4 wv[ROWS][kUnroll];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + lane + 32 * u);
  float* gs = reinterpret_cast<float*>(smem_x + NT * k / 8);
  norm_weights(p, gs);
  pdl_wait();
  pdl_trigger();
  bf16* xs = reinterpret_cast<bf16*>(smem_x);
  norm_prologue<NT>(p, xs, gs);
  bf16* out = static_cast<bf16*>(p.out);
  while (tile < tiles) {
    const uint4* cw[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) cw[r] = wr[r];
    const int64_t cn0 = n0;
    const int64_t next = tile + gridDim.x;
    float acc[ROWS][NT];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
    for (int64_t i = lane; i < kv; i += kStep) {
      uint4 cur[kUnroll][ROWS];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < ROWS; ++r) cur[u][r] = wv[r][u];
      if (i + kStep < kv) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(cw[r] + i + kStep + 32 * u);
      } else if (next < tiles) {  // the next tile's first loads go out before this tile ends
        n0 = rows_of(next, wr);
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + lane + 32 * u);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float xf[NT][8];
#pragma unroll
        for (int t = 0; t < NT; ++t)
          unpack8(reinterpret_cast<const uint4*>(xs + t * k)[koff + i + 32 * u], xf[t]);
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          float wf[8];
          unpack8(cur[u][r], wf);
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[j], xf[t][j], acc[r][t]);
        }
      }
    }
    if constexpr (KS > 1) reduce_parts<WARPS, ROWS, NT, KS>(acc, warp, lane);
    if (KS == 1 || warp % KS == 0) store_outputs<NT, ROWS, kSilu>(p, out, acc, cn0, lane);
    tile = next;
  }
}

template <typename TX, typename TW, typename TO>
__global__ void linear_generic_kernel(const TX* __restrict__ x, const TW* __restrict__ w,
                                      TO* __restrict__ out, int64_t tokens, int64_t n_rows,
                                      int64_t k) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (idx >= tokens * n_rows) return;
  const int64_t t = idx / n_rows, n = idx - t * n_rows;
  float acc = 0.f;
  for (int64_t i = lane; i < k; i += 32) acc += to_f32(x[t * k + i]) * to_f32(w[n * k + i]);
  acc = warp_sum(acc);
  if (lane == 0) out[idx] = from_f32<TO>(acc);
}

std::atomic<int> g_gemv_variant{-1};        // -1: not read from SYV_GEMV_VARIANT yet
std::atomic<int> g_gemv_fused_variant{-2};  // -2: not read from SYV_GEMV_FUSED_VARIANT yet

// The launch shape of the fused GEMVs (norm prologue or SiLU epilogue); -1: as the plain GEMV.
int gemv_fused_variant_now() {
  int v = g_gemv_fused_variant.load(std::memory_order_relaxed);
  if (v == -2) {
    const char* e = std::getenv("SYV_GEMV_FUSED_VARIANT");
    v = e ? std::atoi(e) : -1;
    if (v < 0 || v > kGemvLastVariant) v = -1;
    g_gemv_fused_variant.store(v, std::memory_order_relaxed);
  }
  return v;
}

std::atomic<int> g_gemv_qkv_variant{-2};  // -2: not read from SYV_GEMV_QKV_VARIANT yet

// The launch shape of the norm-prologue GEMV without SiLU (q|k|v); -1: as the other fused GEMVs.
int gemv_qkv_variant_now() {
  int v = g_gemv_qkv_variant.load(std::memory_order_relaxed);
  if (v == -2) {
    const char* e = std::getenv("SYV_GEMV_QKV_VARIANT");
    v = e ? std::atoi(e) : -1;
    if (v < 0 || v > kGemvLastVariant) v = -1;
    g_gemv_qkv_variant.store(v, std::memory_order_relaxed);
  }
  return v;
}

int gemv_variant_now() {
  int v = g_gemv_variant.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GEMV_VARIANT");
    v = e ? std::atoi(e) : kGemvAuto;
    if (v < 0 || v > kGemvLastVariant) v = kGemvAuto;
    g_gemv_variant.store(v, std::memory_order_relaxed);
  }
  return v;
}

// The norm prologue's dynamic shared memory must fit under the 48 KiB a block gets without an
// opt-in, next to the kernels' static shared memory (block_sum's 128 bytes): with exactly 48 KiB
// of rows + weights (4 tokens of k = 4096) the launch fails ("invalid argument", H200).
constexpr size_t kMaxNormSmem = 47 * 1024;

// Shared memory of the norm prologue: the normalised rows (bf16) and the norm weights (f32).
size_t norm_smem_bytes(int64_t tokens, int64_t k) {
  return static_cast<size_t>(tokens * k) * sizeof(bf16) + static_cast<size_t>(k) * sizeof(float);
}

std::atomic<int> g_norm_persistent{-1};  // -1: not read from SYV_GEMV_NORM_PERSIST yet
std::atomic<int> g_norm_per_sm{-1};      // -1: not read from SYV_GEMV_NORM_PER_SM yet

// At most this many blocks per SM in the persistent norm grid (0: as many as fit). Read once: the
// grid size is cached per instantiation. For A/B timing.
int norm_blocks_per_sm_cap() {
  int v = g_norm_per_sm.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GEMV_NORM_PER_SM");
    v = e ? std::max(0, std::atoi(e)) : 0;
    g_norm_per_sm.store(v, std::memory_order_relaxed);
  }
  return v;
}

bool norm_persistent_now() {
  int v = g_norm_persistent.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GEMV_NORM_PERSIST");
    v = (e && e[0] == '0') ? 0 : 1;
    g_norm_persistent.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

// Whether K suits gemv_norm_persistent_kernel split over `ks` warps: each warp's slice a whole
// number of pipeline steps (8 x 32 x kUnroll elements).
constexpr bool persistent_k(int64_t k, int ks) {
  return k % (int64_t{8} * 32 * kUnroll * ks) == 0;
}

// Blocks of the persistent kernel that fit on the device at once (cached per instantiation and
// shared-memory size).
template <int NT, int WARPS, int ROWS, bool kSilu, int KS>
int64_t persistent_blocks(size_t smem) {
  static std::atomic<int64_t> cached{0};  // smem << 16 | blocks
  const int64_t c = cached.load(std::memory_order_relaxed);
  if (c != 0 && static_cast<size_t>(c >> 16) == smem) return c & 0xffff;
  int device = 0, sms = 0, per_sm = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&device));
  SYV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  SYV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, gemv_norm_persistent_kernel<NT, WARPS, ROWS, kSilu, KS>, WARPS * 32, smem));
  if (const int cap = norm_blocks_per_sm_cap(); cap > 0) per_sm = std::min(per_sm, cap);
  const int64_t blocks = std::max(1, sms * per_sm);
  cached.store(static_cast<int64_t>(smem) << 16 | blocks, std::memory_order_relaxed);
  return blocks;
}

template <int NT, typename TO, int WARPS, int ROWS, bool kNorm, bool kSilu, int KS = 1>
void launch_wr(const GemvParams& p, cudaStream_t s) {
  if constexpr (KS > 1) {  // K not split evenly: the unsplit shape
    if ((p.k / 8) % KS != 0) return launch_wr<NT, TO, WARPS, ROWS, kNorm, kSilu, 1>(p, s);
  }
  const int64_t rows_per_block = (kSilu ? WARPS : WARPS * ROWS) / KS;
  const size_t smem = kNorm ? norm_smem_bytes(NT, p.k) : 0;
  if constexpr (kNorm && std::is_same_v<TO, bf16>) {
    if (persistent_k(p.k, KS) && norm_persistent_now()) {
      const int64_t tiles = (p.n_rows + rows_per_block - 1) / rows_per_block;
      const int64_t grid = std::min(tiles, persistent_blocks<NT, WARPS, ROWS, kSilu, KS>(smem));
      launch_k(gemv_norm_persistent_kernel<NT, WARPS, ROWS, kSilu, KS>, static_cast<unsigned>(grid),
               WARPS * 32, smem, s, p);
      return;
    }
  }
  launch_k(gemv_bf16_kernel<NT, TO, WARPS, ROWS, kNorm, kSilu, KS>,
           ceil_div(p.n_rows, rows_per_block), WARPS * 32, smem, s, p);
}

// Variants (warps per block x rows per warp): 0: 8x1, 1: 4x1, 2: 8x2, 3: 4x2, 5: 16x2, and K split
// across warps (KS warps per row pair): 6: 16x2 KS 2, 7: 16x2 KS 4, 8: 8x2 KS 2; kGemvAuto
// picks by token count what measured best on an H200 (8B shapes, docs/cuda-backend-notes.md):
// 16x2 for one token (whole decode steps, run 9: 0.06 ms per step less than 8x2, which `syv bench
// kernels` preferred shape by shape in run 3), 4x2 for 2-4 tokens. The fused SiLU variant needs
// two rows per warp (variants 0 and 1 take 8x2 and 4x2).
constexpr int64_t kGemvFewRows = 1024;
template <int NT, bool kNorm, bool kSilu>
int gemv_shape(int64_t n_rows, [[maybe_unused]] int64_t k) {
  int v = gemv_variant_now();
  if (kNorm || kSilu) {
    const int fv = gemv_fused_variant_now();
    if (fv >= 0) v = fv;
  }
  if constexpr (kNorm && !kSilu) {  // the q|k|v GEMV alone
    const int qv = gemv_qkv_variant_now();
    if (qv >= 0) {
      v = qv;  // SYV_GEMV_QKV_VARIANT (A/B timing)
    } else if (NT == 1 && v == kGemvAuto) {
      // One token: K split over 4 warps fills the waves better (H200, 8B b=1 ctx 512: -0.02 ms),
      // where the split keeps the persistent grid (K % 4096 == 0, launch_wr). At K = 2048
      // (Qwen3-Next) it would not: 1,024 one-tile blocks each recomputing the norm, 28.5 us under
      // ncu; over 2 warps it stays persistent (H100, its 8-layer b = 1 step 0.909 -> 0.845 ms).
      v = !persistent_k(k, 4) && persistent_k(k, 2) ? kGemvQkvOneTokenHalfK : kGemvQkvOneToken;
    }
  }
  // Few rows (the GDN layers' b|a projection: 2 x 32 rows; MoE routers): 16x2 would put them on a
  // handful of blocks (2 for 64 rows: 2 SMs reading the whole weight); 4x1 spreads them over
  // n_rows / 4 (H200, Qwen3.5 9B-class b = 1: the b|a GEMV took ~5 us for 0.5 MB).
  if (v == kGemvAuto && !kNorm && !kSilu && n_rows <= kGemvFewRows) v = 1;
  if (v == kGemvAuto) v = NT == 1 ? kGemv16x2 : 3;
  if (kSilu && v <= 1) v += 2;
  return v;
}

// A launch shape: warps per block, rows per warp, warps splitting K.
template <int W, int R, int KS>
struct GemvShape {
  static constexpr int kWarps = W, kRows = R, kSplit = KS;
};

// Calls launch(GemvShape<WARPS, ROWS, KS>{}) for variant v.
template <bool kSilu, typename Launch>
void with_shape(int v, Launch&& launch) {
  switch (v) {
    case 1:
      if constexpr (!kSilu) return launch(GemvShape<4, 1, 1>{});
      break;
    case 2:
      return launch(GemvShape<8, 2, 1>{});
    case 3:
      return launch(GemvShape<4, 2, 1>{});
    case 5:
      return launch(GemvShape<16, 2, 1>{});
    case 6:
      return launch(GemvShape<16, 2, 2>{});
    case 7:
      return launch(GemvShape<16, 2, 4>{});
    case 8:
      return launch(GemvShape<8, 2, 2>{});
    default:
      if constexpr (!kSilu) return launch(GemvShape<8, 1, 1>{});
      break;
  }
  launch(GemvShape<8, 2, 1>{});
}

template <int NT, typename TO, bool kNorm, bool kSilu>
void launch_nt(const GemvParams& p, cudaStream_t s) {
  with_shape<kSilu>(gemv_shape<NT, kNorm, kSilu>(p.n_rows, p.k), [&](auto shape) {
    using S = decltype(shape);
    launch_wr<NT, TO, S::kWarps, S::kRows, kNorm, kSilu, S::kSplit>(p, s);
  });
}

// gemv_pair_kernel in big's shape.
template <int NT, typename TB, typename TS>
void launch_pair_nt(const GemvParams& big, const GemvParams& small, cudaStream_t s) {
  with_shape<false>(gemv_shape<NT, false, false>(big.n_rows, big.k), [&](auto shape) {
    using S = decltype(shape);
    constexpr int W = S::kWarps, R = S::kRows, kSplit = S::kSplit;
    if constexpr (kSplit > 1) {  // K not split evenly: the unsplit shape
      if ((big.k / 8) % kSplit != 0) {
        const int64_t per_block = W * R;
        const auto sb = static_cast<unsigned>(ceil_div(small.n_rows, per_block));
        launch_k(gemv_pair_kernel<NT, TB, TS, W, R, 1>, sb + ceil_div(big.n_rows, per_block),
                 W * 32, 0, s, big, small, sb);
        return;
      }
    }
    const int64_t per_block = W * R / kSplit;
    const auto sb = static_cast<unsigned>(ceil_div(small.n_rows, per_block));
    launch_k(gemv_pair_kernel<NT, TB, TS, W, R, kSplit>, sb + ceil_div(big.n_rows, per_block),
             W * 32, 0, s, big, small, sb);
  });
}

template <typename TO, bool kNorm, bool kSilu>
void launch_tokens(GemvParams p, int64_t tokens, cudaStream_t s) {
  // Chunks of up to 4 tokens; each chunk re-reads the weights (callers keep tokens small).
  const int64_t k = p.k;
  for (int64_t t0 = 0; t0 < tokens;) {
    const int64_t nt = tokens - t0 >= 4 ? 4 : tokens - t0;
    GemvParams c = p;
    c.x = p.x ? p.x + t0 * k : nullptr;
    c.out = static_cast<TO*>(p.out) + t0 * p.out_stride;
    if (kNorm) {
      c.res_in += t0 * k;
      if (c.gate_z != nullptr) {
        c.gate_z += t0 * k;
      } else {
        c.add += t0 * k;
        c.res_out += t0 * k;
        c.normed += t0 * k;
      }
    }
    if (kSilu) c.gate_up += t0 * 2 * p.n_rows;
    switch (nt) {
      case 4:
        launch_nt<4, TO, kNorm, kSilu>(c, s);
        break;
      case 3:
        launch_nt<3, TO, kNorm, kSilu>(c, s);
        break;
      case 2:
        launch_nt<2, TO, kNorm, kSilu>(c, s);
        break;
      default:
        launch_nt<1, TO, kNorm, kSilu>(c, s);
        break;
    }
    t0 += nt;
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

void set_gemv_norm_persistent(bool on) {
  g_norm_persistent.store(on ? 1 : 0, std::memory_order_relaxed);
}

void set_gemv_fused_variant(int v) {
  g_gemv_fused_variant.store(v >= 0 && v <= kGemvLastVariant ? v : -1, std::memory_order_relaxed);
}

void set_gemv_variant(int v) {
  g_gemv_variant.store(v >= 0 && v <= kGemvLastVariant ? v : kGemvAuto, std::memory_order_relaxed);
}
int gemv_variant() {
  return gemv_variant_now();
}

bool launch_gemv_bf16(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                      int64_t n, int64_t k, cudaStream_t s) {
  if ((k % 8) != 0 || !aligned16(x) || !aligned16(w)) return false;
  if (tokens == 0 || n == 0) return true;
  GemvParams p{};
  p.x = static_cast<const bf16*>(x);
  p.w = static_cast<const bf16*>(w);
  p.out = out;
  p.n_rows = n;
  p.k = k;
  p.out_stride = n;
  if (out_t == DType::BF16) {
    launch_tokens<bf16, false, false>(p, tokens, s);
  } else if (out_t == DType::F32) {
    launch_tokens<float, false, false>(p, tokens, s);
  } else {
    return false;
  }
  return true;
}

bool launch_gemv_bf16_pair(const void* x, int64_t tokens, int64_t k, const void* w_big,
                           void* out_big, DType big_t, int64_t n_big, const void* w_small,
                           void* out_small, DType small_t, int64_t n_small, cudaStream_t s) {
  if ((k % 8) != 0 || !aligned16(x) || !aligned16(w_big) || !aligned16(w_small)) return false;
  if (big_t != DType::BF16 || (small_t != DType::F32 && small_t != DType::BF16)) return false;
  if (tokens == 0 || (n_big == 0 && n_small == 0)) return true;
  const size_t small_size = small_t == DType::F32 ? 4 : 2;
  for (int64_t t0 = 0; t0 < tokens;) {  // chunks of up to 4 tokens, as launch_tokens
    const int64_t nt = std::min<int64_t>(4, tokens - t0);
    GemvParams big{}, small{};
    big.x = small.x = static_cast<const bf16*>(x) + t0 * k;
    big.k = small.k = k;
    big.w = static_cast<const bf16*>(w_big);
    big.out = static_cast<bf16*>(out_big) + t0 * n_big;
    big.n_rows = big.out_stride = n_big;
    small.w = static_cast<const bf16*>(w_small);
    small.out = static_cast<char*>(out_small) + t0 * n_small * small_size;
    small.n_rows = small.out_stride = n_small;
    auto launch = [&](auto* small_type) {  // a null TS*: the small output's type
      using TS = std::remove_pointer_t<decltype(small_type)>;
      switch (nt) {
        case 4:
          return launch_pair_nt<4, bf16, TS>(big, small, s);
        case 3:
          return launch_pair_nt<3, bf16, TS>(big, small, s);
        case 2:
          return launch_pair_nt<2, bf16, TS>(big, small, s);
        default:
          return launch_pair_nt<1, bf16, TS>(big, small, s);
      }
    };
    if (small_t == DType::F32) {
      launch(static_cast<float*>(nullptr));
    } else {
      launch(static_cast<bf16*>(nullptr));
    }
    t0 += nt;
  }
  return true;
}

bool launch_gemv_fused(const GemvFused& a, cudaStream_t s) {
  const bool norm = a.res_in != nullptr, silu = a.gate_up != nullptr, gated = a.gate_z != nullptr;
  if ((a.k % 8) != 0 || !aligned16(a.w) || !aligned16(a.out)) return false;
  if (!norm && (a.x == nullptr || !aligned16(a.x))) return false;
  if (gated) {
    if (!norm || silu || a.group <= 0 || a.k % a.group != 0 || a.norm_w == nullptr ||
        norm_smem_bytes(std::min<int64_t>(a.tokens, 4), a.k) > kMaxNormSmem)
      return false;
  } else if (norm) {
    if (!aligned16(a.res_in) || !aligned16(a.add) || !aligned16(a.res_out) ||
        !aligned16(a.normed) || a.res_out == a.res_in || a.norm_w == nullptr)
      return false;
    if (norm_smem_bytes(std::min<int64_t>(a.tokens, 4), a.k) > kMaxNormSmem) return false;
  }
  if (a.tokens == 0 || a.n == 0) return true;
  GemvParams p{};
  p.x = static_cast<const bf16*>(a.x);
  p.w = static_cast<const bf16*>(a.w);
  p.out = a.out;
  p.n_rows = a.n;
  p.k = a.k;
  p.out_stride = a.n;
  p.res_in = static_cast<const bf16*>(a.res_in);
  p.add = static_cast<const bf16*>(a.add);
  p.res_out = static_cast<bf16*>(a.res_out);
  p.normed = static_cast<bf16*>(a.normed);
  p.norm_w = a.norm_w;
  p.norm_t = a.norm_t;
  p.eps = a.eps;
  p.one_plus = a.one_plus;
  p.gate_up = static_cast<bf16*>(a.gate_up);
  p.gate_z = static_cast<const bf16*>(a.gate_z);
  p.group = a.group;
  if (norm && silu) {
    launch_tokens<bf16, true, true>(p, a.tokens, s);
  } else if (norm) {
    launch_tokens<bf16, true, false>(p, a.tokens, s);
  } else if (silu) {
    launch_tokens<bf16, false, true>(p, a.tokens, s);
  } else {
    launch_tokens<bf16, false, false>(p, a.tokens, s);
  }
  return true;
}

void launch_linear_generic(const void* x, DType x_t, const void* w, DType w_t, void* out,
                           DType out_t, int64_t tokens, int64_t n, int64_t k, cudaStream_t s) {
  if (tokens == 0 || n == 0) return;
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    SYV_DISPATCH_FLOAT(w_t, TW, [&] {
      SYV_DISPATCH_FLOAT(out_t, TO, [&] {
        launch_k(linear_generic_kernel<TX, TW, TO>, ceil_div(tokens * n, 8), 256, 0, s,
                 static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<TO*>(out),
                 tokens, n, k);
      });
    });
  });
}

}  // namespace syv::cuda
