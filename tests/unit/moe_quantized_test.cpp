// Quantized MoE experts kept quantized (Backend::keeps_moe_experts_quantized): a `syv quantize`d
// MoE fixture (Qwen3.5-MoE, Qwen3-Next; fp8, awq, gptq) loaded on the CPU with its experts kept
// quantized gives the logits of the same folder with its experts dequantized at load, and the
// load takes fewer bytes; the experts of the kept load are quantized Weights stacked along their
// rows (Backend::moe_experts), and prepare_model()'s count of the weights shrinks by exactly the
// bytes the kept experts save.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/available_memory.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "model/prepare_model.h"
#include "model/quantize_folder.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

// The CPU backend, counting what it allocates, with the MoE experts kept quantized or not.
class CountingCpuBackend final : public CpuBackend {
 public:
  explicit CountingCpuBackend(bool keep_moe_quantized) : keep_(keep_moe_quantized) {}
  bool keeps_moe_experts_quantized() const override { return keep_; }
  DeviceBuffer allocate(size_t bytes) override {
    allocated_ += static_cast<int64_t>(bytes);
    return CpuBackend::allocate(bytes);
  }
  int64_t allocated() const { return allocated_; }

 private:
  bool keep_;
  int64_t allocated_ = 0;
};

struct LoadRun {
  std::vector<float> logits;
  int64_t weight_bytes = 0;    // what the load allocated
  int64_t prepared_bytes = 0;  // what prepare_model() counted for it beforehand
};

// Logits of every position of `tokens` (one sequence) and the bytes the load allocated.
LoadRun run(const fs::path& dir, bool keep_moe_quantized, const std::vector<int32_t>& tokens) {
  CountingCpuBackend backend(keep_moe_quantized);
  auto prepared = prepare_model(dir.string(), backend);
  EXPECT_TRUE(prepared.ok()) << prepared.message();
  if (!prepared.ok()) return {};
  auto model = load_prepared_model(*prepared, backend);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return {};
  LoadRun r;
  r.weight_bytes = backend.allocated();
  r.prepared_bytes = prepared->weight_bytes;
  r.logits = testing::sequence_logits(**model, backend, tokens);
  return r;
}

class MoeQuantized : public ::testing::TestWithParam<std::tuple<const char*, QuantizeFormat>> {};

TEST_P(MoeQuantized, KeptQuantizedEqualsDequantizedAtLoadInFewerBytes) {
  set_log_level(LogLevel::WARN);
  const auto [fixture, format] = GetParam();
  const fs::path out =
      fs::path(::testing::TempDir()) / ("syv_moeq_" + std::to_string(::getpid()) + "_" + fixture +
                                        "_" + std::to_string(static_cast<int>(format)));
  // group 8 divides every K of the fixtures (hidden 64, expert widths 24 / 32)
  ASSERT_TRUE(testing::quantize_fixture(std::string("hybrid/") + fixture, format, 8, out, 32));
  const std::vector<int32_t> tokens = {3, 17, 40, 9, 25, 1, 77, 5, 60, 2, 11};
  const LoadRun kept = run(out, /*keep_moe_quantized=*/true, tokens);
  const LoadRun dense = run(out, /*keep_moe_quantized=*/false, tokens);
  ASSERT_FALSE(kept.logits.empty());
  ASSERT_EQ(kept.logits.size(), dense.logits.size());
  // The same f32 products over the same dequantized values, in the same order.
  for (size_t i = 0; i < kept.logits.size(); ++i)
    ASSERT_EQ(kept.logits[i], dense.logits[i]) << fixture << " logit " << i;
  // fp8: 1 byte + scales per weight against 4 (the CPU keeps f32); int4: half a byte.
  EXPECT_LT(kept.weight_bytes, dense.weight_bytes) << fixture;
  // The start-up memory check counts the kept experts at the bytes they take (the rest of a
  // hybrid's count is an upper bound either way: prepare_model.h).
  EXPECT_EQ(dense.prepared_bytes - kept.prepared_bytes, dense.weight_bytes - kept.weight_bytes)
      << fixture;
  fs::remove_all(out);
}

// A backend that chooses per model whether to keep the experts quantized (as CUDA does without
// SYV_QUANT_MOE), with `available` bytes of memory: prepare_model() keeps them quantized when the
// dequantized weights would take more than half of it.
class ChoosingCpuBackend final : public CpuBackend {
 public:
  explicit ChoosingCpuBackend(int64_t available) : available_(available) {}
  bool keeps_moe_experts_quantized() const override { return keep_; }
  bool chooses_moe_experts_quantized() const override { return true; }
  void set_moe_experts_quantized(bool keep) override { keep_ = keep; }
  AvailableMemory available_memory() override { return {available_, "test memory"}; }

 private:
  int64_t available_;
  bool keep_ = false;
};

TEST(MoeQuantizedChoice, KeptQuantizedWhenDequantizedTheyWouldTakeMoreThanHalfTheMemory) {
  set_log_level(LogLevel::WARN);
  const fs::path out =
      fs::path(::testing::TempDir()) / ("syv_moeq_choice_" + std::to_string(::getpid()));
  ASSERT_TRUE(testing::quantize_fixture("hybrid/qnext_top2_r1", QuantizeFormat::kGptq, 8, out));
  ChoosingCpuBackend roomy(int64_t{1} << 40);
  auto dequantized = prepare_model(out.string(), roomy);
  ASSERT_TRUE(dequantized.ok()) << dequantized.message();
  EXPECT_FALSE(roomy.keeps_moe_experts_quantized());
  // Memory for 1.5x the dequantized weights: they would take more than half of it.
  ChoosingCpuBackend tight(dequantized->weight_bytes * 3 / 2);
  auto kept = prepare_model(out.string(), tight);
  ASSERT_TRUE(kept.ok()) << kept.message();
  EXPECT_TRUE(tight.keeps_moe_experts_quantized());
  EXPECT_LT(kept->weight_bytes, dequantized->weight_bytes);
  auto model = load_prepared_model(*kept, tight);
  ASSERT_TRUE(model.ok()) << model.message();
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeQuantized,
                         ::testing::Combine(::testing::Values("q35moe_top2_r2", "qnext_top2_r1"),
                                            ::testing::Values(QuantizeFormat::kFp8,
                                                              QuantizeFormat::kAwq,
                                                              QuantizeFormat::kGptq)));

}  // namespace
}  // namespace syv
