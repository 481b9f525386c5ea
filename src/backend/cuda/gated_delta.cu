// The gated delta rule (Gated DeltaNet's recurrence), token by token, for decode, verify and short
// prefills (gated_delta_chunked.cu takes the long ones). Backend::gated_delta_rule in backend.h has
// the math.
//
// Two thread layouts (kernels.h GdnRecurrentForm): the column slices below, and whole state rows
// (gdn_recurrent_rows_kernel, further down) for wide batches.
//
// One block per (sequence, value head, 32 state columns); warp w of the block keeps rows
// [32 w, 32 w + 32) of that [dk, 32] slice in registers, lane c column c, for the whole sequence,
// so the state is read and written once per launch whatever the token count, and every state
// access of a warp is one whole 128-byte row segment (the state is [dk, dv] row-major per head).
// Columns are independent in the delta rule: with S' = exp(g) S, kv = S'ᵀk, δ = β (v - kv),
// S'' = S' + k δᵀ, the output is o = S''ᵀq = S'ᵀq + (k·q) δ, so one pass over the state gives
// both Sᵀk and Sᵀq (each lane sums its rows, the warps' partial sums meet in shared memory; the
// L2 norms and the decay are scalars applied afterwards), and a second applies the rank-1 update.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kCols = 32;  // state columns per block: one per lane

// q_s[i], k_s[i] = the token's q and k element i (0 where !in), and each warp's partial q·q, k·k
// and q·k in norms[0..2][warp]: the L2 norms and k·q, applied as scalars afterwards. Every lane of
// the calling warps takes part (warp sums).
template <typename TX, int W>
__device__ __forceinline__ void stage_qk(const TX* q, const TX* k, bool in, float* q_s, float* k_s,
                                         float (&norms)[3][W]) {
  const int i = threadIdx.x, lane = i & 31, warp = i >> 5;
  const float qv = in ? to_f32(q[i]) : 0.f, kv = in ? to_f32(k[i]) : 0.f;
  q_s[i] = qv;
  k_s[i] = kv;
  const float qq = warp_sum(qv * qv), kk = warp_sum(kv * kv), qk = warp_sum(qv * kv);
  if (lane == 0) {
    norms[0][warp] = qq;
    norms[1][warp] = kk;
    norms[2][warp] = qk;
  }
}

// Sequence s's state slot and new tokens [begin, end); false when this kernel has nothing to do
// for it (past the batch, no slot, no tokens, or the chunked kernel's).
// Read through L2: the column kernel reads them before its dependency wait (pdl_early_reads()).
__device__ __forceinline__ bool sequence_run(const GdnArgs& a, int64_t s, int& slot, int& begin,
                                             int& end) {
  if (s >= a.num_seqs) return false;
  slot = __ldcg(a.slots + s);
  begin = __ldcg(a.seq_starts + s);
  end = __ldcg(a.seq_starts + s + 1);
  return slot >= 0 && begin < end && (a.chunked_from <= 0 || end - begin < a.chunked_from);
}

// The token's gates from its b and a: β = sigmoid(b), the decay exp(-exp(A_log) softplus(a +
// dt_bias)) (A = exp(A_log)).
__device__ __forceinline__ void gdn_gates(float b, float araw, float A, float dt_bias, float& beta,
                                          float& decay) {
  beta = 1.f / (1.f + __expf(-b));
  const float x = araw + dt_bias;
  decay = __expf(-A * (x > 20.f ? x : log1pf(__expf(x))));
}

