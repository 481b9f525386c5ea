// The small-batch path of the routed experts (moe.cuh: launch_moe_experts() takes it for at most
// kMoeGemvMaxTokens tokens outside batch-invariant mode). Two weight-streaming GEMVs in the manner
// of gemv.cu (16-byte streaming loads, kUnroll of them in flight per lane and row, fp32 warp dot
// products); no routing lists, no f32 pair outputs, no combine launch:
//   1. moe_gate_up_gemv_kernel: block (pair p, outputs [blockIdx.y * kGateUpWarps, +kGateUpWarps)),
//      a warp per output i. The pairs routed to expert e = ids[p] go in groups of G (in pair
//      order); the block of a group's first pair reads e's gate row i and up row I + i once for
//      the whole group (a token sharing an expert with another costs no second read), the others
//      exit at once. act[q, i] = bf16(SiLU(gate) * up) per pair q, rounded where the tiled path
//      rounds (gate and up in fp32, the product to bf16). The group's leader of output block 0
//      adds 1 to the routed-experts counter: the number of distinct experts, as moe_route_kernel.
//   2. moe_down_gemv_kernel: block (token t, hidden rows [blockIdx.y * kDownRows, +kDownRows)):
//      the token's valid slots in ascending expert id (ties in slot order: moe_combine_kernel's
//      and the CPU reference's order), split over the block's warps; per slot the fp32 dot product
//      of act[pair] with the expert's down row (a row walked in 32-lane chunks, the last one
//      partial when I % 256 != 0; a warp's chunks of all its slots one stream, kUnroll in flight),
//      then out = sum of bf16(dot) * weight in that order (one thread, as the combine sums the
//      tiled path's bf16 y), written in bf16.
// With a shared expert (MoeSharedExpert, launch_moe_block()) of width Is, it is one more block
// column of the gate/up grid (pair index P: the group of all T tokens; its act rows [T, Is] after
// the routed ones) and one more place of each token's down block (after the routed slots; with
// Is != I every place walks the longer row's chunks, zeros past its own end). Its values are
// rounded where the op sequence of Backend::moe_block rounds them (the shared expert through
// linear_silu_mul and linear, sigmoid_mul, add; every dot product in the GEMV's order), so the
// block's out is that sequence's, bit for bit, where the sequence's linears take the GEMV.
// Every dot product is one warp's fixed-order sum and the combine one thread's, whatever the other
// tokens are, so results are run-to-run identical (no floating-point atomics) and the same for a
// token alone or in any batch of up to kMoeGemvMaxTokens; they differ in rounding from the tiled
// path (mma.sync k16 steps: another summation order), which batch-invariant mode therefore keeps
// at every T.
// Routing ids are produced by the kernel before the gate/up GEMV (the router), so that kernel reads
// no weight before pdl_wait(): which expert's rows to stream is not known until then. The down
// GEMV comes two launches after the router: with pdl_early_reads() (common.cuh's rule) it reads
// the routing and issues its first weight chunks before its wait, while the gate/up GEMV ends;
// only the act rows, that kernel's output, wait.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe.cuh"

