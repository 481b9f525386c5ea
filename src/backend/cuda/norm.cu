// RMSNorm and the fused residual add + RMSNorm: one block per row, fp32 statistics.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

// When res_in is set: res_out = round(res_in + x) (res_out may be res_in); the norm is of the
// rounded residual (as a bf16 model computes it). Values are re-read from global memory (the row
// stays in L1/L2).
template <typename TX, typename TR, typename TO>
__global__ void rmsnorm_kernel(const TX* __restrict__ x, const TR* res_in, TR* res_out,
                               const void* w, DType w_t, float eps, bool one_plus,
                               TO* __restrict__ out, int64_t hidden) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const TX* xr = x + row * hidden;
  const TR* ri = res_in ? res_in + row * hidden : nullptr;
  TR* ro = res_in ? res_out + row * hidden : nullptr;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if (ri) {
      TR sum = from_f32<TR>(to_f32(ri[i]) + v);
      ro[i] = sum;
      v = to_f32(sum);
    }
    ss += v * v;
  }
  const float rstd = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  TO* o = out + row * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = ro ? to_f32(ro[i]) : to_f32(xr[i]);
    float g = load_any(w, w_t, i);
    if (one_plus) g += 1.f;
    o[i] = from_f32<TO>(v * rstd * g);
  }
}

// The bf16 form: 8 elements per thread and chunk by 16-byte loads, kept in registers between the
// sum and the output, the norm weights read before the dependency wait; the same rounding as
// rmsnorm_kernel (only the order of the squares' sum differs). One thread per 8 elements when the
// row allows (hidden <= 8192: kChunks 1), else two chunks each.
template <int kChunks, typename TO>
__global__ void rmsnorm_bf16_kernel(const bf16* __restrict__ x, const bf16* res_in, bf16* res_out,
                                    const void* w, DType w_t, float eps, bool one_plus,
                                    TO* __restrict__ out, int64_t hidden) {
  const int64_t row = blockIdx.x, kv = hidden / 8;
  float g[kChunks][8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + int64_t{c} * blockDim.x;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      g[c][j] = i < kv ? load_any(w, w_t, 8 * i + j) : 0.f;
      if (one_plus) g[c][j] += 1.f;
    }
  }
  pdl_wait();
  pdl_trigger();
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * hidden);
  float v[kChunks][8];
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + int64_t{c} * blockDim.x;
    if (i >= kv) continue;
    unpack8(xr[i], v[c]);
    if (res_in != nullptr) {
      float r[8];
      unpack8(reinterpret_cast<const uint4*>(res_in + row * hidden)[i], r);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[c][j] = __bfloat162float(__float2bfloat16_rn(r[j] + v[c][j]));
      reinterpret_cast<uint4*>(res_out + row * hidden)[i] = pack8(v[c]);  // exact: bf16 values
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[c][j] * v[c][j];
  }
  const float rstd = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = threadIdx.x + int64_t{c} * blockDim.x;
    if (i >= kv) continue;
    float o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = v[c][j] * rstd * g[c][j];
    if constexpr (std::is_same_v<TO, bf16>) {
      reinterpret_cast<uint4*>(out + row * hidden)[i] = pack8(o);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) out[row * hidden + 8 * i + j] = from_f32<TO>(o[j]);
    }
  }
}

// Launches the bf16 form where it applies (x, residual bf16, out bf16 or f32, 16-byte aligned
// rows of hidden % 8 == 0, at most 16,384 elements); false otherwise.
bool launch_rmsnorm_bf16(const void* x, DType x_t, const void* res_in, void* res_out, DType res_t,
                         const void* w, DType w_t, float eps, bool one_plus, void* out, DType out_t,
                         int64_t rows, int64_t hidden, cudaStream_t s) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (x_t != DType::BF16 || (res_in != nullptr && res_t != DType::BF16) || hidden % 8 != 0 ||
      hidden > 16384 || !aligned(x) || !aligned(out) ||
      (res_in != nullptr && (!aligned(res_in) || !aligned(res_out))) ||
      (out_t != DType::BF16 && out_t != DType::F32))
    return false;
  const int64_t kv = hidden / 8;
  const bool one_chunk = kv <= 1024;
  const int threads =
      static_cast<int>(std::max<int64_t>(32, ((one_chunk ? kv : (kv + 1) / 2) + 31) / 32 * 32));
  auto go = [&](auto* o) {
    using TO = std::remove_pointer_t<decltype(o)>;
    const auto* xb = static_cast<const bf16*>(x);
    const auto* rb = static_cast<const bf16*>(res_in);
    auto* rob = static_cast<bf16*>(res_out);
    if (one_chunk) {
      launch_k(rmsnorm_bf16_kernel<1, TO>, static_cast<unsigned>(rows), threads, 0, s, xb, rb, rob,
               w, w_t, eps, one_plus, o, hidden);
    } else {
      launch_k(rmsnorm_bf16_kernel<2, TO>, static_cast<unsigned>(rows), threads, 0, s, xb, rb, rob,
               w, w_t, eps, one_plus, o, hidden);
    }
  };
  if (out_t == DType::BF16) {
    go(static_cast<bf16*>(out));
  } else {
    go(static_cast<float*>(out));
  }
  return true;
}

