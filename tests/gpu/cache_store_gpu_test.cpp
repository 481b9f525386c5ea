// kv/cache_store on the CUDA backend: Qwen3's KV pages copied out (to pageable host memory and to
// another device buffer, on the backend's copy stream) and back in leave the next decode step's
// logits bit-identical (tests/unit/cache_store_roundtrip.h), and copy_async's events order the
// copies against the compute stream. Skipped cleanly when no CUDA device is present. (Hybrid
// models do not run on CUDA yet; their slot and checkpoint copies are covered on the CPU.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "unit/cache_store_roundtrip.h"

namespace syv::testing {
namespace {

std::string fixture(const std::string& name) {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  return std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/" + name;
}

class CacheStoreGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheStoreGpu, PageCopiesOutAndBackAreBitExact) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  set_log_level(LogLevel::WARN);
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  auto model = load_model(fixture(GetParam()), *gpu);
  ASSERT_TRUE(model.ok()) << model.message();
  expect_round_trips_exact(**model);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CacheStoreGpu,
                         ::testing::Values("tied_gqa2", "untied_gqa4_hd24", "untied_mha_hd32"));

// copy_async sees every op enqueued before it and the compute stream waits for order_after_copy.
TEST(CacheStoreGpu, CopyEventsOrderAgainstTheComputeStream) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  const size_t n = size_t{64} << 20;  // large enough that an unordered copy would race
  DeviceBuffer a = gpu->allocate(n), b = gpu->allocate(n);
  std::vector<unsigned char> host(n, 0xAB);
  gpu->fill_zero(a.data(), n);                                               // compute stream
  CopyEvent out = gpu->copy_async(host.data(), a.data(), n, CopyDir::kOut);  // after the fill
  gpu->wait_copy(out);
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(host[i], 0) << "byte " << i;
  std::vector<unsigned char> ones(n, 1);
  CopyEvent in = gpu->copy_async(b.data(), ones.data(), n, CopyDir::kIn);
  gpu->order_after_copy(in);
  gpu->copy(a.data(), b.data(), n);  // compute stream, after the copy in
  std::vector<unsigned char> back(n);
  gpu->download(back.data(), a.data(), n);
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(back[i], 1) << "byte " << i;
}

}  // namespace
}  // namespace syv::testing
