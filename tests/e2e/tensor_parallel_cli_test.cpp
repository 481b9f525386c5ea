// `--tensor-parallel-size N` (`-tp N`) from the command line on the CPU backend, where the ranks
// are simulated (HostTpGroup): `syv generate` gives the greedy tokens of one rank on the bundled
// tiny models, one prompt (SingleSequence, which binds its cache store before every step) and a
// prompts file through the engine (batched, chunked, prefix hits: the hybrid's checkpoints on
// every rank's mirrored store; with a host tier too), MTP speculation with the head split; what
// tensor parallelism refuses is refused by the flags' names before anything loads.
#include <gtest/gtest.h>
#include <unistd.h>

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
using syv::testing::run_command;

const std::string kRoot = SYV_SOURCE_DIR;
const std::string kDense = kRoot + "/models/tiny-dense";    // 4 query / 2 KV heads
const std::string kHybrid = kRoot + "/models/tiny-hybrid";  // 2 query heads, 4 GDN value heads

// `syv generate ... --json`'s tokens.
std::vector<int> generated(const std::string& args) {
  auto [status, out] = run_command(std::string(SYV_BIN) + " generate --device cpu " + args +
                                   " --max-tokens 24 --json");
  EXPECT_EQ(status, 0) << args << "\n" << out;
  const std::vector<json> lines = json_lines(out);
  if (lines.size() != 1) {
    ADD_FAILURE() << args << ": expected one JSON line\n" << out;
    return {};
  }
  return lines[0].at("tokens").get<std::vector<int>>();
}

TEST(TensorParallelCli, GenerateGivesOneRanksGreedyTokens) {
  for (const std::string& model : {kDense, kHybrid}) {
    SCOPED_TRACE(model);
    const std::string prompt = "--model " + model + " --prompt 'Once upon a time, a small'";
    const std::vector<int> one = generated(prompt);
    ASSERT_EQ(one.size(), 24u);
    EXPECT_EQ(generated(prompt + " --tensor-parallel-size 2"), one);
    EXPECT_EQ(generated(prompt + " -tp 2"), one) << "vLLM's short form";
    EXPECT_EQ(generated(prompt + " -tp=2"), one);
  }
  // 2 KV heads over 4 ranks: each KV head replicated on two ranks.
  EXPECT_EQ(generated("--model " + kDense + " --tokens 5,6,7,8,9 --tensor-parallel-size 4"),
            generated("--model " + kDense + " --tokens 5,6,7,8,9"));
}

TEST(TensorParallelCli, PromptsFileThroughTheEngineEqualsOneRank) {
  const fs::path file =
      fs::temp_directory_path() / ("syv_tp_prompts_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::mt19937 rng(3);
    std::ofstream out(file);
    std::vector<int> shared(80);
    for (int& t : shared) t = static_cast<int>(rng() % 8000);
    for (int i = 0; i < 8; ++i) {
      std::vector<int> tokens = i % 2 ? shared : std::vector<int>{};
      for (int k = 0, n = 1 + static_cast<int>(rng() % 40); k < n; ++k)
        tokens.push_back(static_cast<int>(rng() % 8000));
      out << json{{"tokens", tokens}, {"max_tokens", 4 + static_cast<int>(rng() % 12)}}.dump()
          << "\n";
    }
  }
  for (const std::string& model : {kDense, kHybrid}) {
    SCOPED_TRACE(model);
    const std::string base = std::string(SYV_BIN) + " generate --device cpu --model " + model +
                             " --prompts-file " + file.string() +
                             " --max-num-seqs 3 --max-batched-tokens 48 --max-prefill-chunk 20 "
                             "--page-size 16";
    auto [s1, one] = run_command(base + " --host-cache-gb 0");
    ASSERT_EQ(s1, 0) << one;
    auto [s2, split] = run_command(base + " --host-cache-gb 0 --tensor-parallel-size 2", true);
    ASSERT_EQ(s2, 0) << split;
    // With a host tier (every rank's part of a page in one entry: kv/cache_store.h).
    auto [s3, tier] = run_command(base + " -tp 2 --host-cache-gb 0.01", true);
    ASSERT_EQ(s3, 0) << tier;
    EXPECT_NE(tier.find("engine: host tier: "), std::string::npos) << tier;
    const std::vector<json> c = json_lines(tier);
    ASSERT_EQ(c.size(), 8u);
    for (size_t i = 0; i < c.size(); ++i)
      EXPECT_EQ(c[i].at("tokens"), json_lines(one)[i].at("tokens"));
    const std::vector<json> a = json_lines(one), b = json_lines(split);
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), a.size());
    int cached = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(b[i].at("tokens"), a[i].at("tokens")) << "line " << i;
      EXPECT_EQ(b[i].at("cached_tokens"), a[i].at("cached_tokens")) << "line " << i;
      cached += a[i].at("cached_tokens").get<int>();
    }
    EXPECT_GT(cached, 0) << "the scenario takes prefix hits";
    // The start-up log says what was chosen.
    EXPECT_NE(split.find("tensor parallel: 2 ranks simulated"), std::string::npos) << split;
  }
  fs::remove(file);
}