// rmsnorm_bf16_kernel<1, bf16>'s rows (the same sum, rounding and output), each also written as
// the fp8 GEMM's e4m3 activations: per 128-column group (16 threads of 8 columns: a half-warp)
// the absolute maximum of the rounded outputs, scale = amax / 448, codes = value * (448 / amax)
// rounded to e4m3, a zero group scale 1 and zero codes: quantize_fp8_groups_kernel's arithmetic
// (fp8_operands.cu) on the same bf16 values, so the same bits. q [padded, hidden], scales
// [hidden / 128][padded]; rows [tokens, padded) (the GEMM's padding, a block each) get zero codes
// and scale 1. hidden % 128 == 0, at most 8192.
__global__ void add_rmsnorm_fp8_kernel(const bf16* __restrict__ x, const bf16* res_in,
                                       bf16* res_out, const void* w, DType w_t, float eps,
                                       bool one_plus, bf16* __restrict__ out,
                                       uint8_t* __restrict__ q, float* __restrict__ scales,
                                       int64_t hidden, int64_t tokens, int64_t padded) {
  const int64_t row = blockIdx.x, kv = hidden / 8, i = threadIdx.x;
  const bool active = i < kv;
  float g[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    g[j] = active ? load_any(w, w_t, 8 * i + j) : 0.f;
    if (one_plus) g[j] += 1.f;
  }
  pdl_wait();  // x and the residual are earlier kernels' output; q and scales a GEMM's input
  pdl_trigger();
  if (row >= tokens) {  // the whole block: padding rows
    if (active) {
      reinterpret_cast<uint2*>(q + row * hidden)[i] = make_uint2(0u, 0u);
      if (i % 16 == 0) scales[(i / 16) * padded + row] = 1.f;
    }
    return;
  }
  float v[8] = {};
  float ss = 0.f;
  if (active) {
    unpack8(reinterpret_cast<const uint4*>(x + row * hidden)[i], v);
    if (res_in != nullptr) {
      float r[8];
      unpack8(reinterpret_cast<const uint4*>(res_in + row * hidden)[i], r);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = __bfloat162float(__float2bfloat16_rn(r[j] + v[j]));
      reinterpret_cast<uint4*>(res_out + row * hidden)[i] = pack8(v);  // exact: bf16 values
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
  }
  const float rstd = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  float o[8];
  float amax = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    o[j] = __bfloat162float(__float2bfloat16_rn(v[j] * rstd * g[j]));  // the bf16 output's value
    amax = fmaxf(amax, fabsf(o[j]));
  }
  // The group's maximum over its half-warp (every lane takes part; inactive ones hold zeros).
#pragma unroll
  for (int m = 8; m > 0; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  if (!active) return;
  reinterpret_cast<uint4*>(out + row * hidden)[i] = pack8(o);
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
  const float inv = amax > 0.f ? 448.f / amax : 0.f;
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo |= static_cast<uint32_t>(f32_to_e4m3(o[j] * inv)) << (8 * j);
    hi |= static_cast<uint32_t>(f32_to_e4m3(o[4 + j] * inv)) << (8 * j);
  }
  reinterpret_cast<uint2*>(q + row * hidden)[i] = make_uint2(lo, hi);
  if (i % 16 == 0) scales[(i / 16) * padded + row] = scale;
}

}  // namespace

bool launch_add_rmsnorm_fp8(const void* x, const void* res_in, void* res_out, const void* w,
                            DType w_t, float eps, bool one_plus, void* out, uint8_t* q,
                            float* scales, int64_t tokens, int64_t padded, int64_t hidden,
                            cudaStream_t s) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (hidden % 128 != 0 || hidden > 8192 || tokens < 1 || padded < tokens || !aligned(x) ||
      !aligned(out) || !aligned(q) ||
      (res_in != nullptr && (!aligned(res_in) || !aligned(res_out))))
    return false;
  // rmsnorm_bf16_kernel's block size for the row (launch_rmsnorm_bf16): the same sum.
  const int threads = static_cast<int>(std::max<int64_t>(32, (hidden / 8 + 31) / 32 * 32));
  launch_k(add_rmsnorm_fp8_kernel, static_cast<unsigned>(padded), threads, 0, s,
           static_cast<const bf16*>(x), static_cast<const bf16*>(res_in),
           static_cast<bf16*>(res_out), w, w_t, eps, one_plus, static_cast<bf16*>(out), q, scales,
           hidden, tokens, padded);
  return true;
}

void launch_add_rmsnorm(const void* x, DType x_t, const void* res_in, void* res_out, DType res_t,
                        const void* w, DType w_t, float eps, bool one_plus, void* out, DType out_t,
                        int64_t rows, int64_t hidden, cudaStream_t s) {
  if (rows == 0) return;
  if (launch_rmsnorm_bf16(x, x_t, res_in, res_out, res_t, w, w_t, eps, one_plus, out, out_t, rows,
                          hidden, s))
    return;
  const int threads = hidden >= 1024 ? 1024 : (hidden >= 256 ? 256 : 64);
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    SYV_DISPATCH_FLOAT(out_t, TO, [&] {
      if (res_in == nullptr) {
        launch_k(rmsnorm_kernel<TX, TX, TO>, static_cast<unsigned>(rows), threads, 0, s,
                 static_cast<const TX*>(x), nullptr, nullptr, w, w_t, eps, one_plus,
                 static_cast<TO*>(out), hidden);
      } else {
        SYV_DISPATCH_FLOAT(res_t, TR, [&] {
          launch_k(rmsnorm_kernel<TX, TR, TO>, static_cast<unsigned>(rows), threads, 0, s,
                   static_cast<const TX*>(x), static_cast<const TR*>(res_in),
                   static_cast<TR*>(res_out), w, w_t, eps, one_plus, static_cast<TO*>(out), hidden);
        });
      }
    });
  });
}

void launch_rmsnorm(const void* x, DType x_t, void* residual, DType res_t, const void* w, DType w_t,
                    float eps, bool one_plus, void* out, DType out_t, int64_t rows, int64_t hidden,
                    cudaStream_t s) {
  launch_add_rmsnorm(x, x_t, residual, residual, res_t, w, w_t, eps, one_plus, out, out_t, rows,
                     hidden, s);
}

}  // namespace syv::cuda
