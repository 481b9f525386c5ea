// The engine as other threads see it: submit a request, read its tokens from a per-request
// channel, cancel it from anywhere. One engine thread owns the scheduler, the KV cache and the
// model (see engine_core.h for the single-threaded core that tests and benchmarks drive directly).
//
//   Engine engine(*model, tokenizer.get(), EngineOptions{});
//   SYV_RETURN_IF_ERROR(engine.start());
//   Request request;
//   request.prompt_ids = tokenizer->encode("Hello");
//   request.params.max_tokens = 32;
//   SYV_ASSIGN_OR_RETURN(auto handle, engine.submit(std::move(request)));
//   Event event;
//   while (handle->next(event, std::chrono::seconds(30)) == NextStatus::kEvent) {
//     std::cout << event.text;            // text delta, stop strings withheld
//     if (event.finished()) break;        // (n == 1): finish_reason is set on the last event
//   }
//   engine.stop();                        // drains: running requests finish first
//
// Thread safety: every public member of Engine and RequestHandle may be called from any thread.
// The Model and Tokenizer must outlive the Engine; the Tokenizer may be null (token-only use:
// events then carry no text and stop strings are refused at submit()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/channel.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "kv/cache_spec.h"

namespace syv {

class Model;
class Tokenizer;
class EngineCore;

// Most drafts a verify step feeds per sequence (EngineOptions::num_speculative_tokens).
inline constexpr int32_t kMaxSpeculativeTokens = 16;

// How the engine sizes its cache and its steps. Zero means "derive" where noted.
struct EngineOptions {
  int32_t page_size = 64;                 // tokens per KV page
  int32_t num_pages = 0;                  // KV pool size; 0 = kv_cache_bytes / bytes per page
  int64_t kv_cache_bytes = 1ll << 30;     // used when num_pages == 0
  int32_t max_num_seqs = 256;             // running sequences at most (samples count separately)
  int32_t max_num_batched_tokens = 2048;  // token budget of one step (decode + prefill chunks)
  int32_t max_prefill_chunk = 0;          // longest prefill chunk of one sequence; 0 = the budget
  // Logits rows one step gives to prompt logprobs (SamplingParams::prompt_logprobs) at most, on
  // top of the sampling rows; the activation reservation (and a GPU's memory plan) counts them.
  // A prompt-logprobs prefill is chunked to fit. 0: a GPU's memory plan sets it from the device's
  // memory, else 128 (engine_core.h planned_prompt_logprob_rows, prompt_logprob_rows).
  int32_t max_prompt_logprob_rows = 0;
  int32_t max_model_len = 0;  // prompt + max_tokens at most; 0 = the model's maximum
  bool enable_prefix_caching = true;
  // Hybrid models (recurrent-state layers; docs/hybrid-cache.md). Ignored for other models.
  int32_t checkpoint_interval = 0;             // C, a multiple of page_size; 0 = 4 pages
  int32_t num_checkpoints = 0;                 // checkpoint pool; 0 = checkpoint_cache_bytes worth
  int64_t checkpoint_cache_bytes = 1ll << 30;  // (at most 8 per max_num_seqs when derived)
  // Hybrids: the dtype of the delta-rule state (f32, or bf16 where the backend supports it: half
  // the state's bytes and traffic); CacheConfig::state_dtype.
  DType state_dtype = DType::F32;
  // The dtype of the paged K/V (CacheConfig::kv_dtype). Unset: the model's declared cache (the
  // backend's activation dtype). F8E4M3 (fp8, one scale per token and kv head) or U4X2 (int4, one
  // scale per 32 elements) where the backend has kernels (Backend::supports_kv_dtype); the pool
  // holds correspondingly more pages for the same kv_cache_bytes. A --draft-model's own pool
  // stays in the activation dtype.
  std::optional<DType> kv_dtype;
  std::string prefix_retention = "dense";  // "dense" | "boundaries" | N (tokens)
  // Host tier under the device cache (kv/host_tier.h; docs/hybrid-cache.md "Host tier"): host
  // memory (pinned on CUDA) that evicted prefix pages and checkpoints are written back to and
  // copied back from on a hit. host_cache_bytes: 0 = off (here; the CLI derives it), < 0 = a
  // quarter of the free host memory, at most 32 GiB; split between pages and checkpoints in the
  // device pool's proportion. host_num_pages / host_num_checkpoints, when either is > 0, size it
  // exactly instead (tests). Off without prefix caching.
  int64_t host_cache_bytes = 0;
  int32_t host_num_pages = 0;
  int32_t host_num_checkpoints = 0;
  // The host tier's pinning (kv/host_tier.h "Memory"): pinned free space kept ahead of evictions
  // (< 0: kHostPinReserveBytes or, when larger, the KV pages of one max_model_len sequence; at
  // least one piece), the pieces it is pinned in (0:
  // kHostPieceBytes), whether pieces are faulted in on a background thread (false: on the
  // engine thread between steps, deterministic for tests), and whether the engine pins the whole
  // tier while idle (false: only the reserve). Pins happen only between steps.
  int64_t host_pin_reserve_bytes = -1;
  int64_t host_pin_piece_bytes = 0;
  bool host_fault_in_background = true;
  bool host_pin_all_while_idle = true;
  // Write-ahead (kv/host_tier.h "Write-ahead"): between steps, the cached device pages the next
  // step could evict (and, when the pool is short of them, the newest registered pages of running
  // sequences) are copied to the host tier ahead of their eviction, so no step waits for a
  // write-back; off: every page is written back when it is evicted (the step that evicts it waits
  // for the copy).
  bool host_write_ahead = true;
  // Speculative decoding (engine/drafter.h): at most this many drafts per sequence and step, from
  // the drafter given to EngineCore::set_drafter(); 0 = off. Hybrid models then reserve k verify
  // states per sequence slot (state_bytes_per_seq x k x max_num_seqs): the state after each
  // position a rejected draft can return to.
  int32_t num_speculative_tokens = 0;
  // Where drafts come from: "ngram" (prompt lookup, engine/ngram_drafter.h, over n-grams of
  // ngram_min..ngram_max tokens), "mtp" (the model's MTP head, engine/mtp_drafter.h: the model
  // must be loaded with LoadOptions::mtp; prefix-cache keys then cover one token past each page)
  // "draft" (a second, smaller model with the same vocabulary: draft_model, engine/
  // draft_model_drafter.h) or "" (none; EngineCore users may set_drafter() their own; the threaded
  // Engine then refuses num_speculative_tokens > 0).
  std::string speculative_method;
  // speculative_method "draft": the draft model, loaded by the caller on the target's backend and
  // not bound to any cache (the drafter makes its own KV store of draft_num_pages pages of
  // page_size tokens; 0 = num_pages). The caller keeps it alive while the engine runs.
  Model* draft_model = nullptr;
  int32_t draft_num_pages = 0;
  int32_t ngram_min = 2;
  int32_t ngram_max = 4;
  // Adaptive speculation (engine/spec_policy.h, docs/engine.md "Adaptive speculation"): per
  // sequence and step, ask for the drafts that pay by the cost model and the sequence's recent
  // acceptance (0..k). Off here (every decoding sequence asks for k; tests that count drafts rely
  // on it); the CLI's --speculative-adaptive defaults to on. speculative_cost_knee: the decode
  // batch where per-token work equals the step's fixed cost (< 0: the backend's default,
  // docs/performance.md); speculative_draft_cost: the drafter's cost per draft in decode steps
  // (< 0: the method's default). speculative_disable_by_batch_size: no drafts at all in a step
  // with this many decoding sequences or more, adaptive or not (vLLM's knob; 0 = never).
  bool speculative_adaptive = false;
  double speculative_cost_knee = -1;
  double speculative_draft_cost = -1;
  int32_t speculative_disable_by_batch_size = 0;
  // CUDA graphs for plain decode steps, one per batch-size bucket (engine/graph_runner.h):
  // "eager" captures every bucket at start-up, "lazy" each on first use, "off" none. Ignored
  // (off, with a log line) when the model or backend cannot run graphs (CPU backend, hybrid
  // models). Off here (library users opt in); the CLI flag --cuda-graphs defaults to eager
  // (measured: docs/engine.md "CUDA graphs").
  std::string cuda_graphs = "off";
  int32_t max_graph_batch = 0;  // largest bucket; 0 = 256; capped at max_num_seqs and the budget
  // With graphs, a verify step of uneven draft counts is padded to one count so it replays a
  // graph (engine/verify_padding.h). Tests: pad such steps with graphs off too (up to max_num_seqs
  // sequences and 1 + num_speculative_tokens tokens each), so the padding runs on the CPU backend,
  // which has no graphs.
  bool force_verify_padding = false;
  // A token that does not end its sample (no stop token, no length limit reached, and a request
  // without stop strings), other than the first of its sample, is emitted (detokenized, its event
  // queued for the client) after the next step's forward is launched rather than before it, so that
  // work overlaps the GPU's instead of leaving it idle between steps; every event still reaches the
  // client in order, before any later one of its request (an abort emits what is pending first).
  // -1: on where the backend is asynchronous (Backend::asynchronous(): CUDA; on the CPU backend it
  // would only delay the events), 0: off, 1: on (tests).
  int32_t emit_after_launch = -1;
  // A waiting request whose prefix hit loads from the host tier (host pages, a hybrid's host
  // checkpoint: kv/host_tier.h) runs no tokens in its admission step (it is loading), so it is
  // admitted after the step's forward is launched rather than before: its admission's host work
  // (its pages and their evictions, the load's copy calls; the prefix match stays before) overlaps
  // the device's step instead of delaying it. The requests waiting behind it are admitted from the
  // next step on (engine/scheduler.h). -1: on where the backend is asynchronous (CUDA; on the CPU
  // backend nothing overlaps), 0: off, 1: on (tests).
  int32_t admit_loads_after_launch = -1;
};

// One submitted request. Shared between the submitting thread (reads events) and the engine
// thread (writes them); destroying the last reference to a live request does NOT cancel it: call
// cancel() when the client goes away.
class RequestHandle {
 public:
  RequestHandle(uint64_t id, int32_t num_samples) : id_(id), channel_(num_samples) {}

