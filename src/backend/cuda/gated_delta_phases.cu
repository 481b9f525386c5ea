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
// 1. One block per (chunk, value head): A, the diagonal blocks' inverses, then U and W: by default
//    gdn_wu_products_kernel (T = (I + A)^-1 explicitly by the blocked solve on the identity's
//    columns, then U and W as register-tiled products); gdn_wu_kernel with SYV_GDN_WU=blocked
//    (blocked forward substitution over 32 columns at a time of [β v | β Γ k]) or =columns (a
//    column a thread: solve_by_columns); also Γ q, Λ k and Γ_{L-1}, so that the walk needs no
//    norms, gates or exponentials.
// 2. gdn_state_cores_kernel, one block per (sequence, value head, 32 state columns) over the
//    sequence's chunks: W, Γ q and Λ k staged by batched 16-byte loads, Δ = U - W S0 and
//    Oq = (Γ q) S0 into the scratch (Δ over U), then S = Γ_{L-1} S0 + (Λ k)ᵀ Δ.
// 3. One block per (chunk, value head): P and o = Oq + P Δ, by default in
//    gdn_output_products_kernel (P Δ as a register-tiled product), with SYV_GDN_OUT=dots in
//    gdn_output_kernel (passes of 32 columns).
// Those are fp32 on the CUDA cores. Each phase has a tensor-core form besides
// (gated_delta_phases_mma.cu; kernels.h kGdnMma*, SYV_GDN_MMA): gdn_wu_mma_kernel (A, then
// T = (I + A)^-1 explicitly by the substitution on the identity, then U = T β v and W = T β Γ k as
// products), gdn_state_mma_kernel (the state in the mma accumulators across chunks) and
// gdn_output_mma_kernel (P and P Δ as products); tools/emulate/gdn_phases_emulate.py checks
// their index logic on the CPU. The walk takes its tensor-core form by default, phases 1 and 3
// their CUDA-core forms (H100, 2026-12-05, a layer of 8,192 tokens: the walk 17% faster on the
// tensor cores, phases 1 and 3 slower; docs/cuda-backend-notes.md Run 22; the products forms of
// phases 1 and 3, the default since, took a layer from 2.53 to 2.27 ms, Run 32). Their products
// are mma.sync m16n8k8 in 3xTF32: each f32 operand split into a tf32 value and a tf32 remainder, a
// b = a_lo b_hi + a_hi b_lo + a_hi b_hi with fp32 accumulation, which keeps f32's accuracy where
// one tf32 product (10 mantissa bits) would not (FLA's Triton kernels round to the input dtype
// instead). For the tensor-core walk phase 1 writes W, Γq and Λk in the mma's A-fragment order
// (gated_delta_phases.cuh frag_index), so the walk loads a warp's operands as 16-byte loads and
// fetches the next chunk's while it works on this one. Sequences shorter than GdnArgs::chunked_from
// are the token-by-token kernel's, as with gated_delta_chunked.cu.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/gated_delta_phases.cuh"
#include "backend/gdn_chunks.h"