namespace syv::cuda {
namespace {

static_assert(kMoeGemvMaxTokens <= 8, "group sizes are instantiated up to 8 pairs");

constexpr int kUnroll = 4;       // 16-byte weight loads in flight per lane and row (gemv.cu's)
constexpr int kGateUpWarps = 8;  // outputs per gate/up block (a warp each: a gate and an up row)
constexpr int kDownWarps = 4;    // warps per down block, each a share of the token's slots
constexpr int kDownRows = 2;     // hidden rows per down block (they share the act loads)
constexpr int kMaxTopK = 32;     // moe_experts' bound (CudaBackend checks it)

// ---- gate/up ------------------------------------------------------------------------------------

// x [T, H], ids [P = T * k], gate_up [E, 2I, H] (gate rows, then up rows, per expert), act [P, I].
// shared_gu (null: none): the shared expert's [2Is, H], block column P, its act [T, Is] at act +
// P * I.
// G: pairs per group (accumulators per row). H % 8 == 0, 16-byte aligned rows. Up to 2 pairs a
// group, 3 blocks per multiprocessor (<= 80 registers, no spills with nvcc 13 for sm_90a): at
// decode the grid is P * I / 8 blocks (640 at Qwen3-Next's shape: 1.6 waves of 132 x 3, 2.4 at 2).
template <int G>
__global__ void __launch_bounds__(kGateUpWarps * 32, G <= 2 ? 3 : 2)
    moe_gate_up_gemv_kernel(const bf16* __restrict__ x, const int32_t* __restrict__ ids, int P,
                            int k, int E, const bf16* __restrict__ gate_up, int64_t H, int64_t I,
                            bf16* __restrict__ act, unsigned long long* __restrict__ routed,
                            const bf16* __restrict__ shared_gu, int64_t Is) {
  __shared__ int group[G];  // the act rows of this block's group, ascending
  __shared__ int group_n;   // how many; 0: not a group's first pair (nothing to do)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int p = static_cast<int>(blockIdx.x);
  const bool shared = p == P;  // the shared expert's column (only launched with shared_gu)
  pdl_wait();
  pdl_trigger();
  const int e = shared ? 0 : ids[p];
  if (e < 0 || e >= E) return;  // contributes nothing (as the tiled path)
  if (shared) {
    if (warp == 0 && lane < P / k) group[lane] = P + lane;  // every token: T <= G
    if (threadIdx.x == 0) group_n = P / k;
  } else if (warp == 0) {
    // p's rank among the pairs routed to e (pair order), and the pairs of ranks [rank, rank + G).
    int rank = -1, seen = 0;
    for (int base = 0; base < P; base += 32) {
      const int q = base + lane;
      const bool match = q < P && ids[q] == e;
      const unsigned ballot = __ballot_sync(0xffffffffu, match);
      if (p >= base && p < base + 32) rank = seen + __popc(ballot & ((1u << (p - base)) - 1u));
      if (rank >= 0 && rank % G != 0) break;  // not a group's first pair
      if (rank >= 0 && match) {
        const int r = seen + __popc(ballot & ((1u << lane) - 1u));
        if (r >= rank && r < rank + G) group[r - rank] = q;
      }
      seen += __popc(ballot);
      if (rank >= 0 && seen >= rank + G) break;  // the group is complete
    }
    if (lane == 0) {
      group_n = rank % G == 0 ? min(G, seen - rank) : 0;
      if (rank == 0 && blockIdx.y == 0) atomicAdd(routed, 1ull);  // e's first pair: once per e
    }
  }
  __syncthreads();
  const int n = group_n;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kGateUpWarps + warp;
  const int64_t width = shared ? Is : I;  // this expert's outputs (gate rows, then as many up rows)
  if (n == 0 || i >= width) return;
  const int64_t kv = H / 8;  // 16-byte vectors per row
  const bf16* rows = shared ? shared_gu : gate_up + e * 2 * I * H;
  const uint4* wr[2] = {reinterpret_cast<const uint4*>(rows + i * H),
                        reinterpret_cast<const uint4*>(rows + (width + i) * H)};
  const uint4* xr[G];
#pragma unroll
  for (int j = 0; j < G; ++j) {  // past n: clamped, never read
    const int q = group[min(j, n - 1)];
    xr[j] = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(q < P ? q / k : q - P) * H);
  }
  float acc[2][G];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int j = 0; j < G; ++j) acc[r][j] = 0.f;
  // The unpacked weights times the group's x vectors at `at`.
  auto fma_step = [&](const float(&wf)[2][8], int64_t at) {
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (j >= n) break;  // warp-uniform
      float xf[8];
      unpack8(__ldg(xr[j] + at), xf);
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][j] = fmaf(wf[r][c], xf[c], acc[r][j]);
    }
  };
  // gemv_bf16_kernel's pipeline depth (kUnroll vectors of both rows in flight) as a ring: each
  // vector's registers are refilled with the one kUnroll * 32 further on as soon as they are
  // unpacked; a plain tail for kv not a multiple of 32 * kUnroll.
  constexpr int64_t kStep = 32 * kUnroll;
  uint4 wv[2][kUnroll];
  int64_t at = lane;
  if (at + kStep - 32 < kv) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + at + 32 * u);  // read once
  }
  for (; at + kStep - 32 < kv; at += kStep) {
    const bool more = at + kStep + kStep - 32 < kv;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float wf[2][8];
      unpack8(wv[0][u], wf[0]);
      unpack8(wv[1][u], wf[1]);
      if (more) {
        wv[0][u] = __ldcs(wr[0] + at + kStep + 32 * u);
        wv[1][u] = __ldcs(wr[1] + at + kStep + 32 * u);
      }
      fma_step(wf, at + 32 * u);
    }
  }
  for (; at < kv; at += 32) {
    float wf[2][8];
    unpack8(__ldcs(wr[0] + at), wf[0]);
    unpack8(__ldcs(wr[1] + at), wf[1]);
    fma_step(wf, at);
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (j >= n) break;
    const float g = warp_sum(acc[0][j]), u = warp_sum(acc[1][j]);
    if (lane == 0) {
      const int64_t q = group[j];
      if (!shared) {
        const float silu = g / (1.f + expf(-g));  // as moe_gemm_kernel's epilogue
        act[q * I + i] = __float2bfloat16_rn(silu * u);
      } else {  // as linear_silu_mul's GEMV epilogue (gemv.cu store_outputs)
        const float gb = __bfloat162float(__float2bfloat16_rn(g));
        const float ub = __bfloat162float(__float2bfloat16_rn(u));
        const float silu = __bfloat162float(__float2bfloat16_rn(gb / (1.f + __expf(-gb))));
        act[P * I + (q - P) * Is + i] = __float2bfloat16_rn(silu * ub);
      }
    }
  }
}

