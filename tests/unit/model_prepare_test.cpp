// prepare_model() (model/prepare_model.h), the checks before a byte is allocated: the weight bytes
// it predicts equal what the load then allocates (checkpoint and random weights, f32 and bf16
// backends), weights that do not fit are refused with both numbers and nothing allocated, and
// tensor / folder errors come from it, not from the load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/hf_config.h"
#include "model/prepare_model.h"
#include "model/qwen3.h"
#include "unit/keep_dtype_backend.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

const std::string kFixture =
    std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/tied_gqa4_kv1_hd64";

int64_t spec_elements(const std::string& dir) {
  auto config = load_model_config(dir);
  EXPECT_TRUE(config.ok()) << config.message();
  int64_t n = 0;
  for (const WeightSpec& s : qwen3_weight_specs(*config)) n += s.numel();
  return n;
}

LoadOptions random_weights() {
  LoadOptions o;
  o.random_weights = true;
  return o;
}

TEST(PrepareModel, PredictedBytesEqualTheLoadsAllocations) {
  const int64_t elements = spec_elements(kFixture);
  for (DType keep : {DType::F32, DType::BF16}) {
    for (bool random : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(keep)) + (random ? " random" : " checkpoint"));
      KeepDtypeBackend backend(keep);
      const LoadOptions options = random ? random_weights() : LoadOptions{};
      auto prepared = prepare_model(kFixture, backend, options);
      ASSERT_TRUE(prepared.ok()) << prepared.message();
      EXPECT_EQ(prepared->weight_bytes, elements * static_cast<int64_t>(dtype_size(keep)));
      EXPECT_EQ(backend.allocated_bytes(), 0) << "prepare_model allocates nothing";
      auto model = load_prepared_model(*prepared, backend, options);
      ASSERT_TRUE(model.ok()) << model.message();
      EXPECT_EQ(backend.allocated_bytes(), prepared->weight_bytes);
    }
  }
}

TEST(PrepareModel, WeightsThatDoNotFitAreRefusedBeforeAnyAllocation) {
  for (bool random : {false, true}) {
    SCOPED_TRACE(random ? "random" : "checkpoint");
    const LoadOptions options = random ? random_weights() : LoadOptions{};
    KeepDtypeBackend probe(DType::F32);
    const int64_t need = prepare_model(kFixture, probe, options)->weight_bytes;
    ASSERT_GT(need, 0);

    KeepDtypeBackend backend(DType::F32);
    backend.set_available_memory(need - 1);
    auto refused = prepare_model(kFixture, backend, options);
    ASSERT_FALSE(refused.ok());
    const std::string& m = refused.message();
    EXPECT_NE(m.find(std::to_string(need) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(need - 1) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("test memory"), std::string::npos) << "where: " << m;
    EXPECT_NE(m.find(kFixture), std::string::npos) << "which model: " << m;
    EXPECT_NE(m.find("smaller model"), std::string::npos) << "what to do: " << m;
    EXPECT_EQ(backend.allocated_bytes(), 0);
    // load_model() runs the same check.
    EXPECT_FALSE(load_model(kFixture, backend, options).ok());
    EXPECT_EQ(backend.allocated_bytes(), 0);

    backend.set_available_memory(need);
    EXPECT_TRUE(prepare_model(kFixture, backend, options).ok()) << "exactly enough fits";
  }
}

// A config of a model far larger than any machine (about 30 TB of f32 weights) with random
// weights: refused from the config alone, on the real CPU backend and its MemAvailable.
TEST(PrepareModel, HugeRandomModelIsRefusedOnTheCpuBackend) {
  const fs::path dir = fs::temp_directory_path() / ("syv_prepare_huge_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen3", "vocab_size": 151936,
    "hidden_size": 16384, "intermediate_size": 65536, "num_hidden_layers": 2000,
    "num_attention_heads": 128, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
    "tie_word_embeddings": false})";
  auto backend = make_cpu_backend();
  auto prepared = prepare_model(dir.string(), *backend, random_weights());
  fs::remove_all(dir);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.message().find("MemAvailable"), std::string::npos) << prepared.message();
  EXPECT_NE(prepared.message().find("random weights"), std::string::npos) << prepared.message();
  EXPECT_NE(prepared.message().find("as f32"), std::string::npos) << prepared.message();
}

// Random weights are float: a config with a quantization_config is refused, not benchmarked as
// bf16 under the quantized folder's name.
TEST(PrepareModel, RandomWeightsRefuseAQuantizationConfig) {
  const fs::path dir =
      fs::temp_directory_path() / ("syv_prepare_quant_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen3", "vocab_size": 256,
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
    "tie_word_embeddings": false, "quantization_config": {"quant_method": "gptq", "bits": 4,
    "group_size": 128, "desc_act": false, "sym": true, "checkpoint_format": "gptq"}})";
  KeepDtypeBackend backend(DType::BF16);
  auto prepared = prepare_model(dir.string(), backend, random_weights());
  fs::remove_all(dir);
  ASSERT_FALSE(prepared.ok());
  const std::string& m = prepared.message();
  EXPECT_NE(m.find("quantization_config"), std::string::npos) << m;
  EXPECT_NE(m.find("random weights are float"), std::string::npos) << m;
  EXPECT_NE(m.find("syv quantize"), std::string::npos) << "what to do: " << m;
  EXPECT_EQ(backend.allocated_bytes(), 0);
}

TEST(PrepareModel, TensorErrorsComeFromThePreparation) {
  const fs::path dir =
      fs::temp_directory_path() / ("syv_prepare_tensor_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(kFixture + "/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  auto store = WeightStore::open_dir(kFixture);
  ASSERT_TRUE(store.ok());
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : store->names()) {
    if (name == "model.layers.2.mlp.down_proj.weight") continue;
    const TensorInfo* info = store->find(name);
    tensors.push_back({name, info->dtype, info->shape, info->data});
  }
  ASSERT_TRUE(write_safetensors((dir / "model.safetensors").string(), tensors).ok());
  KeepDtypeBackend backend(DType::F32);
  auto prepared = prepare_model(dir.string(), backend);
  fs::remove_all(dir);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.message().find("\"model.layers.2.mlp.down_proj.weight\""), std::string::npos)
      << prepared.message();
  EXPECT_EQ(backend.allocated_bytes(), 0);
}

}  // namespace
}  // namespace syv