namespace syv::cuda {
namespace gdn_phases {
namespace {

__global__ void gdn_chunk_table_kernel(GdnArgs a, PhaseScratch p) {
  pdl_wait();
  pdl_trigger();
  if (threadIdx.x != 0) return;
  int n = 0;
  for (int s = 0; s < a.num_seqs; ++s) {
    p.seq_first[s] = n;
    int slot, begin, len;
    if (!chunked_sequence(a, s, slot, begin, len)) continue;
    const int first_save = a.num_saves > 0 ? a.save_starts[s] : 0;
    const int n_saves = a.num_saves > 0 ? a.save_starts[s + 1] - first_save : 0;
    for_each_gdn_chunk(len, a.save_after + first_save, n_saves, [&](int c0, int L, int save) {
      if (n >= p.capacity) __trap();  // the host's gdn_chunk_bound() was wrong
      p.chunks[n++] = ChunkRec{s, c0, L, save >= 0 ? first_save + save : -1};
    });
  }
  p.seq_first[a.num_seqs] = n;
  *p.count = n;
}

// The chunk's decayed lower-triangular dots M_ij = b_i exp(G_i - G_j) X_i·K_j, b_i = beta[i] (1
// where beta is null), for j < i (kStrict: A) or j <= i (P), zero above; each of the 64 x 64
// entries handed to store(i, j, value) once. Thread (ti, tj) = (tid >> 4, tid & 15) owns rows
// ti + 16 m, columns tj + 16 m'. Rows of kQKStride floats.
template <bool kStrict, typename Store>
__device__ __forceinline__ void decayed_lower(const float* X, const float* K, const float* G,
                                              const float* beta, int dk4, Store store) {
  const int ti = threadIdx.x >> 4, tj = threadIdx.x & 15;
  float acc[1][4][4] = {};
  const float* const rows[1] = {X};
  lower_dots<1>(rows, K, dk4, ti, tj, acc);
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int mp = 0; mp < 4; ++mp) {
      const int i = ti + 16 * m, j = tj + 16 * mp;
      const bool lower = mp <= m && (kStrict ? j < i : j <= i);
      const float b = beta != nullptr ? beta[i] : 1.f;
      store(i, j, lower ? b * __expf(G[i] - G[j]) * acc[0][m][mp] : 0.f);
    }
}

// Phase 1's start, every CUDA-core form: the block's chunk work (false past the table's chunks),
// the chunk's normalised q / k rows and gates in shared memory, the walk's inputs written
// (walk_inputs) and A into Am (rows of kAStride; not yet synchronised).
template <typename TX, bool kFragments>
__device__ __forceinline__ bool wu_start(const GdnArgs& a, const PhaseScratch& p, ChunkWork& cw,
                                         float* Qs, float* Ks, const Gates& gt, float* Am) {
  if (!chunk_work(a, p, cw)) return false;
  chunk_qk<TX>(a, cw.t0, cw.L, cw.kh, Qs, Ks);
  chunk_gates<TX>(a, cw.t0, cw.L, cw.h, gt);
  walk_inputs<kFragments>(a, p, cw.chunk, cw.h, Qs, Ks, gt.gam, gt.lam);
  decayed_lower<true>(Ks, Ks, gt.G, gt.beta, cw.dk4,
                      [&](int i, int j, float v) { Am[i * kAStride + j] = v; });
  return true;
}

// Phase 3's start, both CUDA-core forms: the block's chunk work (false past the table's chunks),
// the chunk's normalised q / k rows and gates in shared memory, and P handed to store(i, j, v).
template <typename TX, typename Store>
__device__ __forceinline__ bool output_start(const GdnArgs& a, const PhaseScratch& p, ChunkWork& cw,
                                             float* Qs, float* Ks, const Gates& gt, Store store) {
  if (!chunk_work(a, p, cw)) return false;
  chunk_qk<TX>(a, cw.t0, cw.L, cw.kh, Qs, Ks);
  chunk_gates<TX>(a, cw.t0, cw.L, cw.h, gt);
  decayed_lower<false>(Qs, Ks, gt.G, nullptr, cw.dk4, store);
  return true;
}

// ---- phase 1: U and W ---------------------------------------------------------------------------
constexpr int kWuSmemFloats = 2 * kChunk * kQKStride  // Qs, Ks
                              + kChunk * kAStride     // A
                              + kChunk * kSub         // diagonal blocks' inverses
                              + kChunk * kDStride     // right-hand sides -> solution
                              + kSub * kDStride       // one block's right-hand sides
                              + kGateFloats;
constexpr size_t kWuSmemBytes = kWuSmemFloats * sizeof(float);

// Phase 1's shared memory as both of its kernels carve it (kWuSmemFloats' parts, in that order).
struct WuSmem {
  float *Qs, *Ks, *Am, *Tb, *Dm, *Xb;
  Gates gt;
};
__device__ __forceinline__ WuSmem wu_smem(float4* smem4) {
  WuSmem m;
  m.Qs = reinterpret_cast<float*>(smem4);
  m.Ks = m.Qs + kChunk * kQKStride;
  m.Am = m.Ks + kChunk * kQKStride;
  m.Tb = m.Am + kChunk * kAStride;
  m.Dm = m.Tb + kChunk * kSub;
  m.Xb = m.Dm + kChunk * kDStride;
  m.gt = gates_at(m.Xb + kSub * kDStride);
  return m;
}

// U and W of phase 1 by columns (gdn_wu_kernel<..., kColumns = true>): each thread takes whole
// columns of the right-hand sides [β v | β Γ k] (dv + kDK of them) and solves (I + A) x = d down
// the chunk's 64 rows by forward substitution, x in registers: x_i = d_i - Σ_{j<i} A_ij x_j, the
// sum in four partial sums over j mod 4, A's row read as float4 broadcasts (entries j >= i are
// zero). No block-wide synchronisation and no shared right-hand sides, against the blocked solve's
// 8 passes of 4 synchronised steps (ncu, H100: gdn_wu_kernel bound by shared-memory traffic, L1
// 69% busy). Measured 1.2x slower than the blocked solve (H100, 2026-12-06; one block an SM at
// 255 registers). Rows past L are written as zeros.
template <typename TX, bool kFragments>
__device__ __forceinline__ void solve_by_columns(const GdnArgs& a, const float* Am, const float* Ks,
                                                 const float* beta, const float* gam, int L,
                                                 int64_t t0, int h, float* u_out, float* w_out) {
  const int dv = a.dv;
  const int64_t key_dim = int64_t{a.hk} * a.dk, width = 2 * key_dim + int64_t{a.hv} * dv;
  const TX* v_rows = static_cast<const TX*>(a.qkv) + t0 * width + 2 * key_dim + int64_t{h} * dv;
  for (int c = threadIdx.x; c < dv + kDK; c += kThreads) {
    const bool is_v = c < dv;
    const int col = is_v ? c : c - dv;
    float x[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) x[i] = 0.f;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      float d = 0.f;
      if (i < L) {
        d = is_v ? beta[i] * to_f32(v_rows[int64_t{i} * width + col])
                 : beta[i] * gam[i] * Ks[i * kQKStride + col];
      }
      float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < i; j += 4) {
        const float4 av = *reinterpret_cast<const float4*>(&Am[i * kAStride + j]);
        s[0] += av.x * x[j];
        s[1] += av.y * x[j + 1];
        s[2] += av.z * x[j + 2];
        s[3] += av.w * x[j + 3];
      }
      x[i] = d - ((s[0] + s[1]) + (s[2] + s[3]));
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float xi = i < L ? x[i] : 0.f;
      if (is_v) {
        u_out[static_cast<int64_t>(i) * dv + col] = xi;
      } else {
        w_out[kFragments ? frag_index(i, col, kDK / 8) : i * kDK + col] = xi;
      }
    }
  }
}

