// The W8A8 GEMM at decode batch sizes (1-64 tokens): fp8 weights of 128 x 128 scale tiles times
// activations already in e4m3 with one scale per (token, 128 columns) (launch_quantize_fp8_groups
// or the norm that writes them), the product cuBLASLt's block-scaled GEMM computes (LtGemm::
// run_fp8), for the step sizes where its one algorithm (128 x 128 tiles: 32-48 blocks on the 8B's
// q|k|v and o_proj) leaves most SMs idle (docs/cuda-backend-notes.md "Run 23").
//
// Work split. A block owns 128 weight rows (one scale tile high) and a range of K: grid (S, N /
// 128), the S blocks of one row tile a thread-block cluster that splits K in S near-equal ranges
// of 128-column chunks and sums its partial tiles through distributed shared memory in rank
// order (the same sum whatever order the blocks finish in: deterministic). Each chunk's weight
// tile (128 rows x 128 bytes) comes by one thread's tensor-map load completing on the stage's
// mbarrier (or, SYV_FP8_SKINNY_TMA=0, every thread's cp.async), its activations (the tokens' 128
// bytes) by cp.async, into a ring of shared-memory stages in wgmma's 128-byte-swizzled K-major
// layout; the block's two warpgroups (64 rows each) multiply on Hopper's warpgroup MMA with the
// tokens as N (swap AB: m64nNk32, e4m3 in, f32 out). A chunk's four k steps accumulate unscaled;
// the chunk's weight-tile scale times each token's group scale then folds them into the f32
// sums, while the next chunk's wgmmas run (two sets of products; SYV_FP8_SKINNY_PIPE=0 waits
// for each chunk's instead). fp8_skinny_plan() picks S and the ring's depth (kernels.h).
//
// Measured on an H100 (2026-12-06 11:12, docs/cuda-backend-notes.md "Run 26"), us a call on the
// Qwen3-8B shapes at 8 / 16 / 32 / 64 tokens against cuBLASLt's W8A8 GEMM: o_proj 13.3 / 12.9 /
// 14.1 / 16.1 against 16.8-17.6, gate_up 39.2 / 40.6 / 41.9 / 47.6 against 43.0-45.4, q|k|v
// 14.9 / 15.0 / 16.2 / 19.4 against 17.0-17.3, down 23.8 / 24.6 / 26.2 / 30.7 against 26.7-33.9
// (the cp.async form without the pipelining: 2-18% slower). Still under the copy rate: gate_up
// at 64 tokens reads DRAM at 61% of its peak (ncu), o_proj at 8 at 34%. Tried first and
// replaced: mma.sync m16n8k32 e4m3 streaming weights through registers (1.5-2.3x slower than
// cuBLASLt at 24-64 tokens, each 8-token tile adding ~3 us on q|k|v: far below the tensor cores'
// fp8 rate; not profiled, the SASS not read), and this kernel with two blocks an SM and 4
// stages on every weight (clusters of 5-8 blocks did not all fit at once: two waves).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include <cuda.h>

#include "backend/cuda/bulk_copy_ptx.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"
#include "core/check.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include <cooperative_groups.h>
#endif

