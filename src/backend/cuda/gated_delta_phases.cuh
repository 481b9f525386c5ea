// What the chunked gated delta rule's three phases share (gated_delta_phases.cu, the CUDA-core
// kernels and the launch; gated_delta_phases_mma.cu, the tensor-core forms): the chunk table and
// the scratch, a (chunk, value head) block's work and gates, the normalised q and k rows, the
// walk's inputs in rows or fragment order, a walk block's target. gated_delta_phases.cu's header
// has the math and the notation.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_delta_chunk.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda::gdn_phases {

using namespace gdn_chunk;  // kChunk, kDK, kBV (columns a pass / state columns a walk block), ...

// A chunk of the table: sequence, first token within the sequence, length, and the save index
// whose state is the one after this chunk (-1: none).
struct ChunkRec {
  int32_t seq, c0, len, save;
};

// The scratch of the phases (gdn_phases_scratch_bytes), per (chunk, value head) f32: U (then Δ)
// and Oq [64][dv], W, Γq and Λk [64][kDK] (rows for the CUDA-core walk, A-fragment order for the
// tensor-core walk), Γ_{L-1}; before them the chunk table.
struct PhaseScratch {
  int32_t capacity;    // the chunk bound the scratch was carved for
  ChunkRec* chunks;    // [capacity]
  int32_t* count;      // [1]
  int32_t* seq_first;  // [S + 1]: sequence s's chunks are [seq_first[s], seq_first[s + 1])
  float* u;            // [chunk][hv][64][dv]: U, overwritten by the walk with Δ
  float* w;            // [chunk][hv][64][kDK] W (columns past dk zero); mma: frag_index(i, d, 16)
  float* qt;  // [chunk][hv][64][kDK] Γ_i q_i (normalised, scaled); mma: frag_index(i, d, 16)
  float* kt;  // [chunk][hv][64][kDK] Λ_j k_j (normalised); mma: (Λk)ᵀ, frag_index(d, j, 8)
  float* gl;  // [chunk][hv]: Γ_{L-1}, the chunk's decay of the state
  float* oq;  // [chunk][hv][64][dv]
};

// What a (chunk, value head) block of phases 1 and 3 works on: its chunk (blockIdx.x) and value
// head (blockIdx.y), the chunk's length, its first token row in the batch, the key head, dk
// rounded up to 4. Waits for the previous kernel (PDL); false past the table's chunks.
struct ChunkWork {
  int chunk, h, L, kh, dk4;
  int64_t t0;
};
__device__ __forceinline__ bool chunk_work(const GdnArgs& a, const PhaseScratch& p, ChunkWork& w) {
  w.chunk = static_cast<int>(blockIdx.x);
  w.h = static_cast<int>(blockIdx.y);
  pdl_wait();
  pdl_trigger();
  if (w.chunk >= *p.count) return false;
  const ChunkRec rec = p.chunks[w.chunk];
  w.L = rec.len;
  w.kh = w.h / (a.hv / a.hk);
  w.dk4 = (a.dk + 3) & ~3;
  w.t0 = int64_t{a.seq_starts[rec.seq]} + rec.c0;
  return true;
}

// Where element (m, k) of an A operand [M][8 ks] of the walk's mma.sync m16n8k8 lies in its
// fragment order: [M / 16 m-tiles][ks k-steps][32 lanes][4], lane (g, t) = (m % 8, k % 4) holding
// rows g, g + 8 and columns t, t + 4 of the 16 x 8 tile (mma_tf32's a0..a3), so a warp's fragment
// of one (m-tile, k-step) is one 16-byte load a lane.
__device__ __forceinline__ int frag_index(int m, int k, int ks) {
  const int lane = (m & 7) * 4 + (k & 3), part = ((m >> 3) & 1) + 2 * ((k >> 2) & 1);
  return (((m >> 4) * ks + (k >> 3)) * 32 + lane) * 4 + part;
}

