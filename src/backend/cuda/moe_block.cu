// The MoE block's small-batch path (moe.cuh launch_moe_block(); Backend::moe_block): a MoE layer
// of at most kMoeBlockMaxTokens tokens after its pre-norm in three launches.
//   1. moe_router_topk_kernel: a warp per row of [router; shared_gate] (E + 1 rows of H), the
//      lane-strided fp32 dot products of gemv.cu's GEMV (the same order per lane, then warp_sum:
//      the bits linear() gives up to its GEMV token limit); row E is the shared expert's gate
//      logit, stored rounded to bf16 per token (as linear() into bf16 activations writes it). Each
//      block then takes a ticket (after a
//      __threadfence() of its stores); the block holding the last one has every logit and does
//      the softmax + top-k, a warp per token, with moe.cu's moe_topk_kernel arithmetic (the same
//      operations in the same order: ids and weights are that kernel's bits for these logits),
//      its probabilities in registers instead of shared memory, each round's winner found by a
//      tree over a lane's entries and two redux instructions (the choice of that kernel's scan).
//      It resets the ticket to 0, so the next launch (the next layer, a graph replay) finds it
//      there. With the whole router row in flight before the dependency wait, this form took the
//      kernel from 15.8 to 11.5 us under ncu (mean of 8 layers) and Qwen3-Next's 8-layer b = 1 step
//      from 0.943 to 0.909 ms (H100, 2026-12-06).
//   2./3. launch_moe_gemv() (moe_gemv.cu) with the shared expert as one more expert: its gate/up
//      rows read once for all tokens beside the routed pairs, its down rows one more place of each
//      token's combine (after the routed slots, gated by sigmoid of the logit above), rounded where
//      the op sequence rounds, out written once.
// Nothing else is launched: the shared expert's own GEMVs, its gate's linear, sigmoid_mul and the
// add of the unfused sequence (Backend::moe_block's default) are gone.
#include <climits>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe.cuh"

