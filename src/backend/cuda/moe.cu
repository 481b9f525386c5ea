// Mixture-of-experts kernels (moe.cuh). Per pass of at most moe_pass_tokens() tokens:
//   1. moe_route_kernel (one block): a counting sort of the T*k (token, slot) pairs by expert
//      (histogram, prefix sum, scatter) into `sorted` (pair ids, grouped by expert), and a list of
//      row tiles: (expert, first sorted row, rows) with at most BM rows each. It also adds the
//      number of experts the pass routes to to a running device counter (the benchmark's floor).
//   2. moe_gemm_kernel<gate_up>: for each tile and block of weight rows, the tile's token rows of
//      x times the expert's gate/up rows (interleaved, so a thread holds a gate column and its up
//      column), SiLU(gate) * up written to `act` (bf16, sorted order).
//   3. moe_gemm_kernel<down>: the tile's rows of act times the expert's down rows, each f32 sum
//      rounded to bf16 into y[pair] (pair = t * k + slot; bf16 halves the bytes the down GEMM
//      writes and the combine reads, as vLLM's fused MoE keeps them).
//   4. moe_combine_kernel: out[t] = sum over the token's slots, in ascending expert id (the order
//      of the CPU reference), of weight * y[pair], in f32.
// Only the experts some token routes to are read, each once per weight tile: at decode that is
// the weight-streaming GEMV of the routed experts (the union of the batch's experts), at prefill a
// grouped tensor-core GEMM (mma.sync m16n8k16, bf16 in, fp32 accumulation). This path is the only
// one in batch-invariant mode; otherwise up to kMoeGemvMaxTokens tokens take moe_gemv.cu's GEMVs
// (no grouping, no y, no combine launch) and the tiled path starts above that.
//
// Launch shapes depend on T alone: the tile grid is sized for the worst case,
// ceil(T*k / BM) + min(E, T*k) tiles, and blocks past the pass's tile count exit at once. The
// position of a pair within its expert's rows depends on atomics, but no value does: each output
// element of the GEMMs is one fp32 accumulator over K in a fixed order whatever row or tile it
// lands in, y is indexed by pair, and the combine sums in a fixed order, so results are run-to-run
// identical.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/moe.cuh"
#include "core/check.h"

namespace syv::cuda {
namespace {

constexpr int kTopkWarps = 4;        // tokens per router block
constexpr int kRouteThreads = 1024;  // the one block of moe_route_kernel

// ---- router -------------------------------------------------------------------------------------

// One warp per token: p = softmax(logits) in shared memory, then top_k rounds of a warp argmax
// (larger p first, lower index on ties), each taking the winner out.
__global__ void moe_topk_kernel(const float* __restrict__ logits, int64_t T, int E, int top_k,
                                bool renormalize, int32_t* __restrict__ ids,
                                float* __restrict__ weights) {
  extern __shared__ float topk_smem[];
  pdl_wait();
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kTopkWarps + warp;
  if (t >= T) return;
  float* p = topk_smem + warp * E;
  const float* l = logits + t * E;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) {
    p[e] = l[e];
    mx = fmaxf(mx, p[e]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) {
    p[e] = expf(p[e] - mx);
    sum += p[e];
  }
  sum = warp_sum(sum);
  for (int e = lane; e < E; e += 32) p[e] /= sum;
  __syncwarp();
  int32_t my_id = 0;
  float my_p = 0.f, top_sum = 0.f;
  for (int j = 0; j < top_k; ++j) {
    float bv = -1.f;
    int bi = INT_MAX;
    for (int e = lane; e < E; e += 32)
      if (p[e] > bv) bv = p[e], bi = e;  // ascending e: the lowest index among equals
    warp_argmax(bv, bi);
    if (lane == j) my_id = bi, my_p = bv;
    top_sum += bv;  // in selection order, as the CPU reference sums
    __syncwarp();
    if (bi < E && (bi & 31) == lane) p[bi] = -INFINITY;
    __syncwarp();
  }
  if (lane < top_k) {
    ids[t * top_k + lane] = my_id;
    weights[t * top_k + lane] = renormalize ? my_p / top_sum : my_p;
  }
}

// ---- grouping -----------------------------------------------------------------------------------

// Exclusive prefix sum over the block of (a, b) pairs; `total` receives the sums.
__device__ int2 block_exclusive_scan2(int2 v, int2* total) {
  __shared__ int2 warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int2 inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, inc.x, o);
    const int b = __shfl_up_sync(0xffffffffu, inc.y, o);
    if (lane >= o) inc.x += a, inc.y += b;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int2 w = lane < warps ? warp_sums[lane] : make_int2(0, 0);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int a = __shfl_up_sync(0xffffffffu, w.x, o);
      const int b = __shfl_up_sync(0xffffffffu, w.y, o);
      if (lane >= o) w.x += a, w.y += b;
    }
    if (lane < warps) warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int2 before = warp > 0 ? warp_sums[warp - 1] : make_int2(0, 0);
  *total = warp_sums[warps - 1];
  return make_int2(before.x + inc.x - v.x, before.y + inc.y - v.y);
}

