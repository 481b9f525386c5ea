// Device conversions of the quantized formats, shared by the quantized-weight kernels
// (quant_linear.cu, moe_quant_gemv.cu) and the quantized KV cache kernels (rope_kv.cu,
// attention_decode.cu, attention_prefill_mma.cu):
//  * fp8 e4m3 -> f32 four at a time (cvt.f16x2.e4m3x2 on sm_89+, the same bits by integer ops on
//    sm_80/86), f32 -> e4m3 (cvt.rn.satfinite on sm_89+, integer rounding elsewhere: the bits of
//    core/dtype.h's f32_to_fp8_e4m3 for every non-NaN input);
//  * the KV cache's row layouts (backend/kv_cache_view.h): where a (token, kv head) row's bytes and
//    scales are, 8-element loads and decodes, and the warp-wide row quantizers that produce what
//    backend/kv_quant.h's reference quantizers produce, bit for bit.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/kv_cache_view.h"

namespace syv::cuda {

// Four e4m3 values (the bytes of `w`, low byte first) as exact floats.
__device__ __forceinline__ void fp8x4_to_f32(uint32_t w, float* f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const __half2_raw raw =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * h)), __NV_E4M3);
    const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&raw));
    f[2 * h] = v.x;
    f[2 * h + 1] = v.y;
  }
#else
  // e4m3 s.eeee.mmm -> f16 s.0eeee.mmm0000000 is the value / 2^8 (normals and subnormals alike:
  // both formats put the exponent bias at 2^(bias-1) - 1, 7 vs 15); NaN (0x7f) is not decoded.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t p = __byte_perm(w, 0u, h == 0 ? 0x1404u : 0x3424u);  // b1 << 24 | b0 << 8
    const uint32_t bits = ((p >> 1) & 0x3f803f80u) | (p & 0x80008000u);
    const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&bits));
    f[2 * h] = v.x * 256.f;
    f[2 * h + 1] = v.y * 256.f;
  }
#endif
}

// f32 -> e4m3: round to nearest, ties to even; finite values beyond 448 and infinities saturate
// to +-448; NaN becomes a NaN (0x7f, with the sign on sm_80/86).
__device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#else
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t abits = u & 0x7fffffffu;
  if (abits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  const float a = __uint_as_float(abits);
  if (a >= 448.f) return static_cast<uint8_t>(sign | 0x7eu);
  if (a < 0.015625f) {  // below 2^-6: a multiple of the subnormal step 2^-9 (8 = smallest normal)
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(__float2int_rn(a * 512.f)));
  }
  // Round the f32 mantissa to 3 bits (ties to even; a carry moves into the exponent), rebias the
  // exponent from 127 to 7. a < 448 rounds to at most 448 (0x7e).
  const uint32_t r = (abits + 0x7ffffu + ((abits >> 20) & 1u)) >> 20;
  return static_cast<uint8_t>(sign | (r - ((127u - 7u) << 3)));
#endif
}

// The 8 nibbles of `w` (element e in bits [4e, 4e + 4): low nibble first, as U4X2 packs them)
// as the int4 KV values q - 8 in [-8, 7]; exact (the nibble OR-ed into the mantissa of 2^23).
__device__ __forceinline__ void int4x8_kv_to_f32(uint32_t w, float* f) {
#pragma unroll
  for (int e = 0; e < 8; ++e)
    f[e] = __uint_as_float(0x4b000000u | ((w >> (4 * e)) & 0xfu)) - 8388616.f;  // 2^23 + 8
}

// The 8 nibbles of an int4-group weight word `w` (k = 0..7 from the low nibble) as (q - z) * 16^j:
// out[j] for nibble j and out[4 + j] for nibble 4 + j, j = 0..3, with c[j] = 2^23 + z * 16^j (the
// nibble OR-ed into the mantissa of 2^23 at bit 4j; the GEMVs fold 16^-j in once per vector).
// Exact. quant_linear.cu, moe_quant_gemv.cu.
__device__ __forceinline__ void int4x8_to_f32(uint32_t w, const float* c, float* out) {
  const uint32_t hi = w >> 16;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t m = 0xfu << (4 * j);
    out[j] = __uint_as_float((w & m) | 0x4b000000u) - c[j];
    out[4 + j] = __uint_as_float((hi & m) | 0x4b000000u) - c[j];
  }
}

// ---- quantized KV rows (backend/kv_cache_view.h) ---------------------------------------------
// KT is DType::F8E4M3 or DType::U4X2. A row is one (token, kv head) of D elements; `row` below is
// its index (slot * Hk + kv head, or (page * page_size + offset) * Hk + kv head).
template <DType KT>
constexpr bool kIsQuantKv = KT == DType::F8E4M3 || KT == DType::U4X2;

// The scale type of KT (kv_scale_dtype): f32 for fp8, IEEE half for int4.
template <DType KT>
using KvScale = std::conditional_t<KT == DType::U4X2, __half, float>;
__device__ __forceinline__ float kv_scale_f32(float s) {
  return s;
}
__device__ __forceinline__ float kv_scale_f32(__half s) {
  return __half2float(s);
}

