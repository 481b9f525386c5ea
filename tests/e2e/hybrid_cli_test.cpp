// `syv generate` on the hybrid fixtures (tests/fixtures/hybrid/*): the CLI path (load_model ->
// one state slot -> prefill + token-by-token decode) must reproduce transformers' 12 greedy tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

class HybridCli : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridCli, GenerateReproducesGreedyTokens) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/" + GetParam();
  std::ifstream in(dir + "/meta.json");
  ASSERT_TRUE(in.good()) << dir;
  const nlohmann::json meta = nlohmann::json::parse(in);
  const auto tokens = meta["tokens"].get<std::vector<int>>();
  const auto greedy = meta["greedy_tokens"].get<std::vector<int>>();
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  int status = -1;
  const std::string out =
      run(std::string(SYV_BIN) + " generate --model " + dir + " --tokens " + list +
              " --max-tokens " + std::to_string(greedy.size()) + " --json",
          &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("tokens")) << out;
  EXPECT_EQ(j["tokens"].get<std::vector<int>>(), greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridCli,
                         ::testing::Values("q35_r1_lllf", "q35_r2_flfl_tied", "q35_nested_r2",
                                           "qnext_top1_r2", "qnext_top2_r1"));

}  // namespace
