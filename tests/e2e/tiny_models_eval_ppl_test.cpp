// `syv eval-ppl` on the trained tiny models (models/tiny-*) against transformers' perplexity of
// the held-out sample (tests/fixtures/tiny/<model>/meta.json "sample": tools/train/eval.py's
// window_nll at context 256): the same windows, tokens scored and, within 0.5%, the same ppl
// (measured: ~1e-7 relative on the CPU); and the refusals of bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e/cli_run.h"

namespace {

using json = nlohmann::json;
using syv::testing::run_command;

const std::string kRoot = SYV_SOURCE_DIR;
const std::string kSample = kRoot + "/tests/fixtures/tiny/heldout_sample.txt";

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in.good() ? json::parse(in) : json();
}

class TinyEvalPpl : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyEvalPpl, ReproducesTransformersPerplexity) {
  const json want =
      read_json(kRoot + "/tests/fixtures/tiny/" + GetParam() + "/meta.json")["sample"];
  const int64_t context = want.at("context").get<int64_t>();
  auto [status, text] =
      run_command(std::string(SYV_BIN) + " eval-ppl --model " + kRoot + "/models/" + GetParam() +
                  " --text-file " + kSample + " --context " + std::to_string(context) + " --json");
  ASSERT_EQ(status, 0) << text;
  const json got = json::parse(text);
  const size_t tokens =
      read_json(kRoot + "/tests/fixtures/tiny/heldout_sample_tokens.json")["tokens"].size();
  EXPECT_EQ(got.at("tokens").get<size_t>(), tokens);
  EXPECT_EQ(got.at("tokens_scored").get<int64_t>(), want.at("tokens_scored").get<int64_t>());
  EXPECT_EQ(got.at("windows").get<int64_t>(), (static_cast<int64_t>(tokens) - 2) / context + 1);
  EXPECT_EQ(got.at("context").get<int64_t>(), context);
  EXPECT_EQ(got.at("device").get<std::string>(), "cpu");
  const double ppl = got.at("ppl").get<double>(), ref = want.at("ppl").get<double>();
  EXPECT_LE(std::abs(ppl / ref - 1.0), 0.005) << "syv " << ppl << ", transformers " << ref;
  std::printf("  %s: ppl %.5f (transformers %.5f, rel diff %.1e) over %lld tokens\n",
              GetParam().c_str(), ppl, ref, std::abs(ppl / ref - 1.0),
              static_cast<long long>(got.at("tokens_scored").get<int64_t>()));
}

INSTANTIATE_TEST_SUITE_P(Models, TinyEvalPpl,
                         ::testing::Values("tiny-draft", "tiny-dense", "tiny-hybrid"));

TEST(TinyEvalPplCli, RefusesBadArgumentsByName) {
  const std::string base =
      std::string(SYV_BIN) + " eval-ppl --model " + kRoot + "/models/tiny-draft";
  auto [s1, t1] = run_command(base + " --text-file " + kSample + " --context 1", true);
  EXPECT_NE(s1, 0);
  EXPECT_NE(t1.find("--context: expected >= 2, found 1"), std::string::npos) << t1;
  auto [s2, t2] = run_command(base + " --text-file " + kSample + " --context 5000", true);
  EXPECT_NE(s2, 0);
  EXPECT_NE(t2.find("exceeds the model's max_position_embeddings 4096"), std::string::npos) << t2;
  auto [s3, t3] = run_command(base + " --text-file /nonexistent/text.txt", true);
  EXPECT_NE(s3, 0);
  EXPECT_NE(t3.find("--text-file \"/nonexistent/text.txt\": cannot open"), std::string::npos) << t3;
}

}  // namespace