// The counting sort and tile list of one pass (see the top of the file). Shared memory: 2 E ints.
__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const int32_t* __restrict__ ids, int P, int E, int bm,
                     int32_t* __restrict__ sorted, int4* __restrict__ tiles,
                     int32_t* __restrict__ num_tiles, unsigned long long* __restrict__ routed) {
  extern __shared__ int route_smem[];
  __shared__ int active;
  int* counts = route_smem;
  int* cursor = route_smem + E;
  if (threadIdx.x == 0) active = 0;
  pdl_wait();
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  // Thread i owns experts [i * per, (i + 1) * per).
  const int per = (E + blockDim.x - 1) / blockDim.x;
  const int e0 = min(E, static_cast<int>(threadIdx.x) * per), e1 = min(E, e0 + per);
  int2 mine = make_int2(0, 0);
  int used = 0;
  for (int e = e0; e < e1; ++e) {
    mine.x += counts[e], mine.y += (counts[e] + bm - 1) / bm;
    used += counts[e] > 0;
  }
  if (used > 0) atomicAdd(&active, used);
  int2 total;
  int2 off = block_exclusive_scan2(mine, &total);
  for (int e = e0; e < e1; ++e) {
    const int n = counts[e];
    cursor[e] = off.x;
    for (int r = 0; r < n; r += bm) tiles[off.y++] = make_int4(e, off.x + r, min(bm, n - r), 0);
    off.x += n;
  }
  __syncthreads();  // `active` complete
  if (threadIdx.x == 0) {
    *num_tiles = total.y;
    atomicAdd(routed, static_cast<unsigned long long>(active));
  }
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < E) sorted[atomicAdd(&cursor[e], 1)] = p;
  }
  pdl_trigger();
}

// ---- grouped GEMM -------------------------------------------------------------------------------

struct GemmArgs {
  const bf16* a;      // gate_up: x [T, H]; down: act [P, I] (sorted rows)
  const bf16* w;      // [E, N, K]
  const int4* tiles;  // (expert, first sorted row, rows)
  const int32_t* num_tiles;
  const int32_t* sorted;  // pair ids grouped by expert
  int top_k;
  // Which grid dimension walks the weight's N tiles: 1 = x (moe_grid_n_fastest(), the default),
  // 0 = y (the tiles of rows in x: SYV_MOE_GRID=m, the order before 2026-12-05).
  int n_fastest;
  // 1: down writes y's columns n, n + 1 (n even) as one 4-byte store (N even, y 4-byte aligned).
  int y_pairs;
  int64_t N, K, inter;  // N = 2I (gate_up) or H (down); K = H or I
  bf16* act;            // gate_up's output [P, I]
  bf16* y;              // down's output [T * k, H], by pair
};

