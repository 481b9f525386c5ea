// logit_bias and the min_tokens mask in the host Sampler: sampling with a bias equals sampling the
// row with the bias already added (same seed, every filter), a mask is never left while it holds
// and is lifted once min_tokens tokens are generated, and the engine's parameter checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine/device_sampling.h"
#include "engine/sampler.h"

namespace syv {
namespace {

std::vector<float> random_logits(uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = dist(rng);
  return l;
}

TEST(SamplerBias, BiasedSamplingEqualsSamplingThePreBiasedRow) {
  const int32_t vocab = 300;
  const auto logits = random_logits(1, vocab);
  for (int config = 0; config < 4; ++config) {
    SamplingParams p;
    p.temperature = config == 0 ? 0.0f : 0.9f;
    if (config == 2) p.top_k = 20;
    if (config == 3) p.top_p = 0.8f;
    p.presence_penalty = 0.5f;  // penalties apply after the bias
    p.logit_bias = {{3, 8.0f}, {17, -100.0f}, {250, 2.5f}, {299, 100.0f}};
    SamplingParams plain = p;
    plain.logit_bias.clear();
    std::vector<float> biased = logits;
    for (const auto& [t, b] : p.logit_bias) biased[static_cast<size_t>(t)] += b;
    Sampler a, b;
    SamplerState sa(sample_seed(7, config)), sb(sample_seed(7, config));
    for (int i = 0; i < 300; ++i) {
      const int32_t ta = a.sample(logits.data(), vocab, p, sa).token_id;
      const int32_t tb = b.sample(biased.data(), vocab, plain, sb).token_id;
      ASSERT_EQ(ta, tb) << "config " << config << " draw " << i;
      ASSERT_NE(ta, 17) << "a -100 bias makes a token practically impossible";
    }
  }
}

TEST(SamplerBias, ABigBiasWinsGreedyAndLogprobsStayRaw) {
  const auto logits = random_logits(2, 100);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.logit_bias = {{42, 100.0f}};
  Sampler sampler;
  SamplerState state;
  const SampleResult r = sampler.sample(logits.data(), 100, p, state);
  EXPECT_EQ(r.token_id, 42);
  // The reported logprob is of the model's row, before the bias (as vLLM reports by default).
  double sum = 0;
  const float m = *std::max_element(logits.begin(), logits.end());
  for (float l : logits) sum += std::exp(static_cast<double>(l - m));
  ASSERT_TRUE(r.logprob.has_value());
  EXPECT_NEAR(r.logprob->logprob, logits[42] - m - std::log(sum), 1e-4);
}

TEST(SamplerBias, StopIdsAreMaskedUntilMinTokensAreGenerated) {
  const int32_t vocab = 50;
  std::vector<float> logits(vocab, 0.0f);
  logits[7] = 30.0f;  // the stop token: greedy's pick, and nearly all the mass when sampled
  logits[9] = 29.0f;
  for (float temperature : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.min_tokens = 3;
    Sampler sampler;
    SamplerState state(11);
    state.stop_ids = {7, 9};
    for (int i = 0; i < 3; ++i) {
      const int32_t t = sampler.sample(logits.data(), vocab, p, state).token_id;
      EXPECT_NE(t, 7) << "token " << i;
      EXPECT_NE(t, 9) << "token " << i;
    }
    EXPECT_EQ(state.num_generated, 3);
    if (temperature == 0.0f) {
      EXPECT_EQ(sampler.sample(logits.data(), vocab, p, state).token_id, 7) << "mask lifted";
    }
  }
  // Without stop ids (ignore_eos and none given) min_tokens changes nothing.
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 3;
  SamplerState state;
  EXPECT_FALSE(biased_or_masked(p, state));
  Sampler sampler;
  EXPECT_EQ(sampler.sample(logits.data(), vocab, p, state).token_id, 7);
}

TEST(SamplerBias, BiasAndMinTokensTakeTheHostPath) {
  SamplingParams p;
  EXPECT_FALSE(needs_host_sampling(p));
  p.logit_bias = {{1, 1.0f}};
  EXPECT_TRUE(needs_host_sampling(p));
  p = {};
  p.min_tokens = 1;
  EXPECT_TRUE(needs_host_sampling(p));
}

TEST(SamplerBias, ValidateNamesTheField) {
  SamplingParams p;
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_NE(p.validate().message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{1, 100.5f}};
  EXPECT_NE(p.validate().message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{1, std::numeric_limits<float>::quiet_NaN()}};
  EXPECT_FALSE(p.validate().ok());
  p = {};
  p.max_tokens = 4;
  p.min_tokens = 5;
  EXPECT_NE(p.validate().message().find("min_tokens"), std::string::npos);
  p.min_tokens = 4;
  EXPECT_TRUE(p.validate().ok());
}

}  // namespace
}  // namespace syv
