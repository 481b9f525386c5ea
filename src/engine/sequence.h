// One sample of one request as the scheduler sees it: its tokens, how many of them have K/V in the
// cache, and the pages holding them.
//
//   waiting --admit--> prefilling --last prompt chunk--> decoding --stop/length--> finished
//      |  ^                  ^  |                                 |
//      |  +----preempt-------|--+---------------------------------+   (any state) --cancel-->
//      |  |                  |                                         aborted
//      +--+--> loading ------+  (its hit's host-tier load, or a load into pages it matched, is
//                                still in flight: not scheduled until it settled)
//
// Preemption is by recompute: the sequence drops its pages (full ones stay in the prefix cache)
// and goes back to the front of the waiting queue with its generated tokens; on re-admission it
// prefills prompt + generated tokens again and carries on, so greedy output does not change.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "engine/spec_policy.h"
#include "kv/checkpoint_pool.h"
#include "kv/inflight_loads.h"

namespace syv {

enum class SequenceState : uint8_t {
  kWaiting,
  kLoading,  // admitted (pages and slot held), waiting for `load` to settle; not scheduled
  kPrefilling,
  kDecoding,
  kFinished,
  kAborted
};
const char* to_string(SequenceState state);

struct RequestGroup;  // engine_core.h: the request a sequence belongs to

class Sequence {
 public:
  Sequence(uint64_t id, const std::vector<int32_t>& prompt, const SamplingParams* params,
           int32_t sample_index, RequestGroup* group, Sequence* parent);

  uint64_t id() const { return id_; }
  int32_t sample_index() const { return sample_index_; }
  RequestGroup* group() const { return group_; }
  const SamplingParams& params() const { return *params_; }
  // n > 1: sample 0, whose prompt pages the other samples share; null for sample 0 itself.
  Sequence* parent() const { return parent_; }

  SequenceState state = SequenceState::kWaiting;
  bool admitted_once = false;   // prefix-hit counters are taken at the first admission only
  int32_t cached_tokens = 0;    // prompt tokens served from the cache at the first admission
  bool counted_prompt = false;  // sample 0: prompt/prefix counters taken (once per request)

  // Tokens: prompt then generated. K/V exist for tokens [0, num_computed).
  std::vector<int32_t> tokens;
  int32_t num_computed = 0;
  // Speculative decoding (engine/drafter.h): tokens guessed to follow `tokens`, proposed before a
  // step; the scheduler feeds as many as fit after the pending tokens (ScheduledSeq::num_drafts)
  // and commit() clears them. Never part of `tokens` until accepted.
  std::vector<int32_t> drafts;
  // Adaptive speculation (engine/spec_policy.h): the acceptance estimate, and the most drafts the
  // next step may ask for, decided after each step it took part in (drafters with model state,
  // MTP and draft models, prepare that many). Without adaptivity it stays at the maximum.
  SpecState spec;
  int32_t draft_budget = kMaxDraftBudget;
  bool draft_probe = false;  // the budget is a one-draft probe of acceptance
  static constexpr int32_t kMaxDraftBudget = 1 << 30;
  // Pages holding positions [0, pages.size() * page_size); page_keys[i] is the prefix-chain key of
  // pages[i] for the full pages registered (or matched) so far (page_keys.size() <= pages.size()).
  std::vector<int32_t> pages;
  std::vector<uint64_t> page_keys;
  // Preempted and waiting with a host tier: the keys of the pages it registered, which the tier
  // keeps for it until it is admitted again or ends (HostTier::want_pages).
  std::vector<uint64_t> wanted_host_keys;
  // Hybrid models (engine/hybrid_state.h): the live recurrent state's slot while running (-1
  // otherwise), and the checkpoints this sequence saved or shared, by increasing length (kept
  // across preemption, released by the retention policy when the sequence ends).
  int32_t state_slot = -1;
  std::vector<CheckpointHold> checkpoints;
  // Loading (kv/inflight_loads.h): the newest host-tier load this sequence's cached prefix waits
  // for (its own, or the one writing pages it matched); pending only while loading.
  LoadTicket load;
  // Hybrid models: where cached pages ended when admission found no checkpoint that far (0: none);
  // an extra checkpoint boundary, so the next prompt sharing that prefix hits it.
  int32_t shared_boundary = 0;

  // SamplingParams::prompt_logprobs: the next prompt position whose token's logprob is still to
  // be computed (prompt_len: all are); kept across preemption.
  int32_t prompt_logprobs_next = 1;
  // Sample 0 of a request asking for prompt logprobs, with positions left to report.
  bool wants_prompt_logprobs() const {
    return params_->prompt_logprobs >= 0 && sample_index_ == 0 &&
           prompt_logprobs_next < prompt_len_;
  }

  int32_t prompt_len() const { return prompt_len_; }
  int32_t length() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return length() - prompt_len_; }
  // Tokens still to feed before the next sample can be drawn (1 while decoding).
  int32_t num_pending() const { return length() - num_computed; }
  bool is_done() const {
    return state == SequenceState::kFinished || state == SequenceState::kAborted;
  }

 private:
  uint64_t id_;
  const SamplingParams* params_;
  int32_t sample_index_;
  int32_t prompt_len_;
  RequestGroup* group_;
  Sequence* parent_;
};

}  // namespace syv
