// Turns one logits row into a token, following SamplingParams (request.h) exactly:
//   1. logit_bias, then the min_tokens mask: state.stop_ids at -inf while fewer than
//      params.min_tokens tokens are generated;
//   2. penalties: repetition (tokens of prompt + output), presence and frequency (output tokens);
//   3. temperature == 0: argmax (lowest id on ties);
//   4. else logits / temperature -> softmax -> top-k -> top-p -> min-p -> one draw from the
//      renormalised distribution with the sequence's own generator.
// Logprobs are taken from the raw row (log-softmax before penalties and temperature).
//
// Reproducibility: a SamplerState seeded with the same seed draws the same numbers on every
// platform (xoshiro256** seeded through splitmix64; no std:: distributions).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/request.h"

namespace syv {

// xoshiro256** (public domain, Blackman & Vigna).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

// Per-sequence sampling state: the generator, the token counts the penalties need and what the
// min_tokens mask needs.
struct SamplerState {
  explicit SamplerState(uint64_t seed = 0) : rng(seed) {}
  Rng rng;
  std::unordered_map<int32_t, int32_t> output_counts;  // generated token -> times generated
  std::unordered_map<int32_t, int32_t> prompt_counts;  // prompt token -> times (repetition only)
  int32_t num_generated = 0;                           // tokens recorded by add_output()
  std::vector<int32_t> stop_ids;  // masked while num_generated < params.min_tokens
  // Structured output (params.grammar): when `constrained`, only tokens whose bit is set in
  // `allowed` (bit t of word t / 64; ids past the words are refused) may be sampled. The engine
  // refills it from the sequence's grammar matcher before each row.
  bool constrained = false;
  std::vector<uint64_t> allowed;

  // Records the prompt (only needed when repetition_penalty != 1) and each generated token.
  void add_prompt(const std::vector<int32_t>& prompt);
  void add_output(int32_t token) {
    ++output_counts[token];
    ++num_generated;
  }
};

struct SampleResult {
  int32_t token_id = -1;
  std::optional<TokenLogprob> logprob;     // when params.logprobs
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs alternatives, best first
};

// Facts of a raw logits row [vocab] (the log-softmax logprobs report): its log-sum-exp, and the
// k most likely tokens with their logprobs, best first (lowest id on ties); `scratch` is reused.
float log_sum_exp(const float* logits, int32_t vocab);
void most_likely(const float* logits, int32_t vocab, int32_t k, float lse,
                 std::vector<std::pair<float, int32_t>>& scratch, std::vector<TokenLogprob>& out);

// Adds params.logit_bias to `logits` [vocab], sets state.stop_ids to -inf while the min_tokens
// mask holds and, when state.constrained, every token outside state.allowed to -inf; ids outside
// [0, vocab) are skipped.
void apply_bias_and_mask(float* logits, int32_t vocab, const SamplingParams& params,
                         const SamplerState& state);

// True when apply_bias_and_mask() changes something for this state.
bool biased_or_masked(const SamplingParams& params, const SamplerState& state);

// Applies the three penalties to `logits` [vocab] in place.
void apply_penalties(float* logits, int32_t vocab, const SamplingParams& params,
                     const SamplerState& state);

class Sampler {
 public:
  // `logits` [vocab] is left untouched (penalties apply to a scratch copy).
  SampleResult sample(const float* logits, int32_t vocab, const SamplingParams& params,
                      SamplerState& state);

 private:
  std::vector<float> work_;                      // penalised logits
  std::vector<std::pair<float, int32_t>> cand_;  // (logit, id) candidates
  std::vector<double> probs_;                    // their unnormalised probabilities
  std::vector<double>& probs_scratch() { return probs_; }
};

// The seed a sample uses: params.seed mixed with the sample index (n > 1 samples differ).
uint64_t sample_seed(uint64_t request_seed, int32_t sample_index);

}  // namespace syv
