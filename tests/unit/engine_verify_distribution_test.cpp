// Speculative decoding leaves sampled output distributed exactly as the target model says
// (engine/drafter.h: a point-mass draft is accepted by sample-and-compare, which is rejection
// sampling). A chi-square test on a 6-token vocabulary: thousands of sampled requests (T = 1, each
// its own seed) of one prompt, every decode step fed k drafts that always propose one fixed token,
// and the token sampled at the first verify row (the second generated token) counted per first
// token t1. Its target distribution p(. | prompt, t1) comes from the engine's own prompt logprobs
// (the full distribution: top 6 of 6), independently of any verify step. Pearson's statistic,
// summed over the t1 groups, must stay under the chi-square quantile of probability 1 - 1e-6
// (Wilson-Hilferty), and, so that the test is shown to see wrong rules, must exceed it against
// what two wrong acceptance rules would give with the same drafts: "always keep the draft" (the
// token is the draft) and "keep the draft with probability p(draft), else sample from p again"
// (p(draft) inflated to p + (1 - p) p). An engine changed to either rule fails the test (checked
// by hand against the first: 2026-12-03).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "engine/drafter.h"
#include "engine/engine_core.h"
#include "engine/sequence.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

constexpr int32_t kVocab = 6;
constexpr int32_t kDraft = 2;  // the token every draft proposes

// Proposes kDraft at every draft position.
class FixedDrafter : public Drafter {
 public:
  void propose(const Sequence&, int32_t max_tokens, std::vector<int32_t>& out) override {
    out.insert(out.end(), static_cast<size_t>(max_tokens), kDraft);
  }
};

// p(. | prompt + [t1]) for every t1, from prompt logprobs of prompt + [t1, 0] (the last position's
// top-kVocab alternatives are the whole distribution).
std::vector<std::vector<double>> target(Model& model, const std::vector<int32_t>& prompt) {
  std::vector<Request> requests;
  for (int32_t t1 = 0; t1 < kVocab; ++t1) {
    Request r = greedy_request(prompt, 1);
    r.prompt_ids.push_back(t1);
    r.prompt_ids.push_back(0);
    r.params.prompt_logprobs = kVocab;
    requests.push_back(r);
  }
  auto core = EngineCore::create(model, nullptr, scenario_options(16, 64, 4096, 0, false));
  EXPECT_TRUE(core.ok()) << core.message();
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  std::vector<std::vector<double>> p(kVocab, std::vector<double>(kVocab, 0.0));
  for (int32_t t1 = 0; t1 < kVocab; ++t1) {
    const std::vector<PromptLogprob>& lp = h.output(ids[t1]).samples.at(0).prompt_logprobs;
    EXPECT_FALSE(lp.empty());
    if (lp.empty()) continue;
    EXPECT_EQ(lp.back().top.size(), static_cast<size_t>(kVocab));
    double sum = 0;
    for (const TokenLogprob& alt : lp.back().top) {
      p[t1][alt.token_id] = std::exp(static_cast<double>(alt.logprob));
      sum += p[t1][alt.token_id];
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "t1 " << t1;
  }
  return p;
}

// Pearson's statistic of counts[t1][t2] against probabilities q[t1][t2], summed over the t1 with
// samples; `df` gets the degrees of freedom (kVocab - 1 per such t1).
double chi_square(const std::vector<std::vector<int>>& counts,
                  const std::vector<std::vector<double>>& q, int* df) {
  double stat = 0;
  *df = 0;
  for (int32_t t1 = 0; t1 < kVocab; ++t1) {
    int n = 0;
    for (int c : counts[t1]) n += c;
    if (n == 0) continue;
    *df += kVocab - 1;
    for (int32_t v = 0; v < kVocab; ++v) {
      const double expected = std::max(1e-9, n * q[t1][v]);
      const double d = counts[t1][v] - expected;
      stat += d * d / expected;
    }
  }
  return stat;
}

// The chi-square quantile of probability 1 - 1e-6 for `df` degrees of freedom (Wilson-Hilferty;
// z = 4.753).
double chi_square_limit(int df) {
  const double k = df, z = 4.753, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

TEST(EngineVerifyDistribution, SampledTokensFollowTheTargetDistribution) {
  FakeModel model(kVocab);
  const std::vector<int32_t> prompt = {1, 4, 0, 3, 5};
  const std::vector<std::vector<double>> p = target(model, prompt);
  for (int32_t k : {1, 3}) {
    SCOPED_TRACE("k " + std::to_string(k));
    std::vector<Request> requests;
    for (int i = 0; i < 4000; ++i) {
      Request r;
      r.prompt_ids = prompt;
      r.params.temperature = 1.0f;
      r.params.seed = 77 + static_cast<uint64_t>(i);
      r.params.max_tokens = 2 + k;
      r.params.ignore_eos = true;
      requests.push_back(r);
    }
    EngineOptions o = scenario_options(16, 4096, 8192, 0, true, 512);
    o.num_speculative_tokens = k;
    const RunResult spec = run(model, o, requests, std::make_unique<FixedDrafter>());
    ASSERT_EQ(spec.tokens.size(), requests.size());
    EXPECT_GT(spec.stats.accepted_tokens, 0u) << "some drafts must be kept";
    EXPECT_LT(spec.stats.accepted_tokens, spec.stats.draft_tokens) << "and some rejected";
    std::vector<std::vector<int>> counts(kVocab, std::vector<int>(kVocab, 0));
    for (const std::vector<int32_t>& t : spec.tokens) {
      ASSERT_GE(t.size(), 2u);
      ++counts[t[0]][t[1]];
    }
    int df = 0;
    const double stat = chi_square(counts, p, &df);
    const double limit = chi_square_limit(df);
    EXPECT_LT(stat, limit) << "chi-square " << stat << " on " << df << " degrees of freedom";
    // The wrong rules' distributions of the same token, which the counts must reject.
    std::vector<std::vector<double>> always(kVocab, std::vector<double>(kVocab, 0.0));
    std::vector<std::vector<double>> twice = p;
    for (int32_t t1 = 0; t1 < kVocab; ++t1) {
      always[t1][kDraft] = 1.0;
      const double pd = p[t1][kDraft];
      for (int32_t v = 0; v < kVocab; ++v) twice[t1][v] = (1.0 - pd) * p[t1][v];
      twice[t1][kDraft] = pd + (1.0 - pd) * pd;
    }
    // Each statistic before its limit: the order in which a call's arguments are evaluated is
    // unspecified (GCC took the limit of df 0 first: NaN).
    int df_always = 0, df_twice = 0;
    const double stat_always = chi_square(counts, always, &df_always);
    const double stat_twice = chi_square(counts, twice, &df_twice);
    EXPECT_GT(stat_always, chi_square_limit(df_always));
    EXPECT_GT(stat_twice, chi_square_limit(df_twice));
  }
}

}  // namespace
}  // namespace syv::testing