namespace syv::cuda {
namespace {

constexpr int kRouterWarps = 8;  // rows per block (a warp each); also the top-k's token limit
static_assert(kMoeBlockMaxTokens <= kRouterWarps, "the last block's warps take a token each");
static_assert(kMoeBlockMaxTokens <= kMoeGemvMaxTokens, "the experts go through moe_gemv.cu");

// Softmax + top-k of one token's logits l [E] (global memory written by other blocks of this
// grid: read through L2) by one warp; ids / weights [top_k]. moe_topk_kernel's arithmetic, step
// for step: the max, expf(l - max) summed per lane in ascending expert order then warp_sum, the
// division, then top_k rounds each taking the largest p (lower index on ties) out; weights
// renormalised by their sum in selection order. PL: a lane's entries (experts lane + 32 v, v < PL;
// E <= 32 PL). A round compares order keys (prob_key) in a tree over the lane's entries and across
// the warp by two redux instructions, where a scan of the entries and a shuffle argmax made a
// dependent chain of ~700 cycles a round (by instruction count, not measured alone).
__device__ __forceinline__ unsigned prob_key(float p) {
  // Order-preserving for p >= 0 (its bits + 1; both zeros 1); 0 for NaN (never chosen, as `p > -1`
  // never holds for it). A taken or invalid entry's key is 0 too.
  return p > 0.f ? __float_as_uint(p) + 1u : (p == 0.f ? 1u : 0u);
}

template <int PL>
__device__ void topk_token(const float* l, int E, int top_k, bool renormalize, int32_t* ids,
                           float* weights) {
  const int lane = threadIdx.x & 31;
  float p[PL];
  float mx = -INFINITY;
#pragma unroll
  for (int v = 0; v < PL; ++v) {
    const int e = v * 32 + lane;
    p[v] = e < E ? __ldcg(l + e) : -INFINITY;
    if (e < E) mx = fmaxf(mx, p[v]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int v = 0; v < PL; ++v) {
    if (v * 32 + lane < E) {
      p[v] = expf(p[v] - mx);
      sum += p[v];
    }
  }
  sum = warp_sum(sum);
  unsigned key[PL];
#pragma unroll
  for (int v = 0; v < PL; ++v) key[v] = v * 32 + lane < E ? prob_key(p[v] / sum) : 0u;
  int32_t my_id = 0;
  float my_p = 0.f, top_sum = 0.f;
  for (int j = 0; j < top_k; ++j) {
    // The lane's largest key, its lowest v among equals (pairs (v, v + s): v's unless v + s's is
    // larger), then the warp's largest key and the lowest expert holding it.
    unsigned bk[PL];
    int bv[PL];
#pragma unroll
    for (int v = 0; v < PL; ++v) bk[v] = key[v], bv[v] = v;
#pragma unroll
    for (int s = 1; s < PL; s *= 2)
#pragma unroll
      for (int v = 0; v + s < PL; v += 2 * s)
        if (bk[v + s] > bk[v]) bk[v] = bk[v + s], bv[v] = bv[v + s];
    const unsigned top = __reduce_max_sync(0xffffffffu, bk[0]);
    const unsigned mine = bk[0] == top ? static_cast<unsigned>(bv[0] * 32 + lane) : UINT_MAX;
    const int bi = top == 0u ? INT_MAX : static_cast<int>(__reduce_min_sync(0xffffffffu, mine));
    const float pv = top == 0u ? -1.f : __uint_as_float(top - 1u);  // none left: moe_topk's -1
    if (lane == j) my_id = bi, my_p = pv;
    top_sum += pv;  // in selection order, as the CPU reference sums
#pragma unroll
    for (int v = 0; v < PL; ++v)
      if (v * 32 + lane == bi) key[v] = 0u;
  }
  if (lane < top_k) {
    ids[lane] = my_id;
    weights[lane] = renormalize ? my_p / top_sum : my_p;
  }
}

// x [NT, H]; router [E, H]; shared_gate [1, H]; logits [NT, E]; gate_logit [NT]; ids / weights
// [NT, top_k]. Block b: rows [b * kRouterWarps, +kRouterWarps) of E + 1. H % 8 == 0.
// PL: the top-k's entries a lane (E <= 32 PL). UNROLL: 16-byte weight loads in flight a lane, all
// issued before the dependency wait (weights never change during a forward): 8 puts a whole row
// of H = 2048 in flight while the kernel before (the pre-norm) still runs.
template <int NT, int PL, int UNROLL>
__global__ void __launch_bounds__(kRouterWarps * 32)
    moe_router_topk_kernel(const bf16* __restrict__ x, const bf16* __restrict__ router,
                           const bf16* __restrict__ shared_gate, int E, int64_t H, int top_k,
                           bool renormalize, float* logits, int32_t* __restrict__ ids,
                           float* __restrict__ weights, float* __restrict__ gate_logit,
                           unsigned* __restrict__ ticket) {
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row = static_cast<int>(blockIdx.x) * kRouterWarps + warp;
  const bool active = row <= E;
  const uint4* wr = reinterpret_cast<const uint4*>(row < E ? router + row * H : shared_gate);
  const int64_t kv = active ? H / 8 : 0;  // 16-byte vectors per row
  // gemv_bf16_kernel's pipeline (UNROLL vectors in flight, the first before the dependency wait)
  // and its per-lane order of the products.
  constexpr int kUnroll = UNROLL;
  constexpr int64_t kStep = 32 * kUnroll;
  uint4 wv[kUnroll];
  int64_t i = lane;
  if (i + kStep - 32 < kv) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + 32 * u);  // read once
  }
  pdl_wait();
  pdl_trigger();
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  auto fma_step = [&](const uint4& w, int64_t at) {
    float wf[8];
    unpack8(w, wf);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float xf[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + t * H) + at), xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
    }
  };
  for (; i + kStep - 32 < kv; i += kStep) {
    uint4 cur[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) cur[u] = wv[u];
    if (i + kStep + kStep - 32 < kv) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + kStep + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_step(cur[u], i + 32 * u);
  }
  for (; i < kv; i += 32) fma_step(__ldcs(wr + i), i);
  if (active) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[t]);
      if (lane == 0) {
        if (row < E) {
          logits[t * E + row] = v;
        } else {  // the shared expert's gate logit: bf16 as linear() writes it
          gate_logit[t] = __bfloat162float(__float2bfloat16_rn(v));
        }
      }
    }
  }
  // The last block to finish sees every logit (each block's stores fenced before its ticket).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) *ticket = 0;
  if (warp < NT)
    topk_token<PL>(logits + warp * E, E, top_k, renormalize, ids + warp * top_k,
                   weights + warp * top_k);
}