// kFragments: W, Γq and Λk in the tensor-core walk's fragment order, else rows [64][kDK].
// kColumns: U and W by solve_by_columns instead of the blocked solve.
// (kColumns takes 255 registers, no spills, so 1 block an SM: capped at 128 for 2 blocks it
// spilled 328 bytes, sm_90a.)
template <typename TX, bool kFragments, bool kColumns>
__global__ void __launch_bounds__(kThreads, 1) gdn_wu_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  const WuSmem m = wu_smem(smem4);
  float *Qs = m.Qs, *Ks = m.Ks, *Am = m.Am, *Tb = m.Tb, *Dm = m.Dm, *Xb = m.Xb;
  const Gates gt = m.gt;
  const float *beta = gt.beta, *gam = gt.gam;

  const int tid = threadIdx.x;
  ChunkWork cw;
  if (!wu_start<TX, kFragments>(a, p, cw, Qs, Ks, gt, Am)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dk = a.dk, dv = a.dv;
  const int64_t t0 = cw.t0;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{a.hv} * dv;
  const TX* qkv = static_cast<const TX*>(a.qkv);
  __syncthreads();  // A
  float* u_out = p.u + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * dv;
  float* w_out = p.w + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * kDK;
  if constexpr (kColumns) {
    solve_by_columns<TX, kFragments>(a, Am, Ks, beta, gam, L, t0, h, u_out, w_out);
    return;
  }
  diagonal_inverses(Am, Tb, tid);
  __syncthreads();

  // Right-hand sides 32 columns at a time: columns [0, dv) of β v (-> U), then [0, dk) of β Γ k
  // (-> W).
  const int r = tid >> 4, cp = tid & 15;
  const int v_passes = (dv + kBV - 1) / kBV, k_passes = kDK / kBV;  // W: all kDK columns
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

// Phase 1 by products (the default; dv <= kDK, else the blocked solve): T = (I + A)^-1
// explicitly, by the blocked solve on the identity's columns (2 passes of 32 columns, where the
// blocked form takes 8 of [β v | β Γ k]), its columns scaled as Tu = T diag(β) and
// Tw = T diag(β Γ), then U = Tu V and W = Tw K as products on the CUDA cores, each thread 8 rows x
// 4 columns of both (64 accumulators; 6 16-byte shared loads a step for 64 FMAs, where the blocked
// solve reads shared memory once per FMA pair: Run 22's ncu found gdn_wu_kernel bound by shared-
// memory traffic). The products skip T's zero upper blocks exactly (rows i < 16 s of the columns
// j in [16 s, 16 s + 16)).
// Shared memory (the blocked form's layout and size, kWuSmemBytes, two blocks an SM):
//   [0, kQKStride x 64): Qs, then (after walk_inputs) TuT and TwT [64 j][64] with row i of T at
//     column (i % 8) * 8 + i / 8 (thread group ri's rows ri + 8 r contiguous), then W staged.
//   Ks: the normalised k rows (W's right-hand side as Λ-free K).
//   [Am, gates): A, Tb, Dm, Xb for the solve; then V's rows [64][kQKStride].
constexpr int perm_row(int i) {
  return (i % 8) * 8 + i / 8;
}
static_assert(2 * kChunk * kChunk <= kChunk * kQKStride, "TuT and TwT fit where Qs was");
static_assert(kChunk * kQKStride <=
                  kChunk * kAStride + kChunk * kSub + kChunk * kDStride + kSub * kDStride,
              "V's rows fit where the solve's arrays were");

template <typename TX, bool kFragments>
__global__ void __launch_bounds__(kThreads, 2) gdn_wu_products_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  const WuSmem m = wu_smem(smem4);
  float *Qs = m.Qs, *Ks = m.Ks, *Am = m.Am, *Tb = m.Tb, *Dm = m.Dm, *Xb = m.Xb;
  const Gates gt = m.gt;
  const float *beta = gt.beta, *gam = gt.gam;
  float* TuT = Qs;                    // [64 j][64 perm(i)]
  float* TwT = Qs + kChunk * kChunk;  // [64 j][64 perm(i)]
  float* Vs = Am;                     // [64 j][kQKStride]
  float* Ws = Qs;                     // [64 i][kQKStride], W staged for the fragment order

  const int tid = threadIdx.x;
  ChunkWork cw;
  if (!wu_start<TX, kFragments>(a, p, cw, Qs, Ks, gt, Am)) return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dk = a.dk, dv = a.dv;
  const int64_t t0 = cw.t0;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{a.hv} * dv;
  const TX* v_rows = static_cast<const TX*>(a.qkv) + t0 * width + 2 * key_dim + int64_t{h} * dv;
  __syncthreads();  // A; walk_inputs' reads of Qs are done
  diagonal_inverses(Am, Tb, tid);

  // T's columns 32 at a time: the identity's columns [c0, c0 + 32) (rows past L zero) through
  // the blocked solve, then into TuT and TwT scaled by the column's β and β Γ (zero past L).
  const int r = tid >> 4, cp = tid & 15;
  for (int c0 = 0; c0 < kChunk; c0 += kBV) {
#pragma unroll
    for (int rr = 0; rr < kChunk / 16; ++rr) {
      const int i = r + 16 * rr;
#pragma unroll
      for (int e = 0; e < 2; ++e)
        Dm[i * kDStride + 2 * cp + e] = i < L && i == c0 + 2 * cp + e ? 1.f : 0.f;
    }
    __syncthreads();  // Dm; (first pass) Tb
    blocked_solve(Am, Tb, Dm, Xb, L, r, cp);
#pragma unroll
    for (int rr = 0; rr < kChunk / 16; ++rr) {
      const int i = r + 16 * rr;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = c0 + 2 * cp + e;
        const float t = i < L && j < L ? Dm[i * kDStride + 2 * cp + e] : 0.f;
        TuT[j * kChunk + perm_row(i)] = t * beta[j];
        TwT[j * kChunk + perm_row(i)] = t * beta[j] * gam[j];
      }
    }
    __syncthreads();  // Dm is the next pass's
  }
  // V's rows where the solve's arrays were (rows past L and columns past dv zero).
  for (int f = tid; f < kChunk * (kDK / 4); f += kThreads) {
    const int j = f / (kDK / 4), c = 4 * (f % (kDK / 4));
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      v[e] = j < L && c + e < dv ? to_f32(v_rows[int64_t{j} * width + c + e]) : 0.f;
    *reinterpret_cast<float4*>(&Vs[j * kQKStride + c]) = make_float4(v[0], v[1], v[2], v[3]);
  }
  __syncthreads();

  // U = Tu V and W = Tw K: warp ri takes rows ri + 8 rr, lane columns 4 lane .. 4 lane + 3.
  const int ri = tid >> 5, c = 4 * (tid & 31);
  float u[8][4] = {}, w[8][4] = {};
