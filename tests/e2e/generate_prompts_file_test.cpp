// `syv generate --prompts-file` end to end on a real Qwen3 fixture: batched output (small pool,
// small token budget, chunking, prefix cache) equals one-by-one output line for line, prefix hits
// show up as cached_tokens, bad input names the line; `syv bench offline` reports tokens/s.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "e2e/cli_run.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using syv::testing::json_lines;

const std::string kModel = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/untied_gqa4_hd24";

std::pair<int, std::string> run(const std::string& cmd, bool with_stderr = false) {
  return syv::testing::run_command(cmd, with_stderr);
}

TEST(GeneratePromptsFile, BatchedEqualsOneByOne) {
  const fs::path file =
      fs::temp_directory_path() / ("syv_prompts_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::mt19937 rng(5);
    std::ofstream out(file);
    std::vector<int> shared(80);
    for (int& t : shared) t = static_cast<int>(rng() % 512);
    for (int i = 0; i < 16; ++i) {
      std::vector<int> tokens = i % 2 ? shared : std::vector<int>{};
      for (int k = 0, n = 1 + static_cast<int>(rng() % 70); k < n; ++k)
        tokens.push_back(static_cast<int>(rng() % 512));
      json j = {{"tokens", tokens}, {"max_tokens", 1 + static_cast<int>(rng() % 24)}};
      if (i == 5) j["n"] = 3;
      if (i == 7) j.update({{"temperature", 0.9}, {"seed", 11}, {"top_p", 0.9}, {"n", 2}});
      out << j.dump() << "\n";
    }
  }
  const std::string base =
      std::string(SYV_BIN) + " generate --model " + kModel + " --prompts-file " + file.string();
  auto [s1, batched] = run(base +
                           " --max-num-seqs 6 --max-batched-tokens 48 --max-prefill-chunk 20 "
                           "--page-size 16 --num-pages 40");
  auto [s2, alone] = run(base + " --one-by-one --no-prefix-caching --kv-cache-mb 16");
  ASSERT_EQ(s1, 0) << batched;
  ASSERT_EQ(s2, 0) << alone;
  const auto a = json_lines(batched), b = json_lines(alone);
  ASSERT_EQ(a.size(), 16u);
  ASSERT_EQ(b.size(), 16u);
  // Every line of `got` has the one-by-one run's tokens, sample by sample.
  const auto expect_same_tokens = [&b](const std::vector<json>& got, const std::string& what) {
    ASSERT_EQ(got.size(), 16u) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].contains("samples")) {
        for (size_t k = 0; k < got[i]["samples"].size(); ++k)
          EXPECT_EQ(got[i]["samples"][k]["tokens"], b[i]["samples"][k]["tokens"])
              << what << ", line " << i << " sample " << k;
      } else {
        EXPECT_EQ(got[i]["tokens"], b[i]["tokens"]) << what << ", line " << i;
      }
    }
  };
  int64_t cached = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["index"], i);
    if (a[i].contains("samples")) {
      ASSERT_EQ(a[i]["samples"].size(), b[i]["samples"].size());
      for (size_t k = 0; k < a[i]["samples"].size(); ++k)
        EXPECT_EQ(a[i]["samples"][k]["tokens"], b[i]["samples"][k]["tokens"])
            << "line " << i << " sample " << k;
    } else {
      EXPECT_EQ(a[i]["tokens"], b[i]["tokens"]) << "line " << i;
      EXPECT_EQ(a[i]["finish_reason"], "length");
    }
    cached += a[i]["cached_tokens"].get<int64_t>();
  }
  EXPECT_GT(cached, 0) << "the shared 80-token prefix should hit the prefix cache";

  // n-gram speculation (verify steps) leaves every line's tokens unchanged, batched and chunked:
  // every sequence drafting every step, and adaptive (the CLI default) with a cost model under
  // which drafting pays (the CPU default switches it off).
  for (const char* adaptive : {"--speculative-adaptive off", "--speculative-cost-knee 8"}) {
    SCOPED_TRACE(adaptive);
    auto [s4, speculated] =
        run(base + " --speculative-method ngram --num-speculative-tokens 3 " + adaptive +
                " --ngram-min 1 --max-num-seqs 6 --max-batched-tokens 48 "
                "--max-prefill-chunk 20 --page-size 16 --num-pages 40",
            /*with_stderr=*/true);
    ASSERT_EQ(s4, 0) << speculated;
    EXPECT_NE(speculated.find("speculative decoding: up to 3 drafts"), std::string::npos)
        << speculated;
    EXPECT_NE(speculated.find(std::string(adaptive).find("off") != std::string::npos
                                  ? "adaptivity off"
                                  : "speculative decoding: adaptive (cost of k drafts"),
              std::string::npos)
        << speculated;
    expect_same_tokens(json_lines(speculated), "speculative");
  }
  // A device pool too small to keep the shared prefix for long and a host tier under it
  // (--host-cache-gb): the same tokens, the tier's size logged; --host-cache-gb 0 turns it off.
  auto [s8, offloaded] = run(base +
                                 " --max-num-seqs 2 --max-batched-tokens 48 --page-size 16 "
                                 "--num-pages 12 --host-cache-gb 0.01",
                             /*with_stderr=*/true);
  ASSERT_EQ(s8, 0) << offloaded;
  EXPECT_NE(offloaded.find("host tier: 873 pages (13968 tokens"), std::string::npos) << offloaded;
  EXPECT_NE(offloaded.find("--host-cache-gb 10.7 MB"), std::string::npos) << offloaded;
  expect_same_tokens(json_lines(offloaded), "host tier");
  auto [s9, no_host] = run(base + " --page-size 16 --num-pages 40 --host-cache-gb 0",
                           /*with_stderr=*/true);
  ASSERT_EQ(s9, 0) << no_host;
  EXPECT_NE(no_host.find("host tier off (--host-cache-gb 0)"), std::string::npos) << no_host;
  // Drafts need a method to propose them: the count alone is refused, not ignored.
  auto [s5, refused] = run(base + " --num-speculative-tokens 3", /*with_stderr=*/true);
  EXPECT_NE(s5, 0);
  EXPECT_NE(refused.find("speculative_method"), std::string::npos) << refused;
  auto [s6, refused_ngram] = run(base + " --ngram-max 3", /*with_stderr=*/true);
  EXPECT_NE(s6, 0);
  EXPECT_NE(refused_ngram.find("--speculative-method"), std::string::npos) << refused_ngram;
  // A draft model with another method is refused, not loaded and ignored.
  auto [s10, refused_draft] =
      run(base + " --speculative-method ngram --num-speculative-tokens 2 --draft-model " + kModel,
          /*with_stderr=*/true);
  EXPECT_NE(s10, 0);
  EXPECT_NE(refused_draft.find("--draft-model needs --speculative-method draft"), std::string::npos)
      << refused_draft;
  // Engine flags act on --prompts-file runs only: without it they are refused, not ignored.
  auto [s7, refused_single] = run(std::string(SYV_BIN) + " generate --model " + kModel +
                                      " --tokens 1,2 --max-tokens 2 --state-dtype bf16",
                                  /*with_stderr=*/true);
  EXPECT_NE(s7, 0);
  EXPECT_NE(refused_single.find("--prompts-file"), std::string::npos) << refused_single;

  {
    std::ofstream out(file);
    out << "{\"tokens\": [1, 2]}\n{\"tokens\": [1, 99999]}\n";
  }
  auto [s3, err] = run(base, /*with_stderr=*/true);
  EXPECT_NE(s3, 0);
  EXPECT_NE(err.find("request 2"), std::string::npos) << err;
  EXPECT_NE(err.find("99999"), std::string::npos) << err;
  fs::remove(file);
}

TEST(BenchOffline, ReportsTokensPerSecond) {
  auto [status, out] = run(std::string(SYV_BIN) + " bench offline --model " + kModel +
                           " --num-prompts 8 --input-len 16 --output-len 8 --json");
  ASSERT_EQ(status, 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["generated_tokens"], 64);
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
}

}  // namespace
