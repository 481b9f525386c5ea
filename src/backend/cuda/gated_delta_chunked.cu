// The gated delta rule over chunks of 64 tokens (the WY / UT form of FLA's chunk_gated_delta_rule,
// ../shared/reference/WAVE2-SPECS.md A.1) for prefill: the same math as the token-by-token kernel
// in gated_delta.cu (Backend::gated_delta_rule in backend.h), with the work inside a chunk done as
// small matrix products instead of 64 dependent steps.
//
// Per chunk of L <= 64 tokens, from the chunk's starting state S0 [dk, dv] (k, q L2-normalised, q
// scaled by 1/sqrt(dk); g_i the log decays, G_i = g_0 + ... + g_i, Γ_i = exp(G_i)):
//   δ_i = β_i (v_i - Γ_i S0ᵀk_i - Σ_{j<i} exp(G_i - G_j) (k_i·k_j) δ_j)
//     =>  (I + A) Δ = R,  A_ij = β_i exp(G_i - G_j) k_i·k_j (j < i),  R_i = β_i (v_i - Γ_i S0ᵀk_i)
//   o_i = Γ_i S0ᵀq_i + Σ_{j<=i} exp(G_i - G_j) (q_i·k_j) δ_j
//   S   = Γ_{L-1} S0 + Σ_j exp(G_{L-1} - G_j) k_j δ_jᵀ
// Only differences G_i - G_j (i >= j) are exponentiated, so nothing overflows. Δ is found by
// blocked forward substitution straight from R (FLA forms all of (I + A)^-1 to reuse it for w;
// nothing here needs w, since R already folds S0 in).
//
// One block per (sequence, value head, 32 state columns): the block keeps its [dk, 32] slice of the
// state in registers (fp32) across the sequence's chunks, so the state is read and written once.
// Every product is fp32 on the CUDA cores; padding rows of a short last chunk are zeros (β = 0,
// g = 0) and change nothing. Sequences shorter than GdnArgs::chunked_from are left to the
// token-by-token kernel.
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kDK = 128;    // key head dim capacity (a smaller dk is padded with zeros)
constexpr int kBV = 32;     // state columns per block
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kQKStride = kDK + 4;     // Qs / Ks rows: float4 reads of 8 rows hit 8 bank groups
constexpr int kAStride = kChunk + 16;  // A / P rows: a warp's two row groups write disjoint banks
constexpr int kDStride = kBV + 4;      // V -> R -> Δ rows
constexpr int kSub = 16;               // the solve's diagonal blocks: kChunk / kSub of kSub x kSub

// Shared memory, in floats.
constexpr int kSmemFloats = 2 * kChunk * kQKStride   // Qs, Ks
                            + 2 * kChunk * kAStride  // A, P
                            + kDK * kBV              // S0
                            + kChunk * kDStride      // V / R / Δ
                            + kChunk * kBV           // Γ S0ᵀq
                            + kChunk * kSub          // the diagonal blocks' inverses
                            + kSub * kDStride        // the solve's right-hand sides
                            + 5 * kChunk;            // g, G, Γ, Λ, β
constexpr size_t kSmemBytes = kSmemFloats * sizeof(float);

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

