// Bandwidth-bound small-batch linear: every weight byte is read once per call with 16-byte loads,
// several in flight per thread; the few activation rows come through L1.
#include <atomic>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// out[t, n] = dot(x[t, :], w[n, :]) for t < NT; each warp owns ROWS consecutive rows, WARPS warps
// per block. K % 8 == 0. Software-pipelined: the next kUnroll weight vectors of every row are in
// flight while the current ones are used. The first batch is loaded before pdl_wait(): weights
// never change during a forward, so with programmatic dependent launch these loads overlap the
// previous kernel's tail.
template <int NT, typename TO, int WARPS, int ROWS>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_bf16_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, TO* __restrict__ out,
                     int64_t n_rows, int64_t k, int64_t out_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * WARPS + (threadIdx.x >> 5)) * ROWS;
  const bool active = n0 < n_rows;
  const uint4* wr[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int64_t row = active ? min(n0 + r, n_rows - 1) : 0;  // clamped rows are not stored
    wr[r] = reinterpret_cast<const uint4*>(w + row * k);
  }
  const int64_t kv = active ? k / 8 : 0;  // 16-byte vectors per row
  constexpr int64_t kStep = 32 * kUnroll;
  uint4 wv[ROWS][kUnroll];
  int64_t i = lane;
  if (i + kStep - 32 < kv) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + i + 32 * u);  // read once
  }
  pdl_wait();
  pdl_trigger();
  if (!active) return;
  float acc[ROWS][NT];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  auto fma_step = [&](const uint4(&wcur)[ROWS], int64_t at) {
    float xf[NT][8];
#pragma unroll
    for (int t = 0; t < NT; ++t)
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + t * k) + at), xf[t]);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float wf[8];
      unpack8(wcur[r], wf);
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[j], xf[t][j], acc[r][t]);
    }
  };
  for (; i + kStep - 32 < kv; i += kStep) {
    uint4 cur[kUnroll][ROWS];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) cur[u][r] = wv[r][u];
    if (i + kStep + kStep - 32 < kv) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wr[r] + i + kStep + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_step(cur[u], i + 32 * u);
  }
  for (; i < kv; i += 32) {
    uint4 one[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) one[r] = __ldcs(wr[r] + i);
    fma_step(one, i);
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0 && n0 + r < n_rows) out[t * out_stride + n0 + r] = from_f32<TO>(v);
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

std::atomic<int> g_gemv_variant{-1};  // -1: not read from SYV_GEMV_VARIANT yet

int gemv_variant_now() {
  int v = g_gemv_variant.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_GEMV_VARIANT");
    v = e ? std::atoi(e) : kGemvAuto;
    if (v < 0 || v > kGemvAuto) v = kGemvAuto;
    g_gemv_variant.store(v, std::memory_order_relaxed);
  }
  return v;
}

template <int NT, typename TO, int WARPS, int ROWS>
void launch_wr(const bf16* x, const bf16* w, TO* out, int64_t n, int64_t k, cudaStream_t s) {
  launch_k(gemv_bf16_kernel<NT, TO, WARPS, ROWS>, ceil_div(n, WARPS * ROWS), WARPS * 32, 0, s, x, w,
           out, n, k, n);
}

// Variants (warps per block x rows per warp): 0: 8x1, 1: 4x1, 2: 8x2, 3: 4x2; kGemvAuto picks by
// token count what `syv bench kernels` measured best on an H200 (8B shapes): 8x2 for one token,
// 4x2 for 2-4 tokens (docs/cuda-backend-notes.md, run 3).
template <int NT, typename TO>
void launch_nt(const bf16* x, const bf16* w, TO* out, int64_t n, int64_t k, cudaStream_t s) {
  int v = gemv_variant_now();
  if (v == kGemvAuto) v = NT == 1 ? 2 : 3;
  switch (v) {
    case 1:
      return launch_wr<NT, TO, 4, 1>(x, w, out, n, k, s);
    case 2:
      return launch_wr<NT, TO, 8, 2>(x, w, out, n, k, s);
    case 3:
      return launch_wr<NT, TO, 4, 2>(x, w, out, n, k, s);
    default:
      return launch_wr<NT, TO, 8, 1>(x, w, out, n, k, s);
  }
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

void set_gemv_variant(int v) {
  g_gemv_variant.store(v >= 0 && v <= kGemvAuto ? v : kGemvAuto, std::memory_order_relaxed);
}
int gemv_variant() {
  return gemv_variant_now();
}

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
