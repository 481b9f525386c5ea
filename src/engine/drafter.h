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
// Not thread-safe: called on the engine thread: observe() once per step, propose() once per
// decoding sequence per step.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/batch.h"
#include "model/model.h"

namespace syv {

class Sequence;
struct SchedulerOutput;

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends at most `max_tokens` (>= 1) draft tokens that may follow seq.tokens to `out` (empty:
  // no guess). Drafts are ids in the model's vocabulary.
  virtual void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) = 0;

  // After each step's commit and before its tokens are emitted (a sequence that ends this step is
  // still alive): `step` as scheduled (num_accepted set; each sequence's num_computed and tokens
  // already advanced over what it kept), `batch` the target ran (batch sequence i is step.seqs[i])
  // and its outputs (Outputs::token_hidden may be empty: CUDA graph steps, test models). A
  // drafter with model state of its own (the MTP head's K/V) brings it up to date here and may
  // prepare the next step's proposals. The default does nothing.
  virtual void observe(const SchedulerOutput& step, const Batch& batch,
                       const Model::Outputs& outputs) {
    (void)step;
    (void)batch;
    (void)outputs;
  }
  // The sequence finished or was aborted (called before it is destroyed): a drafter with
  // per-sequence state of its own releases it. The default does nothing.
  virtual void forget(const Sequence& seq) { (void)seq; }
};

}  // namespace syv