// One block: tile blockIdx.x of the list (BM rows of one expert) x weight rows
// [blockIdx.y * BN, +BN) (the two swapped with g.n_fastest). gate_up: column c of the block's N
// range is gate row c / 2 for even c and up row c / 2 for odd c (of 2I interleaved columns).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool kGateUp>
__global__ void __launch_bounds__(Tile<BM, BN, BK, WM, WN, STAGES>::kThreads)
    moe_gemm_kernel(GemmArgs g) {
  using L = Tile<BM, BN, BK, WM, WN, STAGES>;
  constexpr int LD = L::LD, CPR = BK / 8, MI = L::MI, NI = L::NI;
  extern __shared__ __align__(128) unsigned char moe_smem_raw[];
  __shared__ const bf16* a_rows[BM];
  bf16* smem = reinterpret_cast<bf16*>(moe_smem_raw);
  pdl_wait();
  pdl_trigger();
  const unsigned tile_index = g.n_fastest ? blockIdx.y : blockIdx.x;
  if (static_cast<int>(tile_index) >= *g.num_tiles) return;
  const int4 tile = g.tiles[tile_index];
  const int expert = tile.x, r0 = tile.y, rows = tile.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp / L::kWarpsN, wn = warp % L::kWarpsN;
  const int64_t N = g.N, K = g.K;
  const int64_t n0 = static_cast<int64_t>(g.n_fastest ? blockIdx.x : blockIdx.y) * BN;
  const bf16* w = g.w + static_cast<int64_t>(expert) * N * K;
  for (int r = tid; r < BM; r += L::kThreads) {
    const bf16* row = nullptr;
    if (r < rows)
      row = kGateUp ? g.a + static_cast<int64_t>(g.sorted[r0 + r] / g.top_k) * K
                    : g.a + static_cast<int64_t>(r0 + r) * K;
    a_rows[r] = row;
  }
  __syncthreads();
  const int k_tiles = static_cast<int>((K + BK - 1) / BK);

  auto load_a = [&](int kt, bf16* dst) {
    const int64_t kb = static_cast<int64_t>(kt) * BK;
    for (int idx = tid; idx < BM * CPR; idx += L::kThreads) {
      const int r = idx / CPR, c = idx % CPR;
      const int64_t k = kb + c * 8;
      const bool valid = r < rows && k < K;
      cp_async16(dst + r * LD + c * 8, valid ? a_rows[r] + k : g.a, valid);
    }
  };
  auto load_w = [&](int kt, bf16* dst) {
    const int64_t kb = static_cast<int64_t>(kt) * BK;
    for (int idx = tid; idx < BN * CPR; idx += L::kThreads) {
      const int r = idx / CPR, c = idx % CPR;
      const int64_t n = n0 + r, k = kb + c * 8;
      const int64_t wrow = kGateUp ? (n & 1) * g.inter + (n >> 1) : n;
      const bool valid = n < N && k < K;
      cp_async16(dst + r * LD + c * 8, valid ? w + wrow * K + k : w, valid);
    }
  };
  auto a_stage = [&](int s) { return L::a_stage(smem, s); };
  auto w_stage = [&](int s) { return L::w_stage(smem, s); };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      load_w(s, w_stage(s));
      load_a(s, a_stage(s));
    }
    cp_commit();
  }
  float acc[MI][NI][4];
  tile_mainloop<L>(acc, smem, k_tiles, K, wm, wn, lane, [&](int kt, int stage) {
    load_w(kt, w_stage(stage));
    load_a(kt, a_stage(stage));
  });
  cp_wait<0>();

  // acc[i][j]: rows g and g + 8 of the i-th 16-row block, columns 2 tq and 2 tq + 1 of the j-th
  // 8-column block (gate_up: a gate column and its up column).
  const int gr = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int64_t n = n0 + wn * WN + j * 8 + tq * 2;
      if (n >= N) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * WM + i * 16 + gr + h * 8;
        if (r >= rows) continue;
        const float c0 = acc[i][j][2 * h], c1 = acc[i][j][2 * h + 1];
        if constexpr (kGateUp) {
          const float silu = c0 / (1.f + expf(-c0));
          g.act[static_cast<int64_t>(r0 + r) * g.inter + (n >> 1)] = __float2bfloat16_rn(silu * c1);
        } else {
          bf16* y = g.y + static_cast<int64_t>(g.sorted[r0 + r]) * N + n;
          if (g.y_pairs && n + 1 < N) {
            *reinterpret_cast<__nv_bfloat162*>(y) = __floats2bfloat162_rn(c0, c1);
          } else {
            y[0] = __float2bfloat16_rn(c0);
            if (n + 1 < N) y[1] = __float2bfloat16_rn(c1);
          }
        }
      }
    }
}