namespace syv::cuda {
namespace {

constexpr int kThreads = 256;     // two warpgroups
constexpr int kRows = 128;        // weight rows a block, one scale tile
constexpr int kChunk = 128;       // K columns (bytes) a chunk, one scale group
constexpr int kStagesShared = 4;  // ring stages where two blocks share an SM
constexpr int kStagesAlone = 8;   // ... and where a block has its SM alone (more bytes in flight)
constexpr int kPartPitch = 132;   // floats a token row of the partial tile (conflict-free writes)
constexpr int kMaxSplits = 8;     // cluster size at most (portable)
constexpr uint32_t kWTileBytes = kRows * kChunk;

// Dynamic shared memory of an N-token tile in S stages: the ring's stages (weights, then
// activations; each 1024-byte aligned for the swizzle), the activation scales, alignment slack.
// The partial tile reuses the stages after the main loop.
constexpr uint32_t stage_bytes(int n) {
  return kWTileBytes + static_cast<uint32_t>(n) * kChunk;
}
constexpr size_t smem_bytes(int n, int stages) {
  return size_t(stages) * stage_bytes(n) + size_t(stages) * n * 4 + 1024;
}
static_assert(kFp8SkinnyKernelMaxTokens * kPartPitch * 4 <= kStagesShared * kWTileBytes,
              "the partial tile fits in the stages");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d (m64nNk32, e4m3 A and B from shared memory, both K-major; f32 accumulators) = A B, plus d
// where scale_d != 0.
template <int N>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db,
                                           int scale_d);
template <>
__device__ __forceinline__ void wgmma_e4m3<8>(float (&d)[4], uint64_t da, uint64_t db,
                                              int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<16>(float (&d)[8], uint64_t da, uint64_t db,
                                               int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<32>(float (&d)[16], uint64_t da, uint64_t db,
                                               int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, "
      "1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<64>(float (&d)[32], uint64_t da, uint64_t db,
                                               int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <typename TO>
__device__ __forceinline__ void store_out(TO* p, float v) {
  if constexpr (std::is_same_v<TO, float>) {
    *p = v;
  } else {
    *p = __float2bfloat16_rn(v);
  }
}

// out[t, n] = sum_c ws[n / 128, c] xs[c, t] sum_{k in chunk c} w[n, k] x[t, k] for t < tokens <=
// N. x: e4m3 [>= tokens, K]; x_scales: f32 [K / 128][padded]; w: e4m3 [n, K], scales f32
// [ceil(n / 128)][K / 128]. kLoad: the weight tiles by every thread's cp.async (0) or one
// thread's tensor-map load (1), (2) that with the pipelined multiply (two sets of products), (3)
// that with the block's first 64 weight-tile scales staged in shared memory before the PDL wait,
// so that the first 64 chunks' folds wait on no global load (else each fold loads its own scale
// after the chunk's wgmmas). A compile-time choice: the other forms' code stays as measured.
template <int N, int kStages, int kLoad, typename TO>
__global__ void __launch_bounds__(kThreads, kStages > kStagesShared ? 1 : 2)
    fp8_skinny_kernel(const __grid_constant__ CUtensorMap w_map, const uint8_t* __restrict__ w,
                      const float* __restrict__ w_scales, const uint8_t* __restrict__ x,
                      const float* __restrict__ x_scales, TO* __restrict__ out, int64_t n,
                      int64_t k, int tokens, int64_t padded) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace cg = cooperative_groups;
  constexpr bool kTma = kLoad >= 1, kPipe = kLoad >= 2, kStageScales = kLoad == 3;
  constexpr int kStagedScales = 64;  // weight-tile scales a block stages (kLoad 3)
  constexpr uint32_t kStage = stage_bytes(N);
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;  // stage s at base + s kStage
  uint8_t* gbase = smem_raw + (base - raw);
  float* xsc = reinterpret_cast<float*>(gbase + kStages * kStage);  // [kStages][N]

  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t tile = blockIdx.y, n0 = tile * kRows;
  const int64_t chunks = k / kChunk;
  const int64_t c_begin = chunks * rank / splits, c_end = chunks * (rank + 1) / splits;
  const int nc = static_cast<int>(c_end - c_begin);
  const float* ws = w_scales + tile * chunks + c_begin;

  // Chunk j's weight tile into its stage (rows past n: a clamped row, computed, never stored).
  // With kTma: one thread's tensor-map load (rows past n zero-filled), completing on full[stage].
  __shared__ __align__(8) uint64_t full[kStages];
  if constexpr (kTma) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int i = 0; i < kStages; ++i) mbar_init(smem_addr(&full[i]), 1);
      mbar_init_fence();
    }
    __syncthreads();
  }
  auto load_w = [&](int j) {
    if (j >= nc) return;
    const uint32_t dst = base + (j % kStages) * kStage;
    if constexpr (kTma) {
      if (threadIdx.x == 0) {
        const uint32_t bar = smem_addr(&full[j % kStages]);
        mbar_arrive_expect_tx(bar, kWTileBytes);
        tma_load_2d(dst, &w_map, static_cast<int>((c_begin + j) * kChunk), static_cast<int>(n0),
                    bar);
      }
      return;
    }
    const uint8_t* src = w + (c_begin + j) * kChunk;
#pragma unroll
    for (int i = threadIdx.x; i < kRows * 8; i += kThreads) {
      const int r = i >> 3, c = i & 7;
      cp_async16_s(dst + sw128<kRows>(r, c), src + min(n0 + r, n - 1) * k + c * 16, true);
    }
  };
  // Chunk j's activations and their scales (tokens past `tokens`: zero), then the commit: one
  // group an iteration, empty or not.
  auto load_x = [&](int j) {
    if (j < nc) {
      const int slot = j % kStages;
      const int64_t c = c_begin + j;
      const uint32_t dst = base + slot * kStage + kWTileBytes;
      for (int i = threadIdx.x; i < N * 8; i += kThreads) {
        const int r = i >> 3, p = i & 7;
        const bool valid = r < tokens;
        cp_async16_s(dst + sw128<N>(r, p), x + (valid ? r * k + c * kChunk + p * 16 : 0), valid);
      }
      if (threadIdx.x < N) {
        const bool valid = static_cast<int>(threadIdx.x) < tokens;
        cp_async4(xsc + slot * N + threadIdx.x, x_scales + (valid ? c * padded + threadIdx.x : 0),
                  valid);
      }
    }
    cp_commit();
  };

