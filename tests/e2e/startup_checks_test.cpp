// Issue 23.5, start-up checks, through the real binary: `syv serve` given a GGUF file, a
// GGUF-only folder, a Hugging Face cache folder or hub root, weights larger than this machine's
// free memory, or a folder without a tokenizer exits 1 with a message that says what to pass
// instead, and never prints `listening on`. `syv generate` and `syv bench offline` with
// --random-weights refuse the too-large model the same way (the bytes they would allocate).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_run.h"
#include "io/safetensors.h"

namespace syv::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTokenizerDir = std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";

// About 7.5e12 parameters: 30 TB as the CPU backend's f32, 15 TB in bf16. No machine has that.
constexpr const char* kHugeConfig = R"({"model_type": "qwen3", "vocab_size": 151936,
  "hidden_size": 16384, "intermediate_size": 65536, "num_hidden_layers": 2000,
  "num_attention_heads": 128, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"})";

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// `syv ARGS` with a time limit (a check that let the server start would otherwise never end).
CliRun syv(const std::string& args) {
  auto [status, out] = run_command("timeout 120 " + std::string(SYV_BIN) + " " + args, true);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class StartupChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("syv_startup_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string touch(const fs::path& rel, const std::string& text = "GGUF") {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
    return (root_ / rel).string();
  }
  // A folder with the real tokenizer, `config` and a one-tensor model.safetensors.
  std::string model_folder(const std::string& name, const std::string& config) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(kTokenizerDir + "/" + f, dir / f);
    }
    std::ofstream(dir / "config.json") << config;
    const uint16_t one = 0x3f80;  // bf16 1.0
    EXPECT_TRUE(
        write_safetensors((dir / "model.safetensors").string(), {{"x", DType::BF16, {1}, &one}})
            .ok());
    return dir.string();
  }

  // `syv serve` on `model`: exit 1, every part of `expected` in the output, no `listening on`.
  void expect_serve_refused(const std::string& model, const std::vector<std::string>& expected) {
    const CliRun r = syv("serve --model " + model + " --port 0 --device cpu");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output.find("listening on"), std::string::npos) << r.output;
    for (const std::string& part : expected) {
      EXPECT_NE(r.output.find(part), std::string::npos) << r.output << "\n   lacks: " << part;
    }
  }

  fs::path root_;
};

TEST_F(StartupChecks, ServeRefusesGgufFileAndGgufFolder) {
  expect_serve_refused(touch("Qwen3-0.6B-Q8_0.gguf"),
                       {"Qwen3-0.6B-Q8_0.gguf", "is a GGUF file", "does not read GGUF",
                        "config.json", "*.safetensors"});
  touch("gguf-repo/Qwen3-0.6B-Q4_K_M.gguf");
  expect_serve_refused((root_ / "gguf-repo").string(),
                       {"holds GGUF files", "Qwen3-0.6B-Q4_K_M.gguf", "*.safetensors"});
}

TEST_F(StartupChecks, ServeSuggestsTheSnapshotOfACacheFolder) {
  const fs::path repo = root_ / "hub" / "models--Qwen--Qwen3-0.6B";
  touch(fs::path("hub/models--Qwen--Qwen3-0.6B/snapshots/c1899de2/config.json"), "{}");
  touch(fs::path("hub/models--Qwen--Qwen3-0.6B/refs/main"), "c1899de2");
  const std::string snapshot = (repo / "snapshots" / "c1899de2").string();
  expect_serve_refused(repo.string(), {"Hugging Face cache folder", "pass " + snapshot});
  expect_serve_refused((root_ / "hub").string(), {"Hugging Face cache root", "pass " + snapshot});
}

TEST_F(StartupChecks, ServeRefusesWeightsLargerThanFreeMemory) {
  const std::string dir = model_folder("huge", kHugeConfig);
  expect_serve_refused(dir, {"the weights of " + dir, "MemAvailable in /proc/meminfo",
                             "nothing was loaded", "smaller model", "--device"});
}

TEST_F(StartupChecks, ServeRefusesAFolderWithoutTokenizerBeforeListening) {
  const std::string dir = model_folder("no-tokenizer", kHugeConfig);
  fs::remove(fs::path(dir) / "tokenizer.json");
  expect_serve_refused(dir, {"tokenizer.json"});
}

TEST_F(StartupChecks, RandomWeightRunsCountTheBytesTheyWouldAllocate) {
  const std::string dir = model_folder("huge", kHugeConfig);
  for (const std::string& cmd :
       {"generate --model " + dir + " --random-weights --tokens 1,2 --max-tokens 1",
        "bench offline --model " + dir +
            " --random-weights --num-prompts 1 --input-len 4 "
            "--output-len 1"}) {
    const CliRun r = syv(cmd);
    EXPECT_NE(r.exit_code, 0) << cmd << "\n" << r.output;
    for (const std::string& part :
         std::vector<std::string>{"the random weights of " + dir, "MemAvailable", "bytes"}) {
      EXPECT_NE(r.output.find(part), std::string::npos) << cmd << "\n" << r.output;
    }
  }
}

TEST_F(StartupChecks, GenerateExplainsGguf) {
  const CliRun r = syv("generate --model " + touch("m.gguf") + " --tokens 1 --max-tokens 1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GGUF"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace syv::testing