template <typename TX, typename TS>
__global__ void __launch_bounds__(kThreads, 1) gdn_chunked_kernel(GdnArgs a) {
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);  // [kChunk][kQKStride] normalised, scaled q
  float* Ks = Qs + kChunk * kQKStride;          // [kChunk][kQKStride] normalised k
  float* Am = Ks + kChunk * kQKStride;          // [kChunk][kAStride] A (strictly lower)
  float* Pm = Am + kChunk * kAStride;           // [kChunk][kAStride] exp(G_i - G_j) q_i·k_j, j<=i
  float* S0 = Pm + kChunk * kAStride;           // [kDK][kBV] the chunk's starting state slice
  float* Dm = S0 + kDK * kBV;                   // [kChunk][kDStride] v, then R, then Δ
  float* Oq = Dm + kChunk * kDStride;           // [kChunk][kBV] Γ_i S0ᵀq_i
  float* Tb = Oq + kChunk * kBV;    // [kChunk][kSub] (I + A_bb)^-1, block b = rows 16b..
  float* Xb = Tb + kChunk * kSub;   // [kSub][kDStride] one block's right-hand sides
  float* g = Xb + kSub * kDStride;  // [kChunk] log decay per token
  float* G = g + kChunk;            // [kChunk] its inclusive prefix sum
  float* gam = G + kChunk;          // [kChunk] exp(G_i)
  float* lam = gam + kChunk;        // [kChunk] exp(G_last - G_i)
  float* beta = lam + kChunk;       // [kChunk]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int slices = (a.dv + kBV - 1) / kBV;
  const int slice = static_cast<int>(blockIdx.x % slices);
  const int h = static_cast<int>((blockIdx.x / slices) % a.hv);
  const int s = static_cast<int>(blockIdx.x / (static_cast<unsigned>(slices) * a.hv));
  pdl_wait();
  pdl_trigger();
  if (s >= a.num_seqs) return;
  const int slot = a.slots[s];
  const int begin = a.seq_starts[s], len = a.seq_starts[s + 1] - begin;
  if (slot < 0 || len <= 0 || len < a.chunked_from) return;

  const int dk = a.dk, dv = a.dv, hv = a.hv, kh = h / (hv / a.hk), v0 = slice * kBV;
  const int dk4 = (dk + 3) & ~3;
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{hv} * dv;
  const float q_scale = rsqrtf(static_cast<float>(dk));
  const float A = __expf(load_any(a.a_log, a.param_t, h));
  const float dt_bias = load_any(a.dt_bias, a.param_t, h);
  const TX* qkv = static_cast<const TX*>(a.qkv);
  TX* out = static_cast<TX*>(a.out);
  TS* S = static_cast<TS*>(a.state) + (static_cast<int64_t>(slot) * hv + h) * dk * dv;

  // This thread's state elements: rows rg * 8 + r, columns v0 + 2 cp + e.
  const int rg = tid >> 4, cp = tid & 15;
  float st[8][2];
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = rg * 8 + r, col = v0 + 2 * cp + e;
      st[r][e] = d < dk && col < dv ? to_f32(S[static_cast<int64_t>(d) * dv + col]) : 0.f;
    }

  // State saves cut the chunking: chunks restart at each save point, whose state is then written.
  int next_save = a.num_saves > 0 ? a.save_starts[s] : 0;
  const int save_end = a.num_saves > 0 ? a.save_starts[s + 1] : 0;
  int segment_end = next_save < save_end ? a.save_after[next_save] : len;
  for (int c0 = 0; c0 < len;) {
    const int L = min(kChunk, segment_end - c0);

    // 1. The chunk's inputs: normalised q and k, this block's v columns, β and g; S0 from
    // registers.
#pragma unroll
    for (int r = 0; r < 8; ++r)
      *reinterpret_cast<float2*>(&S0[(rg * 8 + r) * kBV + 2 * cp]) =
          make_float2(st[r][0], st[r][1]);
    {
      // Each warp's 8 rows: every load issued before the first reduction (one latency, not 8).
      constexpr int kRows = kChunk / kWarps, kPer = kDK / 32;
      float qv[kRows][kPer], kv[kRows][kPer], vv[kRows], braw[kRows], araw[kRows];
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const int r = warp + kWarps * rr;
        const bool valid = r < L;
        const int64_t t = int64_t{begin} + c0 + r;
        const TX* row = qkv + t * width;
#pragma unroll
        for (int m = 0; m < kPer; ++m) {
          const int d = lane + 32 * m;
          qv[rr][m] = valid && d < dk ? to_f32(row[int64_t{kh} * dk + d]) : 0.f;
          kv[rr][m] = valid && d < dk ? to_f32(row[key_dim + int64_t{kh} * dk + d]) : 0.f;
        }
        const int col = v0 + lane;  // kBV == 32: one column per lane
        vv[rr] = valid && col < dv ? to_f32(row[2 * key_dim + int64_t{h} * dv + col]) : 0.f;
        braw[rr] = valid && lane == 0 ? load_any(a.ba, a.ba_t, t * 2 * hv + h) : 0.f;
        araw[rr] = valid && lane == 0 ? load_any(a.ba, a.ba_t, t * 2 * hv + hv + h) : 0.f;
      }
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const int r = warp + kWarps * rr;
        float qq = 0.f, kk = 0.f;
#pragma unroll
        for (int m = 0; m < kPer; ++m) {
          qq += qv[rr][m] * qv[rr][m];
          kk += kv[rr][m] * kv[rr][m];
        }
        qq = warp_sum(qq);
        kk = warp_sum(kk);
        const float qn = rsqrtf(qq + 1e-6f) * q_scale, kn = rsqrtf(kk + 1e-6f);
#pragma unroll
        for (int m = 0; m < kPer; ++m) {
          Qs[r * kQKStride + lane + 32 * m] = qv[rr][m] * qn;
          Ks[r * kQKStride + lane + 32 * m] = kv[rr][m] * kn;
        }
        Dm[r * kDStride + lane] = vv[rr];
        if (lane == 0) {
          float bb = 0.f, gg = 0.f;
          if (r < L) {
            const float x = araw[rr] + dt_bias;
            bb = 1.f / (1.f + __expf(-braw[rr]));
            gg = -A * (x > 20.f ? x : log1pf(__expf(x)));
          }
          beta[r] = bb;
          g[r] = gg;
        }
      }
    }
    __syncthreads();
    if (warp == 0) {  // G = inclusive prefix sum of g (padding rows add 0), and its exponentials
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
    __syncthreads();

    // 2a. A and P: thread (ti, tj) owns rows ti + 16 m and columns tj + 16 m' (m' <= m: the rest is
    // above the diagonal and zero).
    {
      const int ti = tid >> 4, tj = tid & 15;
      float acc_a[4][4] = {}, acc_p[4][4] = {};
#pragma unroll 2
      for (int d = 0; d < dk4; d += 4) {
        float4 qi[4], ki[4], kj[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          qi[m] = *reinterpret_cast<const float4*>(&Qs[(ti + 16 * m) * kQKStride + d]);
          ki[m] = *reinterpret_cast<const float4*>(&Ks[(ti + 16 * m) * kQKStride + d]);
          kj[m] = *reinterpret_cast<const float4*>(&Ks[(tj + 16 * m) * kQKStride + d]);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
          for (int mp = 0; mp <= m; ++mp) {
            acc_a[m][mp] += dot4(ki[m], kj[mp]);
            acc_p[m][mp] += dot4(qi[m], kj[mp]);
          }
      }
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int mp = 0; mp < 4; ++mp) {
          const int i = ti + 16 * m, j = tj + 16 * mp;
          float av = 0.f, pv = 0.f;
          if (mp <= m && j <= i) {
            const float decay = __expf(G[i] - G[j]);
            pv = decay * acc_p[m][mp];
            if (j < i) av = beta[i] * decay * acc_a[m][mp];
          }
          Am[i * kAStride + j] = av;
          Pm[i * kAStride + j] = pv;
        }
    }
    // 2b. S0ᵀk and S0ᵀq for this block's columns: R = β (v - Γ S0ᵀk) in place of v, Oq = Γ S0ᵀq.
    {
      const int ri = tid >> 4;
      float ks[4][2] = {}, qs[4][2] = {};
#pragma unroll 2
      for (int d = 0; d < dk4; d += 4) {
        float2 sv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sv[e] = *reinterpret_cast<const float2*>(&S0[(d + e) * kBV + 2 * cp]);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float4 q = *reinterpret_cast<const float4*>(&Qs[(ri + 16 * m) * kQKStride + d]);
          const float4 k = *reinterpret_cast<const float4*>(&Ks[(ri + 16 * m) * kQKStride + d]);
          ks[m][0] += k.x * sv[0].x + k.y * sv[1].x + k.z * sv[2].x + k.w * sv[3].x;
          ks[m][1] += k.x * sv[0].y + k.y * sv[1].y + k.z * sv[2].y + k.w * sv[3].y;
          qs[m][0] += q.x * sv[0].x + q.y * sv[1].x + q.z * sv[2].x + q.w * sv[3].x;
          qs[m][1] += q.x * sv[0].y + q.y * sv[1].y + q.z * sv[2].y + q.w * sv[3].y;
        }
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = ri + 16 * m;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& dm = Dm[i * kDStride + 2 * cp + e];
          dm = beta[i] * (dm - gam[i] * ks[m][e]);
          Oq[i * kBV + 2 * cp + e] = gam[i] * qs[m][e];
        }
      }
    }
    __syncthreads();

    // 3. Δ = (I + A)^-1 R, blocked: the inverses T_b of the four 16 x 16 diagonal blocks of I + A
    // by forward substitution (one thread per column, all four at once), then block by block
    // Δ_b = T_b (R_b - Σ_{c<b} A_bc Δ_c).
    if (tid < kChunk) {
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
    __syncthreads();
    {
      const int r = tid >> 4;  // row within the block; columns 2 cp, 2 cp + 1
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

    // 4a. o = Γ S0ᵀq + P Δ for the chunk's rows.
    {
      const int ri = tid >> 4;
      float o[4][2];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int e = 0; e < 2; ++e) o[m][e] = Oq[(ri + 16 * m) * kBV + 2 * cp + e];
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
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = ri + 16 * m;
        if (i >= L) continue;
        TX* orow = out + (int64_t{begin} + c0 + i) * hv * dv + int64_t{h} * dv;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = v0 + 2 * cp + e;
          if (col < dv) orow[col] = from_f32<TX>(o[m][e]);
        }
      }
    }
    // 4b. S = Γ_last S0 + Σ_j Λ_j k_j Δ_jᵀ on this thread's registers.
    {
      const float decay = gam[kChunk - 1];  // padding rows carry G_{L-1} to the end
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        st[r][0] *= decay;
        st[r][1] *= decay;
      }
      for (int j = 0; j < L; ++j) {
        const float2 dd = *reinterpret_cast<const float2*>(&Dm[j * kDStride + 2 * cp]);
        const float l = lam[j], d0 = l * dd.x, d1 = l * dd.y;
        const float4 k0 = *reinterpret_cast<const float4*>(&Ks[j * kQKStride + rg * 8]);
        const float4 k1 = *reinterpret_cast<const float4*>(&Ks[j * kQKStride + rg * 8 + 4]);
        const float kr[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          st[r][0] += kr[r] * d0;
          st[r][1] += kr[r] * d1;
        }
      }
    }
    __syncthreads();  // the next chunk overwrites the shared arrays
    c0 += L;
    if (c0 == segment_end && next_save < save_end) {
      TS* dst = static_cast<TS*>(a.saves) +
                (static_cast<int64_t>(a.save_dests[next_save]) * hv + h) * dk * dv;
#pragma unroll
      for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int d = rg * 8 + r, col = v0 + 2 * cp + e;
          if (d < dk && col < dv) dst[static_cast<int64_t>(d) * dv + col] = from_f32<TS>(st[r][e]);
        }
      ++next_save;
      segment_end = next_save < save_end ? a.save_after[next_save] : len;
    }
  }

