// The single-threaded heart of the engine: requests in, one step at a time, events out.
// Engine (engine.h) runs it on its own thread; tests and benchmarks drive it directly.
//
// One step: propose drafts (drafter.h, when speculating) -> schedule (scheduler.h) -> build the
// Batch (runner.h) -> model.forward -> sample each logits row (sampler.h; on the device, or on the
// host after downloading the rows), keeping each sequence's drafts up to the first one the model
// disagrees with -> commit (advance sequences over the kept tokens, register full pages) ->
// detokenize, apply stop conditions, push Events -> free finished sequences.
//
// Not thread-safe: every call must come from the same thread (validate() excepted: it only reads
// immutable configuration and may be called from any thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/memory_plan.h"
#include "engine/drafter.h"
#include "engine/engine.h"
#include "engine/event_waker.h"
#include "engine/grammar_sessions.h"
#include "engine/graph_runner.h"
#include "engine/hybrid_state.h"
#include "engine/runner.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/spec_policy.h"
#include "engine/stats.h"
#include "kv/cache_store.h"
#include "kv/host_tier.h"
#include "kv/prefix_cache.h"

namespace syv {

class IncrementalDetokenizer;

// Per sample output state: sampler state, detokenizer and stop-string hold-back.
struct SampleStream {
  SampleStream();
  SampleStream(SampleStream&&) noexcept;
  ~SampleStream();
  SamplerState sampler;
  std::optional<grammar::Matcher> matcher;              // structured output (params.grammar)
  std::unique_ptr<IncrementalDetokenizer> detokenizer;  // null without a tokenizer
  std::string held;  // text withheld because it may be the start of a stop string
};

// One submitted request and its n sequences (sample 0 first).
struct RequestGroup {
  uint64_t id = 0;
  Request request;
  std::shared_ptr<RequestHandle> handle;
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<SampleStream> streams;
  std::vector<int32_t> stop_ids;  // stop_token_ids + EOS ids (unless ignore_eos)
  int32_t unfinished = 0;
  // params.prompt_logprobs: positions 1.. of the prompt scored so far; handed to sample 0's first
  // event.
  std::vector<PromptLogprob> prompt_logprobs;
};

// EngineOptions::max_prompt_logprob_rows as the engine takes it: as set, else (0)
// kMaxPromptLogprobRows. A GPU's memory plan (serve, bench offline; inspect's) sets it first from
// the device's memory (planned_prompt_logprob_rows).
inline constexpr int32_t kMaxPromptLogprobRows = 128;
int32_t prompt_logprob_rows(const EngineOptions& o);
// The prompt-logprob rows a plan gives a device of `device_bytes` (0 in the options: else as set):
// as many as 1/kPromptLogprobDeviceShare of it holds in f32 logits of `vocab` tokens, 16 ..
// kMaxPromptLogprobRows (64 of Qwen3.5's 248,320-token vocabulary on a 24 GiB card, the most on
// an 80 GB one): a small card keeps the rest for its KV pool, a large one scores 128 prompt
// positions a step.
inline constexpr int64_t kPromptLogprobDeviceShare = 400;  // 0.25% of the device
int32_t planned_prompt_logprob_rows(const EngineOptions& o, int64_t device_bytes, int64_t vocab);

// The cache spec the engine builds for a model declaring `model_spec`: its K/V in o.kv_dtype (when
// set), its delta-rule state in o.state_dtype.
CacheSpec engine_cache_spec(const CacheSpec& model_spec, const EngineOptions& o);

// Recurrent-state slots a hybrid model's engine allocates for `o` (0 for other models): one per
// running sequence, the checkpoint pool (o.num_checkpoints, or o.checkpoint_cache_bytes worth, at
// most 8 per sequence, when 0; none without prefix caching) and, with speculation, k verify states
// per sequence (num_speculative_tokens). Memory plans (syv serve) reserve these bytes before sizing
// the KV pool.
int64_t engine_state_slots(const CacheSpec& spec, const EngineOptions& o);

class EngineCore {
 public:
  // Resolves the derived options (num_pages, max_model_len), checks the model is supported,
  // builds the cache store from the model's cache spec (kv/cache_store.h) and binds the model to
  // it. The engine owns the store; it outlives every forward the engine runs.
  static Result<std::unique_ptr<EngineCore>> create(Model& model, const Tokenizer* tokenizer,
                                                    EngineOptions options);