// A token's k slots in ascending expert id (a stable insertion sort: ties in slot order), the
// slots of out-of-range ids dropped; order[] ends with -1 past the valid ones. The combine's
// summation order (the CPU reference's).
__device__ __forceinline__ void sort_slots_by_expert(const int* expert, int k, int E, int* order) {
  int n = 0;
  for (int j = 0; j < k; ++j) {
    const int e = expert[j];
    if (e < 0 || e >= E) continue;
    int at = n++;
    while (at > 0 && expert[order[at - 1]] > e) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = j;
  }
  for (int j = n; j < k; ++j) order[j] = -1;
}

// out[t, h] = sum of weights[t, j] * y[t * k + j, h] over j in ascending expert id.
__global__ void moe_combine_kernel(const bf16* __restrict__ y, const int32_t* __restrict__ ids,
                                   const float* __restrict__ weights, int k, int E, int64_t H,
                                   bf16* __restrict__ out) {
  __shared__ int order[32], expert[32];
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  // The token's expert ids into shared memory first: the insertion sort below compares up to
  // k^2 / 2 of them, a chain of dependent global loads otherwise (9.6 us a launch at k = 10).
  if (threadIdx.x < k) expert[threadIdx.x] = ids[t * k + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) sort_slots_by_expert(expert, k, E, order);
  __syncthreads();
  const int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float acc = 0.f;
  for (int r = 0; r < k; ++r) {
    const int j = order[r];
    if (j < 0) break;
    acc += __bfloat162float(y[(t * k + j) * H + h]) * weights[t * k + j];
  }
  out[t * H + h] = __float2bfloat16_rn(acc);
}

// moe_combine_kernel with one block per token (the expert order sorted once, not once per block
// of 256 columns) and 8 columns a thread a step (16-byte loads of y, 16-byte stores of out): the
// same sums in the same order. Needs H % 8 == 0 (y's rows then 16-byte aligned).
__global__ void moe_combine8_kernel(const bf16* __restrict__ y, const int32_t* __restrict__ ids,
                                    const float* __restrict__ weights, int k, int E, int64_t H,
                                    bf16* __restrict__ out) {
  __shared__ int order[32], expert[32];
  __shared__ float weight[32];
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  if (threadIdx.x < k) {
    expert[threadIdx.x] = ids[t * k + threadIdx.x];
    weight[threadIdx.x] = weights[t * k + threadIdx.x];
  }
  __syncthreads();
  if (threadIdx.x == 0) sort_slots_by_expert(expert, k, E, order);
  __syncthreads();
  const int64_t H8 = H / 8;
  for (int64_t v = threadIdx.x; v < H8; v += blockDim.x) {
    float acc[8] = {};
    for (int r = 0; r < k; ++r) {
      const int j = order[r];
      if (j < 0) break;
      const float w = weight[j];
      float yv[8];
      unpack8(__ldcs(reinterpret_cast<const uint4*>(y + (t * k + j) * H) + v), yv);
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] += yv[c] * w;
    }
    uint4 o;
    __nv_bfloat162* op = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int c = 0; c < 4; ++c) op[c] = __floats2bfloat162_rn(acc[2 * c], acc[2 * c + 1]);
    reinterpret_cast<uint4*>(out + t * H)[v] = o;
  }
}

// ---- host side ----------------------------------------------------------------------------------

