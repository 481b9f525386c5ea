#include "core/dtype.h"

#include <cmath>

#include "core/check.h"

namespace syv {

namespace {

// An fp8 format with `mbits` mantissa bits and exponent bias `bias`.
float fp8_to_f32(uint8_t v, int mbits, int bias, bool has_inf) {
  const int ebits = 7 - mbits;
  const uint32_t sign = (v >> 7) & 1u;
  const int exp = (v >> mbits) & ((1 << ebits) - 1);
  const int mant = v & ((1 << mbits) - 1);
  const float s = sign ? -1.0f : 1.0f;
  if (has_inf && exp == (1 << ebits) - 1) return mant == 0 ? s * INFINITY : NAN;
  if (!has_inf && exp == (1 << ebits) - 1 && mant == (1 << mbits) - 1) return NAN;
  if (exp == 0) return s * std::ldexp(static_cast<float>(mant), 1 - bias - mbits);
  return s * std::ldexp(static_cast<float>((1 << mbits) | mant), exp - bias - mbits);
}

uint8_t f32_to_fp8(float f, int mbits, int bias, bool has_inf, float max_finite) {
  const int ebits = 7 - mbits;
  const uint8_t sign = std::signbit(f) ? 0x80u : 0u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7fu);  // a NaN in both formats
  const float a = std::fabs(f);
  if (a >= max_finite) {  // saturate (e5m2 keeps an infinite input infinite)
    if (has_inf && std::isinf(a)) return static_cast<uint8_t>(sign | (((1 << ebits) - 1) << mbits));
    return static_cast<uint8_t>(sign | f32_to_fp8(max_finite, mbits, bias, has_inf, INFINITY));
  }
  // Smallest subnormal step: 2^(1 - bias - mbits). Round a / step to an integer for the
  // subnormal range, else round the mantissa at mbits bits; both ties-to-even (std::nearbyint
  // in the default rounding mode).
  if (a == 0.0f) return sign;
  int e;
  std::frexp(a, &e);       // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + bias;  // biased exponent of a normal number
  if (exp < 1) {
    const float q = std::nearbyint(std::ldexp(a, bias - 1 + mbits));
    // q == 2^mbits rounds up into the smallest normal, which the same bit pattern encodes.
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  float q = std::nearbyint(std::ldexp(a, mbits - (e - 1)));  // in [2^mbits, 2^(mbits+1)]
  if (q >= static_cast<float>(2 << mbits)) {
    q /= 2;
    ++exp;
  }
  const uint32_t mant = static_cast<uint32_t>(q) - (1u << mbits);
  return static_cast<uint8_t>(sign | (static_cast<uint32_t>(exp) << mbits) | mant);
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t v) {
  return fp8_to_f32(v, 3, 7, false);
}
float fp8_e5m2_to_f32(uint8_t v) {
  return fp8_to_f32(v, 2, 15, true);
}
uint8_t f32_to_fp8_e4m3(float f) {
  return f32_to_fp8(f, 3, 7, false, 448.0f);
}
uint8_t f32_to_fp8_e5m2(float f) {
  return f32_to_fp8(f, 2, 15, true, 57344.0f);
}

void convert_to_f32(DType src_type, const void* src, float* dst, size_t n) {
  switch (src_type) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::F8E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    case DType::F8E5M2: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e5m2_to_f32(s[i]);
      return;
    }
    default:
      SYV_FATAL() << "convert_to_f32: unsupported dtype " << dtype_name(src_type);
  }
}

}  // namespace syv
