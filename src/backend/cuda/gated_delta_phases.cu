// The chunked gated delta rule in three phases (FLA's split, ../shared/reference/WAVE2-SPECS.md
// A.1), for prefill: the same math as gated_delta_chunked.cu (its header has the notation), with
// the work that does not depend on the state taken out of the sequential walk over chunks, so
// that it runs in parallel over every chunk of the batch. The default for prefill since
// 2026-12-05 (measured 1.45x faster than gated_delta_chunked.cu at 8K tokens, docs/performance.md);
// SYV_GDN_PHASES=0 / CudaBackend::set_gdn_phases() selects the one-kernel walk.
//
// Per chunk of L <= 64 tokens, T = (I + A)^-1 with A_ij = β_i exp(G_i - G_j) k_i·k_j (j < i):
//   Δ = T R = U - W S0,   U = T diag(β) V  [L, dv],   W = T diag(β Γ) K  [L, dk]
//   o_i = Γ_i S0ᵀq_i + Σ_{j<=i} exp(G_i - G_j) (q_i·k_j) Δ_j
//   S   = Γ_{L-1} S0 + Σ_j Λ_j k_j Δ_jᵀ
// 0. gdn_chunk_table_kernel (one thread): the batch's chunks in sequence order (a sequence's
//    chunks restart at its state saves, as gated_delta_chunked.cu cuts them), each sequence's first
//    chunk index.
// 1. gdn_wu_kernel, one block per (chunk, value head): A, the diagonal blocks' inverses, and U and
//    W by blocked forward substitution over 32 columns at a time of [β v | β Γ k]; also Γ q, Λ k
//    and Γ_{L-1}, so that the walk needs no norms, gates or exponentials.
// 2. gdn_state_cores_kernel, one block per (sequence, value head, 32 state columns) over the
//    sequence's chunks: W, Γ q and Λ k staged by batched 16-byte loads, Δ = U - W S0 and
//    Oq = (Γ q) S0 into the scratch (Δ over U), then S = Γ_{L-1} S0 + (Λ k)ᵀ Δ.
// 3. gdn_output_kernel, one block per (chunk, value head): P and o = Oq + P Δ.
// Those are fp32 on the CUDA cores (measured). Each phase has a tensor-core form besides
// (kernels.h kGdnMma*, SYV_GDN_MMA=all or wu,walk,output; written 2026-12-05, NOT yet run on a
// GPU: no device was lent after they were written): gdn_wu_mma_kernel (A, then T = (I + A)^-1
// explicitly by the substitution on the identity, then U = T β v and W = T β Γ k as products),
// gdn_state_mma_kernel (the state in the mma accumulators across chunks) and
// gdn_output_mma_kernel (P and P Δ as products); tools/emulate/gdn_phases_emulate.py checks
// their index logic on the CPU. Their products are mma.sync m16n8k8 in 3xTF32:
// each f32 operand split into a tf32 value and a tf32 remainder, a b = a_lo b_hi + a_hi b_lo +
// a_hi b_hi with fp32 accumulation, which keeps f32's accuracy where one tf32 product (10 mantissa
// bits) would not (FLA's Triton kernels round to the input dtype instead). For the tensor-core
// walk phase 1 writes W, Γq and Λk in the mma's A-fragment order (frag_index below), so the walk
// loads a warp's operands as 16-byte loads and fetches the next chunk's while it works on this
// one. Sequences shorter than GdnArgs::chunked_from are the token-by-token kernel's, as with
// gated_delta_chunked.cu.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_delta_chunk.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"