  // Chunks whose copies are in flight ahead of the one multiplied: all but one stage, or with the
  // pipelined multiply all but two (chunk j - 1's wgmmas may still read their stage while chunk
  // j's are issued).
  constexpr int kAhead = kPipe ? kStages - 2 : kStages - 1;
  static_assert(kAhead >= 1, "a stage in flight at least");
#pragma unroll
  for (int j = 0; j < kAhead; ++j) load_w(j);  // weights: before the wait (immutable)
  // kStageScales: the weight-tile scales (immutable, so before the wait), by cp.async: no thread
  // stalls on them; they join chunk 0's copy group, so every fold sees them after the first
  // multiply's wait and barrier.
  const float* wsc = nullptr;
  int staged = 0;
  if constexpr (kStageScales) {
    __shared__ __align__(16) float staged_scales[kStagedScales];
    wsc = staged_scales;
    staged = min(nc, kStagedScales);
    if (static_cast<int>(threadIdx.x) < staged)
      cp_async4(staged_scales + threadIdx.x, ws + threadIdx.x, true);
  }
  pdl_wait();  // x and x_scales are the previous kernel's; out may still be read
  pdl_trigger();
#pragma unroll
  for (int j = 0; j < kAhead; ++j) load_x(j);

  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  // Chunk j's unscaled products into p: its four wgmmas issued and committed as one group, not
  // waited for; chunk j + kAhead's copies issued into the stage everyone is done with.
  auto multiply = [&](int j, float(&p)[N / 2]) {
    cp_wait<kAhead - 1>();  // this thread's copies of chunk j have landed
    fence_proxy_async();    // ... and are visible to the tensor cores
    __syncthreads();        // everyone's; and everyone is done with the stage refilled below
    load_w(j + kAhead);
    load_x(j + kAhead);
    if constexpr (kTma) mbar_wait(smem_addr(&full[j % kStages]), (j / kStages) & 1);
    const int slot = j % kStages;
    const uint32_t sw_tile = base + slot * kStage + wg * (64 * kChunk);
    const uint32_t sx_tile = base + slot * kStage + kWTileBytes;
    fence_regs(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kChunk / 32; ++kk)
      wgmma_e4m3<N>(p, desc(sw_tile + kk * 32, 16, 1024), desc(sx_tile + kk * 32, 16, 1024),
                    kk > 0 ? 1 : 0);
    wgmma_commit();
  };
  // Chunk j's products (their wgmmas completed) times the chunk's weight-tile scale and each
  // token's group scale, into acc; chunk by chunk in order whatever the pipelining: the same bits.
  // p[4 q + e]: rows g (e < 2) and g + 8 of the warp's 16, tokens 8 q + 2 t + (e & 1).
  auto fold = [&](int j, float(&p)[N / 2]) {
    fence_regs(p);
    float sw;
    if constexpr (kStageScales) {
      sw = j < staged ? wsc[j] : __ldg(ws + j);
    } else {
      sw = __ldg(ws + j);
    }
    const float* sx = xsc + (j % kStages) * N + 2 * t;
#pragma unroll
    for (int q = 0; q < N / 8; ++q) {
      const float2 s = *reinterpret_cast<const float2*>(sx + 8 * q);
      const float s0 = sw * s.x, s1 = sw * s.y;
      acc[4 * q] = fmaf(p[4 * q], s0, acc[4 * q]);
      acc[4 * q + 1] = fmaf(p[4 * q + 1], s1, acc[4 * q + 1]);
      acc[4 * q + 2] = fmaf(p[4 * q + 2], s0, acc[4 * q + 2]);
      acc[4 * q + 3] = fmaf(p[4 * q + 3], s1, acc[4 * q + 3]);
    }
  };
  if constexpr (kPipe) {
    // Two sets of products: chunk j's wgmmas run while chunk j - 1's are folded. The first chunk
    // is peeled so that on every path a product set is neither read nor written while its
    // wgmma may be in flight (an `if (j > 0)` around the fold made ptxas serialize every wgmma:
    // warning C7514). nc >= 1: the plan splits K into at most its chunks, and
    // fp8_skinny_supports() wants K >= 128.
    float p0[N / 2], p1[N / 2];
    multiply(0, p0);
    int j = 1;
    for (; j + 1 < nc; j += 2) {  // here chunk j - 1 is in flight in p0
      multiply(j, p1);
      wgmma_wait<1>();
      fold(j - 1, p0);
      multiply(j + 1, p0);
      wgmma_wait<1>();
      fold(j, p1);
    }
    if (j < nc) {  // an even count: the last chunk
      multiply(j, p1);
      wgmma_wait<1>();
      fold(j - 1, p0);
      wgmma_wait<0>();
      fold(j, p1);
    } else {
      wgmma_wait<0>();
      fold(j - 1, p0);
    }
  } else {
    float part[N / 2];
    for (int j = 0; j < nc; ++j) {
      multiply(j, part);
      wgmma_wait<0>();
      fold(j, part);
    }
  }

