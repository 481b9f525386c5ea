// Quantized MoE experts at small batches (Backend::moe_experts_quantized on CUDA): two grouped
// GEMVs that stream only the routed experts' packed rows and dequantize them in registers, as
// quant_linear.cu's GEMV does for one weight (the same vectors: 16 e4m3 values or 32 int4 nibbles
// per 16-byte load, converted by the same exact conversions, fp32 accumulation). Against the
// dequantize-to-bf16 path (launch_quant_dequant_experts, then the dense MoE kernels), a step reads
// the routed experts' quantized bytes once instead of those bytes plus twice their bf16 bytes.
//   1. moe_quant_gate_up_kernel: grid (pair p, outputs [blockIdx.y * kWarps, +kWarps)), a warp per
//      output i: the dot products of x[p / k] with expert ids[p]'s gate row i and up row I + i
//      (rows e * 2I + i and e * 2I + I + i of the stacked gate_up), the lanes taking the rows'
//      vectors in turn, each a warp sum; act[p, i] = bf16(SiLU(gate) * up) (moe_gemv.cu's
//      rounding: gate and up in fp32, the product to bf16). Block (p, 0)'s first thread adds 1 to
//      the routed-experts counter where p is the first pair routed to its expert.
//   2. moe_quant_down_kernel: grid (token t, hidden rows [blockIdx.y * kWarps, +kWarps)), a warp
//      per hidden row h: the lanes walk the token's (slot, vector) pairs in one flattened order,
//      each adding weight[t, j] * (its vector of expert ids[t, j]'s down row h) . act[t * k + j];
//      out[t, h] = bf16(warp sum).
// Each output is a fixed-order sum over one token's own operands, so results are run-to-run
// identical and a token's bits do not depend on the other tokens of the batch. They are not the
// dequantize path's bits: the weights enter as their exact dequantized values (that path rounds
// each to bf16 first) and the sums run in another order. A pair whose id is out of range
// contributes nothing (as the dense kernels).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

constexpr int kWarps = 8;   // outputs per block (a warp each)
constexpr int kUnroll = 4;  // 16-byte weight vectors in flight per lane (and row)

template <int FMT>
constexpr int64_t k_per_vector() {
  return FMT == 0 ? 16 : 32;
}

// dequant(w)[row, k0 .. k0 + kPerVec) . x[k0 .. k0 + kPerVec) for the vector `v` holding them
// (x bf16, 16-byte aligned), the scale applied. FMT 0: fp8 block-scaled, 1: int4 groups.
template <int FMT>
__device__ __forceinline__ float vector_dot(const QuantWeight& w, int64_t row, int64_t k0,
                                            const uint4& v, const bf16* __restrict__ x) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(&v);
  if constexpr (FMT == 0) {
    float dot = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float xf[8], wf[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + k0 + 8 * h)), xf);
      fp8x4_to_f32(words[2 * h], wf);
      fp8x4_to_f32(words[2 * h + 1], wf + 4);
#pragma unroll
      for (int j = 0; j < 8; ++j) dot = fmaf(wf[j], xf[j], dot);
    }
    return dot * __ldg(w.scales + (row / w.block_n) * w.scale_cols + k0 / w.block_k);
  } else {
    const int64_t g = k0 / w.group_size;
    const float z = w.zeros ? static_cast<float>(__ldg(w.zeros + row * w.scale_cols + g)) : 8.f;
    float c[4], cls[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 4; ++j) c[j] = 8388608.f + z * static_cast<float>(1 << (4 * j));
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float xf[8], wf[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + k0 + 8 * q)), xf);
      int4x8_to_f32(words[q], c, wf);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        cls[j] = fmaf(wf[j], xf[j], cls[j]);
        cls[j] = fmaf(wf[4 + j], xf[4 + j], cls[j]);
      }
    }
    const float v = cls[0] + cls[1] * 0.0625f + cls[2] * (1.f / 256.f) + cls[3] * (1.f / 4096.f);
    return v * __ldg(w.scales + row * w.scale_cols + g);
  }
}

