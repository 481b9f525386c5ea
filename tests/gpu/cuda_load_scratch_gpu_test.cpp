// The scratch `syv inspect` counts for CUDA without a device (backend/cuda_choices.h) against
// CudaBackend itself: a fresh backend holds kCudaConstructionScratchBytes, and once a quantized
// hybrid is loaded its allocated_bytes() (the weights `syv serve`'s memory plan takes) is the
// start-up count of the weights plus cuda_load_scratch_bytes of the largest weight
// quantized_load_shapes lists (model/prepare_model.h). Skips cleanly without a CUDA device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_choices.h"
#include "core/log.h"
#include "model/prepare_model.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

TEST(CudaLoadScratch, AFreshBackendHoldsTheConstructionScratch) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  EXPECT_EQ(static_cast<int64_t>(gpu->allocated_bytes()), kCudaConstructionScratchBytes);
  EXPECT_EQ(static_cast<int64_t>(gpu->peak_scratch_bytes()), kCudaConstructionScratchBytes);
}

TEST(CudaLoadScratch, AQuantizedLoadHoldsTheCountedWeightsAndScratch) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  set_log_level(LogLevel::WARN);
  for (QuantizeFormat format : {QuantizeFormat::kGptq, QuantizeFormat::kFp8}) {
    SCOPED_TRACE(static_cast<int>(format));
    const fs::path out =
        fs::path(::testing::TempDir()) / ("syv_cuda_scratch_" + std::to_string(::getpid()) + "_" +
                                          std::to_string(static_cast<int>(format)));
    ASSERT_TRUE(testing::quantize_fixture("hybrid/q35_r1_lllf", format, 32, out, 32));
    std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
    auto prepared = prepare_model(out.string(), *gpu);
    ASSERT_TRUE(prepared.ok()) << prepared.message();
    auto model = load_prepared_model(*prepared, *gpu);
    ASSERT_TRUE(model.ok()) << model.message();
    const WeightShape2d largest = largest_weight(quantized_load_shapes(
        *prepared->arch, prepared->config, *prepared->store, gpu->keeps_moe_experts_quantized()));
    EXPECT_GT(largest.n * largest.k, 0);
    EXPECT_EQ(static_cast<int64_t>(gpu->allocated_bytes()),
              prepared->weight_bytes + cuda_load_scratch_bytes(dequant_scratch_bytes(largest)));
    fs::remove_all(out);
  }
}

}  // namespace
}  // namespace syv