namespace syv::cuda {
namespace {

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
  float* qt;     // [chunk][hv][64][kDK] Γ_i q_i (normalised, scaled); mma: frag_index(i, d, 16)
  float* kt;     // [chunk][hv][64][kDK] Λ_j k_j (normalised); mma: (Λk)ᵀ, frag_index(d, j, 8)
  float* gl;     // [chunk][hv]: Γ_{L-1}, the chunk's decay of the state
  float* delta;  // = u
  float* oq;     // [chunk][hv][64][dv]
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

__global__ void gdn_chunk_table_kernel(GdnArgs a, PhaseScratch p) {
  pdl_wait();
  pdl_trigger();
  if (threadIdx.x != 0) return;
  int n = 0;
  for (int s = 0; s < a.num_seqs; ++s) {
    p.seq_first[s] = n;
    int slot, begin, len;
    if (!chunked_sequence(a, s, slot, begin, len)) continue;
    int next_save = a.num_saves > 0 ? a.save_starts[s] : 0;
    const int save_end = a.num_saves > 0 ? a.save_starts[s + 1] : 0;
    int segment_end = next_save < save_end ? a.save_after[next_save] : len;
    for (int c0 = 0; c0 < len;) {
      const int L = min(kChunk, segment_end - c0);
      ChunkRec r{s, c0, L, -1};
      c0 += L;
      if (c0 == segment_end && next_save < save_end) {
        r.save = next_save;
        ++next_save;
        segment_end = next_save < save_end ? a.save_after[next_save] : len;
      }
      if (n >= p.capacity) __trap();  // the host's bound (gdn_phases_chunk_bound) was wrong
      p.chunks[n++] = r;
    }
  }
  p.seq_first[a.num_seqs] = n;
  *p.count = n;
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

// ---- 3xTF32 on mma.sync m16n8k8 (the tensor-core forms) -----------------------------------------
// x as its tf32 value and the tf32 value of the remainder: {hi, lo}, x = hi + lo to ~21 bits.
__device__ __forceinline__ float2 tf32_split(float x) {
  const float hi = to_tf32(x);
  return make_float2(hi, to_tf32(x - hi));
}
__device__ __forceinline__ void split_fragment(const float4& a, float4& hi, float4& lo) {
  const float2 x = tf32_split(a.x), y = tf32_split(a.y), z = tf32_split(a.z), w = tf32_split(a.w);
  hi = make_float4(x.x, y.x, z.x, w.x);
  lo = make_float4(x.y, y.y, z.y, w.y);
}
// c += a b in 3xTF32 with both operands f32 (split here).
__device__ __forceinline__ void mma_3xtf32_f32(float (&c)[4], const float4& ahi, const float4& alo,
                                               float b0, float b1) {
  const float2 x = tf32_split(b0), y = tf32_split(b1);
  mma_tf32(c, alo, x.x, y.x);
  mma_tf32(c, ahi, x.y, y.y);
  mma_tf32(c, ahi, x.x, y.x);
}
// The A fragment of rows m0 .. m0 + 15, columns k0 .. k0 + 7 of a row-major shared matrix.
__device__ __forceinline__ float4 a_fragment(const float* A, int stride, int m0, int k0, int g,
                                             int t) {
  const float* r0 = A + (m0 + g) * stride + k0 + t;
  const float* r1 = r0 + 8 * stride;
  return make_float4(r0[0], r1[0], r0[4], r1[4]);
}

// acc[n] += rows m0 .. m0 + 15 of X Kᵀ, columns 8 (nb + n) .. + 7, over dk (X and K rows of
// kQKStride, zero past dk); the n-tiles wholly above the diagonal are skipped (left as they are).
__device__ __forceinline__ void lower_products(const float* X, const float* Ks, int dk, int m0,
                                               int nb, int g, int t, float (&acc)[4][4]) {
  for (int ks = 0; ks < (dk + 7) / 8; ++ks) {
    float4 ahi, alo;
    split_fragment(a_fragment(X, kQKStride, m0, 8 * ks, g, t), ahi, alo);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const int n0 = 8 * (nb + n);
      if (n0 > m0 + 15) continue;
      const float* kr = Ks + (n0 + g) * kQKStride + 8 * ks + t;  // B[k][n] = K[n][k]
      mma_3xtf32_f32(acc[n], ahi, alo, kr[0], kr[4]);
    }
  }
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

// ---- phase 1: U and W ---------------------------------------------------------------------------
constexpr int kWuSmemFloats = 2 * kChunk * kQKStride  // Qs, Ks
                              + kChunk * kAStride     // A
                              + kChunk * kSub         // diagonal blocks' inverses
                              + kChunk * kDStride     // right-hand sides -> solution
                              + kSub * kDStride       // one block's right-hand sides
                              + kGateFloats;
constexpr size_t kWuSmemBytes = kWuSmemFloats * sizeof(float);

// kFragments: W, Γq and Λk in the tensor-core walk's fragment order, else rows [64][kDK].
template <typename TX, bool kFragments>
__global__ void __launch_bounds__(kThreads, 1) gdn_wu_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + kChunk * kQKStride;
  float* Am = Ks + kChunk * kQKStride;
  float* Tb = Am + kChunk * kAStride;
  float* Dm = Tb + kChunk * kSub;
  float* Xb = Dm + kChunk * kDStride;
  const Gates gt = gates_at(Xb + kSub * kDStride);
  float *beta = gt.beta, *G = gt.G, *gam = gt.gam, *lam = gt.lam;

  const int tid = threadIdx.x;
  ChunkWork cw;
  if (!chunk_work(a, p, cw)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dk = a.dk, dv = a.dv, kh = cw.kh, dk4 = cw.dk4;
  const int64_t t0 = cw.t0;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{a.hv} * dv;
  const TX* qkv = static_cast<const TX*>(a.qkv);

  chunk_qk<TX>(a, t0, L, kh, Qs, Ks);
  chunk_gates<TX>(a, t0, L, h, gt);
  walk_inputs<kFragments>(a, p, chunk, h, Qs, Ks, gam, lam);

  // A (strictly lower): thread (ti, tj) owns rows ti + 16 m, columns tj + 16 m' (m' <= m).
  {
    const int ti = tid >> 4, tj = tid & 15;
    float acc[1][4][4] = {};
    const float* const rows[1] = {Ks};
    lower_dots<1>(rows, Ks, dk4, ti, tj, acc);
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int mp = 0; mp < 4; ++mp) {
        const int i = ti + 16 * m, j = tj + 16 * mp;
        Am[i * kAStride + j] =
            mp <= m && j < i ? beta[i] * __expf(G[i] - G[j]) * acc[0][m][mp] : 0.f;
      }
  }
  __syncthreads();
  diagonal_inverses(Am, Tb, tid);
  __syncthreads();

  // Right-hand sides 32 columns at a time: columns [0, dv) of β v (-> U), then [0, dk) of β Γ k
  // (-> W).
  const int r = tid >> 4, cp = tid & 15;
  const int v_passes = (dv + kBV - 1) / kBV, k_passes = kDK / kBV;  // W: all kDK columns
  float* u_out = p.u + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * dv;
  float* w_out = p.w + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * kDK;
  for (int pass = 0; pass < v_passes + k_passes; ++pass) {
    const bool is_v = pass < v_passes;
    const int col0 = (is_v ? pass : pass - v_passes) * kBV, ncol = is_v ? dv : kDK;
#pragma unroll
    for (int rr = 0; rr < kChunk / 16; ++rr) {
      const int i = r + 16 * rr;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = col0 + 2 * cp + e;
        float x = 0.f;
        if (i < L && col < ncol) {
          x = is_v ? beta[i] * to_f32(qkv[(t0 + i) * width + 2 * key_dim + int64_t{h} * dv + col])
                   : beta[i] * gam[i] * Ks[i * kQKStride + col];
        }
        Dm[i * kDStride + 2 * cp + e] = x;
      }
    }
    __syncthreads();
    blocked_solve(Am, Tb, Dm, Xb, L, r, cp);
    // Rows past L stay as they are (zero right-hand sides: zero); written for every row.
    if (is_v || !kFragments) {  // rows of ncol
      float* dst = is_v ? u_out : w_out;
#pragma unroll
      for (int rr = 0; rr < kChunk / 16; ++rr) {
        const int i = r + 16 * rr;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col0 + 2 * cp + e;
          if (col < ncol)
            dst[static_cast<int64_t>(i) * ncol + col] = i < L ? Dm[i * kDStride + 2 * cp + e] : 0.f;
        }
      }
    } else {  // W's 4 m-tiles x 4 k-steps of this pass, a lane's fragment a thread and step
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int f = tid + q * kThreads, lane = f & 31, g = lane >> 2, t = lane & 3;
        const int i0 = (f >> 7) * 16 + g, i1 = i0 + 8, c0 = ((f >> 5) & 3) * 8 + t;
        auto at = [&](int i, int c) { return i < L ? Dm[i * kDStride + c] : 0.f; };
        *reinterpret_cast<float4*>(w_out + frag_index(i0, col0 + c0, kDK / 8)) =
            make_float4(at(i0, c0), at(i1, c0), at(i0, c0 + 4), at(i1, c0 + 4));
      }
    }
    __syncthreads();  // Dm is the next pass's
  }
}

