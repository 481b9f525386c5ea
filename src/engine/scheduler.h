// Continuous batching: each step mixes decode tokens and prefill chunks of several sequences
// under a token budget.
//
// schedule() in order:
//  1. Running sequences, oldest first: each gets min(pending tokens, budget left, max chunk) new
//     tokens (1 while decoding) and the pages they need. When the pool cannot supply a page, the
//     youngest running sequence is preempted (recompute) until it can, possibly the one asking.
//  2. Waiting sequences, first come first served, while budget and max_num_seqs allow and nothing
//     was preempted this step: look up the longest cached prefix (at most length - 1 tokens: the
//     last token is always fed to get its logits; device pages, then host-tier pages), admit only
//     if the pool can supply the pages of the first chunk and of the hit's host part after
//     retaining the hit. The host part (and a hybrid's host checkpoint) is copied into its new
//     device pages (slot) at admission, asynchronously: the sequence is then *loading* and gets
//     no tokens (and takes no budget) until the load settled, while the others keep stepping; so
//     does a sequence whose device hit includes pages another sequence's load is still writing
//     (kv/inflight_loads.h). Before 1, schedule() polls the loads once (non-blocking); loading
//     sequences whose load settled become prefilling and are scheduled as usual. A sample of an n >
//     1 request waits until sample 0 has computed the prompt's full pages and then shares them.
//     With SchedulerConfig::admit_loads_after_launch, phase 2 stops at a sequence whose hit loads
//     from the host tier (keeping the hit it matched) and the engine admits it (and the like
//     behind it) by admit_after_launch() once the step's forward is launched: the rest of its
//     admission's host work (the pages and their evictions, the load's copy calls; with the
//     match, 1.7-2.3 ms of a step for a 32K-token hit at the 8B shape on an H200,
//     docs/performance.md) overlaps the GPU instead of delaying the step; the sequences behind it
//     wait for the next step.
// After the model ran and the engine sampled, commit() advances every scheduled sequence over the
// tokens it keeps, registers its newly full pages in the prefix cache, and finish()/abort() return
// every page.
//
// Verify steps (speculative decoding, engine/drafter.h): a decoding sequence whose pending tokens
// all fit also gets as many of its seq->drafts as the budget (after room for the decodes behind
// it), the pool (drafts are dropped before anything is preempted for them) and, on hybrid models,
// the next checkpoint boundary allow. It then feeds pending + k tokens and wants k + 1 logits rows;
// the engine records in num_accepted how many drafts it kept, and commit() advances over the
// pending tokens and the accepted drafts only. Pages mapped beyond what the sequence keeps go back
// to the pool. A verify step may then be padded to one draft count (pad_verify()): filler
// positions after the drafts, never committed (engine/verify_padding.h). On hybrid models the
// verify pass saved the state after each position a rejection can return to
// (HybridState::plan_verify_saves); a rejected draft (or any filler) loads the right one into the
// slot.
//
// Prompt logprobs (SamplingParams::prompt_logprobs): while a sequence still has prompt positions
// to report, lookup() finds no prefix hit for it (skipped positions would have no logits), and its
// chunks are cut so their prompt rows fit the step's max_prompt_logprob_rows; commit() moves
// Sequence::prompt_logprobs_next past the rows computed (a preempted sequence recomputes, but
// reports no position twice).
//
// Hybrid models (set_hybrid): admission also needs a free state slot; hits are cut back to the
// longest prefix ending on a stored checkpoint, which is loaded into the slot; every chunk ends on
// a checkpoint boundary when one lies inside it; commit() saves checkpoints on boundaries;
// preempt/finish/abort free the slot (finish/abort also apply the retention policy).
//
// A loading sequence holds its pages and slot and counts against max_num_seqs. Preempting or
// aborting it orders the compute stream after its load before its pages and slot go back to their
// pools (the copy may still write them).
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "engine/hybrid_state.h"
#include "engine/sequence.h"
#include "kv/prefix_cache.h"

