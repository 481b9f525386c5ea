// CpuBackend(keep_float_weights): bf16 weights stay bf16 (widened per call) for `syv quantize
// --calibration-file`'s float model. The logits are the f32 load's bit for bit (the same values
// through the same products) on a dense, a hybrid with its gated attention and a MoE fixture, and
// the load takes about half the bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

class CountingCpu final : public CpuBackend {
 public:
  explicit CountingCpu(bool keep) : CpuBackend(keep) {}
  DeviceBuffer allocate(size_t bytes) override {
    allocated_ += static_cast<int64_t>(bytes);
    return CpuBackend::allocate(bytes);
  }
  int64_t allocated() const { return allocated_; }

 private:
  int64_t allocated_ = 0;
};

class CpuKeptWeights : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuKeptWeights, LogitsEqualTheF32LoadInAboutHalfTheBytes) {
  set_log_level(LogLevel::WARN);
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/" + GetParam();
  const std::vector<int32_t> tokens = {3, 17, 40, 9, 25, 1, 77, 5, 60, 2, 11, 30};
  std::vector<float> logits[2];
  int64_t bytes[2];
  for (int keep = 0; keep < 2; ++keep) {
    CountingCpu backend(keep == 1);
    auto model = load_model(dir, backend);
    ASSERT_TRUE(model.ok()) << model.message();
    bytes[keep] = backend.allocated();
    logits[keep] = testing::sequence_logits(**model, backend, tokens);
  }
  ASSERT_FALSE(logits[0].empty());
  EXPECT_EQ(logits[1], logits[0]) << GetParam();
  EXPECT_LT(bytes[1], bytes[0] * 6 / 10) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Models, CpuKeptWeights,
                         ::testing::Values("models/tiny-dense", "models/tiny-hybrid",
                                           "tests/fixtures/hybrid/qnext_top2_r1"));

}  // namespace
}  // namespace syv
