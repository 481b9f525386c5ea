// SamplingParams::prompt_logprobs on the CPU engine against Hugging Face transformers: the golden
// fixtures (tests/fixtures/qwen3/*, a Qwen3.5 one of tests/fixtures/hybrid/*: the prompt and
// transformers' logits of every position)
// give the reference log-softmax, and every way the engine can compute the prompt must report the
// same logprobs, ranks and alternatives: whole, in chunks, a few rows per step, after a prefix-
// cache hit on the same prompt (which must not be taken), batched with other requests, preempted,
// with n = 2, and with max_tokens 0 (scored, nothing generated).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

struct Reference {
  std::vector<int32_t> tokens;
  int32_t vocab = 0;
  std::vector<float> logprobs;  // [T, vocab]: log-softmax of transformers' logits
};

// `name`: "qwen3/<fixture>" (expected.json) or "hybrid/<fixture>" (meta.json); both hold the
// tokens and vocab_size beside logits.bin [T, vocab].
Reference read_reference(const std::string& name) {
  Reference r;
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + name;
  std::ifstream in(dir + (name.rfind("hybrid/", 0) == 0 ? "/meta.json" : "/expected.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  r.tokens = j["tokens"].get<std::vector<int32_t>>();
  r.vocab = j["vocab_size"].get<int32_t>();
  std::vector<float> logits(r.tokens.size() * static_cast<size_t>(r.vocab));
  std::ifstream bin(dir + "/logits.bin", std::ios::binary);
  bin.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
  EXPECT_EQ(bin.gcount(), static_cast<std::streamsize>(logits.size() * 4));
  r.logprobs.resize(logits.size());
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    const float* row = logits.data() + t * static_cast<size_t>(r.vocab);
    double mx = row[0], sum = 0;
    for (int32_t v = 0; v < r.vocab; ++v) mx = std::max<double>(mx, row[v]);
    for (int32_t v = 0; v < r.vocab; ++v) sum += std::exp(row[v] - mx);
    for (int32_t v = 0; v < r.vocab; ++v)
      r.logprobs[t * static_cast<size_t>(r.vocab) + static_cast<size_t>(v)] =
          static_cast<float>(row[v] - mx - std::log(sum));
  }
  return r;
}

constexpr float kTol = 2e-3f;  // fp32 CPU vs transformers (the golden test's rel. L2 is 1e-4)
constexpr int32_t kTop = 5;

// Every prompt position 1..T-1: the token, its logprob, its rank, the top alternatives.
void expect_matches(const Reference& ref, const std::vector<PromptLogprob>& got,
                    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.size(), ref.tokens.size() - 1);
  for (size_t p = 1; p < ref.tokens.size(); ++p) {
    const PromptLogprob& e = got[p - 1];
    const float* want = ref.logprobs.data() + (p - 1) * static_cast<size_t>(ref.vocab);
    const int32_t token = ref.tokens[p];
    EXPECT_EQ(e.token.token_id, token) << "position " << p;
    EXPECT_NEAR(e.token.logprob, want[token], kTol) << "position " << p;
    // The rank where no other logprob lies within the tolerance of the token's.
    int32_t above = 0;
    bool near_tie = false;
    for (int32_t v = 0; v < ref.vocab; ++v) {
      if (v == token) continue;
      above += want[v] > want[token];
      near_tie = near_tie || std::fabs(want[v] - want[token]) < kTol;
    }
    if (!near_tie) {
      EXPECT_EQ(e.rank, 1 + above) << "position " << p;
    }
    ASSERT_EQ(static_cast<int32_t>(e.top.size()), kTop) << "position " << p;
    std::vector<int32_t> order(static_cast<size_t>(ref.vocab));
    for (int32_t v = 0; v < ref.vocab; ++v) order[static_cast<size_t>(v)] = v;
    std::partial_sort(order.begin(), order.begin() + kTop, order.end(),
                      [&](int32_t a, int32_t b) { return want[a] > want[b]; });
    for (int32_t i = 0; i < kTop; ++i) {
      EXPECT_NEAR(e.top[static_cast<size_t>(i)].logprob, want[order[static_cast<size_t>(i)]], kTol)
          << "position " << p << ", alternative " << i;
      if (i == 0 ||
          want[order[static_cast<size_t>(i - 1)]] - want[order[static_cast<size_t>(i)]] > kTol) {
        EXPECT_EQ(e.top[static_cast<size_t>(i)].token_id, order[static_cast<size_t>(i)])
            << "position " << p << ", alternative " << i;
      }
    }
  }
}

Request scored(const Reference& ref, int32_t max_tokens) {
  Request r = greedy_request(ref.tokens, max_tokens);
  r.params.prompt_logprobs = kTop;
  r.params.ignore_eos = true;
  return r;
}

class PromptLogprobs : public ::testing::TestWithParam<const char*> {};

