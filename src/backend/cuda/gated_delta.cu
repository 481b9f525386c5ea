// The gated delta rule (Gated DeltaNet's recurrence), token by token, for decode, verify and short
// prefills (gated_delta_chunked.cu takes the long ones). Backend::gated_delta_rule in backend.h has
// the math.
//
// One warp per (sequence, value head, 8 state columns): the warp keeps its [dk, 8] slice of the
// fp32 state in registers (lane l holds rows l, l + 32, ...) for the whole sequence, so the state
// is read and written once per launch whatever the token count. Columns are independent in the
// delta rule: with S' = exp(g) S, kv = S'ᵀk, δ = β (v - kv), S'' = S' + k δᵀ, the output is
// o = S''ᵀq = S'ᵀq + (k·q) δ, so one pass over the state gives both S'ᵀk and S'ᵀq (one
// butterfly reduction of 16 values), and a second applies the rank-1 update. Each lane of the warp
// reads 8 consecutive state columns of its rows (32 bytes, a whole sector), the layout of FLA's
// fastest decode config (BV = 8, one warp; ../shared/reference/WAVE2-SPECS.md A.4).
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kCols = 8;  // state columns (value dims) per warp

template <typename TS>
__device__ __forceinline__ void load_cols(const TS* row, int col0, int dv, float* out) {
  if constexpr (std::is_same_v<TS, float>) {
    if (col0 + kCols <= dv && (dv & 3) == 0) {
      const float4 a = *reinterpret_cast<const float4*>(row + col0);
      const float4 b = *reinterpret_cast<const float4*>(row + col0 + 4);
      out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
      out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
      return;
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) out[c] = col0 + c < dv ? to_f32(row[col0 + c]) : 0.f;
}

template <typename TS>
__device__ __forceinline__ void store_cols(TS* row, int col0, int dv, const float* v) {
  if constexpr (std::is_same_v<TS, float>) {
    if (col0 + kCols <= dv && (dv & 3) == 0) {
      *reinterpret_cast<float4*>(row + col0) = make_float4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<float4*>(row + col0 + 4) = make_float4(v[4], v[5], v[6], v[7]);
      return;
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (col0 + c < dv) row[col0 + c] = from_f32<TS>(v[c]);
}

// Sums 16 per-lane values over the warp with 16 shuffles instead of 16 x 5: at each level a lane
// keeps half of its values and trades the other half with its partner. Afterwards lane l holds the
// warp-wide sum of value (l >> 1) & 15 (lanes l and l ^ 1 hold the same one).
__device__ __forceinline__ float butterfly_sum16(float (&v)[16], int lane) {
#pragma unroll
  for (int level = 0; level < 4; ++level) {
    const int n = 16 >> level, offset = 16 >> level;
    const bool upper = lane & offset;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  }
  return v[0] + __shfl_xor_sync(0xffffffffu, v[0], 1);
}

constexpr int kWarpsPerBlock = 4;

// One warp per (sequence, value head, column group of kCols); kWarpsPerBlock such warps per block.
// Per token, one pass over the state slice gives the raw partials S^T k and S^T q (the decay and
// the L2 norms are scalars, applied after the sums), one butterfly sums them, and a second pass
// applies S = decay S + k delta^T. The next token's inputs are loaded before this one's math. RPL:
// state rows per lane (dk <= 32 * RPL). TX: activations (qkv, out); TS: the state.
// kDecode: every sequence has one new token (a decode step). The state traffic is all the cost
// there, so that variant skips the next-token prefetch and is held to fewer registers: more warps
// per multiprocessor keep more state loads in flight.
template <int RPL, typename TX, typename TS, bool kDecode>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kDecode && RPL <= 4 ? 6 : 1)
    gdn_recurrent_kernel(GdnArgs a) {
  const int lane = threadIdx.x & 31;
  const int groups = (a.dv + kCols - 1) / kCols;
  const int64_t gw = int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5);
  const int col0 = static_cast<int>(gw % groups) * kCols;
  const int h = static_cast<int>((gw / groups) % a.hv);
  const int64_t s = gw / (int64_t{groups} * a.hv);
  pdl_wait();
  pdl_trigger();
  if (s >= a.num_seqs) return;
  const int slot = a.slots[s];
  const int begin = a.seq_starts[s], end = a.seq_starts[s + 1];
  if (slot < 0 || begin >= end || (a.chunked_from > 0 && end - begin >= a.chunked_from)) return;
  const float A = __expf(load_any(a.a_log, a.param_t, h));
  const float dt_bias = load_any(a.dt_bias, a.param_t, h);
  const int dk = a.dk, dv = a.dv, hv = a.hv, kh = h / (hv / a.hk);
  const int64_t key_dim = int64_t{a.hk} * dk, width = 2 * key_dim + int64_t{hv} * dv;
  const float q_scale = rsqrtf(static_cast<float>(dk));
  TS* S = static_cast<TS*>(a.state) + (static_cast<int64_t>(slot) * hv + h) * dk * dv;
  // This lane's value after the butterfly: 0..7 = (S^T k)[col0 + idx], 8..15 = (S^T q)[...].
  const int idx = (lane >> 1) & 15, col = col0 + (idx & 7);

  float st[RPL][kCols];
#pragma unroll
  for (int i = 0; i < RPL; ++i) {
    const int r = lane + 32 * i;
    if (r < dk) {
      load_cols(S + static_cast<int64_t>(r) * dv, col0, dv, st[i]);
    } else {
#pragma unroll
      for (int c = 0; c < kCols; ++c) st[i][c] = 0.f;
    }
  }

  const TX* qkv = static_cast<const TX*>(a.qkv);
  TX* out = static_cast<TX*>(a.out);
  // The inputs of token t: raw q and k rows, this lane's v, the gate inputs.
  float q[RPL], k[RPL], v = 0.f, b = 0.f, araw = 0.f;
  auto load_token = [&](int t, float(&qo)[RPL], float(&ko)[RPL], float& vo, float& bo, float& ao) {
    const TX* row = qkv + static_cast<int64_t>(t) * width;
#pragma unroll
    for (int i = 0; i < RPL; ++i) {
      const int r = lane + 32 * i;
      qo[i] = r < dk ? to_f32(row[int64_t{kh} * dk + r]) : 0.f;
      ko[i] = r < dk ? to_f32(row[key_dim + int64_t{kh} * dk + r]) : 0.f;
    }
    vo = col < dv ? to_f32(row[2 * key_dim + int64_t{h} * dv + col]) : 0.f;
    bo = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + h);
    ao = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + hv + h);
  };
  load_token(begin, q, k, v, b, araw);
  for (int t = begin; t < end; ++t) {
    float nq[RPL], nk[RPL], nv = 0.f, nb = 0.f, na = 0.f;
    if (!kDecode && t + 1 < end) load_token(t + 1, nq, nk, nv, nb, na);

    float part[16], qq = 0.f, kk = 0.f, qk = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float pk = 0.f, pq = 0.f;
#pragma unroll
      for (int i = 0; i < RPL; ++i) {
        pk += st[i][c] * k[i];
        pq += st[i][c] * q[i];
      }
      part[c] = pk;
      part[kCols + c] = pq;
    }