// ---- phase 1 on the tensor cores (SYV_GDN_MMA=wu; written 2026-12-05, not yet run on a GPU) -----
// gdn_wu_kernel's outputs by FLA's route: A as a 3xTF32 product, T = (I + A)^-1 explicitly (the
// blocked forward substitution on the identity: 2 passes of 32 columns instead of 8 of the right-
// hand sides), then U = T (β v) and W = T (β Γ k) as 3xTF32 products (T is lower triangular: the
// k-steps past a row tile's diagonal are skipped). β v is staged over Q's rows once Γ q is out.
constexpr int kTStride = kChunk + 4;                     // T rows: A-fragment reads hit 32 banks
constexpr int kWuMmaSmemFloats = 2 * kChunk * kQKStride  // Qs (then β v), Ks
                                 + kChunk * kAStride     // A
                                 + kChunk * kSub         // diagonal blocks' inverses
                                 + kChunk * kTStride     // T
                                 + kChunk * kDStride     // identity columns -> T columns
                                 + kSub * kDStride       // one block's right-hand sides
                                 + kGateFloats;
constexpr size_t kWuMmaSmemBytes = kWuMmaSmemFloats * sizeof(float);
static_assert(kWuMmaSmemBytes <= 150016);

template <typename TX, bool kFragments>
__global__ void __launch_bounds__(kThreads, 1) gdn_wu_mma_kernel(GdnArgs a, PhaseScratch p) {
  static_assert(kThreads == 256 && kChunk == 64 && kDK == 128, "8 warps, 64 rows, dv <= 128");
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Vs = Qs;  // β v, once Γ q is written
  float* Ks = Qs + kChunk * kQKStride;
  float* Am = Ks + kChunk * kQKStride;
  float* Tb = Am + kChunk * kAStride;
  float* Tm = Tb + kChunk * kSub;
  float* Dm = Tm + kChunk * kTStride;
  float* Xb = Dm + kChunk * kDStride;
  const Gates gt = gates_at(Xb + kSub * kDStride);
  float *beta = gt.beta, *G = gt.G, *gam = gt.gam, *lam = gt.lam;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gi = lane >> 2, ti = lane & 3;
  ChunkWork cw;
  if (!chunk_work(a, p, cw)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dk = a.dk, dv = a.dv, kh = cw.kh;
  const int64_t t0 = cw.t0;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{a.hv} * dv;
  const TX* qkv = static_cast<const TX*>(a.qkv);

  chunk_qk<TX>(a, t0, L, kh, Qs, Ks);
  chunk_gates<TX>(a, t0, L, h, gt);
  walk_inputs<kFragments>(a, p, chunk, h, Qs, Ks, gam, lam);

  {  // A (strictly lower), as P in gdn_output_mma_kernel: rows 16 (w / 2), columns 32 (w % 2).
    const int m0 = 16 * (warp >> 1), nb = 4 * (warp & 1);
    float acc[4][4] = {};
    lower_products(Ks, Ks, dk, m0, nb, gi, ti, acc);
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = m0 + gi + 8 * (e >> 1), j = 8 * (nb + n) + 2 * ti + (e & 1);
        Am[i * kAStride + j] = j < i ? beta[i] * __expf(G[i] - G[j]) * acc[n][e] : 0.f;
      }
  }
  __syncthreads();               // A written; Γ q out of Qs
  const int n_u = (dv + 7) / 8;  // U's n-tiles (W has kDK / 8)
  for (int f = tid; f < kChunk * n_u * 8; f += kThreads) {
    const int i = f / (n_u * 8), c = f % (n_u * 8);
    Vs[i * kQKStride + c] =
        i < L && c < dv
            ? beta[i] * to_f32(qkv[(t0 + i) * width + 2 * key_dim + int64_t{h} * dv + c])
            : 0.f;
  }
  diagonal_inverses(Am, Tb, tid);
  // T by blocked substitution on the identity's columns, 32 at a time (rows past L keep the
  // identity's: their β v and β Γ k rows are zero).
  const int r = tid >> 4, cp = tid & 15;
  for (int col0 = 0; col0 < kChunk; col0 += kBV) {
#pragma unroll
    for (int rr = 0; rr < kChunk / 16; ++rr)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = r + 16 * rr;
        Dm[i * kDStride + 2 * cp + e] = i == col0 + 2 * cp + e ? 1.f : 0.f;
      }
    __syncthreads();  // (the first pass: Tb and β v written too)
    blocked_solve(Am, Tb, Dm, Xb, L, r, cp);
#pragma unroll
    for (int rr = 0; rr < kChunk / 16; ++rr)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = r + 16 * rr;
        Tm[i * kTStride + col0 + 2 * cp + e] = Dm[i * kDStride + 2 * cp + e];
      }
    __syncthreads();  // Dm is the next pass's; T complete after the last
  }

  // U = T (β v) and W = T (β Γ k): warp w takes rows 16 (w % 4) .. + 15 and every other n-tile
  // of [U | W] from w / 4.
  const int m0 = 16 * (warp & 3), last_ks = m0 / 8 + 1;
  float4 thi[kChunk / 8], tlo[kChunk / 8];