#pragma unroll
  for (int sb = 0; sb < kChunk / 16; ++sb) {
    if (16 * sb >= L) break;
      // Rows ri + 8 rr with rr < 2 sb are above column 16 sb: T's entries there are zero.
#pragma unroll 4
    for (int jj = 0; jj < 16; ++jj) {
      const int j = 16 * sb + jj;
      const float4 tu0 = *reinterpret_cast<const float4*>(&TuT[j * kChunk + ri * 8]);
      const float4 tu1 = *reinterpret_cast<const float4*>(&TuT[j * kChunk + ri * 8 + 4]);
      const float4 tw0 = *reinterpret_cast<const float4*>(&TwT[j * kChunk + ri * 8]);
      const float4 tw1 = *reinterpret_cast<const float4*>(&TwT[j * kChunk + ri * 8 + 4]);
      const float4 vj = *reinterpret_cast<const float4*>(&Vs[j * kQKStride + c]);
      const float4 kj = *reinterpret_cast<const float4*>(&Ks[j * kQKStride + c]);
      const float tu[8] = {tu0.x, tu0.y, tu0.z, tu0.w, tu1.x, tu1.y, tu1.z, tu1.w};
      const float tw[8] = {tw0.x, tw0.y, tw0.z, tw0.w, tw1.x, tw1.y, tw1.z, tw1.w};
      const float vv[4] = {vj.x, vj.y, vj.z, vj.w}, kk[4] = {kj.x, kj.y, kj.z, kj.w};
#pragma unroll
      for (int rr = 2 * sb; rr < 8; ++rr)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          u[rr][e] += tu[rr] * vv[e];
          w[rr][e] += tw[rr] * kk[e];
        }
    }
  }
  // U rows straight out (rows past L are zero: T's rows are); W as rows, or staged for the
  // fragment order.
  float* u_out = p.u + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * dv;
  float* w_out = p.w + (static_cast<int64_t>(chunk) * a.hv + h) * kChunk * kDK;
