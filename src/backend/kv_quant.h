// The reference quantizers of the quantized KV dtypes (backend/kv_cache_view.h): how one
// (token, kv head) row of D values becomes stored bytes and scales. Every backend's kv_write must
// produce exactly these bytes and scales from the same input floats (CUDA uses the same formulas:
// an fp32 amax, IEEE-rounded fp32 divisions and multiplies, round-to-nearest-even, saturation).
//
//   fp8:  scale = amax / 448 (f32), q = e4m3(x * (448 / amax))     (amax = 0: scale 1, q = 0)
//   int4: per group of kKvInt4Group, the scale is an IEEE half (f16):
//           s32   = clamp(amax / 7, 2^-14, 65504)   (f32; the f16 normal range)
//           scale = f16(s32), rounded to nearest even (exact in f16, so no further rounding)
//           q     = clamp(rint(x * (1 / float(scale))), -8, 7) + 8 as a nibble
//         quantizing with the rounded scale's inverse, so q * scale is what the cache holds.
//         (amax = 0, infinite or NaN: scale 1, q = 8 for the whole group; a NaN element with a
//         finite amax becomes -8, as fmax / fmin drop NaN.)
//         The clamp: amax < 7 * 2^-14 (~4.3e-4) keeps the scale 2^-14, so such a group is stored
//         with steps of 2^-14 (absolute error <= 2^-15) instead of amax / 7; amax > 7 * 65504
//         (~4.6e5) keeps 65504 and its larger elements saturate at +-7 (-8) * 65504. Neither
//         occurs for the K and V of a normed model; both are exact rules, not undefined cases.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/kv_cache_view.h"
#include "core/dtype.h"

namespace syv::kv_quant {

inline float row_amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// x [D] -> out [D] e4m3 bytes; returns the scale.
inline float quantize_fp8_row(const float* x, int64_t D, uint8_t* out) {
  const float amax = row_amax(x, D);
  if (!(amax > 0.0f) || !std::isfinite(amax)) {
    for (int64_t i = 0; i < D; ++i) out[i] = amax > 0.0f ? f32_to_fp8_e4m3(x[i]) : 0;
    return 1.0f;
  }
  const float inv = 448.0f / amax;
  for (int64_t i = 0; i < D; ++i) out[i] = f32_to_fp8_e4m3(x[i] * inv);
  return amax / 448.0f;
}

inline void dequantize_fp8_row(const uint8_t* q, float scale, int64_t D, float* out) {
  for (int64_t i = 0; i < D; ++i) out[i] = fp8_e4m3_to_f32(q[i]) * scale;
}

// The f16 bits of the int4 scale of a group with this amax (usable: > 0 and finite), as above.
inline uint16_t int4_scale_f16(float amax) {
  constexpr float kMinScale = 6.103515625e-05f;  // 2^-14, the smallest normal f16
  constexpr float kMaxScale = 65504.0f;          // the largest finite f16
  return f32_to_f16(std::fmin(std::fmax(amax / 7.0f, kMinScale), kMaxScale));
}

// x [D] (D a multiple of kKvInt4Group) -> out [D / 2] packed bytes, scales [D / kKvInt4Group]
// (f16 bits).
inline void quantize_int4_row(const float* x, int64_t D, uint8_t* out, uint16_t* scales) {
  constexpr uint16_t kOne = 0x3c00;  // f16 1.0
  for (int64_t g = 0; g < D / kKvInt4Group; ++g) {
    const float* xg = x + g * kKvInt4Group;
    const float amax = row_amax(xg, kKvInt4Group);
    const bool usable = amax > 0.0f && std::isfinite(amax);
    scales[g] = usable ? int4_scale_f16(amax) : kOne;
    const float inv = 1.0f / f16_to_f32(scales[g]);
    for (int64_t i = 0; i < kKvInt4Group; i += 2) {
      auto nibble = [&](float v) {
        if (!usable) return uint8_t{8};
        // round-to-nearest-even (default mode); fmax / fmin as CUDA's fmaxf / fminf (NaN -> -8)
        const float r = std::fmin(std::fmax(std::nearbyint(v * inv), -8.0f), 7.0f);
        return static_cast<uint8_t>(static_cast<int>(r) + 8);
      };
      out[(g * kKvInt4Group + i) / 2] = u4_pack(nibble(xg[i]), nibble(xg[i + 1]));
    }
  }
}

inline void dequantize_int4_row(const uint8_t* q, const uint16_t* scales, int64_t D, float* out) {
  for (int64_t g = 0; g < D / kKvInt4Group; ++g) {
    const float scale = f16_to_f32(scales[g]);
    for (int64_t i = g * kKvInt4Group; i < (g + 1) * kKvInt4Group; ++i) {
      const uint8_t byte = q[i / 2];
      const int nib = (i % 2 == 0) ? u4_low(byte) : u4_high(byte);
      out[i] = static_cast<float>(nib - 8) * scale;
    }
  }
}

}  // namespace syv::kv_quant