#pragma unroll
  for (int ks = 0; ks < kChunk / 8; ++ks)
    if (ks <= last_ks)
      split_fragment(a_fragment(Tm, kTStride, m0, 8 * ks, gi, ti), thi[ks], tlo[ks]);
  float* u_out = p.u + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * dv;
  float* w_out = p.w + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * kDK;
  for (int n = warp >> 2; n < n_u + kDK / 8; n += 2) {
    const bool is_u = n < n_u;
    const int n0 = 8 * (is_u ? n : n - n_u);
    float acc[4] = {};
#pragma unroll
    for (int ks = 0; ks < kChunk / 8; ++ks) {
      if (ks > last_ks) break;
      const int j0 = 8 * ks + ti, j1 = j0 + 4;
      const float b0 =
          is_u ? Vs[j0 * kQKStride + n0 + gi] : beta[j0] * gam[j0] * Ks[j0 * kQKStride + n0 + gi];
      const float b1 =
          is_u ? Vs[j1 * kQKStride + n0 + gi] : beta[j1] * gam[j1] * Ks[j1 * kQKStride + n0 + gi];
      mma_3xtf32_f32(acc, thi[ks], tlo[ks], b0, b1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = m0 + gi + 8 * (e >> 1), col = n0 + 2 * ti + (e & 1);
      const float x = i < L ? acc[e] : 0.f;
      if (is_u) {
        if (col < dv) u_out[static_cast<int64_t>(i) * dv + col] = x;
      } else if constexpr (kFragments) {
        w_out[frag_index(i, col, kDK / 8)] = x;
      } else {
        w_out[static_cast<int64_t>(i) * kDK + col] = x;
      }
    }
  }
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

// ---- phase 2: the state walk, on the tensor cores (SYV_GDN_MMA=walk) ----------------------------
// Shared S0 [kDK][kSStride] and Δ [64][kSStride], each as its tf32 part and its tf32 remainder:
// a B fragment's reads (rows t, columns g) hit 32 distinct banks.
constexpr int kSStride = kBV + 8;
constexpr int kStateSmemFloats = 2 * (kDK * kSStride + kChunk * kSStride);
constexpr size_t kStateSmemBytes = kStateSmemFloats * sizeof(float);

// c += a b in 3xTF32, the B fragment read from shared memory at b (rows t and t + 4 of column g,
// kSStride apart), its remainders `lo` floats after it.
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const float4& ahi, const float4& alo,
                                           const float* b, int lo) {
  const float b0 = b[0], b1 = b[4 * kSStride], b0l = b[lo], b1l = b[lo + 4 * kSStride];
  mma_tf32(c, alo, b0, b1);
  mma_tf32(c, ahi, b0l, b1l);
  mma_tf32(c, ahi, b0, b1);
}

// c += A B for a warp's 16 rows and 4 n-tiles of 8 columns, over KS k-steps of 8: A from the
// lane's fragments `a`, B [KS * 8][kSStride] in shared memory (remainders `lo` floats after it).
template <int KS>
__device__ __forceinline__ void warp_product(float (&c)[4][4], const float4 (&a)[KS],
                                             const float* b, int lo, int g, int t) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    float4 ahi, alo;
    split_fragment(a[ks], ahi, alo);
#pragma unroll
    for (int n = 0; n < 4; ++n)
      mma_3xtf32(c[n], ahi, alo, b + (ks * 8 + t) * kSStride + 8 * n + g, lo);
  }
}

