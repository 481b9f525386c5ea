// io/hf_config: config.json samples of each family, generation_config.json override, and errors
// that name the file, the field, expected vs found.
#include "io/hf_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "unit/expect_error.h"

namespace syv {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json qwen3_sample() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
    "rope_scaling": null, "attention_bias": false, "use_sliding_window": false,
    "sliding_window": null, "max_window_layers": 28, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645})");
}

json qwen3_5_sample() {
  return json::parse(R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "tie_word_embeddings": true, "image_token_id": 248056,
    "text_config": {
      "model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 1024,
      "intermediate_size": 3584, "num_hidden_layers": 8, "num_attention_heads": 8,
      "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu", "rms_norm_eps": 1e-06,
      "max_position_embeddings": 262144, "full_attention_interval": 4,
      "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
      "linear_num_value_heads": 16, "linear_value_head_dim": 128, "mtp_num_hidden_layers": 1,
      "dtype": "bfloat16", "eos_token_id": 248044,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                          "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                          "mrope_interleaved": true}},
    "vision_config": {"model_type": "qwen3_5_vision", "depth": 1,
                      "rope_parameters": {"rope_type": "axial"}}})");
}

json qwen3_next_sample() {
  return json::parse(R"({
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "vocab_size": 151936,
    "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "norm_topk_prob": true, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "partial_rotary_factor": 0.25, "rope_theta": 10000000,
    "rope_scaling": null, "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "eos_token_id": 151645})");
}

Result<ModelConfig> parse(const json& j) {
  return parse_model_config(j.dump(), "config.json");
}

TEST(HfConfig, Qwen3) {
  auto c = parse(qwen3_sample());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3);
  EXPECT_EQ(c->model_type, "qwen3");
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->num_hidden_layers, 28);
  EXPECT_EQ(c->num_attention_heads, 16);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 128);  // not hidden / heads (64)
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 1.0);
  EXPECT_EQ(c->rotary_dim(), 128);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->is_hybrid());
  EXPECT_FALSE(c->is_moe());
  EXPECT_EQ(c->layer_types.size(), 28u);
  EXPECT_EQ(c->num_full_attention_layers(), 28);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
}

TEST(HfConfig, Qwen3Defaults) {
  json j = qwen3_sample();
  j.erase("head_dim");
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  j["eos_token_id"] = {151645, 151643};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->head_dim, 64);  // hidden / heads
  EXPECT_EQ(c->num_key_value_heads, 16);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(HfConfig, Qwen3RopeParameters) {
  json j = qwen3_sample();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e6}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_DOUBLE_EQ(c->rope_theta, 5e6);

  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR_HAS(parse(j), "config.json", "rope_scaling",
                   "rope_scaling type yarn is not supported yet");
  j["rope_scaling"] = nullptr;
  j["rope_parameters"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_ERROR_HAS(parse(j), "rope_parameters", "rope_scaling type linear is not supported yet");
}

TEST(HfConfig, Qwen3RefusesSlidingWindow) {
  json j = qwen3_sample();
  j["use_sliding_window"] = true;
  EXPECT_ERROR_HAS(parse(j), "field \"use_sliding_window\"", "found true");
  j["use_sliding_window"] = false;
  j["num_hidden_layers"] = 2;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_ERROR_HAS(parse(j), "field \"layer_types\"", "\"sliding_attention\"");
}

TEST(HfConfig, Qwen3_5Nested) {
  auto c = parse(qwen3_5_sample());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c->model_type, "qwen3_5");
  EXPECT_TRUE(c->is_hybrid());
  EXPECT_FALSE(c->is_moe());
  EXPECT_EQ(c->vocab_size, 248320);
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_EQ(c->rotary_dim(), 64);
  EXPECT_EQ(c->mrope_section, (std::vector<int64_t>{11, 11, 10}));
  ASSERT_EQ(c->layer_types.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(c->layer_types[i],
              (i % 4 == 3) ? LayerType::kFullAttention : LayerType::kLinearAttention)
        << i;
  }
  EXPECT_EQ(c->num_full_attention_layers(), 2);
  EXPECT_EQ(c->linear_num_key_heads, 16);
  EXPECT_EQ(c->linear_num_value_heads, 16);
  EXPECT_EQ(c->linear_key_head_dim, 128);
  EXPECT_EQ(c->linear_value_head_dim, 128);
  EXPECT_EQ(c->linear_conv_kernel_dim, 4);
  EXPECT_EQ(c->mtp_num_hidden_layers, 1);
  EXPECT_TRUE(c->tie_word_embeddings);  // from the top level
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{248044});
}