namespace syv {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_prefill_chunk = 0;  // 0 = no limit beyond the budget
  // Logits rows a step gives to prompt logprobs at most (EngineOptions::max_prompt_logprob_rows).
  int32_t max_prompt_logprob_rows = 128;
  // Admit a waiting sequence whose hit loads from the host tier after the step's forward is
  // launched (admit_after_launch()), not in schedule() (EngineOptions::admit_loads_after_launch).
  bool admit_loads_after_launch = false;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  // Feed tokens [seq->num_computed, + num_new_tokens - num_drafts), then seq->drafts[0,
  // num_drafts).
  int32_t num_new_tokens = 0;
  bool wants_logits = false;  // the chunk ends at the sequence's last token: sample after it
                              // (and after each draft: num_drafts + 1 logits rows)
  int32_t num_drafts = 0;     // > 0 only when wants_logits
  int32_t num_accepted = 0;   // set by the engine before commit(): drafts kept, <= num_drafts
  // Prompt logprobs (Sequence::wants_prompt_logprobs): logits rows at positions
  // [prompt_rows_from, + num_prompt_rows) of this chunk, each giving the logprob of the prompt
  // token after it; they come before the sampling rows.
  int32_t prompt_rows_from = 0;
  int32_t num_prompt_rows = 0;
  // A padded verify step (Scheduler::pad_verify, engine/verify_padding.h): filler positions fed
  // after the drafts, each with a logits row that is never read; never committed.
  int32_t num_padding = 0;
  int32_t num_pending() const { return num_new_tokens - num_drafts; }
  int32_t num_fed() const { return num_new_tokens + num_padding; }  // the batch's tokens of it
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;  // batch order
  int32_t num_tokens = 0;          // fed, filler positions included
  int32_t num_padding = 0;         // of those, filler positions (sum of seqs' num_padding)
  int32_t num_preempted = 0;
  // Admission counters of this step (first admissions only).
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prefix_host_hit_tokens = 0;  // of those, served from the host tier (copied back)
  int64_t prompt_tokens = 0;
  // Hybrid models: checkpoints the forward pass writes itself (HybridState::plan_saves), ascending
  // by batch index, then by `after` (new tokens of that sequence before the save).
  struct StateSave {
    int32_t seq_index = 0, after = 0, checkpoint = -1;
  };
  std::vector<StateSave> state_saves;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(PrefixCache& cache, SchedulerConfig config);

  const SchedulerConfig& config() const { return config_; }
  PrefixCache& cache() { return cache_; }
  int32_t page_size() const { return cache_.page_size(); }
  // Hybrid models: the state-slot and checkpoint hooks (null for models without recurrent state).
  void set_hybrid(HybridState* hybrid) { hybrid_ = hybrid; }
  HybridState* hybrid() const { return hybrid_; }

  // Queues a new sequence (state waiting, no pages) at the back.
  void add(Sequence* seq);
  // Builds the next step into `out` (cleared first; its vectors are reused).
  void schedule(SchedulerOutput& out);
  // Once the step schedule() built into `out` is launched (or at once when it is empty): where
  // phase 2 stopped at a waiting sequence whose hit loads from the host tier
  // (SchedulerConfig::admit_loads_after_launch), admits it with the hit schedule() found, then
  // the waiting sequences behind it while each one's hit loads from the host tier, as phase 2
  // would have (the step's budget left, max_num_seqs, the pool); each one is loading, or, where
  // the load was synchronous, prefilling from the next step on. Adds to out's admission counters,
  // not to out.seqs. A no-op when schedule() deferred nothing.
  void admit_after_launch(SchedulerOutput& out);
  // Pads the verify step `out` (just scheduled, not yet run) to q tokens per sequence:
  // q = padded_verify_query(out, ...) >= 2 (engine/verify_padding.h). Maps the pages the filler
  // positions need from the pool's free pages (never evicting a cached prefix, never preempting)
  // and, on hybrids, replaces the verify saves by q - 1 per sequence. Returns false, changing
  // nothing, when the free pages are short.
  bool pad_verify(SchedulerOutput& out, int32_t q);
  // After the forward pass and sampling; the caller has appended the tokens each sequence keeps
  // (its accepted drafts and the sampled token) to seq->tokens and set num_accepted. Advances
  // num_computed over the fed pending tokens and accepted drafts (a hybrid sequence with a
  // rejected draft: rolls its state back and advances by nothing), registers newly full pages,
  // returns pages beyond the sequence's length and clears every scheduled sequence's drafts.
  // The caller then emits the tokens (and calls finish() when done).
  void commit(const SchedulerOutput& out);
  // Ends a running sequence normally (finished) or any sequence early (aborted): returns every
  // page and removes it from the queues. Safe in any state; a done sequence is a no-op.
  void finish(Sequence* seq);
  void abort(Sequence* seq);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