TEST_P(PromptLogprobs, EveryScheduleGivesTransformersLogprobs) {
  const std::string name = GetParam();
  const Reference ref = read_reference(name);
  LoadedModel m = load_cpu_fixture(name);
  ASSERT_NE(m.model, nullptr);
  const int32_t T = static_cast<int32_t>(ref.tokens.size());

  struct Scenario {
    std::string what;
    EngineOptions options;
    int32_t rows = 128;  // max_prompt_logprob_rows
  };
  const std::vector<Scenario> scenarios = {
      {"whole prompt in one step", scenario_options(16, 64, 2048, 0, true)},
      {"chunks of 7", scenario_options(16, 64, 2048, 7, true)},
      {"budget of 5 tokens a step", scenario_options(16, 64, 5, 0, true)},
      {"3 prompt rows a step", scenario_options(16, 64, 2048, 0, true), 3},
      {"1 prompt row a step, chunks of 4", scenario_options(16, 64, 2048, 4, true), 1},
      {"no prefix caching", scenario_options(16, 64, 2048, 0, false)},
  };
  for (const Scenario& sc : scenarios) {
    EngineOptions o = sc.options;
    o.max_prompt_logprob_rows = sc.rows;
    // The prompt alone, scored and continued.
    std::vector<RequestOutput> out = run_requests(*m.model, o, {scored(ref, 3)});
    ASSERT_EQ(out.size(), 1u);
    expect_matches(ref, out[0].samples[0].prompt_logprobs, sc.what);
    EXPECT_EQ(out[0].samples[0].tokens.size(), 3u);

    // After the same prompt filled the cache: no hit is taken, the numbers are the same.
    set_log_level(LogLevel::WARN);
    auto core = EngineCore::create(*m.model, nullptr, o);
    ASSERT_TRUE(core.ok()) << core.message();
    Harness h(std::move(core).value());
    const uint64_t warm = h.submit(greedy_request(ref.tokens, 2));
    h.run();
    const uint64_t again = h.submit(scored(ref, 0));
    // Batched with others, one of them sharing the prefix.
    std::vector<int32_t> other(ref.tokens.begin(), ref.tokens.begin() + T / 2);
    other.push_back(1);
    const uint64_t other_id = h.submit(greedy_request(other, 4));
    const uint64_t short_id = h.submit(greedy_request({5, 6, 7}, 4));
    h.run();
    h.expect_no_leaks();
    EXPECT_EQ(h.output(warm).samples[0].finish_reason, "length");
    const SampleOutput& s = h.output(again).samples[0];
    expect_matches(ref, s.prompt_logprobs, sc.what + ", after a cache fill, max_tokens 0");
    EXPECT_EQ(s.cached_tokens, 0);
    // max_tokens 0: one event, no token, "length".
    EXPECT_TRUE(s.tokens.empty());
    EXPECT_EQ(s.events, 1);
    EXPECT_EQ(s.finish_reason, "length");
    EXPECT_EQ(h.output(other_id).samples[0].tokens.size(), 4u);
    EXPECT_EQ(h.output(short_id).samples[0].tokens.size(), 4u);
  }
}

TEST_P(PromptLogprobs, PreemptedAndSampledTwice) {
  const std::string name = GetParam();
  const Reference ref = read_reference(name);
  LoadedModel m = load_cpu_fixture(name);
  ASSERT_NE(m.model, nullptr);
  // Pages of 4 tokens, 6 beyond the scored prompt's: it and a long decode cannot both fit, so one
  // is preempted (recomputed) while the prompt is half reported.
  const int32_t T = static_cast<int32_t>(ref.tokens.size());
  EngineOptions o = scenario_options(4, T / 4 + 6, 6, 0, true, /*max_seqs=*/2);
  o.max_prompt_logprob_rows = 2;
  Request r = scored(ref, 2);
  r.params.n = 2;
  Request hog = greedy_request({9, 8, 7, 6, 5}, 40);
  hog.params.ignore_eos = true;
  EngineStats stats;
  std::vector<RequestOutput> out = run_requests(*m.model, o, {hog, r}, &stats);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].samples.size(), 2u);
  expect_matches(ref, out[1].samples[0].prompt_logprobs, "preempted, n = 2");
  EXPECT_TRUE(out[1].samples[1].prompt_logprobs.empty()) << "only sample 0 carries them";
  EXPECT_EQ(out[1].samples[1].tokens.size(), 2u);
  EXPECT_GT(stats.preemptions, 0u) << "the scenario no longer preempts";
}

INSTANTIATE_TEST_SUITE_P(GoldenFixtures, PromptLogprobs,
                         ::testing::Values("qwen3/tied_gqa2", "qwen3/untied_gqa4_hd24",
                                           "hybrid/q35_r1_lllf"));

TEST(PromptLogprobsValidation, Ranges) {
  SamplingParams p;
  p.prompt_logprobs = 21;
  EXPECT_NE(p.validate().message().find("prompt_logprobs"), std::string::npos);
  p.prompt_logprobs = -1;
  p.max_tokens = -1;
  EXPECT_NE(p.validate().message().find("max_tokens"), std::string::npos);
  p.max_tokens = 0;
  EXPECT_TRUE(p.validate().ok());
}

// The engine's prompt-logprob rows a step: as set, else 128; a GPU's memory plan gives 0.25% of the
// device's memory in f32 logits rows, 16 .. 128.
TEST(PromptLogprobsValidation, RowsFromTheDeviceMemory) {
  EngineOptions o;
  EXPECT_EQ(o.max_prompt_logprob_rows, 0);
  EXPECT_EQ(prompt_logprob_rows(o), 128);
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(planned_prompt_logprob_rows(o, 24 * gib, 248320), 64);   // Qwen3.5, a 24 GiB card
  EXPECT_EQ(planned_prompt_logprob_rows(o, 24 * gib, 151936), 106);  // Qwen3
  EXPECT_EQ(planned_prompt_logprob_rows(o, 80 * gib, 248320), 128);
  EXPECT_EQ(planned_prompt_logprob_rows(o, 2 * gib, 248320), 16);
  o.max_prompt_logprob_rows = 3;
  EXPECT_EQ(prompt_logprob_rows(o), 3);
  EXPECT_EQ(planned_prompt_logprob_rows(o, 24 * gib, 248320), 3);
}

}  // namespace
}  // namespace syv::testing
