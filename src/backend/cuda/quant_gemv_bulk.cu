// The single-token tensor-core GEMV for quantized weights with its weight stream on the bulk-copy
// engine (Hopper's cp.async.bulk): quant_gemv_mma.cu's one-token kernel in its eight-warp form
// (the same decode, mma steps and summation order: the same bits) with a different way of getting
// the bytes in.
//
// Why: the one-token kernel is latency-bound, not bandwidth- or issue-bound (ncu, H200: DRAM
// 20-22% of peak, warps stalled on long scoreboard; docs/cuda-backend-notes.md "Run 14", "Run
// 16"): each block owns 16 rows, loads them with per-thread 16-byte loads, computes, reduces and
// exits, so a multiprocessor has bytes in flight only while its blocks are in their first phase.
// Here the blocks stay resident (two per multiprocessor; one for fp8 beyond K = 22,400) and walk
// their row tiles; a producer warp streams the weight through a ring of shared-memory stages with
// cp.async.bulk, one bulk copy per row and stage, issued by one lane and completed on the stage's
// mbarrier, ahead of the 8 consumer warps by up to the whole ring (55 KB int4, 67 KB fp8 a block),
// and before the PDL wait (weights are immutable), so a launch's first bytes overlap the previous
// kernel's tail.
//
// Layout. A row tile is 16 weight rows (the mma's M; with the SiLU epilogue 8 gate rows and their
// 8 up rows, as quant_gemv_mma.cu); a stage holds 16 rows x 8 chunks of 128 columns (int4 512 B,
// fp8 1 KB a row), rows padded in shared memory (int4 to a pitch of 64 mod 128 bytes, fp8 16 mod
// 128) so a quarter warp's 16-byte reads cover all 32 banks. Consumer warp w takes chunk w of
// every stage: over a row tile the chunks w, w + 8, ..., in order, as the one-token kernel's warp
// w does; each chunk's 8 mma steps, the scale multiply and the cross-warp sum in warp order are
// that kernel's, so the outputs are bit for bit the same. The activations are staged once per
// block in the mma's pair order (the XS form).
//
// Off, measured slower than the register pipeline for int4 (1.2-1.4x a call, H100, 2026-12-06,
// twice; docs/cuda-backend-notes.md "Run 27"): SYV_QUANT_GEMV_BULK=1 (or set_quant_gemv_bulk)
// takes it for single-token launches on compute capability 9.x.
#include <algorithm>
#include <atomic>

#include "backend/cuda/bulk_copy_ptx.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/quant_mma_decode.cuh"