// The instance for NT = tokens (1..kMoeBlockMaxTokens).
template <int NT = 1>
void launch_router(int64_t tokens, const void* x, const void* router, const void* shared_gate,
                   int64_t E, int64_t H, int top_k, bool renormalize, float* logits, int32_t* ids,
                   float* weights, float* gate_logit, unsigned* ticket, cudaStream_t st) {
  if constexpr (NT < kMoeBlockMaxTokens) {
    if (tokens > NT)
      return launch_router<NT + 1>(tokens, x, router, shared_gate, E, H, top_k, renormalize, logits,
                                   ids, weights, gate_logit, ticket, st);
  }
  // The top-k's entries a lane: 16 up to 512 experts (Qwen3-Next, Qwen3.5 MoE), else 32. Loads in
  // flight a lane: 8 from H = 2048 (a row of 2048 in flight at once), else 4 (a shorter row still
  // issues its first loads before the dependency wait).
  const bool deep = H >= 2048;
  auto* kernel =
      E <= 512 ? (deep ? moe_router_topk_kernel<NT, 16, 8> : moe_router_topk_kernel<NT, 16, 4>)
               : (deep ? moe_router_topk_kernel<NT, 32, 8> : moe_router_topk_kernel<NT, 32, 4>);
  launch_k(kernel, dim3(ceil_div(E + 1, kRouterWarps)), dim3(kRouterWarps * 32), 0, st,
           static_cast<const bf16*>(x), static_cast<const bf16*>(router),
           static_cast<const bf16*>(shared_gate), static_cast<int>(E), H, top_k, renormalize,
           logits, ids, weights, gate_logit, ticket);
}

size_t align256(size_t n) {
  return (n + 255) / 256 * 256;
}

// moe_block_scratch_bytes()'s layout: act bf16 [T * k, I] and [T, Is], then the shared gate f32
// [T].
size_t act_bytes(const MoeShape& s, int64_t Is) {
  return align256(2 * static_cast<size_t>(s.tokens * s.top_k * s.inter + s.tokens * Is));
}

}  // namespace

void launch_moe_router_topk(const void* x, const void* router, const void* shared_gate,
                            int64_t tokens, int64_t experts, int64_t hidden, int top_k,
                            bool renormalize, float* logits, int32_t* ids, float* weights,
                            float* gate_logit, unsigned* ticket, cudaStream_t stream) {
  if (tokens < 1 || tokens > kMoeBlockMaxTokens || experts < 1 || experts > kMoeBlockMaxExperts ||
      top_k < 1 || top_k > 32 || top_k > experts || hidden % 8 != 0)
    cuda_fail(__FILE__, __LINE__, "launch_moe_router_topk",
              "needs 1..kMoeBlockMaxTokens tokens, 1..kMoeBlockMaxExperts experts, top_k 1..32 "
              "(at most the experts) and a hidden size multiple of 8");
  launch_router(tokens, x, router, shared_gate, experts, hidden, top_k, renormalize, logits, ids,
                weights, gate_logit, ticket, stream);
}

size_t moe_block_scratch_bytes(const MoeShape& s, int64_t shared_inter) {
  return act_bytes(s, shared_inter) + align256(sizeof(float) * static_cast<size_t>(s.tokens));
}

void launch_moe_block(const void* x, const void* router, const void* shared_gate,
                      const void* gate_up, const void* down, const void* shared_gate_up,
                      const void* shared_down, int64_t shared_inter, bool renormalize,
                      float* logits, int32_t* ids, float* weights, void* out, const MoeShape& s,
                      void* scratch, unsigned* ticket, unsigned long long* routed,
                      cudaStream_t stream) {
  float* gate = reinterpret_cast<float*>(static_cast<char*>(scratch) + act_bytes(s, shared_inter));
  launch_moe_router_topk(x, router, shared_gate, s.tokens, s.experts, s.hidden,
                         static_cast<int>(s.top_k), renormalize, logits, ids, weights, gate, ticket,
                         stream);
  MoeSharedExpert shared;
  shared.gate_up = shared_gate_up;
  shared.down = shared_down;
  shared.gate = gate;
  shared.inter = shared_inter;
  launch_moe_gemv(x, ids, weights, gate_up, down, out, s, scratch, routed, stream, &shared);
}

}  // namespace syv::cuda
