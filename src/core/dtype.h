// Element types and the scalar conversions every backend shares.
//
// Storage types of quantized weights and KV (the formats that give them meaning, with their
// scales and zero points, live with the weights and KV views that use them):
//   F8E4M3  OCP fp8 e4m3 "fn" (bias 7, no infinities, S.1111.111 is NaN, max 448), as torch's
//           float8_e4m3fn and CUDA's __nv_fp8_e4m3
//   F8E5M2  OCP fp8 e5m2 (bias 15, IEEE-like infinities and NaNs, max 57344), float8_e5m2
//   U4X2    two unsigned 4-bit values in one byte, the first in the low nibble: one element is
//           one byte (shapes count bytes), so every size computation stays in whole bytes

#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace syv {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8, F8E4M3, F8E5M2, U4X2 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::U4X2:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::U8:
      return "u8";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
    case DType::U4X2:
      return "u4x2";
  }
  return "?";
}

// Whether the type is a floating-point element type (F32, F16, BF16, F8E4M3, F8E5M2).
constexpr bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8E4M3 ||
         t == DType::F8E5M2;
}

inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even, NaN preserved (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = bits & 0x7fffffu;
  if (((bits >> 23) & 0xffu) == 0xffu)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

// fp8 <-> f32. Decoding is exact. Encoding rounds to nearest, ties to even, and saturates finite
// values beyond the largest normal to +-max (448 for e4m3, 57344 for e5m2; CUDA's
// __NV_SATFINITE); NaN stays NaN, and e5m2 keeps infinities (e4m3 has none: they saturate).
float fp8_e4m3_to_f32(uint8_t v);
float fp8_e5m2_to_f32(uint8_t v);
uint8_t f32_to_fp8_e4m3(float f);
uint8_t f32_to_fp8_e5m2(float f);

// The two 4-bit values of a U4X2 byte.
constexpr uint8_t u4_low(uint8_t packed) {
  return packed & 0x0fu;
}
constexpr uint8_t u4_high(uint8_t packed) {
  return packed >> 4;
}
constexpr uint8_t u4_pack(uint8_t low, uint8_t high) {
  return static_cast<uint8_t>((low & 0x0fu) | ((high & 0x0fu) << 4));
}

// Converts `n` elements of `src` (dtype F32, F16, BF16, F8E4M3 or F8E5M2) to f32.
void convert_to_f32(DType src_type, const void* src, float* dst, size_t n);

}  // namespace syv
