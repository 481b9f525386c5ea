// The tensor-core forms of the chunked gated delta rule's three phases (kernels.h kGdnMma*,
// SYV_GDN_MMA; gated_delta_phases.cu's header has the math, the notation and the 3xTF32 scheme).
// The op tests pass every form (H100, 2026-12-05); the walk's is the default, phases 1's and 3's
// measured slower than their CUDA-core forms (docs/cuda-backend-notes.md Run 22).
// tools/emulate/gdn_phases_emulate.py checks their index logic and the split's numerics on the CPU.
#include "backend/cuda/gated_delta_phases.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace syv::cuda::gdn_phases {
namespace {

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

// ---- phase 1 on the tensor cores (SYV_GDN_MMA=wu; off: slower than the CUDA cores') -------------
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
static_assert(kWuMmaSmemBytes <= kMaxSmemBytes);

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

// ---- phase 2: the state walk on the tensor cores (SYV_GDN_MMA=walk; the default) ----------------
// Shared S0 [kDK][kSStride] and Δ [64][kSStride], each as its tf32 part and its tf32 remainder:
// a B fragment's reads (rows t, columns g) hit 32 distinct banks.
constexpr int kSStride = kBV + 8;
constexpr int kStateSmemFloats = 2 * (kDK * kSStride + kChunk * kSStride);
constexpr size_t kStateSmemBytes = kStateSmemFloats * sizeof(float);
static_assert(kStateSmemBytes <= kMaxSmemBytes);

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
          if (col < dv) p.u[out] = dl;  // over U, which only this block reads
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

// ---- phase 3 on the tensor cores (SYV_GDN_MMA=output; off: slower than the CUDA cores') ---------
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
static_assert(kOutMmaSmemBytes <= kMaxSmemBytes);

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
  const float* delta = p.u + base * dv;
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

}  // namespace

template <typename TX>
void launch_wu_mma(const GdnArgs& a, const PhaseScratch& p, dim3 grid, bool fragments,
                   cudaStream_t s) {
  configure(gdn_wu_mma_kernel<TX, false>, kWuMmaSmemBytes);
  configure(gdn_wu_mma_kernel<TX, true>, kWuMmaSmemBytes);
  launch_k(fragments ? gdn_wu_mma_kernel<TX, true> : gdn_wu_mma_kernel<TX, false>, grid, kThreads,
           kWuMmaSmemBytes, s, a, p);
}

template <typename TX, typename TS>
void launch_walk_mma(const GdnArgs& a, const PhaseScratch& p, unsigned blocks, cudaStream_t s) {
  configure(gdn_state_mma_kernel<TX, TS>, kStateSmemBytes);
  launch_k(gdn_state_mma_kernel<TX, TS>, blocks, kThreads, kStateSmemBytes, s, a, p);
}

template <typename TX>
void launch_output_mma(const GdnArgs& a, const PhaseScratch& p, dim3 grid, cudaStream_t s) {
  configure(gdn_output_mma_kernel<TX>, kOutMmaSmemBytes);
  launch_k(gdn_output_mma_kernel<TX>, grid, kThreads, kOutMmaSmemBytes, s, a, p);
}

#define SYV_GDN_MMA_INSTANTIATE(TX)                                                               \
  template void launch_wu_mma<TX>(const GdnArgs&, const PhaseScratch&, dim3, bool, cudaStream_t); \
  template void launch_walk_mma<TX, float>(const GdnArgs&, const PhaseScratch&, unsigned,         \
                                           cudaStream_t);                                         \
  template void launch_walk_mma<TX, bf16>(const GdnArgs&, const PhaseScratch&, unsigned,          \
                                          cudaStream_t);                                          \
  template void launch_output_mma<TX>(const GdnArgs&, const PhaseScratch&, dim3, cudaStream_t);
SYV_GDN_MMA_INSTANTIATE(float)
SYV_GDN_MMA_INSTANTIATE(half)
SYV_GDN_MMA_INSTANTIATE(bf16)
#undef SYV_GDN_MMA_INSTANTIATE

}  // namespace syv::cuda::gdn_phases