// Warp w's roles, the block's 8 warps: (a) rows 16 (w % 4) .. + 15 of Δ = U - W S0 (w < 4) or of
// Oq = (Γq) S0 (w >= 4), 4 n-tiles of 8 columns, 16 k-steps over the key dim; (b) rows 16 w .. +
// 15 of the state, 4 n-tiles, 8 k-steps over the chunk's tokens, its accumulators the state.
template <typename TX, typename TS>
__global__ void __launch_bounds__(kThreads, 1) gdn_state_mma_kernel(GdnArgs a, PhaseScratch p) {
  static_assert(kThreads == 256 && kBV == 32 && kDK == 128 && kChunk == 64,
                "the warp roles above are for 8 warps, 32 state columns, dk 128, 64 tokens");
  extern __shared__ float4 smem4[];
  float* S0 = reinterpret_cast<float*>(smem4);  // tf32 parts, then remainders
  float* Ds = S0 + 2 * kDK * kSStride;          // likewise
  constexpr int kS0Lo = kDK * kSStride, kDsLo = kChunk * kSStride;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  WalkTarget<TS> wt;
  if (!walk_target(a, wt)) return;
  const int s = wt.s, h = wt.h, v0 = wt.v0, dk = a.dk, dv = a.dv, hv = a.hv;
  TS* S = wt.state;
  const bool is_w = warp < 4;
  const int ra = (warp & 3) * 16;  // role (a)'s first row

  // The element of a 16 x 32 accumulator set a lane holds: n-tile n, part e (mma_tf32's c).
  auto row_of = [&](int e) { return g + 8 * (e >> 1); };
  auto col_of = [&](int n, int e) { return 8 * n + 2 * t + (e & 1); };
  float st[4][4];  // the state, rows 16 warp + row_of(e), columns v0 + col_of(n, e)
  auto state_io = [&](TS* base, bool store) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = 16 * warp + row_of(e), col = v0 + col_of(n, e);
        const bool in = d < dk && col < dv;
        const int64_t at = static_cast<int64_t>(d) * dv + col;
        if (store) {
          if (in) base[at] = from_f32<TS>(st[n][e]);
        } else {
          st[n][e] = in ? to_f32(base[at]) : 0.f;
        }
      }
  };
  state_io(S, false);

  // The next chunk's operands, fetched a phase ahead: role (a)'s A fragments (W or Γq) and U,
  // role (b)'s A fragments ((Λk)ᵀ).
  float4 fa[kDK / 8], fk[kChunk / 8];
  float un[4][4];
  auto fetch_a = [&](int chunk) {
    const int64_t at = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
    const float4* src = reinterpret_cast<const float4*>((is_w ? p.w : p.qt) + at * kDK) +
                        (ra / 16) * (kDK / 8) * 32 + lane;
#pragma unroll
    for (int ks = 0; ks < kDK / 8; ++ks) fa[ks] = __ldg(src + ks * 32);
    if (is_w) {
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = v0 + col_of(n, e);
          un[n][e] = col < dv ? p.u[(at + ra + row_of(e)) * dv + col] : 0.f;
        }
    }
  };
  auto fetch_k = [&](int chunk) {
    const int64_t at = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
    const float4* src = reinterpret_cast<const float4*>(p.kt + at * kDK) + warp * 8 * 32 + lane;
#pragma unroll
    for (int ks = 0; ks < kChunk / 8; ++ks) fk[ks] = __ldg(src + ks * 32);
  };
  const int first = p.seq_first[s], end = p.seq_first[s + 1];
  if (first < end) {
    fetch_a(first);
    fetch_k(first);
  }
  for (int chunk = first; chunk < end; ++chunk) {
    const ChunkRec rec = p.chunks[chunk];
    const int L = rec.len;
    const int64_t at = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
    const float decay = p.gl[static_cast<int64_t>(chunk) * hv + h];
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int sx = (16 * warp + g + 8 * hi) * kSStride + 8 * n + 2 * t;
        const float2 x = tf32_split(st[n][2 * hi]), y = tf32_split(st[n][2 * hi + 1]);
        *reinterpret_cast<float2*>(&S0[sx]) = make_float2(x.x, y.x);
        *reinterpret_cast<float2*>(&S0[kS0Lo + sx]) = make_float2(x.y, y.y);
      }
    __syncthreads();  // S0 written (and the previous chunk's Δ read)

    // (a) W S0 or (Γq) S0 for rows ra .. ra + 15.
    float acc[4][4] = {};
    warp_product(acc, fa, S0, kS0Lo, g, t);
    float u[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) u[n][e] = un[n][e];
    if (chunk + 1 < end) fetch_a(chunk + 1);
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = ra + row_of(e), c = col_of(n, e), col = v0 + c;
        const int64_t out = (at + i) * dv + col;
        if (is_w) {
          const float dl = i < L && col < dv ? u[n][e] - acc[n][e] : 0.f;
          const float2 x = tf32_split(dl);
          Ds[i * kSStride + c] = x.x;
          Ds[kDsLo + i * kSStride + c] = x.y;
          if (col < dv) p.delta[out] = dl;  // over U, which only this block reads
        } else if (col < dv) {
          p.oq[out] = acc[n][e];  // Γ_i is in the rows of Γq
        }
      }
    __syncthreads();  // Δ written

    // (b) S = Γ_{L-1} S0 + (Λk)ᵀ Δ.
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[n][e] *= decay;
    warp_product(st, fk, Ds, kDsLo, g, t);
    if (chunk + 1 < end) fetch_k(chunk + 1);
    if (rec.save >= 0) {
      state_io(static_cast<TS*>(a.saves) +
                   (static_cast<int64_t>(a.save_dests[rec.save]) * hv + h) * dk * dv,
               true);
    }
  }
  state_io(S, true);
}

// ---- phase 2: the state walk on the CUDA cores (the default) ------------------------------------
constexpr int kCoresStateSmemFloats = 2 * kChunk * kQKStride  // Γ q, Λ k rows
                                      + kChunk * kQKStride    // W rows
                                      + kDK * kBV             // S0
                                      + kChunk * kDStride;    // Δ
constexpr size_t kCoresStateSmemBytes = kCoresStateSmemFloats * sizeof(float);

