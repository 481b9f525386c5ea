// The uniform random values Backend::fill_random() writes, computed on the host. Every backend
// draws exactly these (the CUDA kernel in backend/cuda/elementwise.cu uses the same formula), so a
// buffer filled on the device equals the host values rounded to its dtype, on every machine and
// thread count.
#pragma once

#include <cstdint>

namespace syv {

// splitmix64's finaliser: a counter-based generator (element i does not depend on element i - 1).
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element i of a fill_random(seed, scale) buffer before rounding: (2u - 1) * scale with
// u = top 24 bits of splitmix64(seed * 0x2545f4914f6cdd1d + i) / 2^24, a value in [-scale, scale).
inline float random_uniform(uint64_t seed, uint64_t i, float scale) {
  const uint64_t r = splitmix64(seed * 0x2545f4914f6cdd1dull + i);
  const float u = static_cast<float>(r >> 40) * (1.f / 16777216.f);  // [0, 1), exact
  return (2.f * u - 1.f) * scale;  // 2u - 1 is exact; one rounding
}

}  // namespace syv
