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
#include "backend/cuda/gated_delta_chunk.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

using namespace gdn_chunk;  // kChunk, kDK, kBV (state columns per block), strides, helpers

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
  const auto [s, h, slice] = walk_block(a.hv, a.dv);
  pdl_wait();
  pdl_trigger();
  if (s >= a.num_seqs) return;
  int slot, begin, len;
  if (!chunked_sequence(a, s, slot, begin, len)) return;

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
  load_state_slice(S, dk, dv, v0, rg, cp, st);

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
        store_normalized<kPer>(qv[rr], kv[rr], r, lane, q_scale, Qs, Ks);
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
    // G = inclusive prefix sum of g (padding rows add 0), and its exponentials
    if (warp == 0) gate_scan(g, G, gam, lam, lane);
    __syncthreads();

    // 2a. A and P: thread (ti, tj) owns rows ti + 16 m and columns tj + 16 m' (m' <= m: the rest is
    // above the diagonal and zero).
    {
      const int ti = tid >> 4, tj = tid & 15;
      float acc[2][4][4] = {};  // A's k_i·k_j, P's q_i·k_j
      const float* const rows[2] = {Ks, Qs};
      lower_dots<2>(rows, Ks, dk4, ti, tj, acc);
      const auto& acc_a = acc[0];
      const auto& acc_p = acc[1];
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
      s0_products(Ks, Qs, S0, dk4, ri, cp, ks, qs);
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
    diagonal_inverses(Am, Tb, tid);
    __syncthreads();
    blocked_solve(Am, Tb, Dm, Xb, L, tid >> 4, cp);

    // 4a. o = Γ S0ᵀq + P Δ for the chunk's rows.
    {
      const int ri = tid >> 4;
      float o[4][2];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int e = 0; e < 2; ++e) o[m][e] = Oq[(ri + 16 * m) * kBV + 2 * cp + e];
      p_delta(Pm, Dm, L, ri, cp, o);
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
      state_update(st, Dm, Ks, lam, L, rg, cp);
    }
    __syncthreads();  // the next chunk overwrites the shared arrays
    c0 += L;
    if (c0 == segment_end && next_save < save_end) {
      TS* dst = static_cast<TS*>(a.saves) +
                (static_cast<int64_t>(a.save_dests[next_save]) * hv + h) * dk * dv;
      store_state_slice(dst, dk, dv, v0, rg, cp, st);
      ++next_save;
      segment_end = next_save < save_end ? a.save_after[next_save] : len;
    }
  }

  store_state_slice(S, dk, dv, v0, rg, cp, st);
}

template <typename TX, typename TS>
void launch_typed(const GdnArgs& a, cudaStream_t s) {
  allow_dynamic_smem(gdn_chunked_kernel<TX, TS>, kSmemBytes);
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