TEST(HfConfig, Qwen3_5TextFlatAndDefaults) {
  json j = qwen3_5_sample()["text_config"];
  j.erase("full_attention_interval");
  j.erase("rope_parameters");
  j["num_hidden_layers"] = 6;
  j["rope_theta"] = 1e6;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->model_type, "qwen3_5_text");
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);  // the hybrid default
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  // Default interval 4: layers 3 only (of 6) is full attention.
  EXPECT_EQ(c->num_full_attention_layers(), 1);
  EXPECT_EQ(c->layer_types[3], LayerType::kFullAttention);

  j["layer_types"] = {"full_attention", "linear_attention", "linear_attention",
                      "full_attention", "linear_attention", "full_attention"};
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->num_full_attention_layers(), 3);
  EXPECT_EQ(c->layer_types[0], LayerType::kFullAttention);

  j["layer_types"] = {"full_attention"};
  EXPECT_ERROR_HAS(parse(j), "field \"layer_types\"", "a list of 6 layer types", "an array of 1");
}

TEST(HfConfig, Qwen3_5NestedErrors) {
  json j = qwen3_5_sample();
  j["text_config"].erase("hidden_size");
  EXPECT_ERROR_HAS(parse(j), "config.json", "missing field \"text_config.hidden_size\"",
                   "positive integer");
  j = qwen3_5_sample();
  j.erase("text_config");
  EXPECT_ERROR_HAS(parse(j), "missing field \"text_config\"");
  j = qwen3_5_sample();
  j["text_config"]["model_type"] = "qwen3";
  EXPECT_ERROR_HAS(parse(j), "field \"text_config.model_type\"", "\"qwen3_5_text\"",
                   "found \"qwen3\"");
  j = qwen3_5_sample();
  j["text_config"]["linear_num_value_heads"] = 24;
  j["text_config"]["linear_num_key_heads"] = 16;
  EXPECT_ERROR_HAS(parse(j), "text_config.linear_num_value_heads", "multiple of", "found 24");
}

TEST(HfConfig, Qwen3Next) {
  auto c = parse(qwen3_next_sample());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3Next);
  EXPECT_TRUE(c->is_hybrid());
  EXPECT_TRUE(c->is_moe());
  EXPECT_EQ(c->num_experts, 512);
  EXPECT_EQ(c->num_experts_per_tok, 10);
  EXPECT_EQ(c->moe_intermediate_size, 512);
  EXPECT_EQ(c->shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->decoder_sparse_step, 1);
  EXPECT_TRUE(c->layer_is_moe(0));
  EXPECT_EQ(c->num_full_attention_layers(), 12);
  EXPECT_EQ(c->linear_num_value_heads, 32);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_EQ(c->intermediate_size, 5120);

  json j = qwen3_next_sample();
  j["mlp_only_layers"] = {0, 5};
  j["decoder_sparse_step"] = 2;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(c->layer_is_moe(0));
  EXPECT_TRUE(c->layer_is_moe(1));
  EXPECT_FALSE(c->layer_is_moe(2));
  EXPECT_FALSE(c->layer_is_moe(5));

  j = qwen3_next_sample();
  j["num_experts_per_tok"] = 600;
  EXPECT_ERROR_HAS(parse(j), "field \"num_experts_per_tok\"", "at most num_experts (512)",
                   "found 600");
  j = qwen3_next_sample();
  j["mlp_only_layers"] = {48};
  EXPECT_ERROR_HAS(parse(j), "field \"mlp_only_layers\"", "[0, 48)", "found 48");
}

TEST(HfConfig, Qwen3_5Moe) {
  json j = qwen3_5_sample();
  j["model_type"] = "qwen3_5_moe";
  j["text_config"]["model_type"] = "qwen3_5_moe_text";
  j["text_config"].erase("intermediate_size");
  j["text_config"]["num_experts"] = 64;
  j["text_config"]["num_experts_per_tok"] = 4;
  j["text_config"]["moe_intermediate_size"] = 256;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5);
  EXPECT_TRUE(c->is_moe());
  EXPECT_EQ(c->num_experts, 64);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 256);
  EXPECT_EQ(c->shared_expert_intermediate_size, 512);
}

TEST(HfConfig, UnknownModelType) {
  json j = qwen3_sample();
  j["model_type"] = "llama";
  EXPECT_ERROR_HAS(parse(j), "config.json", "model_type \"llama\" is not supported", "\"qwen3\"",
                   "\"qwen3_5\"", "\"qwen3_5_text\"", "\"qwen3_next\"");
  j.erase("model_type");
  EXPECT_ERROR_HAS(parse(j), "missing field \"model_type\"", "\"qwen3_next\"");
}