template <int FMT>
__device__ __forceinline__ const uint4* row_vectors(const QuantWeight& w, int64_t row) {
  const int64_t row_bytes = FMT == 0 ? w.k : w.k / 2;
  return reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + row * row_bytes);
}

// x bf16 [T, H], ids [P = T * k], gate_up [E * 2I, H] quantized, act bf16 [P, I].
// U: vectors in flight per lane and row (2 where a row has at most 64 vectors, as int4 at H =
// 2,048: no lane has more, and the registers it frees fit 3 blocks per SM instead of 2). The sums
// are the same for every U (each lane adds its vectors in the same order).
template <int FMT, int U>
__global__ void __launch_bounds__(kWarps * 32, U <= 2 ? 3 : 2)
    moe_quant_gate_up_kernel(const bf16* __restrict__ x, const int32_t* __restrict__ ids, int k,
                             int E, const QuantWeight gate_up, int64_t I, bf16* __restrict__ act,
                             unsigned long long* __restrict__ routed) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int p = static_cast<int>(blockIdx.x);
  pdl_wait();  // ids from the router; act may still be read by the previous down kernel
  pdl_trigger();
  const int e = ids[p];
  if (e < 0 || e >= E) return;
  if (routed != nullptr && blockIdx.y == 0 && threadIdx.x == 0) {
    bool first = true;
    for (int q = 0; q < p && first; ++q) first = ids[q] != e;
    if (first) atomicAdd(routed, 1ull);
  }
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kWarps + warp;
  if (i >= I) return;
  const int64_t H = gate_up.k, kv = H / k_per_vector<FMT>();
  const int64_t gate_row = e * 2 * I + i, up_row = gate_row + I;
  const uint4* gr = row_vectors<FMT>(gate_up, gate_row);
  const uint4* ur = row_vectors<FMT>(gate_up, up_row);
  const bf16* xr = x + static_cast<int64_t>(p / k) * H;
  float g = 0.f, u = 0.f;
  for (int64_t base = lane; base < kv; base += 32 * U) {
    uint4 gv[U], uv[U];
#pragma unroll
    for (int r = 0; r < U; ++r) {
      const int64_t v = base + 32 * r;
      gv[r] = v < kv ? __ldcs(gr + v) : make_uint4(0, 0, 0, 0);
      uv[r] = v < kv ? __ldcs(ur + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int r = 0; r < U; ++r) {
      const int64_t v = base + 32 * r;
      if (v >= kv) break;
      const int64_t k0 = v * k_per_vector<FMT>();
      g += vector_dot<FMT>(gate_up, gate_row, k0, gv[r], xr);
      u += vector_dot<FMT>(gate_up, up_row, k0, uv[r], xr);
    }
  }
  g = warp_sum(g);
  u = warp_sum(u);
  if (lane == 0) {
    const float silu = g / (1.f + expf(-g));  // as moe_gemv.cu's routed experts
    act[static_cast<int64_t>(p) * I + i] = __float2bfloat16_rn(silu * u);
  }
}