  // Whether the request can run here; thread-safe. Messages name the field and the limits.
  Status validate(const Request& request) const;
  // Queues a validated request; its events go to handle->channel().
  void add_request(uint64_t id, Request request, std::shared_ptr<RequestHandle> handle);
  // Aborts a live request: frees its pages now, ends each unfinished sample with "abort".
  // Unknown or finished ids are ignored.
  void abort_request(uint64_t id);
  void abort_all();

  // Speculative decoding: the drafter that proposes up to options().num_speculative_tokens drafts
  // per decoding sequence and step (null: none). Call between steps.
  void set_drafter(std::unique_ptr<Drafter> drafter) { drafter_ = std::move(drafter); }
  const Drafter* drafter() const { return drafter_.get(); }

  bool has_work() const { return scheduler_.has_work(); }
  // Runs one step (no-op when idle).
  void step();
  // Between steps and while idle (Engine's loop; never inside step()): the host tier pins at most
  // one piece of its reserve (kv/host_tier.h "Memory"; a piece still being faulted in is left to
  // a later call, never waited for). Returns whether its reserve is still short (no tier: false).
  bool between_steps(bool idle);

  const EngineOptions& options() const { return options_; }
  const EngineStats& stats() const { return stats_; }
  Scheduler& scheduler() { return scheduler_; }
  PrefixCache& cache() { return cache_; }
  // Hybrid models: state slots, checkpoints, retention (null for other models).
  const HybridState* hybrid() const { return hybrid_.get(); }
  // The cache's bytes: KV pages (+ the graphs' dummy page), state slots, checkpoints.
  const CacheStore& store() const { return *store_; }
  // The host tier under them (null when off; EngineOptions::host_cache_bytes).
  const HostTier* host_tier() const { return host_.get(); }
  // CUDA graphs of the decode buckets (null when cuda_graphs is off or unsupported).
  const GraphRunner* graphs() const { return graphs_.get(); }
  // Scheduler + cache integrity ("" when sound).
  std::string check_integrity() const { return scheduler_.check_integrity(); }

  EngineCore(Model& model, const Tokenizer* tokenizer, const EngineOptions& options,
             std::unique_ptr<CacheStore> store);  // use create()

 private:
  // Each decoding sequence's drafts for the next step, up to its budget; with graphs, a step
  // whose proposed drafts do not pay for an uneven step keeps only its probes' (spec_policy.h).
  void propose_drafts();
  // Adaptive speculation: after a step's commit, each running decoding sequence's draft budget
  // for the next step (Sequence::draft_budget), before the drafter prepares that many.
  void plan_drafts();
  // A just-scheduled verify step of uneven draft counts: padded to one count when graphs are on
  // (or EngineOptions::force_verify_padding) and the shape fits (engine/verify_padding.h).
  void pad_verify_step();
  // Samples the logits rows of scheduled sequence `i` (rows [row, row + num_drafts]) until a draft
  // is rejected, appending the kept tokens to results_ and to seq.tokens; sets num_accepted.
  // Prompt logprobs of step_.seqs[i]'s prompt rows (host rows from `row`), appended to its
  // group's prompt_logprobs.
  void score_prompt(size_t i, size_t row, const float* host_rows, int32_t vocab);
  void sample_sequence(size_t i, size_t row, const float* host_rows, int32_t vocab,
                       const std::vector<int32_t>& device_ids);
  // Emits one token; `length` is the sequence's length with this token (the stop and length
  // checks see the sequence as it was when this token was generated). Returns true when the
  // sample ended (the sequence, and maybe its group, are gone).
  // `cached_tokens`: the event's (the request's prompt tokens served from the cache), -1 for the
  // group's current figure.
  bool emit(RequestGroup& group, Sequence& seq, const SampleResult& sample, int32_t length,
            int32_t cached_tokens = -1);
  // Whether emit() of this token (the sequence's `length` with it) cannot end the sample and the
  // request has no stop strings, so it may wait for the next step's launch
  // (EngineOptions::emit_after_launch).
  bool emit_can_wait(const RequestGroup& group, const Sequence& seq, const SampleResult& sample,
                     int32_t length) const;
  // emit()'s finishing rules for a token that makes the sequence `length` long: a stop token or
  // stop string ends it only past min_tokens; one of the request's stop ids; max_tokens or
  // max_model_len reached.
  static bool past_min_tokens(const Sequence& seq, int32_t length);
  static bool is_stop_token(const RequestGroup& group, const Sequence& seq, int32_t token,
                            int32_t length);
  bool at_length_limit(const Sequence& seq, int32_t length) const;
  // Emits the tokens kept for after this step's launch (of `group` only, when given), in order,
  // and hands the channels to the waker.
  void emit_pending(const RequestGroup* group = nullptr);
  // Queues `event` on the group's channel without waking its client; the step hands the handles
  // to waker_ after its last emit (engine/event_waker.h).
  void push_quiet(RequestGroup& group, Event event);
  void end_sample(RequestGroup& group, Sequence& seq);
  void update_gauges();
  // The host tier joins the prefix cache (and the hybrid state): evictions go to it from now on.
  void attach_host_tier(std::unique_ptr<HostTier> tier);