// NW warps: dk <= 32 NW. TX: activations (qkv, out); TS: the state.
// With a.early_reads the sequence's run and its state slice are read before the dependency wait:
// the kernel before this one is the causal conv1d, which writes neither; the batch metadata and the
// state were written two or more launches back (the state by this layer's step of an earlier
// forward or a checkpoint restore), so common.cuh's rule lets the reads overlap the conv's tail.
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
  if (!a.early_reads) pdl_wait();
  int slot, begin, end;
  if (!sequence_run(a, s, slot, begin, end)) return;
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
  for (int r = 0; r < 32; ++r) st[r] = r < rows ? to_f32(__ldcg(S_lane + r * dv)) : 0.f;
  pdl_wait();  // the conv's output (qkv); a no-op when waited above
  pdl_trigger();

  const TX* qkv = static_cast<const TX*>(a.qkv);
  TX* out = static_cast<TX*>(a.out);
  int next_save = a.num_saves > 0 ? a.save_starts[s] : 0;
  const int save_end = a.num_saves > 0 ? a.save_starts[s + 1] : 0;
  for (int t = begin; t < end; ++t) {
    const TX* row = qkv + static_cast<int64_t>(t) * width;
    const float v = col_ok ? to_f32(row[2 * key_dim + int64_t{h} * dv + col]) : 0.f;
    const float b = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + h);
    const float araw = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + hv + h);
    stage_qk(row + int64_t{kh} * dk, row + key_dim + int64_t{kh} * dk,
             static_cast<int>(threadIdx.x) < dk, q_s, k_s, norms);
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
    float beta, decay;
    gdn_gates(b, araw, A, dt_bias, beta, decay);
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

// The same recurrence with one block per (sequence, value head) over the whole [dk, 128] state
// (dv = 128): 16 warps, warp w rows w, w + 16, ..., lane c columns 4c .. 4c + 3, so each warp
// load or store is one whole 512-byte state row and a block reads its head's state as one
// contiguous run. The column-slice kernel above has each block read a 128-byte segment of every
// row (the state's rows interleaved over 4 blocks); at wide batches, where the state traffic is
// the kernel's whole cost, this reads and writes it closer to the copy rate. Sᵀk and Sᵀq meet
// over the warps in shared memory; δ is computed once per column and shared.
constexpr int kRowsWarps = 16, kRowsCols = 128;

template <typename TS>
__device__ __forceinline__ float4 load4(const TS* p) {
  if constexpr (std::is_same_v<TS, float>) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
  }
}
template <typename TS>
__device__ __forceinline__ void store4(TS* p, float4 v) {
  if constexpr (std::is_same_v<TS, float>) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<const uint32_t*>(&a);
    u.y = *reinterpret_cast<const uint32_t*>(&b);
    *reinterpret_cast<uint2*>(p) = u;
  }
}

