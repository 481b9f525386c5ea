// What a client asks the engine for (Request + SamplingParams) and what it gets back (Event).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace syv {

namespace grammar {
class Grammar;
}

// Sampling controls, with OpenAI/vLLM meanings. Applied in this order to each logits row:
// logit_bias, the min_tokens mask (stop ids at -inf), repetition penalty (prompt + generated
// tokens), presence/frequency penalties (generated tokens), then greedy if temperature == 0, else
// logits / temperature -> top-k -> top-p -> min-p -> draw (vLLM's order: its logit-bias and
// min-tokens processors run before the penalties).
struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, lowest id on ties); must be >= 0
  int32_t top_k = 0;                // keep the k most likely tokens; 0 or -1 = off
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 = off
  float min_p = 0.0f;               // drop tokens with p < min_p * p_max; in [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; logit > 0 ? logit / r : logit * r for seen tokens
  float presence_penalty = 0.0f;    // [-2, 2]; logit -= presence if generated at least once
  float frequency_penalty = 0.0f;   // [-2, 2]; logit -= frequency * times generated
  std::optional<uint64_t> seed;     // same seed + same request -> same samples; unset = random
  // Generated tokens per sample at most (>= 0; 0: the prompt is computed, and scored with
  // prompt_logprobs, and the token drawn after it is not returned).
  int32_t max_tokens = 16;
  std::vector<std::string> stop;  // stop strings; the matched text is not emitted (needs tokenizer)
  std::vector<int32_t> stop_token_ids;  // extra stop tokens (EOS ids are added unless ignore_eos)
  bool ignore_eos = false;              // keep going past EOS (benchmarks)
  bool logprobs = false;                // report the sampled token's logprob
  int32_t top_logprobs = 0;             // and this many most likely alternatives (0..20)
  // vLLM's prompt_logprobs: -1 = off; k in 0..20: the logprob of each prompt token after the
  // first under the distribution the model computes at the position before it (raw logits,
  // log-softmax, as for logprobs), its rank and the k most likely alternatives; reported once, on
  // the first event of sample 0 (Event::prompt_logprobs). Exact whatever the prefill chunking:
  // such a request never takes a prefix-cache hit for the positions it still has to report (the
  // skipped positions would have no logits).
  int32_t prompt_logprobs = -1;
  int32_t n = 1;                    // independent samples sharing the prompt's KV pages (1..64)
  bool skip_special_tokens = true;  // detokenizer: leave special tokens out of the text
  // (token id, bias in [-100, 100]) added to the raw logits before anything else (OpenAI).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The first min_tokens generated tokens never end the sample: the stop ids (stop_token_ids +
  // EOS) are masked until that many are generated, and a stop string whose last character comes
  // with one of them does not match (vLLM). 0..max_tokens.
  int32_t min_tokens = 0;
  // A matched stop string stays at the end of the text, and a stop token's text is emitted
  // (skip_special_tokens still applies) (vLLM).
  bool include_stop_str_in_output = false;
  // Structured output: every sample's text is a sentence of this grammar (grammar/grammar.h):
  // each step masks the tokens whose bytes the grammar refuses (before penalties, temperature,
  // top-k/p and greedy), EOS is allowed only where the sentence is complete, and a complete
  // sentence that can go no further allows only the stop tokens. Null: unconstrained. Needs the
  // engine's tokenizer; refused with ignore_eos and min_tokens (the grammar says where the text
  // ends). Shared: the server reuses one compiled grammar for identical requests.
  std::shared_ptr<const grammar::Grammar> grammar;

  // Range checks; the message names the field, the expected range and the value.
  Status validate() const;
};

struct Request {
  std::vector<int32_t> prompt_ids;  // tokenized prompt (chat template already applied)
  SamplingParams params;
};

// Logprob of one token under the model's distribution (log-softmax of the raw logits, before
// penalties and temperature, as vLLM reports by default).
struct TokenLogprob {
  int32_t token_id = -1;
  float logprob = 0.0f;
};

// A prompt token's logprob (SamplingParams::prompt_logprobs).
struct PromptLogprob {
  TokenLogprob token;             // the prompt token and its logprob
  int32_t rank = 0;               // 1 + the tokens whose logit is strictly larger
  std::vector<TokenLogprob> top;  // the prompt_logprobs most likely tokens, best first
};

// One item on a request's channel. Each sample produces one event per generated token; the last
// event of a sample carries its finish_reason. An aborted sample gets a final event with
// token_id == -1 and finish_reason "abort".
struct Event {
  int32_t sample_index = 0;  // 0..n-1
  int32_t token_id = -1;     // the generated token; -1 on an abort-only event
  std::string text;          // text delta (incremental, UTF-8 complete; stop strings withheld)
  std::optional<TokenLogprob> logprob;     // when params.logprobs
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs alternatives, most likely first
  std::string finish_reason;  // "" while running; "stop" (stop token/string), "length", "abort"
  int32_t prompt_tokens = 0;  // prompt length
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache (sample 0's first
                              // admission; samples 1..n-1 share sample 0's pages)
  // params.prompt_logprobs >= 0: on sample 0's first event, one entry per prompt position
  // 1..prompt_len-1 (position 0 has no logprob); empty on every other event.
  std::vector<PromptLogprob> prompt_logprobs;

  bool finished() const { return !finish_reason.empty(); }
};

}  // namespace syv