// A chunk's gates in shared memory, kGateFloats floats from `at`: β, g, G (the inclusive prefix
// sum of g), Γ = exp(G), Λ = exp(G_last - G), kChunk each.
struct Gates {
  float *beta, *g, *G, *gam, *lam;
};
constexpr int kGateFloats = 5 * kChunk;
__device__ __forceinline__ Gates gates_at(float* at) {
  return {at, at + kChunk, at + 2 * kChunk, at + 3 * kChunk, at + 4 * kChunk};
}

// The chunk's gates into shared memory (padding rows have β = 0, g = 0). Rows of the chunk are
// token rows t0 .. t0 + L - 1 of the batch. Ends with __syncthreads().
template <typename TX>
__device__ void chunk_gates(const GdnArgs& a, int64_t t0, int L, int h, const Gates& gt) {
  float *beta = gt.beta, *g = gt.g, *G = gt.G, *gam = gt.gam, *lam = gt.lam;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float A = __expf(load_any(a.a_log, a.param_t, h));
  const float dt_bias = load_any(a.dt_bias, a.param_t, h);
  const int hv = a.hv;
  if (tid < kChunk) {
    float bb = 0.f, gg = 0.f;
    if (tid < L) {
      const int64_t t = t0 + tid;
      const float braw = load_any(a.ba, a.ba_t, t * 2 * hv + h);
      const float x = load_any(a.ba, a.ba_t, t * 2 * hv + hv + h) + dt_bias;
      bb = 1.f / (1.f + __expf(-braw));
      gg = -A * (x > 20.f ? x : log1pf(__expf(x)));
    }
    beta[tid] = bb;
    g[tid] = gg;
  }
  __syncthreads();
  if (warp == 0) gate_scan(g, G, gam, lam, lane);
  __syncthreads();
}

// Normalised k (and q scaled by 1/sqrt(dk) when Qs is not null) of the chunk's rows into
// [kChunk][kQKStride] (rows past L and columns past dk zero). Ends with __syncthreads().
template <typename TX>
__device__ void chunk_qk(const GdnArgs& a, int64_t t0, int L, int kh, float* Qs, float* Ks) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dk = a.dk;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{a.hv} * a.dv;
  const float q_scale = rsqrtf(static_cast<float>(dk));
  const TX* qkv = static_cast<const TX*>(a.qkv);
  constexpr int kRows = kChunk / kWarps, kPer = kDK / 32;
  float qv[kRows][kPer], kv[kRows][kPer];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const int r = warp + kWarps * rr;
    const bool valid = r < L;
    const TX* row = qkv + (t0 + (valid ? r : 0)) * width;
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int d = lane + 32 * m;
      qv[rr][m] = Qs && valid && d < dk ? to_f32(row[int64_t{kh} * dk + d]) : 0.f;
      kv[rr][m] = valid && d < dk ? to_f32(row[key_dim + int64_t{kh} * dk + d]) : 0.f;
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    store_normalized<kPer>(qv[rr], kv[rr], warp + kWarps * rr, lane, q_scale, Qs, Ks);
  }
  __syncthreads();
}