// RPW: state rows per warp (dk = 16 RPW).
template <int RPW, typename TX, typename TS>
__global__ void __launch_bounds__(kRowsWarps * 32, 2) gdn_recurrent_rows_kernel(GdnArgs a) {
  constexpr int kDk = RPW * kRowsWarps;
  __shared__ float q_s[kDk], k_s[kDk], v_s[kRowsCols];
  __shared__ __align__(16) float delta_s[kRowsCols];
  __shared__ float norms[3][kRowsWarps];
  __shared__ float4 part[2][kRowsWarps][32];  // per-warp partial Sᵀk, Sᵀq of each lane's columns
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i = threadIdx.x;
  const int h = static_cast<int>(blockIdx.x % a.hv);
  const int64_t s = blockIdx.x / a.hv;
  pdl_wait();
  pdl_trigger();
  int slot, begin, end;
  if (!sequence_run(a, s, slot, begin, end)) return;
  const int hv = a.hv, kh = h / (hv / a.hk);
  const int64_t key_dim = int64_t{a.hk} * kDk, width = 2 * key_dim + int64_t{hv} * kRowsCols;
  const int64_t head_elems = int64_t{kDk} * kRowsCols;
  // This lane's 4 columns of row `warp`; its j-th row, warp + 16 j, is 16 rows further.
  TS* S_lane = static_cast<TS*>(a.state) + (static_cast<int64_t>(slot) * hv + h) * head_elems +
               static_cast<int64_t>(warp) * kRowsCols + 4 * lane;
  float4 st[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) st[j] = load4(S_lane + j * kRowsWarps * kRowsCols);
  const float A = __expf(load_any(a.a_log, a.param_t, h));
  const float dt_bias = load_any(a.dt_bias, a.param_t, h);
  const float q_scale = rsqrtf(static_cast<float>(kDk));

  const TX* qkv = static_cast<const TX*>(a.qkv);
  TX* out = static_cast<TX*>(a.out);
  int next_save = a.num_saves > 0 ? a.save_starts[s] : 0;
  const int save_end = a.num_saves > 0 ? a.save_starts[s + 1] : 0;
  for (int t = begin; t < end; ++t) {
    const TX* row = qkv + static_cast<int64_t>(t) * width;
    if (i < kDk) {
      stage_qk(row + int64_t{kh} * kDk, row + key_dim + int64_t{kh} * kDk, true, q_s, k_s, norms);
    } else if (i >= 512 - kRowsCols) {
      v_s[i - (512 - kRowsCols)] =
          to_f32(row[2 * key_dim + int64_t{h} * kRowsCols + (i - (512 - kRowsCols))]);
    }
    __syncthreads();
    float4 pk = make_float4(0.f, 0.f, 0.f, 0.f), pq = pk;
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
      const float kr = k_s[warp + j * kRowsWarps], qr = q_s[warp + j * kRowsWarps];
      pk.x += st[j].x * kr, pk.y += st[j].y * kr, pk.z += st[j].z * kr, pk.w += st[j].w * kr;
      pq.x += st[j].x * qr, pq.y += st[j].y * qr, pq.z += st[j].z * qr, pq.w += st[j].w * qr;
    }
    part[0][warp][lane] = pk;
    part[1][warp][lane] = pq;
    __syncthreads();
    float tqq = 0.f, tkk = 0.f, tqk = 0.f;
#pragma unroll
    for (int w = 0; w < kDk / 32; ++w) {
      tqq += norms[0][w];
      tkk += norms[1][w];
      tqk += norms[2][w];
    }
    const float qn = rsqrtf(tqq + 1e-6f) * q_scale, kn = rsqrtf(tkk + 1e-6f);
    const float b = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + h);
    const float araw = load_any(a.ba, a.ba_t, static_cast<int64_t>(t) * 2 * hv + hv + h);
    float beta, decay;
    gdn_gates(b, araw, A, dt_bias, beta, decay);
    if (i < kRowsCols) {  // column i: its lane i / 4, component i % 4
      const float* pk_c = reinterpret_cast<const float*>(&part[0][0][0]) + i;
      const float* pq_c = reinterpret_cast<const float*>(&part[1][0][0]) + i;
      float sk = 0.f, sq = 0.f;
#pragma unroll
      for (int w = 0; w < kRowsWarps; ++w) {
        sk += pk_c[w * 128];
        sq += pq_c[w * 128];
      }
      // (S'ᵀk)[col] = decay kn (Sᵀk_raw)[col]; o = S'ᵀq + (k·q) δ.
      const float delta = beta * (v_s[i] - decay * kn * sk);
      delta_s[i] = kn * delta;
      out[static_cast<int64_t>(t) * hv * kRowsCols + int64_t{h} * kRowsCols + i] =
          from_f32<TX>(decay * qn * sq + tqk * qn * kn * delta);
    }
    __syncthreads();
    const float4 kd = reinterpret_cast<const float4*>(delta_s)[lane];
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
      const float kr = k_s[warp + j * kRowsWarps];
      st[j].x = decay * st[j].x + kr * kd.x;
      st[j].y = decay * st[j].y + kr * kd.y;
      st[j].z = decay * st[j].z + kr * kd.z;
      st[j].w = decay * st[j].w + kr * kd.w;
    }
    if (next_save < save_end && a.save_after[next_save] == t + 1 - begin) {
      TS* dst = static_cast<TS*>(a.saves) +
                (static_cast<int64_t>(a.save_dests[next_save]) * hv + h) * head_elems +
                static_cast<int64_t>(warp) * kRowsCols + 4 * lane;
#pragma unroll
      for (int j = 0; j < RPW; ++j) store4(dst + j * kRowsWarps * kRowsCols, st[j]);
      ++next_save;
    }
    __syncthreads();  // the next token overwrites q_s, k_s, v_s, norms, part and delta_s
  }