  // The block's partial tile [N][128] (pitch kPartPitch) over the stages, then the cluster's sum:
  // rank r writes its share of the (token, 4 rows) items, adding the ranks' tiles in rank order.
  cp_wait<0>();
  __syncthreads();
  float* tile_sum = reinterpret_cast<float*>(gbase);
  const int row = wg * 64 + warp * 16 + g;
#pragma unroll
  for (int q = 0; q < N / 8; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      tile_sum[(8 * q + 2 * t + (e & 1)) * kPartPitch + row + 8 * (e >> 1)] = acc[4 * q + e];
  cluster.sync();
  const int items = N * (kRows / 4);
  const int i_end = items * (rank + 1) / splits;
  const float* rank_tile[kMaxSplits];
#pragma unroll
  for (int p = 0; p < kMaxSplits; ++p)
    rank_tile[p] = p < splits ? cluster.map_shared_rank(tile_sum, p) : tile_sum;
  for (int i = items * rank / splits + threadIdx.x; i < i_end; i += kThreads) {
    const int tok = i / (kRows / 4), r4 = (i % (kRows / 4)) * 4;
    if (tok >= tokens) continue;
    // Every rank's share read first (independent loads), then added in rank order.
    float4 v[kMaxSplits];
#pragma unroll
    for (int p = 0; p < kMaxSplits; ++p)
      if (p < splits) v[p] = *reinterpret_cast<const float4*>(rank_tile[p] + tok * kPartPitch + r4);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int p = 0; p < kMaxSplits; ++p) {
      if (p < splits) {
        sum.x += v[p].x;
        sum.y += v[p].y;
        sum.z += v[p].z;
        sum.w += v[p].w;
      }
    }
    const float s[4] = {sum.x, sum.y, sum.z, sum.w};
    TO* o = out + tok * n + n0 + r4;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (n0 + r4 + e < n) store_out(o + e, s[e]);
  }
  cluster.sync();  // no block leaves while another still reads its tile
#else
  __trap();  // sm_90a only (launch_fp8_skinny_gemm refuses elsewhere)
#endif
}

// The launch configuration of n_tokens tokens in `stages` stages, `splits` blocks a cluster (the
// cluster attribute only; the caller adds the stream and PDL).
// The kernel of N tokens in kStages stages, its shared-memory size allowed (once).

// The kernel of N tokens in kStages stages, its shared-memory size allowed (on this device).
template <int N, int kStages, int kLoad, typename TO>
auto* kernel_of() {
  auto* kernel = fp8_skinny_kernel<N, kStages, kLoad, TO>;
  allow_dynamic_smem(kernel, smem_bytes(N, kStages));
  return kernel;
}