#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = rg * 8 + r, col = v0 + 2 * cp + e;
      if (d < dk && col < dv) S[static_cast<int64_t>(d) * dv + col] = from_f32<TS>(st[r][e]);
    }
}

template <typename TX, typename TS>
void launch_typed(const GdnArgs& a, cudaStream_t s) {
  static bool configured = false;  // per template instance; set once per process
  if (!configured) {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunked_kernel<TX, TS>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    configured = true;
  }
  const int64_t blocks = int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kBV);
  launch_k(gdn_chunked_kernel<TX, TS>, static_cast<unsigned>(blocks), kThreads, kSmemBytes, s, a);
}

}  // namespace

bool gdn_chunked_supports(int32_t dk) {
  // 146.5 KiB of shared memory: sm_80 and sm_90 (not the 99 KiB of sm_86 / 89 / 120, which run the
  // recurrent kernel of gated_delta.cu).
  return dk <= kDK && kSmemBytes <= device_smem_optin();
}

void launch_gdn_chunked(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  if (a.num_seqs == 0) return;
  if (a.dk > kDK)
    cuda_fail(__FILE__, __LINE__, "dk",
              "the chunked gated delta rule supports key head dims <= 128");
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (state_t == DType::F32) {
      launch_typed<TX, float>(a, s);
    } else if (state_t == DType::BF16) {
      launch_typed<TX, bf16>(a, s);
    } else {
      cuda_fail(__FILE__, __LINE__, "state_t", "gated delta rule state must be f32 or bf16");
    }
  });
}

}  // namespace syv::cuda
