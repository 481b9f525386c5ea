#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace syv {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

uint64_t sample_seed(uint64_t request_seed, int32_t sample_index) {
  uint64_t x = request_seed ^ (0x51ed270b27e1a3c5ull * static_cast<uint64_t>(sample_index + 1));
  return splitmix64(x);
}

void SamplerState::add_prompt(const std::vector<int32_t>& prompt) {
  for (int32_t t : prompt) ++prompt_counts[t];
}

bool biased_or_masked(const SamplingParams& params, const SamplerState& state) {
  return !params.logit_bias.empty() || state.constrained ||
         (state.num_generated < params.min_tokens && !state.stop_ids.empty());
}

void apply_bias_and_mask(float* logits, int32_t vocab, const SamplingParams& params,
                         const SamplerState& state) {
  for (const auto& [t, bias] : params.logit_bias)
    if (t >= 0 && t < vocab) logits[t] += bias;
  if (state.num_generated < params.min_tokens) {
    for (int32_t t : state.stop_ids)
      if (t >= 0 && t < vocab) logits[t] = -std::numeric_limits<float>::infinity();
  }
  if (state.constrained) {
    constexpr float kNeg = -std::numeric_limits<float>::infinity();
    const auto words = static_cast<int32_t>(state.allowed.size());
    for (int32_t w = 0; w * 64 < vocab; ++w) {
      const uint64_t bits = w < words ? state.allowed[static_cast<size_t>(w)] : 0;
      if (bits == ~uint64_t{0}) continue;
      const int32_t end = std::min(vocab, w * 64 + 64);
      if (bits == 0) {
        std::fill(logits + w * 64, logits + end, kNeg);
        continue;
      }
      for (int32_t t = w * 64; t < end; ++t)
        if (!((bits >> (t - w * 64)) & 1u)) logits[t] = kNeg;
    }
  }
}

void apply_penalties(float* logits, int32_t vocab, const SamplingParams& params,
                     const SamplerState& state) {
  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    auto penalise = [&](int32_t t) {
      if (t < 0 || t >= vocab) return;
      logits[t] = logits[t] > 0 ? logits[t] / r : logits[t] * r;
    };
    for (const auto& [t, count] : state.prompt_counts) penalise(t);
    for (const auto& [t, count] : state.output_counts)
      if (!state.prompt_counts.count(t)) penalise(t);
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    for (const auto& [t, count] : state.output_counts) {
      if (t < 0 || t >= vocab) continue;
      logits[t] -= params.presence_penalty + params.frequency_penalty * static_cast<float>(count);
    }
  }
}

float log_sum_exp(const float* logits, int32_t vocab) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t v = 0; v < vocab; ++v) max_logit = std::max(max_logit, logits[v]);
  double sum = 0;
  for (int32_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v] - max_logit));
  return max_logit + static_cast<float>(std::log(sum));
}

void most_likely(const float* logits, int32_t vocab, int32_t k, float lse,
                 std::vector<std::pair<float, int32_t>>& scratch, std::vector<TokenLogprob>& out) {
  k = std::min(k, vocab);
  if (k <= 0) return;
  scratch.resize(static_cast<size_t>(vocab));
  for (int32_t v = 0; v < vocab; ++v) scratch[static_cast<size_t>(v)] = {logits[v], v};
  std::partial_sort(scratch.begin(), scratch.begin() + k, scratch.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  for (int32_t i = 0; i < k; ++i)
    out.push_back(
        {scratch[static_cast<size_t>(i)].second, scratch[static_cast<size_t>(i)].first - lse});
}

SampleResult Sampler::sample(const float* logits, int32_t vocab, const SamplingParams& params,
                             SamplerState& state) {
  SYV_CHECK(vocab > 0) << "vocab " << vocab;
  SampleResult result;

  // Logprobs of the raw distribution.
  if (params.logprobs || params.top_logprobs > 0) {
    const float lse = log_sum_exp(logits, vocab);
    if (params.top_logprobs > 0)
      most_likely(logits, vocab, params.top_logprobs, lse, cand_, result.top_logprobs);
    // The chosen token's logprob is filled in below, once it is known.
    result.logprob = TokenLogprob{-1, lse};
  }

  const bool penalised = params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                         params.frequency_penalty != 0.0f;
  const bool biased = biased_or_masked(params, state);
  const float* row = logits;
  if (penalised || biased) {
    work_.assign(logits, logits + vocab);
    if (biased) apply_bias_and_mask(work_.data(), vocab, params, state);
    if (penalised) apply_penalties(work_.data(), vocab, params, state);
    row = work_.data();
  }

  int32_t token = 0;
  if (params.temperature == 0.0f) {
    for (int32_t v = 1; v < vocab; ++v)
      if (row[v] > row[token]) token = v;
  } else {
    // Candidates sorted by logit (descending) as far as top-k / top-p need.
    cand_.resize(static_cast<size_t>(vocab));
    for (int32_t v = 0; v < vocab; ++v) cand_[v] = {row[v], v};
    auto desc = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = cand_.size();
    if (params.top_k > 0 && params.top_k < vocab) {
      keep = static_cast<size_t>(params.top_k);
      std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep),
                        cand_.end(), desc);
    } else if (params.top_p < 1.0f || params.min_p > 0.0f) {
      std::sort(cand_.begin(), cand_.end(), desc);
    } else {
      // Plain temperature sampling needs only the maximum first.
      auto best = std::min_element(cand_.begin(), cand_.end(), desc);
      std::iter_swap(cand_.begin(), best);
    }
    cand_.resize(keep);
    // Softmax with temperature over the kept candidates (cand_[0] is the maximum).
    const double inv_t = 1.0 / static_cast<double>(params.temperature);
    const double max_logit = cand_[0].first;
    std::vector<double>& probs = probs_scratch();
    probs.resize(keep);
    double total = 0;
    for (size_t i = 0; i < keep; ++i) {
      probs[i] = std::exp((cand_[i].first - max_logit) * inv_t);
      total += probs[i];
    }
    if (params.top_p < 1.0f) {
      double cum = 0;
      size_t cut = keep;
      for (size_t i = 0; i < keep; ++i) {
        cum += probs[i] / total;
        if (cum >= params.top_p) {
          cut = i + 1;
          break;
        }
      }
      keep = cut;
    }
    if (params.min_p > 0.0f) {
      const double threshold = params.min_p * (probs[0] / total);
      size_t cut = 1;
      while (cut < keep && probs[cut] / total >= threshold) ++cut;
      keep = cut;
    }
    double kept = 0;
    for (size_t i = 0; i < keep; ++i) kept += probs[i];
    double u = state.rng.uniform() * kept;
    size_t pick = keep - 1;  // rounding left u >= 0: the last candidate that has a probability
    while (pick > 0 && probs[pick] == 0) --pick;
    for (size_t i = 0; i < keep; ++i) {
      u -= probs[i];
      if (u < 0) {
        pick = i;
        break;
      }
    }
    token = cand_[pick].second;
  }

  result.token_id = token;
  if (result.logprob) {
    result.logprob->logprob = logits[token] - result.logprob->logprob;  // logit - lse
    result.logprob->token_id = token;
  }
  state.add_output(token);
  return result;
}

}  // namespace syv