  // Cache integrity plus: each page's refcount equals the number of live sequences mapping it;
  // waiting sequences hold no pages; running ones hold exactly the pages their K/V needs; chain
  // keys only cover full computed pages; exactly the loading sequences carry a load, and every
  // page and slot in flight is held by a loading sequence waiting for that load or a later one.
  // "" when sound.
  std::string check_integrity() const;

 private:
  int32_t pages_for(int32_t num_tokens) const {
    return (num_tokens + page_size() - 1) / page_size();
  }
  int32_t chunk_for(const Sequence& seq, int32_t budget) const;
  // Hybrids: the in-pass checkpoint saves of out.seqs.back()'s chunk, appended to out.state_saves.
  void plan_saves(SchedulerOutput& out);
  // Chain key of seq's first `length` tokens (page-aligned): its registered page keys, then the
  // keys its next pages will get (PrefixCache::insert's, lookahead included).
  uint64_t prefix_key(const Sequence& seq, int32_t length) const;
  // Prompt logprobs: the chunk of n tokens cut so its prompt rows fit `rows_left`; then the rows
  // of the chunk recorded in `s` and taken from `rows_left`.
  static int32_t cut_for_prompt_rows(const Sequence& seq, int32_t n, int32_t rows_left);
  static void take_prompt_rows(ScheduledSeq& s, int32_t& rows_left);
  // Drafts to feed after a chunk of n tokens with `room` tokens of budget to spare (0 unless the
  // sequence is decoding and the chunk holds all its pending tokens).
  int32_t drafts_for(const Sequence& seq, int32_t n, int32_t room) const;
  bool grow(Sequence* seq, int32_t num_tokens);  // pages for num_tokens; false if the pool is short
  // The host tier's loads in flight (null without a host tier).
  InflightLoads* loads() const;
  // Polls the loads in flight once; loading sequences whose load settled become prefilling.
  void settle_loads();
  // A loading sequence about to give its pages and slot back: orders the compute stream after its
  // load (no-op for other states).
  void stop_loading(Sequence* seq);
  std::string check_loads() const;
  // Drops seq's claim on its pages in the host tier (HostTier::unwant_pages), if it has one.
  void unwant_host_pages(Sequence* seq);
  void release_pages(Sequence* seq);
  void preempt(Sequence* seq);
  // For an n > 1 sample: true while it should wait for sample 0's prompt pages.
  bool waits_for_parent(const Sequence& seq) const;
  PrefixHit lookup(const Sequence& seq) const;
  // Whether admitting with `hit` copies from the host tier (its host pages, a hybrid's host
  // checkpoint: HybridState::trim_hit sets host_checkpoint only where no device one serves).
  static bool loads_from_host(const PrefixHit& hit);
  // The hit waiting sequence `seq` would be admitted with (hybrids: trimmed to a checkpoint), or
  // none when it cannot be admitted now (it waits for its parent; no free state slot).
  std::optional<PrefixHit> admissible_hit(Sequence& seq) const;
  // Phase 2's admission of `seq`, the front waiting sequence, with `hit`; budget and rows_left are
  // the step's left. May_run: a sequence that loads nothing is scheduled in `out` (else it runs
  // from the next step on). False, changing nothing, when the pool or the prompt rows are short.
  bool admit(Sequence* seq, const PrefixHit& hit, SchedulerOutput& out, int32_t& budget,
             int32_t& rows_left, bool may_run);
  void remove_running(Sequence* seq);

  PrefixCache& cache_;
  SchedulerConfig config_;
  HybridState* hybrid_ = nullptr;
  std::vector<Sequence*> running_;        // admission order (oldest first)
  std::deque<Sequence*> waiting_;         // preempted sequences go to the front
  std::vector<HybridState::Save> saves_;  // plan_saves() scratch
  // The admission schedule() left for admit_after_launch(): the front waiting sequence, its hit,
  // and the step's budget and prompt rows left then.
  struct DeferredAdmission {
    Sequence* seq = nullptr;
    PrefixHit hit;
    int32_t budget = 0, rows_left = 0;
  };
  std::optional<DeferredAdmission> deferred_;
};

}  // namespace syv