// The walk's inputs that need no solve, from the chunk's normalised rows and gates: Γ q, Λ k (all
// kDK columns: zeros past dk) in rows or fragment order, and Γ_{L-1}. Every thread calls it.
template <bool kFragments>
__device__ void walk_inputs(const GdnArgs& a, const PhaseScratch& p, int chunk, int h,
                            const float* Qs, const float* Ks, const float* gam, const float* lam) {
  const int tid = threadIdx.x;
  const int64_t at = (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * kDK;
  if constexpr (kFragments) {  // a float4 = one lane's fragment
    for (int f = tid; f < kChunk * kDK / 4; f += kThreads) {
      const int lane = f & 31, g = lane >> 2, t = lane & 3;
      {  // Γ q: 4 m-tiles of rows i x 16 k-steps of d
        const int ks = (f >> 5) & 15, i0 = (f >> 9) * 16 + g, i1 = i0 + 8, d0 = ks * 8 + t;
        const float g0 = gam[i0], g1 = gam[i1];
        *reinterpret_cast<float4*>(p.qt + at + 4 * f) =
            make_float4(g0 * Qs[i0 * kQKStride + d0], g1 * Qs[i1 * kQKStride + d0],
                        g0 * Qs[i0 * kQKStride + d0 + 4], g1 * Qs[i1 * kQKStride + d0 + 4]);
      }
      {  // (Λ k)ᵀ: 8 m-tiles of d x 8 k-steps of j
        const int ks = (f >> 5) & 7, d0 = (f >> 8) * 16 + g, d1 = d0 + 8, j0 = ks * 8 + t;
        const int j1 = j0 + 4;
        const float l0 = lam[j0], l1 = lam[j1];
        *reinterpret_cast<float4*>(p.kt + at + 4 * f) =
            make_float4(l0 * Ks[j0 * kQKStride + d0], l0 * Ks[j0 * kQKStride + d1],
                        l1 * Ks[j1 * kQKStride + d0], l1 * Ks[j1 * kQKStride + d1]);
      }
    }
  } else {
    for (int f = tid; f < kChunk * kDK / 4; f += kThreads) {
      const int i = f / (kDK / 4), d = 4 * (f % (kDK / 4));
      const float4 q = *reinterpret_cast<const float4*>(&Qs[i * kQKStride + d]);
      const float4 k = *reinterpret_cast<const float4*>(&Ks[i * kQKStride + d]);
      const float gi = gam[i], li = lam[i];
      *reinterpret_cast<float4*>(p.qt + at + i * kDK + d) =
          make_float4(gi * q.x, gi * q.y, gi * q.z, gi * q.w);
      *reinterpret_cast<float4*>(p.kt + at + i * kDK + d) =
          make_float4(li * k.x, li * k.y, li * k.z, li * k.w);
    }
  }
  if (tid == 0) p.gl[static_cast<int64_t>(chunk) * a.hv + h] = gam[kChunk - 1];
}

// What a walk block (both forms) works on: its sequence, value head, first state column and the
// sequence's state. Waits for the previous kernel (PDL); false when the block has no chunked
// sequence.
template <typename TS>
struct WalkTarget {
  int s, h, v0;
  TS* state;
};
template <typename TS>
__device__ __forceinline__ bool walk_target(const GdnArgs& a, WalkTarget<TS>& w) {
  const WalkBlock wb = walk_block(a.hv, a.dv);
  pdl_wait();
  pdl_trigger();
  int slot, begin, len;
  if (wb.s >= a.num_seqs || !chunked_sequence(a, wb.s, slot, begin, len)) return false;
  w = {wb.s, wb.h, wb.slice * kBV,
       static_cast<TS*>(a.state) + (static_cast<int64_t>(slot) * a.hv + wb.h) * a.dk * a.dv};
  return true;
}

// Lets `kernel` take `smem` bytes of dynamic shared memory (on the current device).
template <typename K>
void configure(K* kernel, size_t smem) {
  allow_dynamic_smem(kernel, smem);
}

// Where every phase fits: gated_delta_chunked.cu's kernel (150,016 bytes) does
// (gdn_chunked_supports() decides for both).
constexpr size_t kMaxSmemBytes = 150016;

// gated_delta_phases_mma.cu: the tensor-core forms (kernels.h kGdnMma*) of phase 1 (over the
// (chunk, value head) grid; `fragments`: W, Γq and Λk in the tensor-core walk's order), the walk
// (`blocks` walk blocks) and phase 3. Phases 1 and 3 take dv <= kDK.
template <typename TX>
void launch_wu_mma(const GdnArgs& a, const PhaseScratch& p, dim3 grid, bool fragments,
                   cudaStream_t s);
template <typename TX, typename TS>
void launch_walk_mma(const GdnArgs& a, const PhaseScratch& p, unsigned blocks, cudaStream_t s);
template <typename TX>
void launch_output_mma(const GdnArgs& a, const PhaseScratch& p, dim3 grid, cudaStream_t s);

}  // namespace syv::cuda::gdn_phases