  uint64_t id() const { return id_; }
  // Blocks until an event is available, the timeout passes, or the stream has ended.
  NextStatus next(Event& event, std::chrono::milliseconds timeout) {
    return channel_.pop(event, timeout);
  }
  // Non-blocking variant of next().
  NextStatus try_next(Event& event) { return channel_.pop(event, std::chrono::milliseconds(0)); }

  // The engine's side (the engine thread pushes; engine/event_waker.h's thread wakes).
  EventChannel& channel() { return channel_; }

 private:
  uint64_t id_;
  EventChannel channel_;
};

class Engine {
 public:
  // Does not start the thread; start() allocates the cache and does.
  Engine(Model& model, const Tokenizer* tokenizer, EngineOptions options);
  ~Engine();  // stop(/*drain=*/false) if still running
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Sizes the KV pool, builds the cache store (EngineCore::create) and starts the engine thread.
  // Fails (with a message) for an unusable configuration, e.g. a pool too small for one page or a
  // checkpoint interval that is not a multiple of the page size.
  Status start();

  // drain = true: refuse new requests, let every accepted request finish, then join the thread.
  // drain = false: abort every request (each sample gets a finish_reason "abort" event), then join.
  // Idempotent.
  void stop(bool drain = true);

  // Validates the request (ids in the vocabulary, prompt non-empty, prompt + max_tokens within
  // max_model_len and the pool, sampling parameters in range, stop strings need a tokenizer) and
  // queues it for the engine thread. Errors name the field, the expected range and the value
  // (code kInvalidArgument); an engine not started, stopped or stopping refuses with
  // kUnavailable (the server answers 503).
  Result<std::shared_ptr<RequestHandle>> submit(Request request);

