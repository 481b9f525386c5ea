// The pieces of a 64-token chunk of the gated delta rule that the chunked kernels share
// (gated_delta_chunked.cu, the default; gated_delta_phases.cu): their shared-memory strides, the
// decays' prefix scan, the lower-triangular dot products, the diagonal blocks' inverses and the
// blocked forward substitution of (I + A) Δ = R, the products with the chunk's starting state,
// P Δ and the state update. gated_delta_chunked.cu's header has the math and the notation. A
// block is kThreads threads; every helper that synchronises says so.
#pragma once

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda::gdn_chunk {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kDK = 128;    // key head dim capacity (a smaller dk is padded with zeros)
constexpr int kBV = 32;     // state / right-hand-side columns per pass
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kQKStride = kDK + 4;     // q / k rows: float4 reads of 8 rows hit 8 bank groups
constexpr int kAStride = kChunk + 16;  // A / P rows: a warp's two row groups write disjoint banks
constexpr int kDStride = kBV + 4;      // V -> R -> Δ rows
constexpr int kSub = 16;               // the solve's diagonal blocks: kChunk / kSub of kSub x kSub

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

// The walk of the state over a sequence's chunks is one block per (sequence, value head, kBV
// state columns), blockIdx.x = (s * hv + h) * slices + slice.
struct WalkBlock {
  int s, h, slice;
};
__device__ __forceinline__ WalkBlock walk_block(int hv, int dv) {
  const int slices = (dv + kBV - 1) / kBV;
  return {static_cast<int>(blockIdx.x / (static_cast<unsigned>(slices) * hv)),
          static_cast<int>((blockIdx.x / slices) % hv), static_cast<int>(blockIdx.x % slices)};
}

// Whether sequence s is the chunked kernels' (a state slot, new tokens, at least chunked_from of
// them; the others are gated_delta.cu's), with its slot, first token row and length.
__device__ __forceinline__ bool chunked_sequence(const GdnArgs& a, int s, int& slot, int& begin,
                                                 int& len) {
  slot = a.slots[s];
  begin = a.seq_starts[s];
  len = a.seq_starts[s + 1] - begin;
  return slot >= 0 && len > 0 && len >= a.chunked_from;
}

// Warp 0 only: G = the inclusive prefix sum of the chunk's 64 log decays g (padding rows 0),
// Γ = exp(G), Λ = exp(G_last - G).
__device__ __forceinline__ void gate_scan(const float* g, float* G, float* gam, float* lam,
                                          int lane) {
  const float g0 = g[2 * lane], g1 = g[2 * lane + 1];
  float incl = g0 + g1;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  const float G1 = incl, G0 = incl - g1;
  const float last = __shfl_sync(0xffffffffu, incl, 31);
  G[2 * lane] = G0;
  G[2 * lane + 1] = G1;
  gam[2 * lane] = __expf(G0);
  gam[2 * lane + 1] = __expf(G1);
  lam[2 * lane] = __expf(last - G0);
  lam[2 * lane + 1] = __expf(last - G1);
}

// Row r of q and k (kPer values a lane: columns lane + 32 m), L2-normalised (eps 1e-6 under the
// root), q also scaled by q_scale, into Qs (unless null) and Ks. Every lane of the warp calls it.
template <int kPer>
__device__ __forceinline__ void store_normalized(const float (&qv)[kPer], const float (&kv)[kPer],
                                                 int r, int lane, float q_scale, float* Qs,
                                                 float* Ks) {
  float qq = 0.f, kk = 0.f;
#pragma unroll
  for (int m = 0; m < kPer; ++m) {
    qq += qv[m] * qv[m];
    kk += kv[m] * kv[m];
  }
  qq = warp_sum(qq);
  kk = warp_sum(kk);
  const float qn = rsqrtf(qq + 1e-6f) * q_scale, kn = rsqrtf(kk + 1e-6f);
#pragma unroll
  for (int m = 0; m < kPer; ++m) {
    if (Qs) Qs[r * kQKStride + lane + 32 * m] = qv[m] * qn;
    Ks[r * kQKStride + lane + 32 * m] = kv[m] * kn;
  }
}

// This thread's slice of a state [dk][dv] (row-major, TS = float or bf16) in registers: rows
// 8 rg + r, columns v0 + 2 cp + e (zeros / not stored past dk or dv).
template <typename TS>
__device__ __forceinline__ void load_state_slice(const TS* S, int dk, int dv, int v0, int rg,
                                                 int cp, float (&st)[8][2]) {
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = rg * 8 + r, col = v0 + 2 * cp + e;
      st[r][e] = d < dk && col < dv ? to_f32(S[static_cast<int64_t>(d) * dv + col]) : 0.f;
    }
}
template <typename TS>
__device__ __forceinline__ void store_state_slice(TS* S, int dk, int dv, int v0, int rg, int cp,
                                                  const float (&st)[8][2]) {
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = rg * 8 + r, col = v0 + 2 * cp + e;
      if (d < dk && col < dv) S[static_cast<int64_t>(d) * dv + col] = from_f32<TS>(st[r][e]);
    }
}

