// cli/step_budget.h: the step budget `syv serve` chooses on a GPU when --max-batched-tokens is not
// given, against arithmetic done here from the configs' shapes.
#include "cli/step_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "io/hf_config.h"

namespace syv::cli {
namespace {

ModelConfig bench_config(const std::string& name) {
  Result<ModelConfig> c =
      load_model_config(std::string(SYV_SOURCE_DIR) + "/tools/bench/configs/" + name);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? *c : ModelConfig{};
}

TEST(StepBudget, DenseFlopsAreTwiceTheLayersParameters) {
  const ModelConfig c = bench_config("qwen3-8b");
  ASSERT_EQ(c.hidden_size, 4096);
  // A Qwen3-8B layer: q and o 4096 x 4096, k and v 1024 x 4096, gate, up and down 12288 x 4096,
  // the q/k norms (128 each) and the two layer norms (4096 each); 36 layers and the final norm.
  // The embedding table and the lm_head are not a prompt token's linears.
  const double layer =
      2.0 * 4096 * 4096 + 2.0 * 1024 * 4096 + 3.0 * 12288 * 4096 + 2 * 128 + 2 * 4096;
  const double expected = 2 * (36 * layer + 4096);
  Result<double> flops = prefill_flops_per_token(c);
  ASSERT_TRUE(flops.ok()) << flops.message();
  EXPECT_DOUBLE_EQ(*flops, expected);
  Result<double> half = prefill_flops_per_token(c, 2);
  ASSERT_TRUE(half.ok());
  EXPECT_DOUBLE_EQ(*half, expected / 2);
}

TEST(StepBudget, MoeCountsOnlyTheRoutedExpertsATokenUses) {
  ModelConfig c = bench_config("qwen3-next-24l");
  ASSERT_GT(c.num_experts, 0);
  ASSERT_GT(c.num_experts_per_tok, 0);
  Result<double> k = prefill_flops_per_token(c);
  ASSERT_TRUE(k.ok()) << k.message();
  // Ten more experts a token: ten more experts' gate, up and down in every MoE layer.
  c.num_experts_per_tok += 10;
  Result<double> more = prefill_flops_per_token(c);
  ASSERT_TRUE(more.ok());
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) moe_layers += c.layer_is_moe(i) ? 1 : 0;
  ASSERT_GT(moe_layers, 0);
  const double expert = 3.0 * c.hidden_size * c.moe_intermediate_size;
  EXPECT_NEAR(*more - *k, 2 * 10 * expert * static_cast<double>(moe_layers), 1.0);
}

TEST(StepBudget, LargestQuantumWithinTheBound) {
  const double flops_8b = 2 * (36 * (2.0 * 4096 * 4096 + 2.0 * 1024 * 4096 + 3.0 * 12288 * 4096));
  // An H100's or an H200's measured rate (788 and ~800 TFLOP/s): 50 ms fit ~2,840 tokens: 2,048.
  EXPECT_EQ(step_budget_for(flops_8b, 788e12), 2048);
  EXPECT_EQ(step_budget_for(flops_8b, 850e12), 2048);
  // 50 ms x 2,000 TFLOP/s / 13.9 GFLOP = 7,198 tokens: 7 quanta.
  EXPECT_EQ(step_budget_for(flops_8b, 2000e12), 7168);
  // A token of 1 GFLOP: 39,400 tokens at 788 TFLOP/s, capped at 16,384.
  EXPECT_EQ(step_budget_for(1e9, 788e12), kStepBudgetMax);
  // A slow GPU keeps the floor of 2,048 (its chunk computes for longer than the bound).
  EXPECT_EQ(step_budget_for(flops_8b, 100e12), kStepBudgetMin);
  // Nothing known: the floor.
  EXPECT_EQ(step_budget_for(0, 788e12), kStepBudgetMin);
  EXPECT_EQ(step_budget_for(flops_8b, 0), kStepBudgetMin);
  EXPECT_EQ(step_budget_for(std::numeric_limits<double>::quiet_NaN(), 788e12), kStepBudgetMin);
}

TEST(StepBudget, SmallAndMixtureOfExpertsModelsTakeLargerChunks) {
  const double rate = 788e12;  // an H100's, measured 2026-12-07
  Result<double> small = prefill_flops_per_token(bench_config("qwen3-0.6b"));
  Result<double> dense = prefill_flops_per_token(bench_config("qwen3-8b"));
  Result<double> moe = prefill_flops_per_token(bench_config("qwen3-next-24l"));
  ASSERT_TRUE(small.ok() && dense.ok() && moe.ok());
  EXPECT_EQ(step_budget_for(*small, rate), kStepBudgetMax);
  EXPECT_EQ(step_budget_for(*dense, rate), 2048);
  const int32_t moe_budget = step_budget_for(*moe, rate);
  EXPECT_GT(moe_budget, 2048);
  EXPECT_EQ(moe_budget % kStepBudgetQuantum, 0);
  EXPECT_LE(*moe * moe_budget / rate, kStepComputeBoundS);
  EXPECT_GT(*moe * (moe_budget + kStepBudgetQuantum) / rate, kStepComputeBoundS);
}

TEST(StepBudget, UnknownTensorListIsAnError) {
  ModelConfig c;
  c.model_type = "llama";
  EXPECT_FALSE(prefill_flops_per_token(c).ok());
}

}  // namespace
}  // namespace syv::cli