// The MTP head split over 2 ranks drafts what one rank's drafts: the same tokens (those of plain
// decoding) and the same drafts accepted.
TEST(TensorParallelCli, MtpHeadSplitDraftsAsOneRank) {
  const fs::path file =
      fs::temp_directory_path() / ("syv_tp_mtp_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    for (const char* p : {"Once upon a time, a small", "The little dog ran", "One day, Lily"})
      out << json{{"prompt", p}, {"max_tokens", 20}}.dump() << "\n";
  }
  const std::string base = std::string(SYV_BIN) + " generate --device cpu --model " + kHybrid +
                           " --prompts-file " + file.string() +
                           " --max-num-seqs 2 --host-cache-gb 0";
  // Adaptivity off: the CPU's cost model would drop every draft of the tiny model.
  const std::string mtp =
      " --speculative-method mtp --num-speculative-tokens 2 --speculative-adaptive off";
  auto [s0, plain] = run_command(base);
  ASSERT_EQ(s0, 0) << plain;
  auto [s1, one] = run_command(base + mtp);
  ASSERT_EQ(s1, 0) << one;
  auto [s2, split] = run_command(base + mtp + " -tp 2", true);
  ASSERT_EQ(s2, 0) << split;
  const std::vector<json> p = json_lines(plain), a = json_lines(one), b = json_lines(split);
  ASSERT_EQ(p.size(), 3u);
  ASSERT_EQ(a.size(), p.size());
  ASSERT_EQ(b.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(a[i].at("tokens"), p[i].at("tokens")) << "line " << i;
    EXPECT_EQ(b[i].at("tokens"), p[i].at("tokens")) << "line " << i;
  }
  fs::remove(file);
  // The same drafts accepted (bench offline's counters), and some are: the head ran.
  const std::string bench = std::string(SYV_BIN) + " bench offline --device cpu --model " +
                            kHybrid + " --num-prompts 3 --input-len 16 --output-len 24 " +
                            "--host-cache-gb 0 --json" + mtp;
  auto [s3, r1] = run_command(bench);
  ASSERT_EQ(s3, 0) << r1;
  auto [s4, r2] = run_command(bench + " -tp 2");
  ASSERT_EQ(s4, 0) << r2;
  const std::vector<json> j1 = json_lines(r1), j2 = json_lines(r2);
  ASSERT_FALSE(j1.empty());
  ASSERT_FALSE(j2.empty());
  EXPECT_GT(j1.back().at("accepted_tokens").get<int64_t>(), 0);
  EXPECT_EQ(j2.back().at("accepted_tokens"), j1.back().at("accepted_tokens"));
  EXPECT_EQ(j2.back().at("draft_tokens"), j1.back().at("draft_tokens"));
}

TEST(TensorParallelCli, RefusalsNameTheFlag) {
  const std::string generate = std::string(SYV_BIN) + " generate --device cpu --model " + kDense;
  auto [s1, t1] = run_command(generate + " --tokens 1,2 --tensor-parallel-size 3", true);
  EXPECT_NE(s1, 0);
  EXPECT_NE(t1.find("--tensor-parallel-size 3: config.json: num_attention_heads = 4 is not "
                    "divisible by the tensor parallel size 3"),
            std::string::npos)
      << t1;
  auto [s2, t2] = run_command(generate + " --tokens 1,2 --tensor-parallel-size 0", true);
  EXPECT_NE(s2, 0);
  EXPECT_NE(t2.find("--tensor-parallel-size"), std::string::npos) << t2;
  // --help explains it.
  auto [s6, t6] = run_command(std::string(SYV_BIN) + " serve --help");
  EXPECT_EQ(s6, 0);
  EXPECT_NE(t6.find("--tensor-parallel-size"), std::string::npos) << t6;
  EXPECT_NE(t6.find("-tp N"), std::string::npos) << t6;
}

}  // namespace