TEST(HfConfig, MissingAndInvalidFields) {
  json j = qwen3_sample();
  j.erase("vocab_size");
  EXPECT_ERROR_HAS(parse(j), "config.json: missing field \"vocab_size\"", "positive integer");
  j = qwen3_sample();
  j["hidden_size"] = "abc";
  EXPECT_ERROR_HAS(parse(j), "config.json: field \"hidden_size\": expected a positive integer",
                   "found \"abc\"");
  j = qwen3_sample();
  j["num_hidden_layers"] = 0;
  EXPECT_ERROR_HAS(parse(j), "field \"num_hidden_layers\"", "found 0");
  j = qwen3_sample();
  j["num_key_value_heads"] = 5;
  EXPECT_ERROR_HAS(parse(j), "field \"num_key_value_heads\"", "divisor of num_attention_heads (16)",
                   "found 5");
  j = qwen3_sample();
  j["rms_norm_eps"] = -1;
  EXPECT_ERROR_HAS(parse(j), "field \"rms_norm_eps\"", "found -1");
  j = qwen3_sample();
  j["hidden_act"] = "gelu";
  EXPECT_ERROR_HAS(parse(j), "field \"hidden_act\"", "\"silu\"", "found \"gelu\"");
  j = qwen3_sample();
  j["eos_token_id"] = {1, "x"};
  EXPECT_ERROR_HAS(parse(j), "field \"eos_token_id\"", "found \"x\"");
  j = qwen3_sample();
  j["tie_word_embeddings"] = 1;
  EXPECT_ERROR_HAS(parse(j), "field \"tie_word_embeddings\"", "true or false", "found 1");
  j = qwen3_sample();
  j.erase("head_dim");
  j["hidden_size"] = 1000;
  j["num_attention_heads"] = 16;
  EXPECT_ERROR_HAS(parse(j), "missing field \"head_dim\"", "not divisible");

  EXPECT_ERROR_HAS(parse_model_config("{\"model_type\": ", "my/config.json"), "my/config.json",
                   "not valid JSON");
  EXPECT_ERROR_HAS(parse_model_config("[1]", "my/config.json"), "expected a JSON object");
}

class HfConfigDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("syv_cfg_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST_F(HfConfigDir, GenerationConfigOverridesEos) {
  write("config.json", qwen3_sample().dump());
  auto c = load_model_config(dir_.string());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{151645});

  write("generation_config.json", R"({"bos_token_id": 151643, "eos_token_id": [151645, 151643]})");
  c = load_model_config(dir_.string());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{151645, 151643}));

  write("generation_config.json", R"({"eos_token_id": 7})");
  c = load_model_config(dir_.string());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{7});

  write("generation_config.json", R"({"eos_token_id": "seven"})");
  EXPECT_ERROR_HAS(load_model_config(dir_.string()), "generation_config.json",
                   "field \"eos_token_id\"", "found \"seven\"");
  write("generation_config.json", "{oops");
  EXPECT_ERROR_HAS(load_model_config(dir_.string()), "generation_config.json", "not valid JSON");
}

TEST_F(HfConfigDir, MissingConfig) {
  EXPECT_ERROR_HAS(load_model_config(dir_.string()), (dir_ / "config.json").string(),
                   "cannot open");
}

// Configs written by transformers 5.17 for the committed reference fixtures.
TEST(HfConfigFixtures, AllParse) {
  const std::string root = SYV_SOURCE_DIR "/tests/fixtures";
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (e.path().filename() != "config.json") continue;
    auto c = load_model_config(e.path().parent_path().string());
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(static_cast<int64_t>(c->layer_types.size()), c->num_hidden_layers);
    ++n;
  }
  if (n == 0) GTEST_SKIP() << "no fixtures under " << root;
}

TEST(HfConfigFixtures, NestedQwen3_5) {
  const std::string d = SYV_SOURCE_DIR "/tests/fixtures/hybrid/q35_nested_r2";
  if (!fs::exists(d + "/config.json")) GTEST_SKIP() << "fixture missing: " << d;
  auto c = load_model_config(d);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_hidden_layers, 5);
  EXPECT_EQ(c->num_full_attention_layers(), 2);
  EXPECT_EQ(c->linear_num_value_heads, 2);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rotary_dim(), 4);
}

}  // namespace
}  // namespace syv
