// The gated delta rule (Gated DeltaNet's recurrence), token by token, for decode, verify and short
// prefills (gated_delta_chunked.cu takes the long ones). Backend::gated_delta_rule in backend.h has
// the math.
//
// One block per (sequence, value head, 32 state columns); warp w of the block keeps rows
// [32 w, 32 w + 32) of that [dk, 32] slice in registers, lane c column c, for the whole sequence,
// so the state is read and written once per launch whatever the token count, and every state
// access of a warp is one whole 128-byte row segment (the state is [dk, dv] row-major per head).
// Columns are independent in the delta rule: with S' = exp(g) S, kv = S'ᵀk, δ = β (v - kv),
// S'' = S' + k δᵀ, the output is o = S''ᵀq = S'ᵀq + (k·q) δ, so one pass over the state gives
// both Sᵀk and Sᵀq (each lane sums its rows, the warps' partial sums meet in shared memory; the
// L2 norms and the decay are scalars applied afterwards), and a second applies the rank-1 update.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kCols = 32;  // state columns per block: one per lane

// NW warps: dk <= 32 NW. TX: activations (qkv, out); TS: the state.
template <int NW, typename TX, typename TS>
__global__ void __launch_bounds__(NW * 32) gdn_recurrent_kernel(GdnArgs a) {
  __shared__ float q_s[NW * 32], k_s[NW * 32];  // the token's raw q and k rows
  __shared__ float norms[3][NW];                // per-warp partial q·q, k·k, q·k
  __shared__ float part[2][NW][32];             // per-warp partial Sᵀk, Sᵀq per column
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = (a.dv + kCols - 1) / kCols;
  const int group = static_cast<int>(blockIdx.x % groups);
  const int h = static_cast<int>((blockIdx.x / groups) % a.hv);
  const int64_t s = blockIdx.x / (int64_t{groups} * a.hv);
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
  const int col = group * kCols + lane, row0 = warp * 32;
  const bool col_ok = col < dv;
  // This lane's column of the warp's rows: element r at S_lane[r * dv].
  TS* S_lane = static_cast<TS*>(a.state) + (static_cast<int64_t>(slot) * hv + h) * dk * dv +
               static_cast<int64_t>(row0) * dv + col;
  const int rows = col_ok ? min(32, dk - row0) : 0;

  float st[32];
#pragma unroll
  for (int r = 0; r < 32; ++r) st[r] = r < rows ? to_f32(S_lane[r * dv]) : 0.f;

  const TX* qkv = static_cast<const TX*>(a.qkv);
  TX* out = static_cast<TX*>(a.out);
  int next_save = a.num_saves > 0 ? a.save_starts[s] : 0;
  const int save_end = a.num_saves > 0 ? a.save_starts[s + 1] : 0;
  for (int t = begin; t < end; ++t) {
    const TX* row = qkv + static_cast<int64_t>(t) * width;
    const int i = threadIdx.x;
    const float qv = i < dk ? to_f32(row[int64_t{kh} * dk + i]) : 0.f;
    const float kv = i < dk ? to_f32(row[key_dim + int64_t{kh} * dk + i]) : 0.f;
    const float v = col_ok ? to_f32(row[2 * key_dim + int64_t{h} * dv + col]) : 0.f;
    const float b = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + h);
    const float araw = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + hv + h);
    q_s[i] = qv;
    k_s[i] = kv;
    const float qq = warp_sum(qv * qv), kk = warp_sum(kv * kv), qk = warp_sum(qv * kv);
    if (lane == 0) {
      norms[0][warp] = qq;
      norms[1][warp] = kk;
      norms[2][warp] = qk;
    }
    __syncthreads();
    float pk = 0.f, pq = 0.f;
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      pk += st[r] * k_s[row0 + r];
      pq += st[r] * q_s[row0 + r];
    }
    part[0][warp][lane] = pk;
    part[1][warp][lane] = pq;
    __syncthreads();
    float sk = 0.f, sq = 0.f, tqq = 0.f, tkk = 0.f, tqk = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      sk += part[0][w][lane];
      sq += part[1][w][lane];
      tqq += norms[0][w];
      tkk += norms[1][w];
      tqk += norms[2][w];
    }
    const float qn = rsqrtf(tqq + 1e-6f) * q_scale, kn = rsqrtf(tkk + 1e-6f);
    const float beta = 1.f / (1.f + __expf(-b));
    const float x = araw + dt_bias;
    const float decay = __expf(-A * (x > 20.f ? x : log1pf(__expf(x))));
    // (S'ᵀk)[col] = decay kn (Sᵀk_raw)[col]; o = S'ᵀq + (k·q) δ.
    const float delta = beta * (v - decay * kn * sk);
    if (warp == 0 && col_ok)
      out[static_cast<int64_t>(t) * hv * dv + int64_t{h} * dv + col] =
          from_f32<TX>(decay * qn * sq + tqk * qn * kn * delta);
    const float kd = kn * delta;
#pragma unroll
    for (int r = 0; r < 32; ++r) st[r] = decay * st[r] + k_s[row0 + r] * kd;
    if (next_save < save_end && a.save_after[next_save] == t + 1 - begin) {
      TS* dst = static_cast<TS*>(a.saves) +
                (static_cast<int64_t>(a.save_dests[next_save]) * hv + h) * dk * dv +
                static_cast<int64_t>(row0) * dv + col;
#pragma unroll
      for (int r = 0; r < 32; ++r)
        if (r < rows) dst[r * dv] = from_f32<TS>(st[r]);
      ++next_save;
    }
    __syncthreads();  // the next token overwrites q_s, k_s, norms and part
  }

#pragma unroll
  for (int r = 0; r < 32; ++r)
    if (r < rows) S_lane[r * dv] = from_f32<TS>(st[r]);
}

template <int NW>
void launch_nw(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kCols));
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (state_t == DType::F32) {
      launch_k(gdn_recurrent_kernel<NW, TX, float>, grid, NW * 32, 0, s, a);
    } else if (state_t == DType::BF16) {
      launch_k(gdn_recurrent_kernel<NW, TX, bf16>, grid, NW * 32, 0, s, a);
    } else {
      cuda_fail(__FILE__, __LINE__, "state_t", "gated delta rule state must be f32 or bf16");
    }
  });
}

}  // namespace

void launch_gdn_recurrent(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  if (a.num_seqs == 0) return;
  if (a.dk <= 32) {
    launch_nw<1>(a, x_t, state_t, s);
  } else if (a.dk <= 64) {
    launch_nw<2>(a, x_t, state_t, s);
  } else if (a.dk <= 128) {
    launch_nw<4>(a, x_t, state_t, s);
  } else if (a.dk <= 256) {
    launch_nw<8>(a, x_t, state_t, s);
  } else {
    cuda_fail(__FILE__, __LINE__, "dk", "the gated delta rule supports key head dims <= 256");
  }
}

}  // namespace syv::cuda