template <typename TX, typename TS>
__global__ void __launch_bounds__(kThreads, 1) gdn_state_cores_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + kChunk * kQKStride;
  float* Ws = Ks + kChunk * kQKStride;
  float* S0 = Ws + kChunk * kQKStride;
  float* Dm = S0 + kDK * kBV;

  const int tid = threadIdx.x;
  WalkTarget<TS> wt;
  if (!walk_target(a, wt)) return;
  const int s = wt.s, h = wt.h, v0 = wt.v0, dk = a.dk, dv = a.dv, hv = a.hv;
  TS* S = wt.state;
  const int dk4 = (dk + 3) & ~3;
  // A [64][kDK] f32 matrix of the scratch into shared rows of kQKStride: each thread's 8 float4
  // loads issued before any store (one latency, not 8).
  auto stage = [&](const float* src, float* dst) {
    constexpr int kPer = kChunk * kDK / 4 / kThreads;
    float4 v[kPer];
#pragma unroll
    for (int q = 0; q < kPer; ++q)
      v[q] = __ldcs(reinterpret_cast<const float4*>(src) + tid + q * kThreads);
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int f = tid + q * kThreads, i = f / (kDK / 4), d = 4 * (f % (kDK / 4));
      *reinterpret_cast<float4*>(&dst[i * kQKStride + d]) = v[q];
    }
  };

  const int rg = tid >> 4, cp = tid & 15;
  float st[8][2];
  load_state_slice(S, dk, dv, v0, rg, cp, st);

  for (int chunk = p.seq_first[s]; chunk < p.seq_first[s + 1]; ++chunk) {
    const ChunkRec rec = p.chunks[chunk];
    const int L = rec.len;
    const int64_t base = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
#pragma unroll
    for (int r = 0; r < 8; ++r)
      *reinterpret_cast<float2*>(&S0[(rg * 8 + r) * kBV + 2 * cp]) =
          make_float2(st[r][0], st[r][1]);
    stage(p.w + base * kDK, Ws);
    stage(p.qt + base * kDK, Qs);
    stage(p.kt + base * kDK, Ks);
    const float decay = p.gl[static_cast<int64_t>(chunk) * hv + h];
    __syncthreads();

    // Δ = U - W S0 and Oq = Γ S0ᵀq for this block's columns (gated_delta_chunked.cu step 2b).
    {
      const int ri = tid >> 4;
      float ws[4][2] = {}, qs[4][2] = {};
      s0_products(Ws, Qs, S0, dk4, ri, cp, ws, qs);
      const float* u = p.u + base * dv;
      float* delta = p.delta + base * dv;
      float* oq = p.oq + base * dv;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = ri + 16 * m;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = v0 + 2 * cp + e;
          const float uv = col < dv ? u[static_cast<int64_t>(i) * dv + col] : 0.f;
          const float dl = i < L ? uv - ws[m][e] : 0.f;
          Dm[i * kDStride + 2 * cp + e] = dl;
          if (col < dv) {
            delta[static_cast<int64_t>(i) * dv + col] = dl;
            oq[static_cast<int64_t>(i) * dv + col] = qs[m][e];  // Γ_i is in q̃_i
          }
        }
      }
    }
    __syncthreads();
    // S = Γ_last S0 + Σ_j (Λ_j k_j) Δ_jᵀ (gated_delta_chunked.cu step 4b; Λ_j is in k̃_j).
    {
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        st[r][0] *= decay;
        st[r][1] *= decay;
      }
      state_update(st, Dm, Ks, nullptr, L, rg, cp);  // Λ is in k̃
    }
    __syncthreads();  // the next chunk overwrites the shared arrays
    if (rec.save >= 0) {
      TS* dst = static_cast<TS*>(a.saves) +
                (static_cast<int64_t>(a.save_dests[rec.save]) * hv + h) * dk * dv;
      store_state_slice(dst, dk, dv, v0, rg, cp, st);
    }
  }
  store_state_slice(S, dk, dv, v0, rg, cp, st);
}

// ---- phase 3: the output ------------------------------------------------------------------------
constexpr int kOutSmemFloats = 2 * kChunk * kQKStride  // Qs, Ks
                               + kChunk * kAStride     // P
                               + kChunk * kDStride     // Δ columns
                               + kGateFloats;
constexpr size_t kOutSmemBytes = kOutSmemFloats * sizeof(float);
// Every phase fits where gated_delta_chunked.cu's kernel (150,016 bytes) does
// (gdn_chunked_supports() decides for both).
static_assert(kWuSmemBytes <= 150016 && kStateSmemBytes <= 150016 &&
              kCoresStateSmemBytes <= 150016 && kOutSmemBytes <= 150016);

template <typename TX>
__global__ void __launch_bounds__(kThreads, 1) gdn_output_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + kChunk * kQKStride;
  float* Pm = Ks + kChunk * kQKStride;
  float* Dm = Pm + kChunk * kAStride;
  const Gates gt = gates_at(Dm + kChunk * kDStride);
  const float* G = gt.G;

  const int tid = threadIdx.x;
  ChunkWork cw;
  if (!chunk_work(a, p, cw)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dv = a.dv, hv = a.hv, kh = cw.kh, dk4 = cw.dk4;
  const int64_t t0 = cw.t0;
  const int64_t base = (static_cast<int64_t>(chunk) * hv + h) * kChunk;

  chunk_qk<TX>(a, t0, L, kh, Qs, Ks);
  chunk_gates<TX>(a, t0, L, h, gt);
  {  // P (gated_delta_chunked.cu step 2a), zero above the diagonal
    const int ti = tid >> 4, tj = tid & 15;
    float acc[1][4][4] = {};
    const float* const rows[1] = {Qs};
    lower_dots<1>(rows, Ks, dk4, ti, tj, acc);
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int mp = 0; mp < 4; ++mp) {
        const int i = ti + 16 * m, j = tj + 16 * mp;
        Pm[i * kAStride + j] = mp <= m && j <= i ? __expf(G[i] - G[j]) * acc[0][m][mp] : 0.f;
      }
  }
  const int ri = tid >> 4, cp = tid & 15;
  const float* delta = p.delta + base * dv;
  const float* oq = p.oq + base * dv;
  TX* out = static_cast<TX*>(a.out);
  for (int v0 = 0; v0 < dv; v0 += kBV) {
    __syncthreads();  // P written; the previous pass's Δ read
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int i = ri + 16 * m;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = v0 + 2 * cp + e;
        Dm[i * kDStride + 2 * cp + e] =
            i < L && col < dv ? delta[static_cast<int64_t>(i) * dv + col] : 0.f;
      }
    }
    __syncthreads();
    float o[4][2];
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = ri + 16 * m, col = v0 + 2 * cp + e;
        o[m][e] = col < dv ? oq[static_cast<int64_t>(i) * dv + col] : 0.f;
      }
    p_delta(Pm, Dm, L, ri, cp, o);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int i = ri + 16 * m;
      if (i >= L) continue;
      TX* orow = out + (t0 + i) * hv * dv + int64_t{h} * dv;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = v0 + 2 * cp + e;
        if (col < dv) orow[col] = from_f32<TX>(o[m][e]);
      }
    }
  }
}

