// One sampler: `syv generate --seed S` (the CLI's SingleSequence path) gives exactly the tokens the
// engine (what `syv serve` runs) gives the same request with seed S, on the CPU backend, greedy
// and sampled, and `--prompts-file` (the engine inside the CLI) agrees with both. Different seeds
// give different tokens, so the comparison is not vacuous.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "unit/engine_harness.h"

#include "e2e/cli_run.h"

namespace syv::testing {
namespace {

using nlohmann::json;

const std::string kModel = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/untied_gqa4_hd24";
const std::vector<int32_t> kPrompt = {11, 400, 23, 987, 5, 5, 61, 300, 2, 750};
constexpr int32_t kMaxTokens = 24;

std::pair<int, std::string> run(const std::string& cmd, bool with_stderr = false) {
  return syv::testing::run_command(cmd, with_stderr);
}

std::string token_list(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// `syv generate --tokens ... --json` on the CPU backend.
std::vector<int32_t> cli_tokens(float temperature, uint64_t seed) {
  std::ostringstream cmd;
  cmd << SYV_BIN << " generate --model " << kModel << " --device cpu --tokens "
      << token_list(kPrompt) << " --max-tokens " << kMaxTokens << " --temperature " << temperature
      << " --seed " << seed << " --json";
  auto [status, out] = run(cmd.str());
  EXPECT_EQ(status, 0) << cmd.str() << "\n" << out;
  if (status != 0) return {};
  return json::parse(out)["tokens"].get<std::vector<int32_t>>();
}

// The engine with the request the server builds for {"temperature": T, "seed": S}.
std::vector<int32_t> engine_tokens(Model& model, float temperature, uint64_t seed) {
  Request r;
  r.prompt_ids = kPrompt;
  r.params.max_tokens = kMaxTokens;
  r.params.temperature = temperature;
  r.params.seed = seed;
  const auto out = run_requests(model, scenario_options(16, 64, 2048, 0, true), {r});
  if (out.size() != 1 || out[0].samples.size() != 1) return {};
  return out[0].samples[0].tokens;
}

TEST(GenerateSeed, CliEqualsEngineForTheSameSeed) {
  auto backend = make_cpu_backend();
  auto model = load_model(kModel, *backend);
  ASSERT_TRUE(model.ok()) << model.message();
  std::vector<std::vector<int32_t>> seen;
  for (float temperature : {0.0f, 0.7f, 1.5f}) {
    for (uint64_t seed : {0ull, 11ull, 123456789ull}) {
      if (temperature == 0.0f && seed != 0) continue;
      const std::vector<int32_t> cli = cli_tokens(temperature, seed);
      const std::vector<int32_t> engine = engine_tokens(**model, temperature, seed);
      ASSERT_EQ(cli.size(), static_cast<size_t>(kMaxTokens));
      EXPECT_EQ(cli, engine) << "temperature " << temperature << " seed " << seed;
      if (temperature > 0) seen.push_back(cli);
    }
  }
  // Sampling is live: the three seeds at one temperature do not all agree.
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_FALSE(seen[0] == seen[1] && seen[1] == seen[2]);
  EXPECT_FALSE(seen[3] == seen[4] && seen[4] == seen[5]);
}

TEST(GenerateSeed, PromptsFileEqualsSinglePrompt) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("syv_seed_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    out << json({{"tokens", kPrompt}, {"temperature", 0.9}, {"seed", 42}}).dump() << "\n";
  }
  auto [status, out] =
      run(std::string(SYV_BIN) + " generate --model " + kModel + " --device cpu --max-tokens " +
          std::to_string(kMaxTokens) + " --prompts-file " + file.string());
  std::filesystem::remove(file);
  ASSERT_EQ(status, 0) << out;
  const json line = json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(line["tokens"].get<std::vector<int32_t>>(), cli_tokens(0.9f, 42));
}

TEST(GenerateSeed, DeviceFlagIsParsedAsServeParsesIt) {
  auto [status, out] = run(std::string(SYV_BIN) + " logits --model " + kModel +
                               " --tokens 1,2 --out /dev/null --device tpu",
                           /*with_stderr=*/true);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--device: expected auto, cpu or cuda, found \"tpu\""), std::string::npos)
      << out;
  auto [auto_status, auto_out] = run(std::string(SYV_BIN) + " generate --model " + kModel +
                                     " --tokens 1,2 --max-tokens 2 --device auto --json");
  EXPECT_EQ(auto_status, 0) << auto_out;
}

}  // namespace
}  // namespace syv::testing