  Model& model_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  // Hybrids: the delta-rule chunks beyond ceil(tokens / 64) the memory plan counts for a step of
  // these options (backend/memory_plan.h gdn_phases_spare_chunks); each step is checked against it
  // below kGdnPhasesSpareChunks, where the backend's own limit does not already hold it.
  const int64_t gdn_spare_chunks_ =
      gdn_phases_spare_chunks(options_.max_num_seqs, options_.num_speculative_tokens);
  std::unique_ptr<CacheStore> store_;  // bound to model_; declared before everything that uses it
  std::unique_ptr<HostTier> host_;     // under store_ (null when off)
  int64_t vocab_size_;
  std::vector<int32_t> eos_ids_;
  PrefixCache cache_;
  Scheduler scheduler_;
  std::unique_ptr<HybridState> hybrid_;
  std::unique_ptr<GraphRunner> graphs_;
  Runner runner_;
  Sampler sampler_;
  SchedulerOutput step_;
  std::unique_ptr<Drafter> drafter_;
  std::vector<SpecPlan> plans_;                // propose_drafts()' scratch, one per sequence
  std::unique_ptr<SpecPolicy> spec_policy_;    // null unless options_.speculative_adaptive
  std::unique_ptr<GrammarSessions> grammars_;  // structured outputs; null without a tokenizer
  std::vector<float> host_logits_;
  std::vector<std::pair<float, int32_t>> score_scratch_;  // score_prompt's top-k candidates
  std::vector<SampleResult> results_;  // tokens kept this step, by scheduled sequence
  std::vector<std::shared_ptr<RequestHandle>> to_wake_;  // channels this step pushed to quietly
  EventWaker waker_;  // its thread wakes the handles step() hands it (engine/event_waker.h)
  std::vector<size_t> result_begin_;  // [step_.seqs.size() + 1] offsets into results_
  // Tokens whose emit() waits for the next step's launch (EngineOptions::emit_after_launch), in
  // step order; their sequences keep running (only emit_pending() or an abort of their request,
  // which emits them first, takes them out).
  struct PendingEmit {
    RequestGroup* group = nullptr;
    Sequence* seq = nullptr;
    SampleResult sample;
    int32_t length = 0;
    int32_t cached_tokens = 0;
  };
  std::vector<PendingEmit> pending_emits_;
  bool emit_after_launch_ = false;  // EngineOptions::emit_after_launch resolved
  std::unordered_map<uint64_t, std::unique_ptr<RequestGroup>> groups_;
  uint64_t next_seq_id_ = 1;
  EngineStats stats_;
};

}  // namespace syv
