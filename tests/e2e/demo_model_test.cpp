// The CLI around the model, end to end: `syv demo-model` writes a folder that `syv generate` and
// `syv inspect` accept, generation is deterministic, and `syv inspect` counts what the files hold.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kTokenizer = std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";

// Runs a command; returns (exit status, stdout).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  return {pclose(pipe), out};
}

TEST(DemoModel, WritesAModelThatGeneratesAndInspects) {
  if (!fs::exists(kTokenizer + "/tokenizer.json")) GTEST_SKIP() << "no tokenizer at " << kTokenizer;
  const fs::path dir = fs::temp_directory_path() / ("syv_demo_model_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string syv = SYV_BIN;
  ASSERT_EQ(run(syv + " demo-model --tokenizer " + kTokenizer + " --out " + dir.string()).first, 0);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;

  const std::string gen = syv + " generate --model " + dir.string() +
                          " --prompt 'Hello from syv' --max-tokens 4 --json";
  auto [status, out] = run(gen);
  ASSERT_EQ(status, 0) << gen;
  nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_GE(j["tokens"].size(), 1u);
  EXPECT_LE(j["tokens"].size(), 4u);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_EQ(run(gen).second, out) << "greedy generation is deterministic";

  auto [istatus, iout] = run(syv + " inspect --json --model " + dir.string());
  ASSERT_EQ(istatus, 0);
  nlohmann::json info = nlohmann::json::parse(iout);
  // embed 151936x64 + 2 layers x (q 128x64 + k,v 64x64 + o 64x128 + norms 2x64 + 2x32
  // + gate,up 128x64 + down 64x128) + final norm 64.
  const int64_t layer = 128 * 64 + 2 * 64 * 64 + 64 * 128 + 2 * 64 + 2 * 32 + 3 * 128 * 64;
  EXPECT_EQ(info["parameters"].get<int64_t>(), 151936 * 64 + 2 * layer + 64);
  EXPECT_EQ(info["kv_bytes_per_token_bf16"].get<int64_t>(), 2 * 2 * 2 * 32 * 2);
  EXPECT_EQ(info["status"], "servable");
  fs::remove_all(dir);
}

}  // namespace