cudaLaunchConfig_t launch_config(int n_tokens, int stages, int64_t n, int splits,
                                 cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(splits), ceil_div(n, kRows));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem_bytes(n_tokens, stages);
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = static_cast<unsigned>(splits);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether the weights come by tensor-map loads (SYV_FP8_SKINNY_TMA, default 1;
// set_fp8_skinny_tma), whether the multiply is pipelined (SYV_FP8_SKINNY_PIPE, default 1;
// set_fp8_skinny_pipe; with tensor-map loads only) and whether the weight-tile scales are staged
// up front (SYV_FP8_SKINNY_STAGE_SCALES, default 1; set_fp8_skinny_stage_scales; with the
// pipelined multiply only).
std::atomic<int> g_tma{-1}, g_pipe{-1}, g_stage_scales{-1};
bool tma_on() {
  return env_switch(g_tma, "SYV_FP8_SKINNY_TMA", true);
}
bool pipe_on() {
  return env_switch(g_pipe, "SYV_FP8_SKINNY_PIPE", true);
}
bool stage_scales_on() {
  return env_switch(g_stage_scales, "SYV_FP8_SKINNY_STAGE_SCALES", true);
}

template <int N, int kStages, int kLoad, typename TO>
void launch_n(const CUtensorMap& w_map, const uint8_t* w, const float* w_scales, const uint8_t* x,
              const float* x_scales, TO* out, int64_t n, int64_t k, int tokens, int64_t padded,
              int splits, cudaStream_t s) {
  auto* kernel = kernel_of<N, kStages, kLoad, TO>();
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = launch_config(N, kStages, n, splits, attrs);
  cfg.stream = s;
  cfg.numAttrs = pdl_enabled() ? 2 : 1;
  SYV_CUDA_CHECK(
      cudaLaunchKernelEx(&cfg, kernel, w_map, w, w_scales, x, x_scales, out, n, k, tokens, padded));
}

template <int kStages, int kLoad, typename TO>
void launch_tokens(const CUtensorMap& w_map, const uint8_t* w, const float* w_scales,
                   const uint8_t* x, const float* x_scales, TO* out, int64_t n, int64_t k,
                   int tokens, int64_t padded, int splits, cudaStream_t s) {
  if (tokens <= 8) {
    launch_n<8, kStages, kLoad, TO>(w_map, w, w_scales, x, x_scales, out, n, k, tokens, padded,
                                    splits, s);
  } else if (tokens <= 16) {
    launch_n<16, kStages, kLoad, TO>(w_map, w, w_scales, x, x_scales, out, n, k, tokens, padded,
                                     splits, s);
  } else if (tokens <= 32) {
    launch_n<32, kStages, kLoad, TO>(w_map, w, w_scales, x, x_scales, out, n, k, tokens, padded,
                                     splits, s);
  } else {
    // 33-64 tokens two blocks an SM: not pipelined (its second set of products would pass the
    // 128 registers a thread that two blocks of 256 allow and spill).
    constexpr int kLoad64 = kStages == kStagesShared && kLoad >= 2 ? 1 : kLoad;
    launch_n<64, kStages, kLoad64, TO>(w_map, w, w_scales, x, x_scales, out, n, k, tokens, padded,
                                       splits, s);
  }
}

// The tensor map of fp8 weight w as the kernel's stages hold it: [n rows][k bytes], boxes of 128
// rows x 128 bytes, 128-byte swizzle (wgmma's layout), rows past n read as zeros.
CUtensorMap weight_map(const QuantWeight& w) {
  return tensor_map_2d(w.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, w.n, w.k, kRows, kChunk,
                       "an fp8 weight");
}

// How many clusters of `splits` blocks of the one-block-an-SM kernel the GPU holds at once
// (cudaOccupancyMaxActiveClusters: a cluster's blocks share one GPC), read once a device and
// split count.
int resident_clusters_alone(int splits) {
  static std::atomic<int> cache[64][kMaxSplits + 1] = {};  // [device][splits], 0: not read yet
  std::atomic<int>& slot = cache[current_device()][splits];
  int v = slot.load(std::memory_order_relaxed);
  if (v > 0) return v;
  auto* kernel = kernel_of<kFp8SkinnyKernelMaxTokens, kStagesAlone, 0, bf16>();
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg =
      launch_config(kFp8SkinnyKernelMaxTokens, kStagesAlone, int64_t{kRows}, splits, attrs);
  SYV_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&v, kernel, &cfg));
  v = std::max(v, 1);
  slot.store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace

Fp8SkinnyPlan fp8_skinny_plan(int64_t n, int64_t k, int sm_count) {
  // SYV_FP8_SKINNY_SPLITS=S caps the splits at S (A/B timing).
  static const int cap = [] {
    const char* env = std::getenv("SYV_FP8_SKINNY_SPLITS");
    return env != nullptr && std::atoi(env) > 0 ? std::min(std::atoi(env), kMaxSplits) : kMaxSplits;
  }();
  const int64_t tiles = (n + kRows - 1) / kRows, chunks = std::max<int64_t>(k / kChunk, 1);
  // Row tiles for more than half the SMs: no split, two blocks an SM.
  if (2 * tiles > sm_count) return {1, kStagesShared, 0};
  // Else one block an SM with the deeper ring, K split in as many ranges as the SMs allow and the
  // GPU holds in one wave.
  int splits = static_cast<int>(
      std::min<int64_t>({int64_t{sm_count} / std::max<int64_t>(tiles, 1), int64_t{cap}, chunks}));
  splits = std::max(splits, 1);
  while (splits > 1 && resident_clusters_alone(splits) < tiles) --splits;
  return {splits, kStagesAlone, resident_clusters_alone(splits)};
}

void set_fp8_skinny_tma(bool on) {
  g_tma.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool fp8_skinny_tma() {
  return tma_on();
}
void set_fp8_skinny_pipe(bool on) {
  g_pipe.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool fp8_skinny_pipe() {
  return pipe_on();
}
void set_fp8_skinny_stage_scales(bool on) {
  g_stage_scales.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool fp8_skinny_stage_scales() {
  return stage_scales_on();
}

bool fp8_skinny_supports(const QuantWeight& w, int64_t tokens) {
  return device_cc_major() == 9 && w.kind == QuantKind::kFp8Block && w.block_n == kRows &&
         w.block_k == kChunk && w.k % kChunk == 0 && w.scale_cols == w.k / kChunk &&
         w.perm == nullptr && w.k >= kChunk && tokens >= 1 && tokens <= kFp8SkinnyKernelMaxTokens &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

bool launch_fp8_skinny_gemm(const QuantWeight& w, const uint8_t* x, const float* x_scales,
                            int64_t padded, void* out, DType out_t, int64_t tokens, int sm_count,
                            cudaStream_t s) {
  if (!fp8_skinny_supports(w, tokens) || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      padded < tokens)
    return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (w.n == 0) return true;
  const auto* wd = static_cast<const uint8_t*>(w.data);
  const Fp8SkinnyPlan plan = fp8_skinny_plan(w.n, w.k, sm_count);
  const int nt = static_cast<int>(tokens);
  const bool tma = tma_on();
  // The kernel's kLoad: tensor-map loads, pipelined, the weight scales staged (each needing the
  // one before).
  const int load = !tma ? 0 : !pipe_on() ? 1 : stage_scales_on() ? 3 : 2;
  const CUtensorMap map = tma ? weight_map(w) : CUtensorMap{};
  auto run = [&](auto* o) {
    using TO = std::remove_pointer_t<decltype(o)>;
    auto go = [&](auto stages) {
      constexpr int kS = decltype(stages)::value;
      if (load == 3) {
        launch_tokens<kS, 3, TO>(map, wd, w.scales, x, x_scales, o, w.n, w.k, nt, padded,
                                 plan.splits, s);
      } else if (load == 2) {
        launch_tokens<kS, 2, TO>(map, wd, w.scales, x, x_scales, o, w.n, w.k, nt, padded,
                                 plan.splits, s);
      } else if (load == 1) {
        launch_tokens<kS, 1, TO>(map, wd, w.scales, x, x_scales, o, w.n, w.k, nt, padded,
                                 plan.splits, s);
      } else {
        launch_tokens<kS, 0, TO>(map, wd, w.scales, x, x_scales, o, w.n, w.k, nt, padded,
                                 plan.splits, s);
      }
    };
    if (plan.stages == kStagesAlone) {
      go(std::integral_constant<int, kStagesAlone>{});
    } else {
      go(std::integral_constant<int, kStagesShared>{});
    }
  };
  if (out_t == DType::BF16) {
    run(static_cast<bf16*>(out));
  } else {
    run(static_cast<float*>(out));
  }
  return true;
}

}  // namespace syv::cuda