// The grid's x walks the weight's N tiles (the default since 2026-12-05; SYV_MOE_GRID=m goes
// back to x walking the tiles of rows), so the blocks of one tile of rows run together (its
// activation rows read once from DRAM, then from L2) and one expert's tiles of rows follow each
// other (its weights read again from L2). The other order sweeps every routed row once per N
// tile: at 8K tokens of Qwen3-Next's shape, 8 sweeps of 335 MB of gate_up's rows beside 2.1 GB of
// weights. Measured on an H100 (tools/device/moe_prefill_check.sh, 2026-12-05 17:01 UTC): the
// routed experts 1.680 -> 1.495 ms at 2K tokens, 4.110 -> 4.004 ms at 8K; an 8-layer Qwen3-Next
// prefill 24.6 -> 23.4 ms at 2K, 76.6 -> 75.2 ms at 8K. Either order computes the same values
// (each output element by one block, in K order).
bool moe_grid_n_fastest() {
  static const bool on = [] {
    const char* env = std::getenv("SYV_MOE_GRID");
    return env == nullptr || std::string(env) != "m";
  }();
  return on;
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool kGateUp>
void launch_gemm(const GemmArgs& a, int64_t tiles, cudaStream_t s) {
  using L = Tile<BM, BN, BK, WM, WN, STAGES>;
  auto kernel = moe_gemm_kernel<BM, BN, BK, WM, WN, STAGES, kGateUp>;
  allow_dynamic_smem(kernel, L::kSmem);
  const unsigned n_tiles = ceil_div(a.N, BN);
  GemmArgs g = a;
  g.n_fastest = moe_grid_n_fastest() && tiles <= 65535 ? 1 : 0;  // (gridDim.y's limit)
  g.y_pairs = a.N % 2 == 0 && reinterpret_cast<uintptr_t>(a.y) % 4 == 0 ? 1 : 0;
  const dim3 grid = g.n_fastest ? dim3(n_tiles, static_cast<unsigned>(tiles))
                                : dim3(static_cast<unsigned>(tiles), n_tiles);
  launch_k(kernel, grid, L::kThreads, L::kSmem, s, g);
}

// The tile shapes (results do not depend on the tile: gemm_tile.cuh, one accumulator per element
// in K order). Decode, the experts getting at most 16 rows each: 16 rows x 64 weight rows, K in
// steps of 64 through 4 stages (4 warps, 46 KB of shared memory: 4 blocks and 16 warps per
// multiprocessor; weight-bandwidth-bound, many blocks). It streams the routed experts at 84% of
// the device copy rate at 64 tokens of Qwen3-Next's shape (658 us for 373 experts, 2.35 GB), 64% at
// 8 and 30% at 1 (2026-12-02, H200, gpu_cuda_moe_ops_test QwenNextExpertsTiming); the 16 x 32 x
// 128 tile of 6 stages it replaced ran at 40%, 37% and 20%. Prefill: 64 x 128 of 8 warps, and
// 128 x 128 of 8 warps from kLargeTileRows rows an expert on average; where the device has less
// than their 110 KB of shared memory a block (sm_86 / 89 / 120), 64 x 64 of 4 warps. Measured
// 2026-12-05 on an H200 (QwenNextPrefillTiming, the routed experts alone, random distinct experts
// per token): 2K tokens (40 rows an expert) 64 x 64 1.940 ms, 64 x 128 of 8 warps 1.437, 128 x
// 128 1.871; 8K tokens (160 rows) 5.244, 4.334, 4.072 (a 64 x 128 tile of 4 warps: 1.590 / 4.524).
// Those two are MoeTile::kAuto's choice; moe.cuh MoeTile forces others (written 2026-12-06 after
// ncu found the 128 x 128 tile latency-bound at 25% occupancy; not yet timed on a GPU).
constexpr int64_t kLargeTileRows = 128;

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
void run_pass(const MoeShape& s, int64_t T, const bf16* x, const int32_t* ids, const float* weights,
              const bf16* gate_up, const bf16* down, bf16* out, char* scratch,
              unsigned long long* routed, cudaStream_t st) {
  const MoeRouting r = launch_moe_route(s, T, ids, BM, scratch, routed, st);
  GemmArgs a;
  a.tiles = r.tiles;
  a.num_tiles = r.num_tiles;
  a.sorted = r.sorted;
  a.top_k = static_cast<int>(s.top_k);
  a.inter = s.inter;
  a.act = static_cast<bf16*>(r.act);
  a.y = static_cast<bf16*>(r.y);
  a.a = x;
  a.w = gate_up;
  a.N = 2 * s.inter;
  a.K = s.hidden;
  launch_gemm<BM, BN, BK, WM, WN, STAGES, true>(a, r.max_tiles, st);
  a.a = a.act;
  a.w = down;
  a.N = s.hidden;
  a.K = s.inter;
  launch_gemm<BM, BN, BK, WM, WN, STAGES, false>(a, r.max_tiles, st);
  launch_moe_combine(a.y, ids, weights, s, T, out, st);
}

// run_pass on the warpgroup-MMA GEMMs (moe_wgmma.cu) with tiles of `tile_rows` token rows.
void run_pass_wgmma(int tile_rows, const MoeShape& s, int64_t T, const bf16* x, const int32_t* ids,
                    const float* weights, const bf16* gate_up, const bf16* down, bf16* out,
                    char* scratch, unsigned long long* routed, cudaStream_t st) {
  const MoeRouting r = launch_moe_route(s, T, ids, tile_rows, scratch, routed, st);
  MoeWgmmaGemm g;
  g.tiles = r.tiles;
  g.num_tiles = r.num_tiles;
  g.sorted = r.sorted;
  g.top_k = static_cast<int>(s.top_k);
  g.experts = s.experts;
  g.inter = s.inter;
  g.act = r.act;
  g.gate_up = true;
  g.a = x;
  g.w = gate_up;
  g.n = 2 * s.inter;
  g.k = s.hidden;
  launch_moe_wgmma(g, tile_rows, r.max_tiles, st);
  g.gate_up = false;
  g.a = r.act;
  g.w = down;
  g.n = s.hidden;
  g.k = s.inter;
  g.y = r.y;
  launch_moe_wgmma(g, tile_rows, r.max_tiles, st);
  launch_moe_combine(r.y, ids, weights, s, T, out, st);
}

// The warpgroup-MMA path's token rows a tile: 64 (two blocks an SM); SYV_MOE_WGMMA_ROWS=32|64|128
// or set_moe_wgmma_rows() forces one (A/B timing, tests). Measured on an H100 (2026-12-07,
// QwenNextPrefillTiming, the routed experts alone at Qwen3-Next's shape): 2K tokens (40 rows an
// expert) 1.424 / 1.265 / 1.632 ms in tiles of 32 / 64 / 128 rows, 8K (160 rows) 3.258 / 2.443 /
// 3.234 ms, against 1.403 and 3.720 ms for moe_gemm_kernel's tiles.
std::atomic<int> g_wgmma_rows{-1};

int wgmma_rows() {
  int v = g_wgmma_rows.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_MOE_WGMMA_ROWS");
    v = e == nullptr ? 0 : std::atoi(e);
    SYV_CHECK(v == 0 || v == 32 || v == 64 || v == 128)
        << "SYV_MOE_WGMMA_ROWS=" << e << ": expected 32, 64 or 128";
    g_wgmma_rows.store(v, std::memory_order_relaxed);
  }
  return v > 0 ? v : 64;
}