// ---- phase 3 on the tensor cores (SYV_GDN_MMA=output; written 2026-12-05, not yet run on a GPU) -
// P = Q Kᵀ and o = Oq + P Δ as 3xTF32 mma.sync products (gdn_output_kernel's math; dv <= kDK).
// Shared P rows of kPStride and Δ rows of kVStride: A-fragment reads of P (rows g, columns t) and
// B-fragment reads of Δ (rows t, columns g) hit 32 distinct banks, as do Q's and K's at kQKStride.
constexpr int kPStride = kChunk + 4;
constexpr int kVStride = kDK + 8;
constexpr int kOutMmaSmemFloats = 2 * kChunk * kQKStride  // Qs, Ks
                                  + kChunk * kPStride     // P
                                  + kChunk * kVStride     // Δ
                                  + kGateFloats;
constexpr size_t kOutMmaSmemBytes = kOutMmaSmemFloats * sizeof(float);
static_assert(kOutMmaSmemBytes <= 150016);

template <typename TX>
__global__ void __launch_bounds__(kThreads, 1) gdn_output_mma_kernel(GdnArgs a, PhaseScratch p) {
  static_assert(kThreads == 256 && kChunk == 64 && kDK == 128, "8 warps, 64 rows, dv <= 128");
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + kChunk * kQKStride;
  float* Pm = Ks + kChunk * kQKStride;
  float* Dm = Pm + kChunk * kPStride;
  const Gates gt = gates_at(Dm + kChunk * kVStride);
  const float* G = gt.G;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gi = lane >> 2, ti = lane & 3;
  ChunkWork cw;
  if (!chunk_work(a, p, cw)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dv = a.dv, hv = a.hv, kh = cw.kh;
  const int64_t t0 = cw.t0;
  const int64_t base = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
  const int n_tiles = (dv + 7) / 8;  // of Δ's and o's columns

  // Δ into shared memory (columns up to the last n-tile's end zero past dv).
  const float* delta = p.delta + base * dv;
  for (int f = tid; f < kChunk * n_tiles * 8; f += kThreads) {
    const int i = f / (n_tiles * 8), c = f % (n_tiles * 8);
    Dm[i * kVStride + c] = i < L && c < dv ? delta[static_cast<int64_t>(i) * dv + c] : 0.f;
  }
  chunk_qk<TX>(a, t0, L, kh, Qs, Ks);
  chunk_gates<TX>(a, t0, L, h, gt);

  {  // P: warp w takes rows 16 (w / 2) .. + 15, columns 32 (w % 2) .. + 31 (n-tiles past the
     // diagonal skipped), k-steps over dk.
    const int m0 = 16 * (warp >> 1), nb = 4 * (warp & 1);
    float acc[4][4] = {};
    lower_products(Qs, Ks, a.dk, m0, nb, gi, ti, acc);
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = m0 + gi + 8 * (e >> 1), j = 8 * (nb + n) + 2 * ti + (e & 1);
        Pm[i * kPStride + j] = j <= i ? __expf(G[i] - G[j]) * acc[n][e] : 0.f;
      }
  }
  __syncthreads();  // P and Δ written

  // o = Oq + P Δ: warp w takes rows 16 (w % 4) .. + 15 and n-tiles w / 4, w / 4 + 2, ...; P's
  // k-steps past the rows' diagonal are zero and skipped.
  const int m0 = 16 * (warp & 3), nq = warp >> 2;
  const float* oq = p.oq + base * dv;
  TX* out = static_cast<TX*>(a.out);
  float acc[8][4];
#pragma unroll
  for (int q = 0; q < 8; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = m0 + gi + 8 * (e >> 1), col = 8 * (nq + 2 * q) + 2 * ti + (e & 1);
      acc[q][e] = col < dv ? oq[static_cast<int64_t>(i) * dv + col] : 0.f;
    }
  for (int ks = 0; ks <= m0 / 8 + 1; ++ks) {
    float4 ahi, alo;
    split_fragment(a_fragment(Pm, kPStride, m0, 8 * ks, gi, ti), ahi, alo);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const int n0 = 8 * (nq + 2 * q);
      if (n0 >= n_tiles * 8) continue;
      const float* d = Dm + (8 * ks + ti) * kVStride + n0 + gi;
      mma_3xtf32_f32(acc[q], ahi, alo, d[0], d[4 * kVStride]);
    }
  }
#pragma unroll
  for (int q = 0; q < 8; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = m0 + gi + 8 * (e >> 1), col = 8 * (nq + 2 * q) + 2 * ti + (e & 1);
      if (i < L && col < dv)
        out[(t0 + i) * hv * dv + int64_t{h} * dv + col] = from_f32<TX>(acc[q][e]);
    }
}

template <typename K>
void configure(K* kernel, size_t smem) {
  SYV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
}