#pragma unroll
    for (int i = 0; i < RPL; ++i) {
      qq += q[i] * q[i];
      kk += k[i] * k[i];
      qk += q[i] * k[i];
    }
    const float sum = butterfly_sum16(part, lane);
    qq = warp_sum(qq);
    kk = warp_sum(kk);
    qk = warp_sum(qk);
    const float qn = rsqrtf(qq + 1e-6f) * q_scale, kn = rsqrtf(kk + 1e-6f);
    const float beta = 1.f / (1.f + __expf(-b));
    const float x = araw + dt_bias;
    const float decay = __expf(-A * (x > 20.f ? x : log1pf(__expf(x))));
    // Lanes 0..15 (idx < 8) hold (S'^T k)[col] = decay kn (S^T k_raw): delta there.
    const float delta = beta * (v - decay * kn * sum);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const float dc = __shfl_sync(0xffffffffu, delta, 2 * c);
      // Lanes 16..31 (idx >= 8) hold (S^T q_raw)[col]: o = S'^T q + (k.q) delta.
      if (idx == kCols + c && (lane & 1) == 0 && col < dv)
        out[static_cast<int64_t>(t) * hv * dv + int64_t{h} * dv + col] =
            from_f32<TX>(decay * qn * sum + qk * qn * kn * dc);
#pragma unroll
      for (int i = 0; i < RPL; ++i) st[i][c] = decay * st[i][c] + kn * k[i] * dc;
    }
#pragma unroll
    for (int i = 0; i < RPL; ++i) {
      q[i] = nq[i];
      k[i] = nk[i];
    }
    v = nv;
    b = nb;
    araw = na;
  }

#pragma unroll
  for (int i = 0; i < RPL; ++i) {
    const int r = lane + 32 * i;
    if (r < dk) store_cols(S + static_cast<int64_t>(r) * dv, col0, dv, st[i]);
  }
}

template <int RPL>
void launch_rpl(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  const int64_t warps = int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kCols);
  const unsigned grid = ceil_div(warps, kWarpsPerBlock);
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (state_t == DType::F32) {
      if (a.max_tokens == 1)
        launch_k(gdn_recurrent_kernel<RPL, TX, float, true>, grid, kWarpsPerBlock * 32, 0, s, a);
      else
        launch_k(gdn_recurrent_kernel<RPL, TX, float, false>, grid, kWarpsPerBlock * 32, 0, s, a);
    } else if (state_t == DType::BF16) {
      if (a.max_tokens == 1)
        launch_k(gdn_recurrent_kernel<RPL, TX, bf16, true>, grid, kWarpsPerBlock * 32, 0, s, a);
      else
        launch_k(gdn_recurrent_kernel<RPL, TX, bf16, false>, grid, kWarpsPerBlock * 32, 0, s, a);
    } else {
      cuda_fail(__FILE__, __LINE__, "state_t", "gated delta rule state must be f32 or bf16");
    }
  });
}

}  // namespace

void launch_gdn_recurrent(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  if (a.num_seqs == 0) return;
  if (a.dk <= 32) {
    launch_rpl<1>(a, x_t, state_t, s);
  } else if (a.dk <= 64) {
    launch_rpl<2>(a, x_t, state_t, s);
  } else if (a.dk <= 128) {
    launch_rpl<4>(a, x_t, state_t, s);
  } else if (a.dk <= 256) {
    launch_rpl<8>(a, x_t, state_t, s);
  } else {
    cuda_fail(__FILE__, __LINE__, "dk", "the gated delta rule supports key head dims <= 256");
  }
}

}  // namespace syv::cuda