// -1: not read from SYV_MOE_TILE yet; else a MoeTile.
std::atomic<int> g_tile{-1};

MoeTile moe_tile() {
  int v = g_tile.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* names[std::size(kMoeTiles)];
    for (size_t i = 0; i < std::size(kMoeTiles); ++i) names[i] = moe_tile_name(kMoeTiles[i]);
    v = static_cast<int>(
        kMoeTiles[env_choice("SYV_MOE_TILE", names, static_cast<int>(std::size(kMoeTiles)))]);
    g_tile.store(v, std::memory_order_relaxed);
  }
  return static_cast<MoeTile>(v);
}

}  // namespace

const char* moe_tile_name(MoeTile t) {
  switch (t) {
    case MoeTile::kAuto:
      return "auto";
    case MoeTile::kWide:
      return "wide";
    case MoeTile::kLarge:
      return "large";
    case MoeTile::kLargeK32:
      return "large-k32";
    case MoeTile::kWarp64:
      return "warp64";
    case MoeTile::kWarp64K64:
      return "warp64-k64";
    case MoeTile::kTall:
      return "tall";
  }
  return "?";
}

void set_moe_tile(MoeTile t) {
  g_tile.store(static_cast<int>(t), std::memory_order_relaxed);
}

void set_moe_wgmma_rows(int rows) {
  SYV_CHECK(rows == 0 || rows == 32 || rows == 64 || rows == 128)
      << "moe wgmma: tiles of " << rows << " rows (0: auto, 32, 64 or 128)";
  g_wgmma_rows.store(rows, std::memory_order_relaxed);
}