// acc[x][m][mp] += X[x]_i · K_j over the first dk4 columns, for rows i = ti + 16 m and columns
// j = tj + 16 mp with mp <= m (the rest is above the diagonal). Rows of kQKStride floats.
template <int NX>
__device__ __forceinline__ void lower_dots(const float* const (&X)[NX], const float* K, int dk4,
                                           int ti, int tj, float (&acc)[NX][4][4]) {
#pragma unroll 2
  for (int d = 0; d < dk4; d += 4) {
    float4 xi[NX][4], kj[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
#pragma unroll
      for (int x = 0; x < NX; ++x)
        xi[x][m] = *reinterpret_cast<const float4*>(&X[x][(ti + 16 * m) * kQKStride + d]);
      kj[m] = *reinterpret_cast<const float4*>(&K[(tj + 16 * m) * kQKStride + d]);
    }
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int mp = 0; mp <= m; ++mp)
#pragma unroll
        for (int x = 0; x < NX; ++x) acc[x][m][mp] += dot4(xi[x][m], kj[mp]);
  }
}

// Threads tid < kChunk: the inverses T_b of the four 16 x 16 diagonal blocks of I + A (A strictly
// lower, rows of kAStride) by forward substitution, one thread per column, into Tb [kChunk][kSub].
__device__ __forceinline__ void diagonal_inverses(const float* Am, float* Tb, int tid) {
  if (tid >= kChunk) return;
  const int b = tid / kSub, cc = tid % kSub;
  const float* Ab = Am + (b * kSub) * kAStride + b * kSub;
  float t[kSub];
#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < i; ++j) acc += Ab[i * kAStride + j] * t[j];
    t[i] = i == cc ? 1.f : (i < cc ? 0.f : -acc);
    Tb[(b * kSub + i) * kSub + cc] = t[i];
  }
}

// Every thread: Dm [kChunk][kDStride] (32 columns of right-hand sides) becomes (I + A)^-1 Dm for
// its first L rows, block by block: Δ_b = T_b (R_b - Σ_{c<b} A_bc Δ_c). Thread (r, cp) = (tid >>
// 4, tid & 15) owns row r of each block, columns 2 cp, 2 cp + 1. Xb [kSub][kDStride] is scratch.
// Synchronises (twice a block); Am, Tb and Dm must be visible to every thread before the call.
__device__ __forceinline__ void blocked_solve(const float* Am, const float* Tb, float* Dm,
                                              float* Xb, int L, int r, int cp) {
  for (int b = 0; b * kSub < L; ++b) {
    const int i = b * kSub + r;
    float x0 = Dm[i * kDStride + 2 * cp], x1 = Dm[i * kDStride + 2 * cp + 1];
    for (int j = 0; j < b * kSub; ++j) {
      const float aij = Am[i * kAStride + j];
      const float2 dj = *reinterpret_cast<const float2*>(&Dm[j * kDStride + 2 * cp]);
      x0 -= aij * dj.x;
      x1 -= aij * dj.y;
    }
    *reinterpret_cast<float2*>(&Xb[r * kDStride + 2 * cp]) = make_float2(x0, x1);
    __syncthreads();
    float y0 = 0.f, y1 = 0.f;
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const float tij = Tb[i * kSub + j];
      const float2 xj = *reinterpret_cast<const float2*>(&Xb[j * kDStride + 2 * cp]);
      y0 += tij * xj.x;
      y1 += tij * xj.y;
    }
    *reinterpret_cast<float2*>(&Dm[i * kDStride + 2 * cp]) = make_float2(y0, y1);
    __syncthreads();
  }
}