#pragma unroll
  for (int rr = 0; rr < 8; ++rr) {
    const int i = ri + 8 * rr;
    float* urow = u_out + static_cast<int64_t>(i) * dv;
    if (dv % 4 == 0 && c + 4 <= dv) {
      *reinterpret_cast<float4*>(urow + c) = make_float4(u[rr][0], u[rr][1], u[rr][2], u[rr][3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c + e < dv) urow[c + e] = u[rr][e];
    }
  }
  if constexpr (!kFragments) {
#pragma unroll
    for (int rr = 0; rr < 8; ++rr)
      *reinterpret_cast<float4*>(w_out + (ri + 8 * rr) * kDK + c) =
          make_float4(w[rr][0], w[rr][1], w[rr][2], w[rr][3]);
  } else {
    __syncthreads();  // every thread's reads of TuT and TwT are done
#pragma unroll
    for (int rr = 0; rr < 8; ++rr)
      *reinterpret_cast<float4*>(&Ws[(ri + 8 * rr) * kQKStride + c]) =
          make_float4(w[rr][0], w[rr][1], w[rr][2], w[rr][3]);
    __syncthreads();
    // W's 4 m-tiles x 16 k-steps, a lane's fragment a float4 (gdn_wu_kernel's order).
    for (int f = tid; f < kChunk * kDK / 4; f += kThreads) {
      const int lane = f & 31, g = lane >> 2, t = lane & 3;
      const int i0 = (f >> 9) * 16 + g, i1 = i0 + 8, c0 = ((f >> 5) & 15) * 8 + t;
      *reinterpret_cast<float4*>(w_out + 4 * f) =
          make_float4(Ws[i0 * kQKStride + c0], Ws[i1 * kQKStride + c0], Ws[i0 * kQKStride + c0 + 4],
                      Ws[i1 * kQKStride + c0 + 4]);
    }
  }
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
      float* delta = p.u + base * dv;
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

// Phase 3's shared memory as both of its kernels carve it (kOutSmemFloats' parts, in that order).
struct OutSmem {
  float *Qs, *Ks, *Pm, *Dm;
  Gates gt;
};
__device__ __forceinline__ OutSmem out_smem(float4* smem4) {
  OutSmem m;
  m.Qs = reinterpret_cast<float*>(smem4);
  m.Ks = m.Qs + kChunk * kQKStride;
  m.Pm = m.Ks + kChunk * kQKStride;
  m.Dm = m.Pm + kChunk * kAStride;
  m.gt = gates_at(m.Dm + kChunk * kDStride);
  return m;
}
static_assert(kWuSmemBytes <= kMaxSmemBytes && kCoresStateSmemBytes <= kMaxSmemBytes &&
              kOutSmemBytes <= kMaxSmemBytes);

template <typename TX>
__global__ void __launch_bounds__(kThreads, 1) gdn_output_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  const OutSmem m = out_smem(smem4);
  float *Qs = m.Qs, *Ks = m.Ks, *Pm = m.Pm, *Dm = m.Dm;
  const Gates gt = m.gt;

  const int tid = threadIdx.x;
  ChunkWork cw;
  // P (gated_delta_chunked.cu step 2a), zero above the diagonal.
  if (!output_start<TX>(a, p, cw, Qs, Ks, gt,
                        [&](int i, int j, float v) { Pm[i * kAStride + j] = v; }))
    return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dv = a.dv, hv = a.hv;
  const int64_t t0 = cw.t0;
  const int64_t base = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
  const int ri = tid >> 4, cp = tid & 15;
  const float* delta = p.u + base * dv;
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

// Phase 3 by products (the default; dv <= kDK, else gdn_output_kernel): P as
// gdn_output_kernel computes it, stored transposed with rows permuted as phase 1 by products
// stores T (PT [64 j][64 perm_row(i)], where P was), Δ's rows staged where q was, then o = Oq +
// P Δ with each thread 8 rows x 4 columns (3 16-byte shared loads a step for 32 FMAs, where
// p_delta takes 8 loads for 32), skipping P's zero upper blocks exactly as phase 1 by products
// skips T's. Shared memory: gdn_output_kernel's layout and size (kOutSmemBytes).
static_assert(kChunk * kChunk <= kChunk * kAStride, "PT fits where P was");

template <typename TX>
__global__ void __launch_bounds__(kThreads, 2)
    gdn_output_products_kernel(GdnArgs a, PhaseScratch p) {
  extern __shared__ float4 smem4[];
  const OutSmem m = out_smem(smem4);
  float *Qs = m.Qs, *Ks = m.Ks;
  float* PT = m.Pm;  // [64 j][64 perm_row(i)]
  const Gates gt = m.gt;
  float* Ds = Qs;  // [64 j][kQKStride]: Δ's rows, once P is computed

  const int tid = threadIdx.x;
  ChunkWork cw;
  // P, zero above the diagonal, transposed.
  if (!output_start<TX>(a, p, cw, Qs, Ks, gt,
                        [&](int i, int j, float v) { PT[j * kChunk + perm_row(i)] = v; }))
    return;
  const int chunk = cw.chunk, h = cw.h;
  const int L = cw.L, dv = a.dv, hv = a.hv;
  const int64_t t0 = cw.t0;
  const int64_t base = (static_cast<int64_t>(chunk) * hv + h) * kChunk;
  __syncthreads();  // PT written; every read of Qs done
  const float* delta = p.u + base * dv;
  for (int f = tid; f < kChunk * (kDK / 4); f += kThreads) {
    const int j = f / (kDK / 4), c = 4 * (f % (kDK / 4));
    float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
    if (j < L) {
      const float* row = delta + static_cast<int64_t>(j) * dv + c;
      if (dv % 4 == 0 && c + 4 <= dv) {
        d = *reinterpret_cast<const float4*>(row);
      } else {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = c + e < dv ? row[e] : 0.f;
        d = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
    *reinterpret_cast<float4*>(&Ds[j * kQKStride + c]) = d;
  }
  __syncthreads();

  // o = Oq + P Δ: warp ri takes rows ri + 8 rr, lane columns 4 lane .. 4 lane + 3.
  const int ri = tid >> 5, c = 4 * (tid & 31);
  const float* oq = p.oq + base * dv;
  float o[8][4];
#pragma unroll
  for (int rr = 0; rr < 8; ++rr)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[rr][e] = c + e < dv ? oq[static_cast<int64_t>(ri + 8 * rr) * dv + c + e] : 0.f;
#pragma unroll
  for (int sb = 0; sb < kChunk / 16; ++sb) {
    if (16 * sb >= L) break;
      // Rows ri + 8 rr with rr < 2 sb are above column 16 sb: P's entries there are zero.
#pragma unroll 4
    for (int jj = 0; jj < 16; ++jj) {
      const int j = 16 * sb + jj;
      const float4 p0 = *reinterpret_cast<const float4*>(&PT[j * kChunk + ri * 8]);
      const float4 p1 = *reinterpret_cast<const float4*>(&PT[j * kChunk + ri * 8 + 4]);
      const float4 dj = *reinterpret_cast<const float4*>(&Ds[j * kQKStride + c]);
      const float pt[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
      const float dd[4] = {dj.x, dj.y, dj.z, dj.w};
#pragma unroll
      for (int rr = 2 * sb; rr < 8; ++rr)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[rr][e] += pt[rr] * dd[e];
    }
  }
  TX* out = static_cast<TX*>(a.out);
#pragma unroll
  for (int rr = 0; rr < 8; ++rr) {
    const int i = ri + 8 * rr;
    if (i >= L) continue;
    TX* orow = out + (t0 + i) * hv * dv + int64_t{h} * dv;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c + e < dv) orow[c + e] = from_f32<TX>(o[rr][e]);
  }
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
  p.oq = reinterpret_cast<float*>(take(rows * a.dv * 4));
  return p;
}

// -1: not read from SYV_GDN_MMA yet; else a mask of kGdnMma* bits (kGdnMmaDefault when unset).
std::atomic<int> g_mma{-1};

// SYV_GDN_MMA: "all", "none", or a comma list of wu, walk, output; anything else is refused by
// name. Unset or empty: kGdnMmaDefault.
unsigned parse_mma(const char* e) {
  if (e == nullptr || *e == 0) return kGdnMmaDefault;
  if (std::strcmp(e, "all") == 0) return kGdnMmaAll;
  if (std::strcmp(e, "none") == 0) return 0;
  unsigned v = 0;
  const std::string list(e);
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string phase = list.substr(at, end - at);
    if (phase == "wu") {
      v |= kGdnMmaWu;
    } else if (phase == "walk") {
      v |= kGdnMmaWalk;
    } else if (phase == "output") {
      v |= kGdnMmaOutput;
    } else {
      const std::string why = "unknown phase \"" + phase +
                              "\": expected all, none, or a comma list of wu, walk, output";
      cuda_fail(__FILE__, __LINE__, "SYV_GDN_MMA", why.c_str());
    }
    at = end + 1;
  }
  return v;
}

unsigned mma_mask() {
  int v = g_mma.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(parse_mma(std::getenv("SYV_GDN_MMA")));
    g_mma.store(v, std::memory_order_relaxed);
  }
  return static_cast<unsigned>(v);
}

// -1: not read from SYV_GDN_WU yet; else a GdnWuForm.
std::atomic<int> g_wu_form{-1};

// SYV_GDN_WU: "products" (gdn_wu_products_kernel, the default), "blocked" (gdn_wu_kernel's
// blocked solve) or "columns" (solve_by_columns); anything else is refused.
GdnWuForm wu_form() {
  static_assert(kGdnWuFormDefault == GdnWuForm::kProducts && int(GdnWuForm::kProducts) == 0 &&
                    int(GdnWuForm::kBlocked) == 1 && int(GdnWuForm::kColumns) == 2,
                "the names' order");
  return static_cast<GdnWuForm>(
      env_choice_once(g_wu_form, "SYV_GDN_WU", {"products", "blocked", "columns"}));
}

// -1: not read from SYV_GDN_OUT yet; else 0 where phase 3 takes gdn_output_products_kernel, 1
// where gdn_output_kernel.
std::atomic<int> g_out_form{-1};

// SYV_GDN_OUT: "products" (gdn_output_products_kernel, the default) or "dots"
// (gdn_output_kernel); anything else is refused.
bool out_by_products() {
  static_assert(kGdnOutputProductsDefault, "the names' order");
  return env_choice_once(g_out_form, "SYV_GDN_OUT", {"products", "dots"}) == 0;
}

template <typename TX, typename TS>
void launch_typed(const GdnArgs& a, int64_t chunk_bound, void* scratch, cudaStream_t s) {
  // (on the current device: a no-op past its first launch there)
  configure(gdn_wu_kernel<TX, false, false>, kWuSmemBytes);
  configure(gdn_wu_kernel<TX, true, false>, kWuSmemBytes);
  configure(gdn_wu_kernel<TX, false, true>, kWuSmemBytes);
  configure(gdn_wu_kernel<TX, true, true>, kWuSmemBytes);
  configure(gdn_wu_products_kernel<TX, false>, kWuSmemBytes);
  configure(gdn_wu_products_kernel<TX, true>, kWuSmemBytes);
  configure(gdn_state_cores_kernel<TX, TS>, kCoresStateSmemBytes);
  configure(gdn_output_kernel<TX>, kOutSmemBytes);
  configure(gdn_output_products_kernel<TX>, kOutSmemBytes);
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
    launch_wu_mma<TX>(a, p, per_chunk, walk_mma, s);
  } else if (wu_form() == GdnWuForm::kProducts && narrow) {
    auto wu = walk_mma ? gdn_wu_products_kernel<TX, true> : gdn_wu_products_kernel<TX, false>;
    launch_k(wu, per_chunk, kThreads, kWuSmemBytes, s, a, p);
  } else {
    const bool columns = wu_form() == GdnWuForm::kColumns;
    auto wu = walk_mma
                  ? (columns ? gdn_wu_kernel<TX, true, true> : gdn_wu_kernel<TX, true, false>)
                  : (columns ? gdn_wu_kernel<TX, false, true> : gdn_wu_kernel<TX, false, false>);
    launch_k(wu, per_chunk, kThreads, kWuSmemBytes, s, a, p);
  }
  const auto blocks = static_cast<unsigned>(int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kBV));
  if (walk_mma) {
    launch_walk_mma<TX, TS>(a, p, blocks, s);
  } else {
    launch_k(gdn_state_cores_kernel<TX, TS>, blocks, kThreads, kCoresStateSmemBytes, s, a, p);
  }
  if (out_mma) {
    launch_output_mma<TX>(a, p, per_chunk, s);
  } else if (out_by_products() && narrow) {
    launch_k(gdn_output_products_kernel<TX>, per_chunk, kThreads, kOutSmemBytes, s, a, p);
  } else {
    launch_k(gdn_output_kernel<TX>, per_chunk, kThreads, kOutSmemBytes, s, a, p);
  }
}

}  // namespace
}  // namespace gdn_phases

using namespace gdn_phases;

void set_gdn_mma(unsigned mask) {
  g_mma.store(static_cast<int>(mask), std::memory_order_relaxed);
}

void set_gdn_wu_form(GdnWuForm form) {
  g_wu_form.store(static_cast<int>(form), std::memory_order_relaxed);
}

void set_gdn_output_products(bool on) {
  g_out_form.store(on ? 0 : 1, std::memory_order_relaxed);
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