MoeRouting launch_moe_route(const MoeShape& s, int64_t T, const int32_t* ids, int bm, void* scratch,
                            unsigned long long* routed, cudaStream_t st) {
  SYV_CHECK(bm >= kMoeMinTileRows) << "moe route: tiles of " << bm << " rows (at least "
                                   << kMoeMinTileRows << ": the tile list is sized for them)";
  const MoeScratchLayout l = moe_scratch_layout(s, T);
  char* sc = static_cast<char*>(scratch);
  const int64_t P = T * s.top_k, E = s.experts;
  MoeRouting r;
  r.sorted = reinterpret_cast<int32_t*>(sc + l.sorted);
  r.tiles = reinterpret_cast<int4*>(sc + l.tiles);
  r.num_tiles = reinterpret_cast<int32_t*>(sc + l.num_tiles);
  r.act = sc + l.act;
  r.y = sc + l.y;
  r.max_tiles = moe_max_tiles(P, E, bm);
  launch_k(moe_route_kernel, dim3(1), dim3(kRouteThreads), 2 * E * sizeof(int), st, ids,
           static_cast<int>(P), static_cast<int>(E), bm, r.sorted, r.tiles, r.num_tiles, routed);
  return r;
}

void launch_moe_combine(const void* y_bytes, const int32_t* ids, const float* weights,
                        const MoeShape& s, int64_t T, void* out, cudaStream_t st) {
  constexpr int kCombineThreads = 256;
  const auto* y = static_cast<const bf16*>(y_bytes);
  if (T == 0) return;
  if (s.hidden % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    launch_k(moe_combine8_kernel, dim3(static_cast<unsigned>(T)), dim3(kCombineThreads), 0, st, y,
             ids, weights, static_cast<int>(s.top_k), static_cast<int>(s.experts), s.hidden,
             static_cast<bf16*>(out));
    return;
  }
  launch_k(moe_combine_kernel, dim3(static_cast<unsigned>(T), ceil_div(s.hidden, kCombineThreads)),
           dim3(kCombineThreads), 0, st, y, ids, weights, static_cast<int>(s.top_k),
           static_cast<int>(s.experts), s.hidden, static_cast<bf16*>(out));
}

void launch_moe_topk(const float* logits, int64_t tokens, int64_t experts, int top_k,
                     bool renormalize, int32_t* ids, float* weights, cudaStream_t s) {
  if (tokens == 0) return;
  const size_t smem = kTopkWarps * static_cast<size_t>(experts) * sizeof(float);
  allow_dynamic_smem(moe_topk_kernel, kTopkWarps * kMoeMaxExperts * 4);
  launch_k(moe_topk_kernel, dim3(ceil_div(tokens, kTopkWarps)), dim3(kTopkWarps * 32), smem, s,
           logits, tokens, static_cast<int>(experts), top_k, renormalize, ids, weights);
}

