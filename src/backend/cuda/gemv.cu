// Bandwidth-bound small-batch linear: every weight byte is read once per call with 16-byte loads,
// several in flight per thread; the few activation rows come through L1.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kWarps = 8;   // warps per block; one output row per warp
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// out[t, n] = dot(x[t, :], w[n, :]) for t < NT. K % 8 == 0.
template <int NT, typename TO>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_bf16_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, TO* __restrict__ out,
                     int64_t n_rows, int64_t k, int64_t out_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (n >= n_rows) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + n * k);
  const int64_t kv = k / 8;  // 16-byte vectors per row
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  int64_t i = lane;
  for (; i + 32 * (kUnroll - 1) < kv; i += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + 32 * u);  // streamed, read once
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float wf[8];
      unpack8(wv[u], wf);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float xf[8];
        unpack8(__ldg(reinterpret_cast<const uint4*>(x + t * k) + i + 32 * u), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
      }
    }
  }
  for (; i < kv; i += 32) {
    float wf[8];
    unpack8(__ldcs(wr + i), wf);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float xf[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + t * k) + i), xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
    }
  }
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
  gemv_bf16_kernel<NT, TO><<<ceil_div(n, kWarps), kWarps * 32, 0, s>>>(x, w, out, n, k, n);
  SYV_CUDA_LAUNCH_CHECK();
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
        linear_generic_kernel<TX, TW, TO><<<ceil_div(tokens * n, 8), 256, 0, s>>>(
            static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<TO*>(out), tokens, n,
            k);
        SYV_CUDA_LAUNCH_CHECK();
      });
    });
  });
}

}  // namespace syv::cuda