// The products with the chunk's starting state slice S0 [kDK][kBV]: ra[m][e] = A_i · S0[:, 2 cp +
// e] and rb[m][e] = B_i · S0[:, 2 cp + e] for rows i = ri + 16 m of A and B (rows of kQKStride).
__device__ __forceinline__ void s0_products(const float* A, const float* B, const float* S0,
                                            int dk4, int ri, int cp, float (&ra)[4][2],
                                            float (&rb)[4][2]) {
#pragma unroll 2
  for (int d = 0; d < dk4; d += 4) {
    float2 sv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      sv[e] = *reinterpret_cast<const float2*>(&S0[(d + e) * kBV + 2 * cp]);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float4 b = *reinterpret_cast<const float4*>(&B[(ri + 16 * m) * kQKStride + d]);
      const float4 a = *reinterpret_cast<const float4*>(&A[(ri + 16 * m) * kQKStride + d]);
      ra[m][0] += a.x * sv[0].x + a.y * sv[1].x + a.z * sv[2].x + a.w * sv[3].x;
      ra[m][1] += a.x * sv[0].y + a.y * sv[1].y + a.z * sv[2].y + a.w * sv[3].y;
      rb[m][0] += b.x * sv[0].x + b.y * sv[1].x + b.z * sv[2].x + b.w * sv[3].x;
      rb[m][1] += b.x * sv[0].y + b.y * sv[1].y + b.z * sv[2].y + b.w * sv[3].y;
    }
  }
}

// o[m][e] += Σ_{j<L} P_ij Δ_j[2 cp + e] for rows i = ri + 16 m (P rows of kAStride, zero above
// the diagonal; Δ rows of kDStride, zero from L to the next multiple of 4).
__device__ __forceinline__ void p_delta(const float* Pm, const float* Dm, int L, int ri, int cp,
                                        float (&o)[4][2]) {
  for (int j = 0; j < L; j += 4) {
    float2 dd[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dd[e] = *reinterpret_cast<const float2*>(&Dm[(j + e) * kDStride + 2 * cp]);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float4 p = *reinterpret_cast<const float4*>(&Pm[(ri + 16 * m) * kAStride + j]);
      o[m][0] += p.x * dd[0].x + p.y * dd[1].x + p.z * dd[2].x + p.w * dd[3].x;
      o[m][1] += p.x * dd[0].y + p.y * dd[1].y + p.z * dd[2].y + p.w * dd[3].y;
    }
  }
}

// st[r][e] += Σ_{j<L} K_j[8 rg + r] (l_j Δ_j[2 cp + e]), l_j = lam[j] (1 when lam is null): this
// thread's state rows 8 rg .. 8 rg + 7, columns 2 cp, 2 cp + 1.
__device__ __forceinline__ void state_update(float (&st)[8][2], const float* Dm, const float* K,
                                             const float* lam, int L, int rg, int cp) {
  for (int j = 0; j < L; ++j) {
    const float2 dd = *reinterpret_cast<const float2*>(&Dm[j * kDStride + 2 * cp]);
    float d0 = dd.x, d1 = dd.y;
    if (lam) {
      const float l = lam[j];
      d0 = l * dd.x;
      d1 = l * dd.y;
    }
    const float4 k0 = *reinterpret_cast<const float4*>(&K[j * kQKStride + rg * 8]);
    const float4 k1 = *reinterpret_cast<const float4*>(&K[j * kQKStride + rg * 8 + 4]);
    const float kr[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      st[r][0] += kr[r] * d0;
      st[r][1] += kr[r] * d1;
    }
  }
}

}  // namespace syv::cuda::gdn_chunk