void launch_moe_experts(const void* x, const int32_t* ids, const float* weights,
                        const void* gate_up, const void* down, void* out, const MoeShape& s,
                        bool batch_invariant, void* scratch, unsigned long long* routed,
                        cudaStream_t stream) {
  const int64_t pass = moe_pass_tokens(s), k = s.top_k, H = s.hidden;
  if (!batch_invariant && s.tokens <= kMoeGemvMaxTokens && s.tokens <= pass) {
    // One pass's scratch holds its act rows (bf16 [T * k, I]), where the tiled path keeps them.
    launch_moe_gemv(x, ids, weights, gate_up, down, out, s,
                    static_cast<char*>(scratch) + moe_scratch_layout(s, s.tokens).act, routed,
                    stream);
    return;
  }
  for (int64_t t0 = 0; t0 < s.tokens; t0 += pass) {
    const int64_t T = std::min(pass, s.tokens - t0);
    const bf16* xp = static_cast<const bf16*>(x) + t0 * H;
    bf16* op = static_cast<bf16*>(out) + t0 * H;
    const bf16* gu = static_cast<const bf16*>(gate_up);
    const bf16* dn = static_cast<const bf16*>(down);
    char* sc = static_cast<char*>(scratch);
    // Rows per routed expert at most T*k / min(E, T*k): few -> the decode tile.
    const int64_t P = T * k, rows_per_expert = P / std::min(s.experts, P);
    const int32_t* ip = ids + t0 * k;
    const float* wp = weights + t0 * k;
    if (rows_per_expert <= 16) {
      run_pass<16, 64, 64, 16, 16, 4>(s, T, xp, ip, wp, gu, dn, op, sc, routed, stream);
      continue;
    }
    // The pass on tile L, or false where the device's shared memory is short of it.
    auto pass_on = [&](auto tile) {
      using L = decltype(tile);
      if (L::kSmem > device_smem_optin()) return false;
      run_pass<L::BM, L::BN, L::BK, L::WM, L::WN, L::STAGES>(s, T, xp, ip, wp, gu, dn, op, sc,
                                                             routed, stream);
      return true;
    };
    MoeTile tile = moe_tile();
    // (The warpgroup-MMA grid's y walks the tiles: at most 65,535; more take moe_gemm_kernel.)
    const int wrows = wgmma_rows();
    if (tile == MoeTile::kAuto && !batch_invariant && moe_wgmma_supports(s) &&
        moe_max_tiles(P, s.experts, wrows) <= 65535) {
      run_pass_wgmma(wrows, s, T, xp, ip, wp, gu, dn, op, sc, routed, stream);
      continue;
    }
    if (tile == MoeTile::kAuto)
      tile = rows_per_expert >= kLargeTileRows ? MoeTile::kLarge : MoeTile::kWide;
    bool ran = false;
    switch (tile) {  // moe.cuh MoeTile has the shapes, shared memory 82-110 KB a block
      case MoeTile::kWide:
        ran = pass_on(Tile<64, 128, 64, 32, 32, 4>{});
        break;
      case MoeTile::kLarge:
        ran = pass_on(Tile<128, 128, 64, 64, 32, 3>{});
        break;
      case MoeTile::kLargeK32:
        ran = pass_on(Tile<128, 128, 32, 64, 32, 4>{});
        break;
      case MoeTile::kWarp64:
        ran = pass_on(Tile<128, 128, 32, 64, 64, 4>{});
        break;
      case MoeTile::kWarp64K64:
        ran = pass_on(Tile<128, 128, 64, 64, 64, 3>{});
        break;
      case MoeTile::kTall:
        ran = pass_on(Tile<128, 256, 32, 64, 64, 3>{});
        break;
      case MoeTile::kAuto:
        break;
    }
    if (!ran) run_pass<64, 64, 64, 32, 32, 4>(s, T, xp, ip, wp, gu, dn, op, sc, routed, stream);
  }
}

}  // namespace syv::cuda
