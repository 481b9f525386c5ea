// Model-side config checks (validate_qwen3_config, validate_hybrid_config and their shared helpers
// in model/config_checks.h): each refusal names the config.json field, expected vs found.
#include "model/config_checks.h"

#include <gtest/gtest.h>

#include <string>

#include "io/hf_config.h"
#include "model/hybrid_layers.h"
#include "model/qwen3.h"

namespace syv {
namespace {

ModelConfig fixture_config(const std::string& rel) {
  auto c = load_model_config(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + rel);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ConfigChecks, PositiveField) {
  EXPECT_TRUE(check_positive_field(1, "hidden_size").ok());
  EXPECT_EQ(check_positive_field(0, "hidden_size").message(),
            "config.json: field \"hidden_size\": expected a positive integer, found 0");
  EXPECT_EQ(check_positive_field(-3, "head_dim").message(),
            "config.json: field \"head_dim\": expected a positive integer, found -3");
}

TEST(ConfigChecks, MultipleOf) {
  EXPECT_TRUE(check_multiple_of(8, "num_attention_heads", 2, "num_key_value_heads").ok());
  EXPECT_EQ(check_multiple_of(8, "num_attention_heads", 3, "num_key_value_heads").message(),
            "config.json: num_attention_heads (8) must be a multiple of num_key_value_heads (3)");
}

using Validator = Status (*)(const ModelConfig&);

// What `validate` says of `c` after `edit`.
template <class Edit>
std::string refusal(Validator validate, ModelConfig c, Edit edit) {
  edit(c);
  return validate(c).message();
}

TEST(ConfigChecks, Qwen3Validator) {
  const ModelConfig good = fixture_config("qwen3/tied_gqa2");
  ASSERT_TRUE(validate_qwen3_config(good).ok());
  const Validator v = validate_qwen3_config;
  EXPECT_EQ(refusal(v, good, [](ModelConfig& c) { c.intermediate_size = 0; }),
            "config.json: field \"intermediate_size\": expected a positive integer, found 0");
  EXPECT_EQ(refusal(v, good, [](ModelConfig& c) { c.head_dim = 0; }),
            "config.json: field \"head_dim\": expected a positive integer, found 0");
  const std::string heads = std::to_string(good.num_attention_heads);
  const std::string kv = std::to_string(good.num_attention_heads + 1);
  EXPECT_EQ(
      refusal(v, good, [](ModelConfig& c) { c.num_key_value_heads = c.num_attention_heads + 1; }),
      "config.json: num_attention_heads (" + heads +
          ") must be a multiple of num_key_value_heads (" + kv + ")");
}

TEST(ConfigChecks, HybridValidator) {
  const ModelConfig good = fixture_config("hybrid/qnext_top1_r2");  // 4 q heads, 4 linear v heads
  ASSERT_TRUE(validate_hybrid_config(good).ok());
  const Validator v = validate_hybrid_config;
  EXPECT_EQ(refusal(v, good, [](ModelConfig& c) { c.linear_value_head_dim = -1; }),
            "config.json: field \"linear_value_head_dim\": expected a positive integer, found -1");
  EXPECT_EQ(refusal(v, good, [](ModelConfig& c) { c.moe_intermediate_size = 0; }),
            "config.json: field \"moe_intermediate_size\": expected a positive integer, found 0");
  EXPECT_EQ(refusal(v, good, [](ModelConfig& c) { c.num_key_value_heads = 3; }),
            "config.json: num_attention_heads (4) must be a multiple of num_key_value_heads (3)");
  EXPECT_EQ(
      refusal(v, good, [](ModelConfig& c) { c.linear_num_key_heads = 3; }),
      "config.json: linear_num_value_heads (4) must be a multiple of linear_num_key_heads (3)");
}

}  // namespace
}  // namespace syv
