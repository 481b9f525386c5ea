// `syv eval-ppl` on the trained tiny models (models/tiny-*) against transformers' perplexity of
// the held-out sample (tests/fixtures/tiny/<model>/meta.json "sample": tools/train/eval.py's
// window_nll at context 256): the same windows, tokens scored and, within 0.5%, the same ppl
// (measured: ~1e-7 relative on the CPU); --kl-reference-model (a folder against itself: zero;
// its fp8 copy against it: the copy's ppl and a small positive KL); and the refusals of bad
// arguments.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
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

json eval_json(const std::string& flags) {
  auto [status, out] = run_command(std::string(SYV_BIN) + " eval-ppl --text-file " + kSample +
                                   " --context 256 --json " + flags);
  EXPECT_EQ(status, 0) << flags << "\n" << out;
  return status == 0 ? json::parse(out) : json::object();
}

TEST(TinyEvalPplCli, KlReferenceModelScoresOneFolderAgainstAnother) {
  const std::string draft = kRoot + "/models/tiny-draft";
  const json same = eval_json("--model " + draft + " --kl-reference-model " + draft);
  ASSERT_TRUE(same.contains("mean_kl")) << same.dump();
  EXPECT_EQ(same.at("mean_kl").get<double>(), 0.0);  // the same weights: identical logits
  EXPECT_EQ(same.at("ppl").get<double>(), same.at("reference_ppl").get<double>());
  EXPECT_EQ(same.at("kl_reference_model"), draft);

  namespace fs = std::filesystem;
  const fs::path fp8 =
      fs::path(::testing::TempDir()) / ("syv_eval_kl_model_" + std::to_string(::getpid()));
  auto [qs, qt] = run_command(std::string(SYV_BIN) + " quantize --format fp8 --in " + draft +
                              " --out " + fp8.string());
  ASSERT_EQ(qs, 0) << qt;
  const json plain = eval_json("--model " + fp8.string());
  const json vs = eval_json("--model " + fp8.string() + " --kl-reference-model " + draft);
  fs::remove_all(fp8);
  ASSERT_TRUE(vs.contains("mean_kl")) << vs.dump();
  EXPECT_EQ(vs.at("ppl"), plain.at("ppl"));  // the reference changes nothing of this run
  EXPECT_NEAR(vs.at("reference_ppl").get<double>(), 23.55197, 1e-3);  // tiny-draft's own
  EXPECT_NE(vs.at("ppl").get<double>(), vs.at("reference_ppl").get<double>());
  const double kl = vs.at("mean_kl").get<double>();
  EXPECT_GT(kl, 0.0);
  EXPECT_LT(kl, 0.05);  // fp8 weights: measured 0.0046 nats
}

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
  // Another tokenizer's folder (vocab 512 against 8192) cannot be the reference.
  auto [s4, t4] = run_command(base + " --text-file " + kSample + " --kl-reference-model " + kRoot +
                                  "/tests/fixtures/qwen3/tied_gqa2",
                              true);
  EXPECT_NE(s4, 0);
  EXPECT_NE(t4.find("--kl-reference-model: vocab_size"), std::string::npos) << t4;
  auto [s5, t5] =
      run_command(base + " --text-file " + kSample + " --kl-reference auto --kl-reference-model " +
                      kRoot + "/models/tiny-draft",
                  true);
  EXPECT_NE(s5, 0);
  EXPECT_NE(t5.find("--kl-reference"), std::string::npos) << t5;
}

}  // namespace
