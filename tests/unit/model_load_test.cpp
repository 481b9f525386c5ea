// Bad model folders and bad CLI input: each error names the tensor / field / argument and says
// what was expected and what was found. Also random-weight loading from config.json alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

const std::string kFixture =
    std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/tied_gqa4_kv1_hd64";

// A scratch copy of the fixture's config.json with the weights rewritten by `edit`.
class BadModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("syv_model_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kFixture + "/config.json", dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes model.safetensors from the fixture's tensors, letting `edit` drop or replace them.
  void write_weights(const std::function<bool(TensorToWrite&)>& edit) {
    auto store = WeightStore::open_dir(kFixture);
    ASSERT_TRUE(store.ok()) << store.message();
    std::vector<TensorToWrite> tensors;
    for (const std::string& name : store->names()) {
      const TensorInfo* info = store->find(name);
      TensorToWrite t{name, info->dtype, info->shape, info->data};
      if (edit(t)) tensors.push_back(t);
    }
    ASSERT_TRUE(write_safetensors((dir_ / "model.safetensors").string(), tensors).ok());
  }

  std::string load_error() {
    auto backend = make_cpu_backend();
    auto model = load_model(dir_.string(), *backend);
    EXPECT_FALSE(model.ok());
    return model.ok() ? "" : model.message();
  }

  fs::path dir_;
};

TEST_F(BadModel, MissingTensorIsNamed) {
  write_weights([](TensorToWrite& t) { return t.name != "model.layers.1.mlp.up_proj.weight"; });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("\"model.layers.1.mlp.up_proj.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("[112, 48]"), std::string::npos) << "expected shape: " << msg;
}

TEST_F(BadModel, WrongShapeSaysExpectedAndFound) {
  write_weights([&](TensorToWrite& t) {
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {32, 48};  // config: [64, 48]
    return true;
  });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("\"model.layers.0.self_attn.k_proj.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("[32, 48]"), std::string::npos) << "found shape: " << msg;
  EXPECT_NE(msg.find("[64, 48]"), std::string::npos) << "expected shape: " << msg;
}

TEST_F(BadModel, WrongDtypeIsRefusedByName) {
  write_weights([&](TensorToWrite& t) {
    if (t.name == "model.norm.weight") {  // 48 bf16 values -> 24 i32 values of the same bytes
      t.dtype = DType::I32;
      t.shape = {24};
    }
    return true;
  });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("I32"), std::string::npos) << "found dtype: " << msg;
  EXPECT_NE(msg.find("BF16"), std::string::npos) << "supported dtypes: " << msg;
}

TEST_F(BadModel, UnsupportedArchitectureIsRefused) {
  write_weights([](TensorToWrite&) { return true; });
  std::ifstream in(dir_ / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string config = ss.str();
  const std::string from = "\"model_type\": \"qwen3\"";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"model_type\": \"llama\"");
  std::ofstream(dir_ / "config.json") << config;
  const std::string msg = load_error();
  EXPECT_NE(msg.find("llama"), std::string::npos) << "found: " << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << "supported: " << msg;
}

TEST_F(BadModel, MissingFolderIsNamed) {
  auto backend = make_cpu_backend();
  auto model = load_model((dir_ / "nope").string(), *backend);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.message().find("nope"), std::string::npos) << model.message();
}

TEST_F(BadModel, RandomWeightsNeedOnlyConfigAndAreSeeded) {
  auto logits_for = [&](uint64_t seed) {
    auto backend = make_cpu_backend();
    LoadOptions options;
    options.random_weights = true;
    options.seed = seed;
    auto model = load_model(dir_.string(), *backend, options);  // no safetensors in dir_
    EXPECT_TRUE(model.ok()) << model.message();
    CacheConfig cache;
    cache.page_size = 16;
    cache.num_pages = 1;
    EXPECT_TRUE((*model)->allocate_cache(cache).ok());
    Batch b;
    b.token_ids = {1, 2, 3};
    b.positions = {0, 1, 2};
    b.seq_starts = {0, 3};
    b.context_lens = {3};
    b.page_table = {0};
    b.max_pages_per_seq = 1;
    b.logit_rows = {2};
    Tensor t = (*model)->forward(b);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend->download(host.data(), t.data, host.size() * 4);
    return host;
  };
  auto a = logits_for(7), again = logits_for(7), other = logits_for(8);
  ASSERT_EQ(a.size(), 640u);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

// Runs `syv <args>`; returns the exit status and stderr.
std::pair<int, std::string> run_syv(const std::string& args) {
  const std::string err =
      (fs::temp_directory_path() / ("syv_model_load_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(SYV_BIN) + " " + args + " >/dev/null 2>" + err;
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  return {status, ss.str()};
}

TEST(CliBadInput, TokensOutOfVocabulary) {
  auto [status, err] = run_syv("logits --model " + kFixture + " --tokens 1,2,640 --out /dev/null");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("640"), std::string::npos) << "found: " << err;
  EXPECT_NE(err.find("[0, 640)"), std::string::npos) << "expected: " << err;
  EXPECT_EQ(err.find("Abort"), std::string::npos) << err;
}

TEST(CliBadInput, TokensNotNumbers) {
  auto [status, err] = run_syv("generate --model " + kFixture + " --tokens 1,two --max-tokens 1");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("\"two\""), std::string::npos) << err;
}

TEST(CliBadInput, MissingModelFolder) {
  auto [status, err] = run_syv("logits --model /nonexistent/syv-model --tokens 1 --out /dev/null");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--model"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent/syv-model"), std::string::npos) << err;
}

}  // namespace
}  // namespace syv