  // Cancels a request from any thread (a disconnected client calls it). The engine frees every page
  // of the request at its next step and ends each unfinished sample with finish_reason "abort".
  // Cancelling a finished or unknown request is a no-op.
  void cancel(const RequestHandle& handle);
  void cancel(uint64_t request_id);

  // A consistent snapshot of the counters, published by the engine thread after every step.
  EngineStats stats() const;

  // The options after start() filled in the derived values (num_pages, max_model_len...).
  const EngineOptions& options() const { return options_; }
  // The cache as start() built it (the store's spec: the KV dtype and bytes per token the pool
  // holds, after options().kv_dtype); empty before start().
  const CacheSpec& cache_spec() const { return cache_spec_; }

 private:
  struct Command {
    enum Kind { kSubmit, kCancel } kind;
    std::shared_ptr<RequestHandle> handle;  // kSubmit
    Request request;                        // kSubmit
    uint64_t request_id = 0;                // kCancel
  };
  void loop();

  Model& model_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  CacheSpec cache_spec_;  // set by start(), then read-only
  std::unique_ptr<EngineCore> core_;

  mutable std::mutex mutex_;  // guards inbox_, stats_, accepting_, stop flags
  std::condition_variable wake_;
  std::deque<Command> inbox_;
  EngineStats stats_;
  bool accepting_ = false;
  bool stop_requested_ = false;
  bool drain_ = true;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;
};

}  // namespace syv
