// Quantized hybrid checkpoints on the CPU: the gated-attention projections, whose query and gate
// rows the model takes apart per head (model/hybrid_layers.cpp), stay quantized through
// WeightLoader::load_rows (rows sliced exactly: slice_rows, then concat_quantized) instead of
// loading dequantized, and the model's logits equal those of the float folder of the dequantized
// weights, bit for bit (Qwen3.5, Qwen3.5-MoE, Qwen3-Next fixtures; fp8, awq, gptq). The MLP's
// gate|up stays quantized too (one load_concat), and Qwen3-Next's in_proj_qkvz, whose rows the
// model re-orders into q|k|v and z (load_rows too).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "model/model.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

// The CPU backend, noting the [N, K] of every quantized weight the loader uploads.
class RecordingCpuBackend final : public CpuBackend {
 public:
  void reserve_quantized_scratch(const Weight& w, QuantWeightRole) override {
    quantized.push_back({w.n, w.k});
  }
  std::vector<std::pair<int64_t, int64_t>> quantized;
};

const std::vector<int32_t> kTokens = {3, 17, 40, 9, 25, 1, 77, 5, 60, 2, 11};

class HybridQuantized : public ::testing::TestWithParam<std::tuple<const char*, QuantizeFormat>> {};

TEST_P(HybridQuantized, GatedAttentionStaysQuantizedAndEqualsTheDequantizedFolder) {
  set_log_level(LogLevel::WARN);
  const auto [fixture, format] = GetParam();
  const fs::path base =
      fs::path(::testing::TempDir()) /
      ("syv_hybq_" + std::to_string(::getpid()) + "_" + std::to_string(static_cast<int>(format)));
  const fs::path src = fs::path(SYV_SOURCE_DIR) / "tests/fixtures" / fixture;
  ASSERT_TRUE(testing::quantize_fixture(fixture, format, 8, base / "q"));
  ASSERT_TRUE(testing::write_dequantized_folder(src, base / "q", base / "d"));

  RecordingCpuBackend qb;
  auto qm = load_model((base / "q").string(), qb);
  ASSERT_TRUE(qm.ok()) << qm.message();
  auto db = make_cpu_backend();
  auto dm = load_model((base / "d").string(), *db);
  ASSERT_TRUE(dm.ok()) << dm.message();
  const std::vector<float> q = testing::sequence_logits(**qm, qb, kTokens);
  const std::vector<float> d = testing::sequence_logits(**dm, *db, kTokens);
  ASSERT_FALSE(q.empty());
  ASSERT_EQ(q, d) << fixture;

  // The full-attention layers' q|k|v ([(Hq + 2 Hk) D, H]) and gate ([Hq D, H]) are quantized.
  auto c = load_model_config(src.string());
  ASSERT_TRUE(c.ok()) << c.message();
  const int64_t H = c->hidden_size, D = c->head_dim;
  const int64_t Hq = c->num_attention_heads, Hk = c->num_key_value_heads;
  auto has = [&](int64_t n) {
    return std::find(qb.quantized.begin(), qb.quantized.end(), std::make_pair(n, H)) !=
           qb.quantized.end();
  };
  EXPECT_TRUE(has((Hq + 2 * Hk) * D)) << fixture << ": q|k|v not kept quantized";
  EXPECT_TRUE(has(Hq * D)) << fixture << ": gate not kept quantized";
  // So are the MLP's gate|up (the dense MLP's, or the shared expert's).
  const int64_t I = c->num_experts > 0 ? c->shared_expert_intermediate_size : c->intermediate_size;
  EXPECT_TRUE(has(2 * I)) << fixture << ": gate|up not kept quantized";
  if (c->model_type == "qwen3_next") {  // in_proj_qkvz's rows re-ordered into q|k|v and z
    const int64_t key_dim = c->linear_num_key_heads * c->linear_key_head_dim;
    const int64_t value_dim = c->linear_num_value_heads * c->linear_value_head_dim;
    EXPECT_TRUE(has(2 * key_dim + value_dim)) << fixture << ": GDN q|k|v not kept quantized";
    EXPECT_TRUE(has(value_dim)) << fixture << ": GDN z not kept quantized";
  }
  fs::remove_all(base);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, HybridQuantized,
    ::testing::Combine(
        ::testing::Values("hybrid/q35_r1_lllf", "hybrid/q35moe_top2_r2", "hybrid/qnext_top2_r1"),
        ::testing::Values(QuantizeFormat::kFp8, QuantizeFormat::kAwq, QuantizeFormat::kGptq)));

}  // namespace
}  // namespace syv