PhaseScratch carve(const GdnArgs& a, int64_t n, void* scratch) {
  auto* at = static_cast<char*>(scratch);
  auto take = [&](int64_t bytes) {
    char* here = at;
    at += (bytes + 255) / 256 * 256;
    return here;
  };
  PhaseScratch p;
  p.capacity = static_cast<int32_t>(n);
  p.chunks = reinterpret_cast<ChunkRec*>(take(n * static_cast<int64_t>(sizeof(ChunkRec))));
  p.count = reinterpret_cast<int32_t*>(take(4));
  p.seq_first = reinterpret_cast<int32_t*>(take((int64_t{a.num_seqs} + 1) * 4));
  const int64_t rows = n * a.hv * kChunk;
  p.u = reinterpret_cast<float*>(take(rows * a.dv * 4));
  p.w = reinterpret_cast<float*>(take(rows * kDK * 4));
  p.qt = reinterpret_cast<float*>(take(rows * kDK * 4));
  p.kt = reinterpret_cast<float*>(take(rows * kDK * 4));
  p.gl = reinterpret_cast<float*>(take(n * a.hv * 4));
  p.delta = p.u;
  p.oq = reinterpret_cast<float*>(take(rows * a.dv * 4));
  return p;
}

// -1: not read from SYV_GDN_MMA yet; else a mask of kGdnMma* bits.
std::atomic<int> g_mma{-1};

unsigned mma_mask() {
  int v = g_mma.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GDN_MMA");
    v = 0;
    if (e && std::strcmp(e, "all") == 0) v = kGdnMmaAll;
    if (e && std::strstr(e, "wu")) v |= kGdnMmaWu;
    if (e && std::strstr(e, "walk")) v |= kGdnMmaWalk;
    if (e && std::strstr(e, "output")) v |= kGdnMmaOutput;
    g_mma.store(v, std::memory_order_relaxed);
  }
  return static_cast<unsigned>(v);
}

template <typename TX, typename TS>
void launch_typed(const GdnArgs& a, int64_t chunk_bound, void* scratch, cudaStream_t s) {
  static const bool configured = [] {
    configure(gdn_wu_kernel<TX, false>, kWuSmemBytes);
    configure(gdn_wu_kernel<TX, true>, kWuSmemBytes);
    configure(gdn_wu_mma_kernel<TX, false>, kWuMmaSmemBytes);
    configure(gdn_wu_mma_kernel<TX, true>, kWuMmaSmemBytes);
    configure(gdn_state_cores_kernel<TX, TS>, kCoresStateSmemBytes);
    configure(gdn_state_mma_kernel<TX, TS>, kStateSmemBytes);
    configure(gdn_output_kernel<TX>, kOutSmemBytes);
    configure(gdn_output_mma_kernel<TX>, kOutMmaSmemBytes);
    return true;
  }();
  (void)configured;
  const unsigned mask = mma_mask();
  const bool walk_mma = (mask & kGdnMmaWalk) != 0, narrow = a.dv <= kDK;
  const bool wu_mma = (mask & kGdnMmaWu) != 0 && narrow;
  const bool out_mma = (mask & kGdnMmaOutput) != 0 && narrow;
  const PhaseScratch p = carve(a, chunk_bound, scratch);
  const auto chunks = static_cast<unsigned>(chunk_bound);
  const dim3 per_chunk(chunks, static_cast<unsigned>(a.hv));
  launch_k(gdn_chunk_table_kernel, 1, 32, 0, s, a, p);
  // Phase 1 writes W, Γq and Λk in the order the walk reads them.
  if (wu_mma) {
    launch_k(walk_mma ? gdn_wu_mma_kernel<TX, true> : gdn_wu_mma_kernel<TX, false>, per_chunk,
             kThreads, kWuMmaSmemBytes, s, a, p);
  } else {
    launch_k(walk_mma ? gdn_wu_kernel<TX, true> : gdn_wu_kernel<TX, false>, per_chunk, kThreads,
             kWuSmemBytes, s, a, p);
  }
  const auto blocks = static_cast<unsigned>(int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kBV));
  if (walk_mma) {
    launch_k(gdn_state_mma_kernel<TX, TS>, blocks, kThreads, kStateSmemBytes, s, a, p);
  } else {
    launch_k(gdn_state_cores_kernel<TX, TS>, blocks, kThreads, kCoresStateSmemBytes, s, a, p);
  }
  if (out_mma) {
    launch_k(gdn_output_mma_kernel<TX>, per_chunk, kThreads, kOutMmaSmemBytes, s, a, p);
  } else {
    launch_k(gdn_output_kernel<TX>, per_chunk, kThreads, kOutSmemBytes, s, a, p);
  }
}

}  // namespace

void set_gdn_mma(unsigned mask) {
  g_mma.store(static_cast<int>(mask), std::memory_order_relaxed);
}

int64_t gdn_phases_scratch_bytes(const GdnArgs& a, int64_t n) {
  const int64_t rows = n * a.hv * kChunk;
  auto round = [](int64_t b) { return (b + 255) / 256 * 256; };
  return round(n * static_cast<int64_t>(sizeof(ChunkRec))) + round(4) +
         round((int64_t{a.num_seqs} + 1) * 4) + round(rows * a.dv * 4) * 2 +
         round(rows * kDK * 4) * 3 + round(n * a.hv * 4);
}

void launch_gdn_phases(const GdnArgs& a, DType x_t, DType state_t, int64_t chunks, void* scratch,
                       cudaStream_t s) {
  if (a.num_seqs == 0 || chunks == 0) return;
  if (a.dk > kDK)
    cuda_fail(__FILE__, __LINE__, "dk",
              "the chunked gated delta rule supports key head dims <= 128");
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (state_t == DType::F32) {
      launch_typed<TX, float>(a, chunks, scratch, s);
    } else if (state_t == DType::BF16) {
      launch_typed<TX, bf16>(a, chunks, scratch, s);
    } else {
      cuda_fail(__FILE__, __LINE__, "state_t", "gated delta rule state must be f32 or bf16");
    }
  });
}

}  // namespace syv::cuda
