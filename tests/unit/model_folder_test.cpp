// What --model must be (io/model_folder.h): a GGUF file or a GGUF-only folder, a Hugging Face
// cache folder (models--Org--Name, its snapshots/, the hub root), a file, a missing path. Each
// error names the path and says what to pass instead; a real model folder passes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/hf_config.h"
#include "io/model_folder.h"
#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "unit/expect_error.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

class ModelFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("syv_model_folder_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string touch(const fs::path& rel, const std::string& text = "x") {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
    return (root_ / rel).string();
  }
  std::string dir(const fs::path& rel) {
    fs::create_directories(root_ / rel);
    return (root_ / rel).string();
  }
  // A Hugging Face cache repo folder with one complete snapshot (and one without config.json).
  std::string cache_repo(const std::string& name, const std::string& hash) {
    const fs::path repo = fs::path("hub") / ("models--Qwen--" + name);
    touch(repo / "snapshots" / hash / "config.json", "{}");
    dir(repo / "snapshots" / "incomplete0");
    dir(repo / "blobs");
    touch(repo / "refs" / "main", hash);
    return (root_ / repo).string();
  }

  fs::path root_;
};

TEST_F(ModelFolder, RealFolderPasses) {
  touch("m/config.json", "{}");
  touch("m/model.safetensors");
  EXPECT_TRUE(check_model_folder(dir("m")).ok());
  // No config.json, nothing recognisable: the readers of the files say what is missing.
  EXPECT_TRUE(check_model_folder(dir("empty")).ok());
  // A folder with config.json is a model folder even when it also holds GGUF files.
  touch("mixed/config.json", "{}");
  touch("mixed/model-q8_0.gguf");
  EXPECT_TRUE(check_model_folder(dir("mixed")).ok());
}

TEST_F(ModelFolder, MissingPathAndFile) {
  EXPECT_ERROR_HAS(check_model_folder((root_ / "nope").string()), "nope", "does not exist",
                   "config.json", "*.safetensors");
  const std::string file = touch("m/config.json", "{}");
  EXPECT_ERROR_HAS(check_model_folder(file), file, "is a file",
                   "the folder that holds it is \"" + (root_ / "m").string() + "\"");
}

TEST_F(ModelFolder, GgufFileSaysWhatToPassInstead) {
  const std::string gguf = touch("Qwen3-0.6B-Q8_0.GGUF");
  EXPECT_ERROR_HAS(check_model_folder(gguf), gguf, "GGUF file", "does not read GGUF",
                   "Hugging Face model folder", "config.json", "*.safetensors");
}

TEST_F(ModelFolder, GgufOnlyFolderListsItsFiles) {
  touch("g/qwen3-0.6b-q8_0.gguf");
  touch("g/qwen3-0.6b-f16.gguf");
  touch("g/README.md");
  EXPECT_ERROR_HAS(check_model_folder(dir("g")), "holds GGUF files",
                   "qwen3-0.6b-f16.gguf or qwen3-0.6b-q8_0.gguf", "does not read GGUF",
                   "*.safetensors");
  // The same folder through the readers every command uses.
  EXPECT_ERROR_HAS(load_model_config(dir("g")), "GGUF");
  EXPECT_ERROR_HAS(Tokenizer::load(dir("g")), "GGUF");
}

TEST_F(ModelFolder, ConfigWithOnlyGgufWeightsIsExplainedByTheWeightStore) {
  touch("cg/config.json", "{}");
  touch("cg/model-q4_k_m.gguf");
  EXPECT_ERROR_HAS(WeightStore::open_dir(dir("cg")), "no weights found", "model-q4_k_m.gguf",
                   "does not read GGUF");
}

TEST_F(ModelFolder, CacheRepoFolderSuggestsItsSnapshot) {
  const std::string repo = cache_repo("Qwen3-0.6B", "0123abcd");
  const std::string snapshot = repo + "/snapshots/0123abcd";
  EXPECT_ERROR_HAS(check_model_folder(repo), "Hugging Face cache folder", "pass " + snapshot);
  EXPECT_EQ(hf_cache_snapshots(repo), std::vector<std::string>{snapshot});
  // With a trailing slash, and its snapshots/ folder.
  EXPECT_ERROR_HAS(check_model_folder(repo + "/"), "pass " + repo + "/snapshots/0123abcd");
  EXPECT_ERROR_HAS(check_model_folder(repo + "/snapshots"), "snapshots folder", "pass " + snapshot);
  // The snapshot itself is the model folder.
  EXPECT_TRUE(check_model_folder(snapshot).ok());
  // Through load_model_config, as every model command reads it.
  EXPECT_ERROR_HAS(load_model_config(repo), snapshot);
}

TEST_F(ModelFolder, HubRootListsEverySnapshot) {
  const std::string a = cache_repo("Qwen3-0.6B", "aaaa");
  const std::string b = cache_repo("Qwen3-8B", "bbbb");
  const std::string hub = (root_ / "hub").string();
  EXPECT_ERROR_HAS(check_model_folder(hub), "Hugging Face cache root",
                   a + "/snapshots/aaaa or " + b + "/snapshots/bbbb");
  EXPECT_EQ(hf_cache_snapshots(hub).size(), 2u);
}

TEST_F(ModelFolder, ManySnapshotsAreCut) {
  for (int i = 0; i < 11; ++i) cache_repo("M" + std::to_string(i), "h" + std::to_string(i));
  EXPECT_ERROR_HAS(check_model_folder((root_ / "hub").string()), "(and 3 more)");
}

TEST_F(ModelFolder, CacheRepoWithoutCompleteSnapshot) {
  const fs::path repo = fs::path("hub") / "models--Qwen--Qwen3-8B";
  dir(repo / "snapshots" / "abc");  // download interrupted before config.json
  EXPECT_ERROR_HAS(check_model_folder((root_ / repo).string()), "without a complete snapshot",
                   "huggingface-cli download");
}

}  // namespace
}  // namespace syv