// act bf16 [T * k, I], ids / weights [T * k], down [E * H, I] quantized, out bf16 [T, H].
template <int FMT>
__global__ void __launch_bounds__(kWarps * 32)
    moe_quant_down_kernel(const bf16* __restrict__ act, const int32_t* __restrict__ ids,
                          const float* __restrict__ weights, int k, int E, const QuantWeight down,
                          int64_t H, bf16* __restrict__ out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  const int64_t h = static_cast<int64_t>(blockIdx.y) * kWarps + warp;
  pdl_wait();  // act from the gate/up kernel; out may still be read by the previous kernel
  pdl_trigger();
  if (h >= H) return;
  const int64_t I = down.k, kv = I / k_per_vector<FMT>(), total = k * kv;
  float acc = 0.f;
  for (int64_t base = lane; base < total; base += 32 * kUnroll) {
    uint4 wv[kUnroll];
    int64_t rows[kUnroll];
    int js[kUnroll];
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      const int64_t f = base + 32 * r;
      const int j = static_cast<int>(f / kv);
      const int e = f < total ? ids[t * k + j] : -1;
      js[r] = j;
      rows[r] = e >= 0 && e < E ? e * H + h : -1;
      wv[r] = rows[r] >= 0 ? __ldcs(row_vectors<FMT>(down, rows[r]) + (f - j * kv))
                           : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      if (rows[r] < 0) continue;
      const int64_t f = base + 32 * r, pair = t * k + js[r];
      const int64_t k0 = (f - js[r] * kv) * k_per_vector<FMT>();
      acc = fmaf(__ldg(weights + pair), vector_dot<FMT>(down, rows[r], k0, wv[r], act + pair * I),
                 acc);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) out[t * H + h] = __float2bfloat16_rn(acc);
}

template <int FMT>
void launch(const void* x, const int32_t* ids, const float* weights, const QuantWeight& gate_up,
            const QuantWeight& down, void* out, int64_t tokens, int top_k, int64_t experts,
            void* act, unsigned long long* routed, cudaStream_t s) {
  const int64_t H = gate_up.k, I = down.k, P = tokens * top_k;
  const dim3 grid(static_cast<unsigned>(P), static_cast<unsigned>(ceil_div(I, kWarps)));
  auto* gate_up_kernel = H / k_per_vector<FMT>() <= 64 ? moe_quant_gate_up_kernel<FMT, 2>
                                                       : moe_quant_gate_up_kernel<FMT, kUnroll>;
  launch_k(gate_up_kernel, grid, kWarps * 32, 0, s, static_cast<const bf16*>(x), ids, top_k,
           static_cast<int>(experts), gate_up, I, static_cast<bf16*>(act), routed);
  launch_k(moe_quant_down_kernel<FMT>,
           dim3(static_cast<unsigned>(tokens), static_cast<unsigned>(ceil_div(H, kWarps))),
           kWarps * 32, 0, s, static_cast<const bf16*>(act), ids, weights, top_k,
           static_cast<int>(experts), down, H, static_cast<bf16*>(out));
}

}  // namespace

bool moe_quant_gemv_supports(const QuantWeight& gate_up, const QuantWeight& down) {
  return gate_up.kind == down.kind && gate_up.perm == nullptr && down.perm == nullptr &&
         quant_gemv_supports(gate_up) && quant_gemv_supports(down);
}

bool launch_moe_quant_gemv(const void* x, const int32_t* ids, const float* weights,
                           const QuantWeight& gate_up, const QuantWeight& down, void* out,
                           int64_t tokens, int top_k, int64_t experts, void* act,
                           unsigned long long* routed, cudaStream_t s) {
  if (!moe_quant_gemv_supports(gate_up, down)) return false;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(act) % 16 != 0)
    return false;
  const int64_t H = gate_up.k, I = down.k;
  SYV_CHECK(experts > 0 && gate_up.n == experts * 2 * I && down.n == experts * H && top_k >= 1)
      << "moe quantized GEMV: gate_up [" << gate_up.n << ", " << H << "], down [" << down.n << ", "
      << I << "] for " << experts << " experts";
  SYV_CHECK(tokens >= 0 && tokens * top_k < (int64_t{1} << 31))
      << "moe quantized GEMV: " << tokens << " tokens x " << top_k;
  if (tokens == 0) return true;
  if (gate_up.kind == QuantKind::kFp8Block) {
    launch<0>(x, ids, weights, gate_up, down, out, tokens, top_k, experts, act, routed, s);
  } else {
    launch<1>(x, ids, weights, gate_up, down, out, tokens, top_k, experts, act, routed, s);
  }
  return true;
}

}  // namespace syv::cuda