// ---- down + combine -----------------------------------------------------------------------------

// act [P, I] (pair order), ids / weights [T, k], down [E, H, I], out [T, H]. I % 8 == 0.
// kShared: shared_down, the shared expert's [H, Is], is one more place after the token's routed
// slots (act row t of [T, Is] at act + P * I), its dot product d gated by the logit g =
// shared_gate[t]: out = bf16(bf16(routed sum) + bf16(bf16(d) * sigmoid(g))), the op sequence's
// roundings (moe_experts, linear, sigmoid_mul, add).
// Block (token t = blockIdx.x, hidden rows [blockIdx.y * kDownRows, +kDownRows)): the tokens of
// one row block run side by side, so the rows of an expert two tokens share are read twice close
// together (the second read may hit L2). The token's valid slots in ascending expert id are split
// over the warps (warp w takes places w, w + kDownWarps, ...: the slot dimension is the K of the
// combine, split so that kDownWarps of a token's expert rows stream at once); the per-slot dot
// products meet in shared memory and one thread per row sums them in place order.
// early_reads: ids, weights and shared_gate (the router's, two launches back) and the first
// kUnroll weight chunks are read before the dependency wait (the file's header).
template <bool kShared>
__global__ void __launch_bounds__(kDownWarps * 32)
    moe_down_gemv_kernel(const bf16* __restrict__ act, const int32_t* __restrict__ ids,
                         const float* __restrict__ weights, int k, int E,
                         const bf16* __restrict__ down, int64_t H, int64_t I,
                         bf16* __restrict__ out, const bf16* __restrict__ shared_down,
                         const float* __restrict__ shared_gate, int64_t Is, bool early_reads) {
  constexpr int kPlaces = kMaxTopK + (kShared ? 1 : 0);  // the routed slots (and the shared one)
  __shared__ const bf16* s_rows[kPlaces];                // the place's expert: down [H, I]
  __shared__ const bf16* s_act[kPlaces];                 // the place's act row
  __shared__ float s_weight[kPlaces];
  __shared__ float s_dot[kPlaces][kDownRows];  // [place][row]: the slot's fp32 dot products
  __shared__ int s_slots;                      // places in use
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  if (!early_reads) pdl_wait();
  if (warp == 0) {  // the router's outputs, through L2 (read before the wait: common.cuh)
    // Slot `lane`'s place among the token's valid slots: ascending expert id, then slot order
    // (moe_combine_kernel's stable insertion sort).
    const int pair = static_cast<int>(t * k) + lane;
    const int e = lane < k ? __ldcg(ids + pair) : -1;
    const bool valid = e >= 0 && e < E;
    int place = 0;
    for (int j = 0; j < k; ++j) {
      const int ej = __shfl_sync(0xffffffffu, e, j);
      place += ej >= 0 && ej < E && (ej < e || (ej == e && j < lane));
    }
    if (valid) {
      s_rows[place] = down + static_cast<int64_t>(e) * H * I;
      s_act[place] = act + static_cast<int64_t>(pair) * I;
      s_weight[place] = __ldcg(weights + pair);
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, valid);
    if (lane == 0) {
      int n = __popc(ballot);
      if constexpr (kShared) {
        s_rows[n] = shared_down;
        s_act[n] = act + static_cast<int64_t>(gridDim.x) * k * I + t * Is;
        s_weight[n] = __ldcg(shared_gate + t);
        ++n;
      }
      s_slots = n;
    }
  }
  __syncthreads();
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * kDownRows;
  const int n = s_slots;
  const int64_t kv = I / 8, kv_shared = kShared ? Is / 8 : 0;  // 16-byte vectors per row
  // 32-lane chunks per row: with a shared expert those of the longer row for every place.
  const int chunks = static_cast<int>((max(kv, kv_shared) + 31) / 32);
  // This warp's places and their chunks, one stream.
  const int mine = n > warp ? (n - warp + kDownWarps - 1) / kDownWarps : 0;
  const int steps = mine * chunks;
  int64_t row_off[kDownRows], row_off_shared[kDownRows];  // rows past H: clamped, never stored
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) {
    row_off[r] = min(h0 + r, H - 1) * I;
    row_off_shared[r] = min(h0 + r, H - 1) * Is;
  }

  // Chunk c of place s for this lane: the down rows' (load_w) and act's (load_a) vector c * 32 +
  // lane, zeros past the row's end.
  auto in_row = [&](int s, int c) {
    const bool shared = kShared && s == n - 1;  // the shared expert: the last place
    return static_cast<int64_t>(c) * 32 + lane < (shared ? kv_shared : kv);
  };
  auto load_w = [&](int s, int c, uint4(&w)[kDownRows]) {
    const int64_t v = static_cast<int64_t>(c) * 32 + lane;
    const bool shared = kShared && s == n - 1;
    if (in_row(s, c)) {
      const bf16* base = s_rows[s];
#pragma unroll
      for (int r = 0; r < kDownRows; ++r)
        w[r] = __ldcs(
            reinterpret_cast<const uint4*>(base + (shared ? row_off_shared[r] : row_off[r])) +
            v);  // read once
    } else {
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) w[r] = make_uint4(0, 0, 0, 0);
    }
  };
  auto load_a = [&](int s, int c, uint4& a) {
    a = in_row(s, c) ? __ldg(reinterpret_cast<const uint4*>(s_act[s]) + c * 32 + lane)
                     : make_uint4(0, 0, 0, 0);
  };
  auto advance = [&](int& s, int& c) {
    if (++c == chunks) c = 0, s += kDownWarps;
  };

  // A ring of kUnroll chunks in flight (gemv_bf16_kernel's depth): each chunk's registers are
  // refilled with the chunk kUnroll further on as soon as they are unpacked.
  uint4 wv[kUnroll][kDownRows], av[kUnroll];
  {
    int ws = warp, wc = 0;  // the first kUnroll chunks' weights: before the wait (early_reads)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (ws < n) {
        load_w(ws, wc, wv[u]);
        advance(ws, wc);
      }
  }
  pdl_wait();  // act: the gate/up GEMV's output (a no-op when waited above)
  pdl_trigger();
  int ls = warp, lc = 0;  // the loader's next chunk
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (ls < n) {
      load_a(ls, lc, av[u]);
      advance(ls, lc);
    }
  float acc[kDownRows];
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) acc[r] = 0.f;
  int cs = warp, cc = 0;  // the chunk being used
  for (int s0 = 0; s0 < steps; s0 += kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s0 + u >= steps) break;  // warp-uniform
      float af[8], wf[kDownRows][8];
      unpack8(av[u], af);
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) unpack8(wv[u][r], wf[r]);
      if (ls < n) {
        load_w(ls, lc, wv[u]);
        load_a(ls, lc, av[u]);
        advance(ls, lc);
      }