namespace syv::cuda {
namespace {

constexpr int kConsumerWarps = 8;  // each one chunk of every stage
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kTileRows = 16;
constexpr int kStageChunks = kConsumerWarps;  // 128-column chunks per stage

// Per format: bytes of a row's chunk, the row pitch in shared memory, the ring's stages.
template <int FMT>
struct BulkShape {
  static constexpr int kChunkBytes = FMT == 0 ? 128 : 64;
  static constexpr int kRowBytes = kChunkBytes * kStageChunks;     // a row's share of a stage
  static constexpr int kPitch = kRowBytes + (FMT == 0 ? 16 : 64);  // bank-conflict-free reads
  static constexpr int kStages = FMT == 0 ? 4 : 6;                 // 66.6 / 55.3 KB
  static constexpr int kStageBytes = kTileRows * kPitch;
  static constexpr int kRingBytes = kStages * kStageBytes;
};

// The 8 consumer warps meet (the producer warp does not take part).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerWarps * 32) : "memory");
}

// out[0, n] = x[0, :] · dequant(w)[n, :] for one token; FMT 0: fp8 tiles, 1: int4 groups. tiles:
// row tiles (N / 16, or with SILU I / 8 where I = N / 2), walked by block b as b, b + grid, ....
// Dynamic shared memory: the ring, then the staged activations (K / 2 + 8 words).
template <int FMT, typename TO, bool SILU>
__global__ void __launch_bounds__(kThreads, 2)
    quant_gemv_bulk_kernel(const QuantWeight w, const ChunkDiv cdiv, const bf16* __restrict__ x,
                           TO* __restrict__ out, void* __restrict__ gate_up, int tiles) {
  using S = BulkShape<FMT>;
  constexpr int V = FMT == 0 ? 2 : 1;  // 16-byte vectors per lane, row and chunk
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  uint32_t* xs = reinterpret_cast<uint32_t*>(smem + S::kRingBytes);
  __shared__ __align__(8) uint64_t full[S::kStages], empty[S::kStages];
  __shared__ float partial[kConsumerWarps][32][4];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t N = w.n, K = w.k, I = N / 2;
  const int64_t chunks = K / kQuantChunk;
  const int stages_per_tile = static_cast<int>((chunks + kStageChunks - 1) / kStageChunks);
  const int64_t row_bytes = FMT == 0 ? K : K / 2;
  // The weight row of row i < 16 of tile `tile`, clamped (never stored).
  auto tile_row = [&](int64_t tile, int i) -> int64_t {
    if constexpr (SILU) return (i < 8 ? 0 : I) + min(tile * 8 + (i & 7), I - 1);
    return min(tile * kTileRows + i, N - 1);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer: one lane issues every copy
    if (lane != 0) return;
    int it = 0;  // this block's stage count so far
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      for (int ks = 0; ks < stages_per_tile; ++ks, ++it) {
        const int s = it % S::kStages;
        mbar_wait(smem_addr(&empty[s]), ((it / S::kStages) & 1) ^ 1);
        const int64_t c0 = static_cast<int64_t>(ks) * kStageChunks;
        const auto bytes =
            static_cast<uint32_t>(min(int64_t{kStageChunks}, chunks - c0) * S::kChunkBytes);
        const uint32_t bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, bytes * kTileRows);
        const uint32_t dst = smem_addr(ring + s * S::kStageBytes);
        for (int i = 0; i < kTileRows; ++i) {
          const uint8_t* src = static_cast<const uint8_t*>(w.data) + tile_row(tile, i) * row_bytes +
                               c0 * S::kChunkBytes;
          bulk_copy(dst + i * S::kPitch, src, bytes, bar);
        }
      }
    }
    return;
  }

  // The consumers. Stage the token's activations in the mma's pair order (quant_gemv_mma.cu's XS).
  pdl_wait();
  pdl_trigger();
  const int64_t segs = K / 32;
  for (int64_t sg = threadIdx.x; sg < segs; sg += kConsumerWarps * 32)
    stage_pair_order<FMT>(x + sg * 32, reinterpret_cast<uint4*>(xs + sg * 16));
  consumers_sync();

  const int g = lane >> 2, t = lane & 3;
  int it = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t rows[2] = {tile_row(tile, g), tile_row(tile, g + 8)};
    const float* srow[2];
    const uint8_t* zrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      srow[r] = w.scales + (FMT == 0 ? rows[r] / w.block_n : rows[r]) * w.scale_cols;
      zrow[r] = w.zeros ? w.zeros + rows[r] * w.scale_cols : nullptr;
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int ks = 0; ks < stages_per_tile; ++ks, ++it) {
      const int s = it % S::kStages;
      const int64_t c = static_cast<int64_t>(ks) * kStageChunks + warp;  // this warp's chunk
      const bool mine = c < chunks;
      float sc[2] = {0.f, 0.f};
      uint32_t zc[2] = {0u, 0u};
      if (mine) {  // the scales first: their loads overlap the wait
        const uint32_t col = cdiv(static_cast<uint32_t>(c));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          sc[r] = __ldg(srow[r] + col);
          if constexpr (FMT == 1) zc[r] = int4_zero_pair(zrow[r] ? __ldg(zrow[r] + col) : 8u);
        }
      }
      mbar_wait(smem_addr(&full[s]), (it / S::kStages) & 1);
      if (mine) {
        const uint8_t* stage = ring + s * S::kStageBytes + warp * S::kChunkBytes + t * 16 * V;
        uint4 wb[2][V];
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int v = 0; v < V; ++v)
            wb[r][v] = reinterpret_cast<const uint4*>(stage + (g + 8 * r) * S::kPitch)[v];
        const uint32_t* xs_chunk = xs + static_cast<int>(c) * 64 + t * 16;
        float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // Token 0's pairs for every lane, as quant_gemv_mma.cu's single token: columns g >= 1
            // are never stored (no branch, one address a chunk).
            const uint2 b = *reinterpret_cast<const uint2*>(xs_chunk + (2 * i + h) * 2);
            uint32_t a[4];
            weight_fragment<FMT>(reinterpret_cast<const uint32_t*>(&wb[0][0]),
                                 reinterpret_cast<const uint32_t*>(&wb[1][0]), zc[0], zc[1], i, h,
                                 a);
            mma(part, a, b.x, b.y);
          }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = fmaf(part[e], sc[e >> 1], acc[e]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_addr(&empty[s]));
    }
    // The warps' sums in warp order, as the one-token kernel adds them.
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][lane][e] = acc[e];
    consumers_sync();
    if constexpr (SILU) {
      const int64_t n0 = tile * 8;
      for (int o = threadIdx.x; o < 32 * 2; o += kConsumerWarps * 32) {
        const int l = o / 2, e = o % 2;
        float gv = 0.f, uv = 0.f;
#pragma unroll
        for (int wi = 0; wi < kConsumerWarps; ++wi) {
          gv += partial[wi][l][e];
          uv += partial[wi][l][e + 2];
        }
        const int64_t col = n0 + (l >> 2);
        const int tok = 2 * (l & 3) + e;
        if (tok < 1 && col < I) {
          const bf16 gb = __float2bfloat16_rn(gv), ub = __float2bfloat16_rn(uv);
          bf16* gu = static_cast<bf16*>(gate_up);
          gu[col] = gb;
          gu[I + col] = ub;
          const float gf = __bfloat162float(gb);
          const float act = __bfloat162float(__float2bfloat16_rn(gf / (1.f + __expf(-gf))));
          out[col] = from_f32<TO>(act * __bfloat162float(ub));
        }
      }
    } else {
      const int64_t n0 = tile * kTileRows;
      for (int o = threadIdx.x; o < 32 * 4; o += kConsumerWarps * 32) {
        const int l = o / 4, e = o % 4;
        float v = 0.f;
#pragma unroll
        for (int wi = 0; wi < kConsumerWarps; ++wi) v += partial[wi][l][e];
        const int64_t r = n0 + (l >> 2) + (e >= 2 ? 8 : 0);
        const int tok = 2 * (l & 3) + (e & 1);
        if (tok < 1 && r < N) out[r] = from_f32<TO>(v);
      }
    }
    consumers_sync();  // partial is rewritten by the next tile
  }
}