// Bytes and scales of one row.
template <DType KT>
__host__ __device__ constexpr int64_t kv_row_bytes(int64_t D) {
  return KT == DType::U4X2 ? D / 2 : D;
}
template <DType KT>
__host__ __device__ constexpr int64_t kv_row_scales(int64_t D) {
  return KT == DType::U4X2 ? D / kKvInt4Group : 1;
}

// The stored bytes of elements [d0, d0 + 8) of row `row` (d0 a multiple of 8): 8 bytes for fp8,
// 4 (in .x) for int4.
template <DType KT>
__device__ __forceinline__ uint2 kv_load8(const uint8_t* cache, int64_t row, int D, int d0) {
  if constexpr (KT == DType::F8E4M3) {
    return *reinterpret_cast<const uint2*>(cache + row * D + d0);
  } else {
    return make_uint2(*reinterpret_cast<const uint32_t*>(cache + row * (D / 2) + d0 / 2), 0u);
  }
}
// The scale of elements [d0, d0 + 8) of row `row`, as f32 (`scales`: KvScale<KT>[rows, groups]).
template <DType KT>
__device__ __forceinline__ float kv_scale(const void* scales, int64_t row, int D, int d0) {
  const KvScale<KT>* s = static_cast<const KvScale<KT>*>(scales);
  if constexpr (KT == DType::F8E4M3) {
    return s[row];
  } else {
    return kv_scale_f32(s[row * (D / kKvInt4Group) + d0 / kKvInt4Group]);
  }
}
// kv_load8's bytes as the 8 stored values q (without the scale).
template <DType KT>
__device__ __forceinline__ void kv_unpack8(uint2 raw, float* f) {
  if constexpr (KT == DType::F8E4M3) {
    fp8x4_to_f32(raw.x, f);
    fp8x4_to_f32(raw.y, f + 4);
  } else {
    int4x8_kv_to_f32(raw.x, f);
  }
}

// One warp quantizes one row as backend/kv_quant.h does: element lane + 32 j of the row is x[j]
// (J * 32 >= D; entries past D are ignored and must be 0), the bytes go to q [kv_row_bytes] and
// the scales to s [kv_row_scales]. Every lane of the warp must call it (shuffles).
//   fp8:  amax over the row; scale amax / 448; bytes e4m3(x * (448 / amax)) (amax 0: scale 1,
//         bytes 0; an infinite amax: scale 1, bytes e4m3(x)).
//   int4: per 32-element group (group j is x[j] across the warp): the f16 scale
//         f16_rn(clamp(amax / 7, 2^-14, 65504)); nibbles clamp(rint(x * (1 / scale)), -8, 7) + 8
//         with the rounded scale (amax 0 or not finite: scale 1, nibbles 8).
// Division and multiply are the IEEE-rounded ones whatever the compiler flags (__fdiv_rn,
// __fmul_rn), as on the host.
template <DType KT, int J>
__device__ __forceinline__ void warp_quantize_kv_row(const float (&x)[J], int D, uint8_t* q,
                                                     KvScale<KT>* s) {
  const int lane = threadIdx.x & 31;
  if constexpr (KT == DType::F8E4M3) {
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < J; ++j) amax = fmaxf(amax, fabsf(x[j]));
    amax = warp_max(amax);
    const bool usable = amax > 0.f && isfinite(amax);
    const float inv = usable ? __fdiv_rn(448.f, amax) : 1.f;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int i = lane + 32 * j;
      if (i < D) q[i] = amax > 0.f ? f32_to_e4m3(__fmul_rn(x[j], inv)) : uint8_t{0};
    }
    if (lane == 0) s[0] = usable ? __fdiv_rn(amax, 448.f) : 1.f;
  } else {
    static_assert(KT == DType::U4X2 && kKvInt4Group == 32, "int4 groups are one warp wide");
#pragma unroll
    for (int j = 0; j < J; ++j) {
      if (32 * j >= D) break;  // uniform over the warp
      const float amax = warp_max(fabsf(x[j]));
      const bool usable = amax > 0.f && isfinite(amax);
      constexpr float kMinScale = 6.103515625e-05f;  // 2^-14, kv_quant.h's clamp
      const __half scale =
          usable ? __float2half_rn(fminf(fmaxf(__fdiv_rn(amax, 7.f), kMinScale), 65504.f))
                 : __float2half_rn(1.f);
      const float inv = __fdiv_rn(1.f, __half2float(scale));
      const float r = fminf(fmaxf(rintf(__fmul_rn(x[j], inv)), -8.f), 7.f);
      const uint32_t nib = usable ? static_cast<uint32_t>(static_cast<int>(r) + 8) : 8u;
      const uint32_t odd = __shfl_down_sync(0xffffffffu, nib, 1);
      if ((lane & 1) == 0) q[(32 * j + lane) / 2] = static_cast<uint8_t>(nib | (odd << 4));
      if (lane == 0) s[j] = scale;
    }
  }
}

}  // namespace syv::cuda
