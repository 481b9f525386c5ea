// Adaptive speculation (docs/engine.md "Adaptive speculation"): per decoding sequence and step, how
// many drafts to ask for, 0..k. Drafts pay when the tokens they add outweigh what verifying them
// costs; a verify step feeds 1 + k positions per sequence, which is nearly free while a decode
// step is bound by reading the weights (small batches on a GPU) and costs about 1 + k decode steps
// once it is bound by compute (large batches; a CPU almost always).
//
// Acceptance: each sequence carries `a`, an exponentially weighted estimate of the chance that a
// draft is kept given the drafts before it were, from an optimistic prior, updated after each of
// its verify steps (observe(): one observation per draft position the target judged: the kept
// ones and the first rejected one). k drafts are then expected to yield E(k) = sum_{i=0..k} a^i
// tokens (the target's own token counts as a^0).
//
// Cost: a verify step with k drafts per sequence over a plain decode step at B decoding sequences,
//   cost(k, B) = 1 + k * (B / (B + knee) + draft_cost)
// where `knee` is the batch at which a decode step's per-token work equals its fixed cost
// (weights read once per step, launch and host overhead) and `draft_cost` the drafter's own
// cost per draft, both relative to a decode step (calibrated by measurement: docs/performance.md).
// The decision is the k maximising E(k) / cost(k, B), 0 unless that beats plain decoding (ratio 1)
// by `margin`. A sequence switched off by its acceptance is probed with one draft every
// `probe_interval` steps, so a passage that turns repetitive turns it back on; one switched off by
// the batch alone (no k would pay even at a = 1, or, with graphs, no step in which it drafts
// alone could) is not probed. At B >= disable_batch_size (when
// > 0) nobody drafts, as vLLM's --speculative-disable-by-batch-size.
//
// The step as a whole (step_ratio()): with CUDA graphs a step whose sequences carry different
// draft counts cannot replay a graph as it is: it is padded to one count (filler rows) or runs
// eagerly, either costing up to `uneven_cost` of a decode step for the whole batch. Sequences'
// choices that each pay can together lose to that (a few drafting sequences among 64): the engine
// then drops the step's drafts but the probes, and probes only on every probe_interval-th step so
// that they share one uneven step instead of making most steps uneven.
//
// Pure and deterministic (no clocks): the same states and batch sizes give the same decisions.
#pragma once

#include <cstdint>
#include <string>

namespace syv {

struct SpecPolicyOptions {
  int32_t k = 1;            // most drafts per sequence (EngineOptions::num_speculative_tokens)
  double knee = 8.0;        // cost model: batch where per-token work = fixed step cost
  double draft_cost = 0.0;  // cost model: drafter cost per draft, in decode steps
  int32_t disable_batch_size = 0;  // no drafts at this many decoding sequences or more; 0 = never
  double prior = 0.9;              // acceptance estimate of a new sequence
  double decay = 0.25;             // weight of each new observation in the estimate
  double margin = 0.03;            // E(k) / cost(k, B) must exceed 1 + margin
  int32_t probe_interval = 16;     // steps between one-draft probes of a sequence switched off
};

// One decoding sequence's part of a step, for SpecPolicy::step_ratio().
struct SpecPlan {
  double acceptance = 0;  // the sequence's estimate (SpecPolicy::acceptance())
  int32_t drafts = 0;     // what decide() chose
  bool probe = false;
};

// A sequence's part of the policy (lives in Sequence).
struct SpecState {
  double acceptance = -1;  // < 0: no estimate yet (the prior)
  int32_t idle_steps = 0;  // consecutive steps the policy asked it for no drafts
};

// What decide() chose.
struct SpecDecision {
  int32_t drafts = 0;
  bool probe = false;    // drafts == 1 only to re-measure acceptance
  bool skipped = false;  // drafts == 0 where the caller had room for some
};

class SpecPolicy {
 public:
  explicit SpecPolicy(const SpecPolicyOptions& options) : o_(options) {}

  // The drafts to ask for from a sequence with `room` (>= 1) drafts left (max_tokens,
  // max_model_len: capped at k) in a step with `batch` decoding sequences. Advances the
  // sequence's probe counter: call once per sequence and step. A sequence due for a probe takes
  // it only on a `probe_step` (it stays due until one comes), and only where a step in which it
  // alone drafts could pay were its drafts all kept (lone_draft_pays(): with graphs, `uneven_cost`
  // > 0, a probe among many sequences costs the batch an uneven step and could never earn it).
  SpecDecision decide(SpecState& state, int32_t room, int32_t batch, bool probe_step = true,
                      double uneven_cost = 0) const;
  // Whether a step of `batch` decoding sequences in which one drafts k <= room tokens, all kept,
  // and the others none, beats plain decoding (step_ratio() of those plans > 1) for some k.
  bool lone_draft_pays(int32_t room, int32_t batch, double uneven_cost) const;
  // Tokens per unit of cost of a step of `n` decoding sequences with these plans, over plain
  // decoding (1): the sum of E(a_i, d_i) / n over 1 + (sum of d_i) * (1 / (n + knee) +
  // draft_cost / n), plus `uneven_cost` (decode steps: what a step of uneven draft counts costs
  // beyond its rows; 0 without graphs) when the draft counts differ.
  double step_ratio(const SpecPlan* plans, int32_t n, double uneven_cost) const;
  // Whether a step with these plans beats plain decoding (true without drafts). No margin here:
  // each sequence's choice carried it; this only weighs the step's uneven cost against them.
  bool step_pays(const SpecPlan* plans, int32_t n, double uneven_cost) const;
  // After a verify step that fed the sequence `drafted` (>= 1) drafts and kept `accepted`.
  void observe(SpecState& state, int32_t drafted, int32_t accepted) const;

  // The best k for acceptance `a` at `batch` (0 when none pays by the margin), capped at `room`.
  int32_t best_drafts(double a, int32_t room, int32_t batch) const;
  double cost(int32_t k, int32_t batch) const;
  static double expected_tokens(double a, int32_t k);
  double acceptance(const SpecState& state) const {
    return state.acceptance < 0 ? o_.prior : state.acceptance;
  }
  const SpecPolicyOptions& options() const { return o_; }
  // One line for the start-up log.
  std::string describe() const;

 private:
  SpecPolicyOptions o_;
};

}  // namespace syv
