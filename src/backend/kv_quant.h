// The reference quantizers of the quantized KV dtypes (backend/kv_cache_view.h): how one
// (token, kv head) row of D values becomes stored bytes and scales. Every backend's kv_write must
// produce exactly these bytes and scales from the same input floats (CUDA uses the same formulas:
// an fp32 amax, one fp32 multiply by the inverse, round-to-nearest-even, saturation).
//
//   fp8:  scale = amax / 448, q = e4m3(x * (448 / amax))          (amax = 0: scale 1, q = 0)
//   int4: per group of kKvInt4Group: scale = amax / 7,
//         q = clamp(rint(x * (7 / amax)), -8, 7) + 8 as a nibble   (amax = 0: scale 1, q = 8)
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

// x [D] (D a multiple of kKvInt4Group) -> out [D / 2] packed bytes, scales [D / kKvInt4Group].
inline void quantize_int4_row(const float* x, int64_t D, uint8_t* out, float* scales) {
  for (int64_t g = 0; g < D / kKvInt4Group; ++g) {
    const float* xg = x + g * kKvInt4Group;
    const float amax = row_amax(xg, kKvInt4Group);
    const bool usable = amax > 0.0f && std::isfinite(amax);
    const float inv = usable ? 7.0f / amax : 0.0f;
    scales[g] = usable ? amax / 7.0f : 1.0f;
    for (int64_t i = 0; i < kKvInt4Group; i += 2) {
      auto nibble = [&](float v) {
        const float r = std::nearbyint(v * inv);  // round-to-nearest-even (default mode)
        return static_cast<uint8_t>(static_cast<int>(std::clamp(r, -8.0f, 7.0f)) + 8);
      };
      out[(g * kKvInt4Group + i) / 2] = u4_pack(nibble(xg[i]), nibble(xg[i + 1]));
    }
  }
}

inline void dequantize_int4_row(const uint8_t* q, const float* scales, int64_t D, float* out) {
  for (int64_t i = 0; i < D; ++i) {
    const uint8_t byte = q[i / 2];
    const int nib = (i % 2 == 0) ? u4_low(byte) : u4_high(byte);
    out[i] = static_cast<float>(nib - 8) * scales[i / kKvInt4Group];
  }
}

}  // namespace syv::kv_quant
