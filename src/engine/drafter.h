// Speculative decoding's proposal side: a Drafter guesses the next tokens of a decoding sequence;
// the engine feeds them after the sequence's pending tokens in the normal step (a verify step),
// samples every fed draft position and keeps the longest prefix of drafts the target model agrees
// with, plus one token of its own (the correction, or the bonus when every draft was accepted).
//
// Acceptance is sample-and-compare: row j is sampled exactly as plain decoding would sample it
// (same parameters, penalties that include drafts 0..j-1, the next draw of the sequence's
// generator) and draft j is kept when the sampled token equals it. For a drafter that proposes
// one token per position (a point mass, as n-gram, greedy MTP and greedy draft models do) this is
// exactly rejection sampling (accept with probability p(draft), otherwise a draw from p without the
// draft, renormalised), and each generated token consumes one draw, as without drafts: greedy and
// seeded output are token-for-token those of plain decoding (tests/unit/engine_verify_test.cpp).
//
// Not thread-safe: called on the engine thread, once per decoding sequence per step.
#pragma once

#include <cstdint>
#include <vector>

namespace syv {

class Sequence;

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends at most `max_tokens` (>= 1) draft tokens that may follow seq.tokens to `out` (empty:
  // no guess). Drafts are ids in the model's vocabulary.
  virtual void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) = 0;
};

}  // namespace syv