// -1: not read from SYV_QUANT_GEMV_BULK ("0", the default, or "1") yet; else 0 / 1.
std::atomic<int> g_bulk{-1};
std::atomic<uint64_t> g_launches{0};  // quant_gemv_bulk_launches()

bool bulk_on() {
  return env_switch(g_bulk, "SYV_QUANT_GEMV_BULK", false);
}

template <int FMT, typename TO, bool SILU>
bool launch_typed(const QuantWeight& w, const bf16* x, TO* out, void* gate_up, cudaStream_t s) {
  using S = BulkShape<FMT>;
  const size_t smem = S::kRingBytes + static_cast<size_t>(w.k / 2 + 8) * 4;
  auto* kernel = quant_gemv_bulk_kernel<FMT, TO, SILU>;
  // The dynamic shared memory a block may have: the opt-in limit less the kernel's static part
  // (its barriers and partial sums), which the attribute must leave room for.
  static const size_t static_bytes = [kernel] {
    cudaFuncAttributes fa{};
    SYV_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    return fa.sharedSizeBytes;
  }();
  const size_t optin = device_smem_optin();
  const size_t max_dynamic = optin > static_bytes ? optin - static_bytes : 0;
  if (smem > max_dynamic) return false;
  allow_dynamic_smem(kernel, max_dynamic);
  // Resident blocks a multiprocessor holds at this K's staging (two by the launch bounds; one
  // where the activations make the block too large for two), cached per shared-memory size.
  static std::atomic<int64_t> cached{0};  // smem << 8 | blocks per SM
  int64_t c = cached.load(std::memory_order_relaxed);
  if (c == 0 || static_cast<size_t>(c >> 8) != smem) {
    int per_sm = 0;
    SYV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    c = static_cast<int64_t>(smem) << 8 | std::max(per_sm, 1);
    cached.store(c, std::memory_order_relaxed);
  }
  const int64_t tiles = SILU ? (w.n / 2 + 7) / 8 : (w.n + kTileRows - 1) / kTileRows;
  const int64_t grid = std::min<int64_t>(tiles, (c & 0xff) * device_sm_count());
  launch_k(kernel, static_cast<unsigned>(grid), kThreads, smem, s, w, quant_chunk_div(w), x, out,
           gate_up, static_cast<int>(tiles));
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

void set_quant_gemv_bulk(bool on) {
  g_bulk.store(on ? 1 : 0, std::memory_order_relaxed);
}
uint64_t quant_gemv_bulk_launches() {
  return g_launches.load(std::memory_order_relaxed);
}

bool launch_quant_gemv_bulk(const QuantWeight& w, const void* x, void* out, DType out_t,
                            void* gate_up, cudaStream_t s) {
  if (!bulk_on() || device_cc_major() != 9 || !quant_mma_supports(w) || w.n == 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || w.n > (int64_t{1} << 30))
    return false;
  const auto* xb = static_cast<const bf16*>(x);
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (gate_up != nullptr) {
    if (out_t != DType::BF16 || w.n % 2 != 0) return false;
    auto* o = static_cast<bf16*>(out);
    return fp8 ? launch_typed<0, bf16, true>(w, xb, o, gate_up, s)
               : launch_typed<1, bf16, true>(w, xb, o, gate_up, s);
  }
  if (out_t == DType::BF16) {
    auto* o = static_cast<bf16*>(out);
    return fp8 ? launch_typed<0, bf16, false>(w, xb, o, nullptr, s)
               : launch_typed<1, bf16, false>(w, xb, o, nullptr, s);
  }
  if (out_t != DType::F32) return false;
  auto* o = static_cast<float*>(out);
  return fp8 ? launch_typed<0, float, false>(w, xb, o, nullptr, s)
             : launch_typed<1, float, false>(w, xb, o, nullptr, s);
}

}  // namespace syv::cuda
