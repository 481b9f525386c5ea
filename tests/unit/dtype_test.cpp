// core/dtype: the fp8 storage types (e4m3 "fn" and e5m2) against their definitions, and the
// packed 4-bit pairs. Encoding is checked against a brute-force nearest search over every code.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace syv {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::F8E5M2), 1u);
  EXPECT_EQ(dtype_size(DType::U4X2), 1u);
  EXPECT_EQ(dtype_name(DType::F8E4M3), "f8e4m3");
  EXPECT_EQ(dtype_name(DType::F8E5M2), "f8e5m2");
  EXPECT_EQ(dtype_name(DType::U4X2), "u4x2");
  EXPECT_TRUE(dtype_is_float(DType::F8E4M3));
  EXPECT_FALSE(dtype_is_float(DType::U4X2));
}

TEST(DType, Fp8DecodesKnownValues) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);    // exp 7 = bias
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);  // the largest finite
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);  // e4m3fn: exponent 15 is a normal binade
  EXPECT_EQ(fp8_e5m2_to_f32(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0x7d)));
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
}

TEST(DType, Fp8EveryCodeRoundTrips) {
  for (int v = 0; v < 256; ++v) {
    const uint8_t c = static_cast<uint8_t>(v);
    const float a = fp8_e4m3_to_f32(c), b = fp8_e5m2_to_f32(c);
    if (!std::isnan(a)) {
      EXPECT_EQ(f32_to_fp8_e4m3(a), c) << v;
    }
    if (!std::isnan(b)) {
      EXPECT_EQ(f32_to_fp8_e5m2(b), c) << v;
    }
  }
}

// Nearest finite code, ties to the even code (mantissa bit 0 clear), saturating at the maximum.
uint8_t nearest(float x, float (*decode)(uint8_t)) {
  int best = -1;
  float best_err = 0;
  for (int v = 0; v < 256; ++v) {
    const float d = decode(static_cast<uint8_t>(v));
    if (!std::isfinite(d) || std::signbit(d) != std::signbit(x)) continue;
    const float err = std::fabs(d - x);
    if (best < 0 || err < best_err || (err == best_err && (v & 1) == 0)) {
      best = v;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(DType, Fp8EncodesToTheNearestCodeTiesToEvenSaturating) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-20.0f, 18.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(exponent(rng));
    EXPECT_EQ(f32_to_fp8_e4m3(x), nearest(x, fp8_e4m3_to_f32)) << x;
    EXPECT_EQ(f32_to_fp8_e5m2(x), nearest(x, fp8_e5m2_to_f32)) << x;
  }
  // Exact midpoints between neighbours go to the even one.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);  // between 1.0 (0x38) and 1.125 (0x39)
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);  // between 1.125 and 1.25 (0x3a)
  EXPECT_EQ(f32_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(f32_to_fp8_e5m2(std::numeric_limits<float>::infinity()), 0x7c);
  EXPECT_EQ(f32_to_fp8_e5m2(1e6f), 0x7b);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(f32_to_fp8_e4m3(NAN))));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(f32_to_fp8_e5m2(NAN))));
}

TEST(DType, ConvertToF32ReadsFp8) {
  const uint8_t codes[3] = {0x38, 0xfe, 0x01};
  float out[3];
  convert_to_f32(DType::F8E4M3, codes, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -448.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -9));
}

TEST(DType, U4PairsPackLowNibbleFirst) {
  for (uint8_t lo = 0; lo < 16; ++lo) {
    for (uint8_t hi = 0; hi < 16; ++hi) {
      const uint8_t p = u4_pack(lo, hi);
      EXPECT_EQ(u4_low(p), lo);
      EXPECT_EQ(u4_high(p), hi);
    }
  }
  EXPECT_EQ(u4_pack(0x3, 0xa), 0xa3);
}

}  // namespace
}  // namespace syv