#pragma unroll
      for (int r = 0; r < kDownRows; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r] = fmaf(wf[r][c], af[c], acc[r]);
      if (cc == chunks - 1) {  // place cs's dot products are complete
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          const float dot = warp_sum(acc[r]);
          if (lane == 0) s_dot[cs][r] = dot;
          acc[r] = 0.f;
        }
      }
      advance(cs, cc);
    }
  }
  __syncthreads();
  if (warp == 0 && lane < kDownRows && h0 + lane < H) {
    const int routed = kShared ? n - 1 : n;
    float sum = 0.f;
    // moe_combine_kernel's sum, each slot's dot product rounded to bf16 first as the tiled path's
    // y holds it (so a token's greedy output does not depend on which path its step takes).
    for (int s = 0; s < routed; ++s)
      sum += __bfloat162float(__float2bfloat16_rn(s_dot[s][lane])) * s_weight[s];
    if constexpr (kShared) {  // sigmoid_mul's and add's roundings
      const float d = __bfloat162float(__float2bfloat16_rn(s_dot[routed][lane]));
      const float gated =
          __bfloat162float(__float2bfloat16_rn(d / (1.f + __expf(-s_weight[routed]))));
      sum = __bfloat162float(__float2bfloat16_rn(sum)) + gated;
    }
    out[t * H + h0 + lane] = __float2bfloat16_rn(sum);
  }
}

