// Bandwidth-bound small-batch linear: every weight byte is read once per call with 16-byte loads,
// several in flight per thread; the few activation rows come through L1.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kWarps = 8;   // warps per block; one output row per warp
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// out[t, n] = dot(x[t, :], w[n, :]) for t < NT. K % 8 == 0.
// Software-pipelined: the next kUnroll weight vectors are in flight while the current ones are
// used. The first batch is loaded before pdl_wait(): weights never change during a forward, so
// with programmatic dependent launch these loads overlap the previous kernel's tail.
template <int NT>
__device__ __forceinline__ void gemv_fma(const uint4& wv, const bf16* __restrict__ x, int64_t k,
                                         int64_t i, float* acc) {
  float wf[8];
  unpack8(wv, wf);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    float xf[8];
    unpack8(__ldg(reinterpret_cast<const uint4*>(x + t * k) + i), xf);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
  }
}

template <int NT, typename TO>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_bf16_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, TO* __restrict__ out,
                     int64_t n_rows, int64_t k, int64_t out_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const bool active = n < n_rows;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (active ? n : 0) * k);
  const int64_t kv = active ? k / 8 : 0;  // 16-byte vectors per row
  constexpr int64_t kStep = 32 * kUnroll;
  uint4 wv[kUnroll];
  int64_t i = lane;
  if (i + kStep - 32 < kv) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + 32 * u);  // streamed, read once
  }
  pdl_wait();
  pdl_trigger();
  if (!active) return;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  for (; i + kStep - 32 < kv; i += kStep) {
    uint4 cur[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) cur[u] = wv[u];
    if (i + kStep + kStep - 32 < kv) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + kStep + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) gemv_fma<NT>(cur[u], x, k, i + 32 * u, acc);
  }
  for (; i < kv; i += 32) gemv_fma<NT>(__ldcs(wr + i), x, k, i, acc);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) out[t * out_stride + n] = from_f32<TO>(v);
  }
}

template <typename TX, typename TW, typename TO>
__global__ void linear_generic_kernel(const TX* __restrict__ x, const TW* __restrict__ w,
                                      TO* __restrict__ out, int64_t tokens, int64_t n_rows,
                                      int64_t k) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (idx >= tokens * n_rows) return;
  const int64_t t = idx / n_rows, n = idx - t * n_rows;
  float acc = 0.f;
  for (int64_t i = lane; i < k; i += 32) acc += to_f32(x[t * k + i]) * to_f32(w[n * k + i]);
  acc = warp_sum(acc);
  if (lane == 0) out[idx] = from_f32<TO>(acc);
}

template <int NT, typename TO>
void launch_nt(const bf16* x, const bf16* w, TO* out, int64_t n, int64_t k, cudaStream_t s) {
  launch_k(gemv_bf16_kernel<NT, TO>, ceil_div(n, kWarps), kWarps * 32, 0, s, x, w, out, n, k, n);
}

template <typename TO>
void launch_tokens(const bf16* x, const bf16* w, TO* out, int64_t tokens, int64_t n, int64_t k,
                   cudaStream_t s) {
  // Chunks of up to 4 tokens; each chunk re-reads the weights (callers keep tokens small).
  for (int64_t t0 = 0; t0 < tokens;) {
    const int64_t left = tokens - t0;
    const bf16* xs = x + t0 * k;
    TO* os = out + t0 * n;
    if (left >= 4) {
      launch_nt<4>(xs, w, os, n, k, s);
      t0 += 4;
    } else if (left == 3) {
      launch_nt<3>(xs, w, os, n, k, s);
      t0 += 3;
    } else if (left == 2) {
      launch_nt<2>(xs, w, os, n, k, s);
      t0 += 2;
    } else {
      launch_nt<1>(xs, w, os, n, k, s);
      t0 += 1;
    }
  }
}

}  // namespace

bool launch_gemv_bf16(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                      int64_t n, int64_t k, cudaStream_t s) {
  if ((k % 8) != 0 || (reinterpret_cast<uintptr_t>(x) % 16) != 0 ||
      (reinterpret_cast<uintptr_t>(w) % 16) != 0)
    return false;
  if (tokens == 0 || n == 0) return true;
  const bf16* xb = static_cast<const bf16*>(x);
  const bf16* wb = static_cast<const bf16*>(w);
  if (out_t == DType::BF16) {
    launch_tokens(xb, wb, static_cast<bf16*>(out), tokens, n, k, s);
  } else if (out_t == DType::F32) {
    launch_tokens(xb, wb, static_cast<float*>(out), tokens, n, k, s);
  } else {
    return false;
  }
  return true;
}

void launch_linear_generic(const void* x, DType x_t, const void* w, DType w_t, void* out,
                           DType out_t, int64_t tokens, int64_t n, int64_t k, cudaStream_t s) {
  if (tokens == 0 || n == 0) return;
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    SYV_DISPATCH_FLOAT(w_t, TW, [&] {
      SYV_DISPATCH_FLOAT(out_t, TO, [&] {
        launch_k(linear_generic_kernel<TX, TW, TO>, ceil_div(tokens * n, 8), 256, 0, s,
                 static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<TO*>(out),
                 tokens, n, k);
      });
    });
  });
}

}  // namespace syv::cuda