#pragma unroll
  for (int j = 0; j < RPW; ++j) store4(S_lane + j * kRowsWarps * kRowsCols, st[j]);
}

// Launches pick(TX{}, TS{}) (a kernel for the activations' and the state's types; the state f32
// or bf16) over `grid` blocks of `threads`.
template <typename Pick>
void launch_typed(const GdnArgs& a, DType x_t, DType state_t, unsigned grid, int threads,
                  cudaStream_t s, Pick pick) {
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    if (state_t == DType::F32) {
      launch_k(pick(TX{}, float{}), grid, threads, 0, s, a);
    } else if (state_t == DType::BF16) {
      launch_k(pick(TX{}, bf16{}), grid, threads, 0, s, a);
    } else {
      cuda_fail(__FILE__, __LINE__, "state_t", "gated delta rule state must be f32 or bf16");
    }
  });
}

template <int NW>
void launch_nw(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  const auto grid = static_cast<unsigned>(int64_t{a.num_seqs} * a.hv * ceil_div(a.dv, kCols));
  launch_typed(a, x_t, state_t, grid, NW * 32, s,
               [](auto x, auto st) { return gdn_recurrent_kernel<NW, decltype(x), decltype(st)>; });
}

template <int RPW>
void launch_rows(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s) {
  const auto grid = static_cast<unsigned>(int64_t{a.num_seqs} * a.hv);
  launch_typed(a, x_t, state_t, grid, kRowsWarps * 32, s, [](auto x, auto st) {
    return gdn_recurrent_rows_kernel<RPW, decltype(x), decltype(st)>;
  });
}

// -1: not read from SYV_GDN_RECURRENT yet; else a GdnRecurrentForm.
std::atomic<int> g_recurrent_form{-1};

GdnRecurrentForm recurrent_form() {
  int v = g_recurrent_form.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GDN_RECURRENT");
    v = static_cast<int>(e && std::strcmp(e, "rows") == 0      ? GdnRecurrentForm::kRows
                         : e && std::strcmp(e, "columns") == 0 ? GdnRecurrentForm::kColumns
                                                               : GdnRecurrentForm::kAuto);
    g_recurrent_form.store(v, std::memory_order_relaxed);
  }
  return static_cast<GdnRecurrentForm>(v);
}

}  // namespace

void set_gdn_recurrent_form(GdnRecurrentForm form) {
  g_recurrent_form.store(static_cast<int>(form), std::memory_order_relaxed);
}

void launch_gdn_recurrent(const GdnArgs& args, DType x_t, DType state_t, cudaStream_t s) {
  if (args.num_seqs == 0) return;
  GdnArgs a = args;
  a.early_reads = pdl_early_reads();
  const bool rows_fit = a.dv == kRowsCols && (a.dk == 32 || a.dk == 64 || a.dk == 128);
  const GdnRecurrentForm form = recurrent_form();
  const bool wide = int64_t{a.num_seqs} * a.hv >= kGdnRowsMinBlocks || a.batch_invariant;
  if (rows_fit && (form == GdnRecurrentForm::kRows || (form == GdnRecurrentForm::kAuto && wide))) {
    if (a.dk == 32) return launch_rows<2>(a, x_t, state_t, s);
    if (a.dk == 64) return launch_rows<4>(a, x_t, state_t, s);
    return launch_rows<8>(a, x_t, state_t, s);
  }
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