// shared_gu, Is: the shared expert's gate/up rows and width (null, 0: none).
template <int G>
void launch_gate_up(const bf16* x, const int32_t* ids, const MoeShape& s, const bf16* gate_up,
                    bf16* act, unsigned long long* routed, const bf16* shared_gu, int64_t Is,
                    cudaStream_t st) {
  const int64_t P = s.tokens * s.top_k;
  const int64_t columns = P + (shared_gu != nullptr ? 1 : 0);
  launch_k(moe_gate_up_gemv_kernel<G>,
           dim3(static_cast<unsigned>(columns), ceil_div(std::max(s.inter, Is), kGateUpWarps)),
           dim3(kGateUpWarps * 32), 0, st, x, ids, static_cast<int>(P), static_cast<int>(s.top_k),
           static_cast<int>(s.experts), gate_up, s.hidden, s.inter, act, routed, shared_gu, Is);
}

}  // namespace

void launch_moe_gemv(const void* x, const int32_t* ids, const float* weights, const void* gate_up,
                     const void* down, void* out, const MoeShape& s, void* act,
                     unsigned long long* routed, cudaStream_t stream,
                     const MoeSharedExpert* shared) {
  const int64_t Is = shared != nullptr ? shared->inter : 0;
  if (s.tokens < 1 || s.tokens > kMoeGemvMaxTokens || s.top_k < 1 || s.top_k > kMaxTopK ||
      s.hidden > 65535 * kDownRows || std::max(s.inter, Is) > 65535 * kGateUpWarps ||
      (shared != nullptr && (Is < 1 || Is % 8 != 0)))
    cuda_fail(__FILE__, __LINE__, "launch_moe_gemv",
              "needs 1..kMoeGemvMaxTokens tokens, top_k 1..32, hidden and inter sizes within the "
              "grid's y dimension, and a shared expert width that is a positive multiple of 8");
  const bf16* xb = static_cast<const bf16*>(x);
  const bf16* gu = static_cast<const bf16*>(gate_up);
  bf16* ab = static_cast<bf16*>(act);
  const bf16* sgu = shared != nullptr ? static_cast<const bf16*>(shared->gate_up) : nullptr;
  const bf16* sdn = shared != nullptr ? static_cast<const bf16*>(shared->down) : nullptr;
  const float* sgate = shared != nullptr ? shared->gate : nullptr;
  // Pairs per group: the token count rounded up to a power of two (a batch's tokens routed to one
  // expert share one read of its rows).
  if (s.tokens == 1)
    launch_gate_up<1>(xb, ids, s, gu, ab, routed, sgu, Is, stream);
  else if (s.tokens == 2)
    launch_gate_up<2>(xb, ids, s, gu, ab, routed, sgu, Is, stream);
  else if (s.tokens <= 4)
    launch_gate_up<4>(xb, ids, s, gu, ab, routed, sgu, Is, stream);
  else
    launch_gate_up<8>(xb, ids, s, gu, ab, routed, sgu, Is, stream);
  const dim3 grid(static_cast<unsigned>(s.tokens), ceil_div(s.hidden, kDownRows));
  auto* down_kernel = shared != nullptr ? moe_down_gemv_kernel<true> : moe_down_gemv_kernel<false>;
  launch_k(down_kernel, grid, dim3(kDownWarps * 32), 0, stream, static_cast<const bf16*>(act), ids,
           weights, static_cast<int>(s.top_k), static_cast<int>(s.experts),
           static_cast<const bf16*>(down), s.hidden, s.inter, static_cast<bf16*>(out), sdn, sgate,
           Is, pdl_early_reads());
}

}  // namespace syv::cuda
