// Backend::fill_random's default: the values of backend/random_fill.h drawn on the host (global
// thread pool) in chunks and uploaded. Backends with their own generator (CUDA) override it.
#include "backend/random_fill.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace syv {

void Backend::fill_random(void* data, DType dtype, int64_t n, uint64_t seed, float scale) {
  SYV_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16)
      << "fill_random: dtype " << dtype_name(dtype) << " is not a float dtype (f32, bf16, f16)";
  SYV_CHECK_GE(n, 0) << "fill_random: negative element count";
  if (n == 0) return;
  constexpr int64_t kChunk = int64_t{1} << 22;  // elements staged on the host per upload
  const size_t size = dtype_size(dtype);
  std::vector<uint8_t> host(static_cast<size_t>(std::min(n, kChunk)) * size);
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t count = std::min(kChunk, n - begin);
    ThreadPool::global().parallel_for(
        count,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const float v = random_uniform(seed, static_cast<uint64_t>(begin + i), scale);
            if (dtype == DType::F32) {
              std::memcpy(host.data() + i * 4, &v, 4);
            } else {
              const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
              std::memcpy(host.data() + i * 2, &h, 2);
            }
          }
        },
        int64_t{1} << 15);
    upload(static_cast<uint8_t*>(data) + static_cast<size_t>(begin) * size, host.data(),
           static_cast<size_t>(count) * size);
  }
}

}  // namespace syv
