#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "engine/device_sampling.h"
#include "engine/draft_model_drafter.h"
#include "engine/drafter_batch.h"
#include "engine/host_tier_setup.h"
#include "engine/mtp_drafter.h"
#include "engine/ngram_drafter.h"
#include "engine/verify_padding.h"
#include "model/model.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace syv {

SampleStream::SampleStream() = default;
SampleStream::SampleStream(SampleStream&&) noexcept = default;
SampleStream::~SampleStream() = default;

namespace {

// Tokens per sequence of a graph step at most: CUDA's decode attention takes chunks up to this
// long (kDecodeMaxSeqLen in cuda_backend.cpp); longer ones take the prefill kernel, whose tile
// list follows the contexts.
constexpr int32_t kMaxGraphQuery = 16;
// With --cuda-graphs eager and speculation on, the verify graphs of buckets up to this many
// sequences are captured at start-up too (GraphRunner::capture_all); larger ones on first use.
constexpr int32_t kEagerVerifyGraphBatch = 16;

}  // namespace

int32_t prompt_logprob_rows(const EngineOptions& o) {
  return o.max_prompt_logprob_rows > 0 ? o.max_prompt_logprob_rows : kMaxPromptLogprobRows;
}

int32_t planned_prompt_logprob_rows(const EngineOptions& o, int64_t device_bytes, int64_t vocab) {
  if (o.max_prompt_logprob_rows > 0) return o.max_prompt_logprob_rows;
  const int64_t rows = device_bytes / kPromptLogprobDeviceShare / (std::max<int64_t>(vocab, 1) * 4);
  return static_cast<int32_t>(std::clamp<int64_t>(rows, 16, kMaxPromptLogprobRows));
}

namespace {

// An after-the-launch engine option (EngineOptions::emit_after_launch,
// admit_loads_after_launch: -1 auto, 0 off, 1 on) resolved: auto follows the backend.
bool after_launch_on(int32_t option, const Backend& backend) {
  return option < 0 ? backend.asynchronous() : option > 0;
}
// The same for the start-up log: "on (auto: ...)".
std::string after_launch_choice(int32_t option, const Backend& backend) {
  return std::string(after_launch_on(option, backend) ? "on" : "off") + " (" +
         (option >= 0              ? "asked"
          : backend.asynchronous() ? "auto: the backend runs ahead of the host"
                                   : "auto: the backend runs ops as they are called") +
         ")";
}

SchedulerConfig scheduler_config(const EngineOptions& o, const Backend& backend) {
  return SchedulerConfig{o.max_num_seqs, o.max_num_batched_tokens, o.max_prefill_chunk,
                         o.max_prompt_logprob_rows,
                         after_launch_on(o.admit_loads_after_launch, backend)};
}

// The earliest occurrence in `text` of a stop string that ends after `min_end` (one ending at or
// before it completed earlier, when it could not match); at one position, the shortest.
struct StopMatch {
  size_t pos = std::string::npos;
  size_t len = 0;
};
StopMatch find_stop(const std::string& text, const std::vector<std::string>& stops,
                    size_t min_end) {
  StopMatch best;
  for (const std::string& stop : stops) {
    const size_t from = min_end >= stop.size() ? min_end - stop.size() + 1 : 0;
    const size_t pos = text.find(stop, from);
    if (pos == std::string::npos) continue;
    if (pos < best.pos || (pos == best.pos && stop.size() < best.len)) best = {pos, stop.size()};
  }
  return best;
}

// Longest suffix of `text` that is a proper prefix of some stop string (may still become a match).
size_t partial_stop_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& stop : stops) {
    const size_t max_len = std::min(text.size(), stop.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// The checkpoint pool's size: none without prefix caching, else o.num_checkpoints, or (when 0)
// checkpoint_cache_bytes worth, at most 8 per running sequence.
int32_t derived_checkpoints(const CacheSpec& spec, const EngineOptions& o) {
  if (!o.enable_prefix_caching) return 0;  // nothing can hit them
  if (o.num_checkpoints > 0) return o.num_checkpoints;
  const int64_t derived = o.checkpoint_cache_bytes / spec.state_bytes_per_seq;
  return static_cast<int32_t>(
      std::min<int64_t>(derived, 8 * static_cast<int64_t>(std::max(o.max_num_seqs, 1))));
}

// Hybrid models: checkpoint interval, pool size and retention policy, validated and derived.
Status resolve_hybrid_options(const CacheSpec& spec, EngineOptions& o) {
  if (o.checkpoint_interval == 0) o.checkpoint_interval = 4 * o.page_size;
  if (o.checkpoint_interval < 0 || o.checkpoint_interval % o.page_size != 0) {
    return Status::Error(
        "engine option checkpoint_interval: expected a positive multiple of the "
        "page size " +
        std::to_string(o.page_size) + ", found " + std::to_string(o.checkpoint_interval));
  }
  Result<RetentionPolicy> policy = RetentionPolicy::parse(o.prefix_retention);
  if (!policy.ok()) return Status::Error("engine option " + policy.status().message());
  if (policy.value().kind == RetentionPolicy::Kind::kEvery &&
      policy.value().every % o.checkpoint_interval != 0) {
    return Status::Error(
        "engine option prefix_retention: N = " + std::to_string(policy.value().every) +
        " must be a multiple of the checkpoint interval " + std::to_string(o.checkpoint_interval));
  }
  if (o.num_checkpoints < 0)
    return Status::Error("engine option num_checkpoints: expected >= 0, found " +
                         std::to_string(o.num_checkpoints));
  o.num_checkpoints = derived_checkpoints(spec, o);
  return Status::Ok();
}

// Adaptive speculation's cost model defaults (engine/spec_policy.h; measured with
// tools/spec_calibrate.sh: docs/performance.md "Adaptive speculation"). knee: the decode batch
// where per-token work equals the step's fixed cost. The CPU backend is compute bound from one
// sequence on (a draft row cost 1.0-1.2 decode rows at batch 1, 0.5-0.6 at 16-64, noisily): knee
// 0 makes a draft cost a full decode row, so drafting never pays there by default. CUDA, Qwen3-8B
// shape on an H200 (2026-12-02, n-gram): a draft row cost 0.07-0.15 decode rows at batch 1-8,
// 0.5 at 32 (knee 32) and 0.94 at 64, noisily (few drafts per step on random weights).
double default_cost_knee(const std::string& backend) {
  return backend == "cpu" ? 0.0 : 32.0;
}

// The drafter's own cost per draft, in target decode steps: n-gram lookup is free; the MTP head
// (a layer and the lm_head per draft, run k times in a chain) measured 1.4-1.6 on the CPU on
// models/tiny-hybrid (4 layers); the draft model models/tiny-draft (2 layers, 0.28x the
// parameters) on models/tiny-dense 0.2-0.25 (docs/performance.md).
double default_draft_cost(const std::string& method, const std::string& backend) {
  const bool cpu = backend == "cpu";
  if (method == "mtp") return cpu ? 1.5 : 0.1;
  if (method == "draft") return cpu ? 0.3 : 0.2;
  return 0.0;  // ngram and drafters set by the caller
}

SpecPolicyOptions spec_policy_options(const EngineOptions& o) {
  SpecPolicyOptions p;
  p.k = o.num_speculative_tokens;
  p.knee = o.speculative_cost_knee;
  p.draft_cost = o.speculative_draft_cost;
  p.disable_batch_size = o.speculative_disable_by_batch_size;
  return p;
}

}  // namespace

CacheSpec engine_cache_spec(const CacheSpec& model_spec, const EngineOptions& o) {
  const CacheSpec kv = o.kv_dtype ? model_spec.with_kv_dtype(*o.kv_dtype) : model_spec;
  return o.state_dtype == DType::F32 ? kv : kv.with_state_dtype(o.state_dtype);
}

int64_t engine_state_slots(const CacheSpec& spec, const EngineOptions& o) {
  if (!spec.has_recurrent_state()) return 0;
  return int64_t{o.max_num_seqs} * (1 + o.num_speculative_tokens) +
         derived_checkpoints(engine_cache_spec(spec, o), o);
}

Result<std::unique_ptr<EngineCore>> EngineCore::create(Model& model, const Tokenizer* tokenizer,
                                                       EngineOptions options) {
  const CacheSpec spec = engine_cache_spec(model.cache_spec(), options);
  if (options.page_size < 1 || options.page_size > 4096) {
    return Status::Error("engine option page_size: expected 1..4096, found " +
                         std::to_string(options.page_size));
  }
  if (spec.has_recurrent_state()) {
    SYV_RETURN_IF_ERROR(resolve_hybrid_options(spec, options));
  }
  if (options.num_pages <= 0) {
    const int64_t page_bytes = spec.kv_bytes_per_token * options.page_size;
    if (page_bytes <= 0)
      return Status::Error("engine: the model reports 0 KV bytes per token; cannot size the pool");
    options.num_pages =
        static_cast<int32_t>(std::min<int64_t>(options.kv_cache_bytes / page_bytes, 1 << 24));
    if (options.num_pages < 1) {
      return Status::Error(
          "engine option kv_cache_bytes: " + std::to_string(options.kv_cache_bytes) +
          " bytes hold no page of " + std::to_string(page_bytes) + " bytes");
    }
  }
  const int64_t pool_tokens = static_cast<int64_t>(options.num_pages) * options.page_size;
  if (options.max_model_len <= 0) {
    const int64_t model_max = model.config().max_position_embeddings;
    options.max_model_len =
        static_cast<int32_t>(model_max > 0 ? std::min(model_max, pool_tokens) : pool_tokens);
  }
  if (options.max_num_seqs < 1) return Status::Error("engine option max_num_seqs: expected >= 1");
  if (options.max_num_batched_tokens < 1)
    return Status::Error("engine option max_num_batched_tokens: expected >= 1");
  if (options.max_prefill_chunk < 0)
    return Status::Error("engine option max_prefill_chunk: expected >= 0");
  if (options.max_prompt_logprob_rows < 0)
    return Status::Error("engine option max_prompt_logprob_rows: expected >= 0 (0: the default)");
  options.max_prompt_logprob_rows = prompt_logprob_rows(options);
  if (options.num_speculative_tokens < 0 || options.num_speculative_tokens > kMaxSpeculativeTokens)
    return Status::Error("engine option num_speculative_tokens: expected 0.." +
                         std::to_string(kMaxSpeculativeTokens) + ", found " +
                         std::to_string(options.num_speculative_tokens));
  if (!options.speculative_method.empty() && options.speculative_method != "ngram" &&
      options.speculative_method != "mtp" && options.speculative_method != "draft")
    return Status::Error(
        "engine option speculative_method: expected ngram, mtp or draft (or none), "
        "found \"" +
        options.speculative_method + "\"");
  if (options.speculative_method == "draft") {
    if (options.num_speculative_tokens < 1)
      return Status::Error(
          "engine option speculative_method draft: num_speculative_tokens must be >= 1");
    if (options.draft_model == nullptr)
      return Status::Error("engine option speculative_method draft: no draft_model given");
    if (&options.draft_model->backend() != &model.backend())
      return Status::Error("engine option draft_model: the draft must run on the target's backend");
  }
  if (options.draft_model != nullptr && options.speculative_method != "draft")
    return Status::Error("engine option draft_model: given without speculative_method draft");
  if (options.draft_num_pages < 0)
    return Status::Error("engine option draft_num_pages: expected >= 0");
  if (options.speculative_method == "mtp") {
    if (options.num_speculative_tokens < 1)
      return Status::Error(
          "engine option speculative_method mtp: num_speculative_tokens must be >= 1");
    if (!model.has_mtp())
      return Status::Error(
          "engine option speculative_method mtp: the model was loaded without an MTP head "
          "(LoadOptions::mtp; a qwen3_5, qwen3_5_text or qwen3_next checkpoint with mtp.* "
          "tensors)");
  }
  if (options.speculative_method == "ngram") {
    if (options.num_speculative_tokens < 1)
      return Status::Error(
          "engine option speculative_method ngram: num_speculative_tokens must be >= 1");
    if (options.ngram_min < 1 || options.ngram_max < options.ngram_min)
      return Status::Error(
          "engine options ngram_min / ngram_max: expected 1 <= min <= max, found " +
          std::to_string(options.ngram_min) + " / " + std::to_string(options.ngram_max));
  }
  if (!(options.speculative_cost_knee < 1e9) || !(options.speculative_draft_cost < 1e9))
    return Status::Error(
        "engine options speculative_cost_knee / speculative_draft_cost: expected "
        "finite numbers (< 0: the defaults)");
  if (options.speculative_disable_by_batch_size < 0)
    return Status::Error("engine option speculative_disable_by_batch_size: expected >= 0, found " +
                         std::to_string(options.speculative_disable_by_batch_size));
  if (options.speculative_cost_knee < 0)
    options.speculative_cost_knee = default_cost_knee(model.backend().name());
  if (options.speculative_draft_cost < 0)
    options.speculative_draft_cost =
        default_draft_cost(options.speculative_method, model.backend().name());
  SYV_ASSIGN_OR_RETURN(GraphMode graph_mode, parse_graph_mode(options.cuda_graphs));
  if (options.max_graph_batch < 0) {
    return Status::Error("engine option max_graph_batch: expected >= 0, found " +
                         std::to_string(options.max_graph_batch));
  }
  if (graph_mode != GraphMode::kOff && !model.supports_graphs()) {
    SYV_LOG(INFO) << "graphs: off (backend " << model.backend().name() << " has no CUDA graphs)";
    graph_mode = GraphMode::kOff;
  }
  options.cuda_graphs = to_string(graph_mode);
  if (graph_mode != GraphMode::kOff) {
    options.max_graph_batch = std::min({options.max_graph_batch > 0 ? options.max_graph_batch : 256,
                                        options.max_num_seqs, options.max_num_batched_tokens});
  }

  CacheConfig cache;
  cache.page_size = options.page_size;
  cache.num_pages = options.num_pages;
  cache.kv_dtype = options.kv_dtype;
  if (graph_mode != GraphMode::kOff) ++cache.num_pages;  // the dummy page of graph padding rows
  if (spec.has_recurrent_state()) {
    if (options.state_dtype != DType::F32) cache.state_dtype = options.state_dtype;
    cache.num_state_slots = options.max_num_seqs;
    cache.num_checkpoints = options.num_checkpoints;
    // Verify steps: k entries per slot after the pool's checkpoints (HybridState's verify saves).
    cache.num_checkpoints += options.max_num_seqs * options.num_speculative_tokens;
  }
  SYV_ASSIGN_OR_RETURN(std::unique_ptr<CacheStore> store,
                       CacheStore::create(spec, cache, model.backend()));
  SYV_LOG(INFO) << "engine: " << store->describe();
  model.bind_cache(*store);
  if (spec.has_recurrent_state()) {
    SYV_LOG(INFO) << "engine: state: " << spec.state_bytes_per_seq
                  << " bytes/seq, checkpoint interval " << options.checkpoint_interval
                  << ", pool for " << options.num_checkpoints << " checkpoints ("
                  << ((spec.state_bytes_per_seq * options.num_checkpoints) >> 20) << " MiB), "
                  << options.max_num_seqs << " state slots, prefix retention "
                  << options.prefix_retention;
  }
  SYV_LOG(INFO) << "engine: " << options.num_pages << " KV pages of " << options.page_size
                << " tokens (" << pool_tokens << " tokens, "
                << (spec.kv_bytes_per_token * pool_tokens >> 20) << " MiB), max_num_seqs "
                << options.max_num_seqs << ", token budget " << options.max_num_batched_tokens
                << ", prefix caching " << (options.enable_prefix_caching ? "on" : "off")
                << ", max_model_len " << options.max_model_len;
  SYV_LOG(INFO) << "engine: emit after launch "
                << after_launch_choice(options.emit_after_launch, model.backend());
  if (options.host_cache_bytes != 0 || options.host_num_pages > 0) {
    SYV_LOG(INFO) << "engine: host-tier hits admitted after the step's launch "
                  << after_launch_choice(options.admit_loads_after_launch, model.backend());
  }
  if (options.num_speculative_tokens > 0) {
    const int64_t verify_entries = int64_t{options.max_num_seqs} * options.num_speculative_tokens;
    SYV_LOG(INFO)
        << "engine: speculative decoding: up to " << options.num_speculative_tokens
        << " drafts per sequence and step from "
        << (options.speculative_method == "ngram"
                ? "prompt lookup (n-grams of " + std::to_string(options.ngram_min) + ".." +
                      std::to_string(options.ngram_max) + " tokens)"
            : options.speculative_method == "mtp"
                ? "the MTP head (greedy; its K/V in every page, " +
                      std::to_string(spec.kv_layers.back().bytes_per_token()) +
                      " bytes/token; prefix pages keyed with their next token)"
            : options.speculative_method == "draft" ? std::string("a draft model")
                                                    : std::string("the drafter set by the caller"))
        << (spec.has_recurrent_state()
                ? ", " + std::to_string(verify_entries) + " verify states for rejected drafts (" +
                      std::to_string((spec.state_bytes_per_seq * verify_entries) >> 20) + " MiB)"
                : std::string());
    SYV_LOG(INFO) << "engine: speculative decoding: "
                  << (options.speculative_adaptive
                          ? SpecPolicy(spec_policy_options(options)).describe()
                          : std::string("adaptivity off: every decoding sequence asks for k "
                                        "drafts"))
                  << (!options.speculative_adaptive && options.speculative_disable_by_batch_size > 0
                          ? "; no drafts at " +
                                std::to_string(options.speculative_disable_by_batch_size) +
                                "+ decoding sequences"
                          : std::string());
  }
  SYV_ASSIGN_OR_RETURN(HostTierPlan host_plan,
                       plan_host_tier(options, *store, host_available_memory().bytes));
  options.host_num_pages = host_plan.num_pages;
  options.host_num_checkpoints = host_plan.num_checkpoints;
  auto core = std::make_unique<EngineCore>(model, tokenizer, options, std::move(store));
  if (!host_plan.enabled()) {
    SYV_LOG(INFO) << "engine: host tier " << host_plan.reason;
  } else {
    // Host pages carry the device index's keys, over as many tokens (lookahead included). Its
    // memory is pinned piece by piece between steps (kv/host_tier.h "Memory").
    // The default reserve also covers one longest sequence's pages: a host hit of that length
    // evicts as many device pages to the tier in its admission step.
    HostPinOptions pin;
    const int64_t longest =
        core->store_->external_page_bytes() *
        ((int64_t{options.max_model_len} + options.page_size - 1) / options.page_size);
    pin.reserve_bytes = options.host_pin_reserve_bytes >= 0
                            ? options.host_pin_reserve_bytes
                            : std::max(kHostPinReserveBytes, longest);
    if (options.host_pin_piece_bytes != 0) pin.piece_bytes = options.host_pin_piece_bytes;
    pin.fault_in_background = options.host_fault_in_background;
    pin.pin_all_while_idle = options.host_pin_all_while_idle;
    SYV_ASSIGN_OR_RETURN(auto tier,
                         HostTier::create(*core->store_, core->cache_.index().key_tokens(),
                                          host_plan.num_pages, host_plan.num_checkpoints, pin));
    SYV_LOG(INFO) << "engine: " << tier->describe() << "; " << host_plan.reason;
    core->attach_host_tier(std::move(tier));
  }
  if (options.speculative_method == "ngram")
    core->set_drafter(std::make_unique<NgramDrafter>(options.ngram_min, options.ngram_max));
  MtpDrafter* mtp = nullptr;
  if (options.speculative_method == "mtp") {
    auto drafter =
        std::make_unique<MtpDrafter>(model, core->cache().pool(), options.page_size,
                                     options.num_speculative_tokens, options.max_model_len);
    mtp = drafter.get();
    core->set_drafter(std::move(drafter));
  }
  if (options.speculative_method == "draft") {
    SYV_ASSIGN_OR_RETURN(
        std::unique_ptr<DraftModelDrafter> drafter,
        DraftModelDrafter::create(
            *options.draft_model, model.config().vocab_size, options.page_size,
            options.draft_num_pages > 0 ? options.draft_num_pages : options.num_pages,
            options.num_speculative_tokens, options.max_model_len, options.max_num_batched_tokens));
    SYV_LOG(INFO) << "engine: draft model: " << drafter->describe();
    core->set_drafter(std::move(drafter));
  }
  if (graph_mode != GraphMode::kOff) {
    GraphConfig g;
    g.mode = graph_mode;
    g.max_batch = options.max_graph_batch;
    g.page_size = options.page_size;
    g.pages_per_seq = (options.max_model_len + options.page_size - 1) / options.page_size;
    g.dummy_page = options.num_pages;  // the store has one page beyond the pool
    g.max_context = options.max_model_len;
    // Verify steps with the same draft count everywhere run as graphs too, up to
    // kMaxGraphQuery tokens per sequence (longer chunks take CUDA's prefill attention, whose tile
    // list follows the contexts), a page (a dummy sequence's positions fit the dummy page), and
    // the token budget over the largest bucket (so the graphs' reservation stays within the
    // activations the memory plan counts for a step of the budget).
    const int32_t rows_per_seq = 1 + options.num_speculative_tokens;
    g.max_query = std::max(1, std::min({rows_per_seq, kMaxGraphQuery, options.page_size,
                                        options.max_num_batched_tokens / options.max_graph_batch}));
    const int64_t largest_graph = int64_t{options.max_graph_batch} * g.max_query;
    g.max_tokens = std::max<int64_t>(options.max_num_batched_tokens, largest_graph);
    // A verify step wants 1 + k rows per sequence; prompt-logprob rows come on top (eager steps,
    // same reservation).
    g.max_logit_rows = static_cast<int32_t>(
        std::max<int64_t>(
            std::min<int64_t>(options.max_num_seqs * rows_per_seq, options.max_num_batched_tokens),
            largest_graph) +
        options.max_prompt_logprob_rows);
    const auto t0 = std::chrono::steady_clock::now();
    core->graphs_ = std::make_unique<GraphRunner>(model, g);
    // Verify graphs of small batches too, where speculation pays most: captured on first use they
    // cost the first speculating requests a capture per draft count (the H200 serve log: 15
    // decode buckets of the Qwen3-8B shape in 0.42 s, ~28 ms a capture on average), which short
    // benchmarks counted as speculation's cost.
    if (graph_mode == GraphMode::kEager)
      core->graphs_->capture_all(g.max_query > 1 ? kEagerVerifyGraphBatch : 0);
    // The MTP head's forwards too (captured on first use) where the model lets them be captured
    // (Model::supports_mtp_graphs; otherwise they run eagerly): its eager forwards take at most a
    // step's tokens, and a logits row per sequence.
    const bool mtp_graphs = mtp != nullptr && model.supports_mtp_graphs();
    if (mtp_graphs)
      mtp->enable_graphs(g, std::max(options.max_num_batched_tokens, options.max_num_seqs),
                         options.max_num_seqs);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<int32_t>& b = core->graphs_->buckets();
    std::ostringstream line;
    line << "graphs: " << b.size() << " buckets (" << b.front() << ".." << b.back() << ") ";
    if (g.max_query > 1)
      line << "for decode and for verify steps of up to " << g.max_query - 1
           << " drafts per sequence (uneven counts padded to the most where that pays; "
           << (graph_mode == GraphMode::kEager ? "up to " + std::to_string(kEagerVerifyGraphBatch) +
                                                     " sequences captured now, more on first use), "
                                               : std::string("captured on first use), "));
    if (mtp_graphs)
      line << "the MTP head's forwards of up to " << g.max_batch
           << " rows (captured on first use), ";
    else if (mtp != nullptr)
      line << "not the MTP head's forwards (eager: the model cannot capture them), ";
    if (graph_mode == GraphMode::kEager)
      line << "captured in " << seconds << " s";
    else
      line << "captured on first use (lazy)";
    line << "; page table width " << g.pages_per_seq << ", split choice for context "
         << g.max_context << ", padding rows write page " << g.dummy_page
         << " (one page beyond the pool), activations reserved for " << g.max_tokens << " tokens / "
         << g.max_logit_rows << " logits rows";
    SYV_LOG(INFO) << line.str();
    core->update_gauges();
  }
  return core;
}

EngineCore::EngineCore(Model& model, const Tokenizer* tokenizer, const EngineOptions& options,
                       std::unique_ptr<CacheStore> store)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      store_(std::move(store)),
      vocab_size_(model.config().vocab_size),
      // MTP: the head's K/V at a page's last position depends on the next token (mtp_drafter.h).
      cache_(options.num_pages, options.page_size, options.enable_prefix_caching,
             options.speculative_method == "mtp" ? 1 : 0),
      scheduler_(cache_, scheduler_config(options, model.backend())) {
  if (options.speculative_adaptive && options.num_speculative_tokens > 0)
    spec_policy_ = std::make_unique<SpecPolicy>(spec_policy_options(options));
  emit_after_launch_ = after_launch_on(options.emit_after_launch, model.backend());
  eos_ids_ = model.config().eos_token_ids;
  if (tokenizer_ != nullptr) {
    if (auto eos = tokenizer_->eos_token_id()) eos_ids_.push_back(*eos);
    grammars_ = std::make_unique<GrammarSessions>(*tokenizer_);
  }
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  stats_.pages_total = options.num_pages;
  if (model.cache_spec().has_recurrent_state()) {
    Result<RetentionPolicy> policy = RetentionPolicy::parse(options.prefix_retention);
    SYV_CHECK(policy.ok()) << policy.status().message();  // create() validated it
    hybrid_ = std::make_unique<HybridState>(
        *store_, CheckpointGeometry(options.page_size, options.checkpoint_interval), policy.value(),
        options.max_num_seqs, options.num_checkpoints, options.num_speculative_tokens);
    scheduler_.set_hybrid(hybrid_.get());
    stats_.checkpoint_bytes = store_->spec().state_bytes_per_seq * options.num_checkpoints;
  }
  update_gauges();
}

Status EngineCore::validate(const Request& request) const {
  SYV_RETURN_IF_ERROR(request.params.validate());
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt_len == 0) return Status::Error("request prompt: expected at least 1 token, found 0");
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= vocab_size_) {
      return Status::Error("request prompt token " + std::to_string(i) +
                           ": expected an id in [0, " + std::to_string(vocab_size_) + "), found " +
                           std::to_string(id));
    }
  }
  // max_tokens 0 (prompt logprobs only) still draws the token after the prompt.
  const int64_t total = prompt_len + std::max(request.params.max_tokens, 1);
  if (total > options_.max_model_len) {
    return Status::Error("request: prompt (" + std::to_string(prompt_len) +
                         " tokens) + max_tokens (" + std::to_string(request.params.max_tokens) +
                         ") = " + std::to_string(total) + " exceeds the maximum context length " +
                         std::to_string(options_.max_model_len));
  }
  for (const auto& [id, bias] : request.params.logit_bias) {
    if (id >= vocab_size_) {
      return Status::Error("sampling parameter logit_bias: token id " + std::to_string(id) +
                           " is outside the vocabulary [0, " + std::to_string(vocab_size_) + ")");
    }
  }
  const int64_t pool_tokens = static_cast<int64_t>(options_.num_pages) * options_.page_size;
  if (total > pool_tokens) {
    return Status::Error("request: prompt + max_tokens = " + std::to_string(total) +
                         " tokens do not fit the KV pool of " + std::to_string(pool_tokens) +
                         " tokens");
  }
  if (request.params.grammar != nullptr) {
    const SamplingParams& p = request.params;
    if (tokenizer_ == nullptr) {
      return Status::Error(
          "structured output: a grammar needs the tokenizer's token bytes, and this engine has "
          "no tokenizer");
    }
    if (p.ignore_eos) {
      return Status::Error(
          "sampling parameter ignore_eos: cannot be combined with a structured "
          "output (the grammar decides where the output ends)");
    }
    if (p.min_tokens > 0) {
      return Status::Error(
          "sampling parameter min_tokens: cannot be combined with a structured "
          "output (the grammar decides where the output ends)");
    }
    if (eos_ids_.empty() && p.stop_token_ids.empty()) {
      return Status::Error(
          "structured output: the model declares no end-of-sequence token, so "
          "a complete output could not end; pass stop_token_ids");
    }
  }
  if (!request.params.stop.empty() && tokenizer_ == nullptr) {
    return Status::Error(
        "sampling parameter stop: stop strings need a tokenizer, and this engine has none");
  }
  return Status::Ok();
}

void EngineCore::add_request(uint64_t id, Request request, std::shared_ptr<RequestHandle> handle) {
  SYV_CHECK(groups_.count(id) == 0) << "request id " << id << " reused";
  auto group = std::make_unique<RequestGroup>();
  group->id = id;
  group->request = std::move(request);
  group->handle = std::move(handle);
  const SamplingParams& params = group->request.params;
  group->stop_ids = params.stop_token_ids;
  if (!params.ignore_eos)
    group->stop_ids.insert(group->stop_ids.end(), eos_ids_.begin(), eos_ids_.end());
  const uint64_t seed = params.seed ? *params.seed : std::random_device{}() * 0x100000001ull ^ id;
  group->unfinished = params.n;
  for (int32_t i = 0; i < params.n; ++i) {
    Sequence* parent = i == 0 ? nullptr : group->seqs[0].get();
    group->seqs.push_back(std::make_unique<Sequence>(next_seq_id_++, group->request.prompt_ids,
                                                     &params, i, group.get(), parent));
    SampleStream stream;
    stream.sampler = SamplerState(sample_seed(seed, i));
    if (params.repetition_penalty != 1.0f) stream.sampler.add_prompt(group->request.prompt_ids);
    if (params.min_tokens > 0) stream.sampler.stop_ids = group->stop_ids;
    if (params.grammar != nullptr) {
      SYV_CHECK(grammars_ != nullptr) << "a grammar request passed validate() without a tokenizer";
      stream.matcher.emplace(grammars_->session(params.grammar));
      stream.sampler.constrained = true;
    }
    if (tokenizer_ != nullptr)
      stream.detokenizer =
          std::make_unique<IncrementalDetokenizer>(*tokenizer_, params.skip_special_tokens);
    group->streams.push_back(std::move(stream));
  }
  for (auto& seq : group->seqs) scheduler_.add(seq.get());
  groups_.emplace(id, std::move(group));
  update_gauges();
}

void EngineCore::abort_request(uint64_t id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  RequestGroup& group = *it->second;
  emit_pending(&group);  // its tokens so far reach the client before the abort
  for (auto& seq : group.seqs) {
    if (seq->is_done()) continue;
    scheduler_.abort(seq.get());
    if (drafter_ != nullptr) drafter_->forget(*seq);
    Event event;
    event.sample_index = seq->sample_index();
    event.finish_reason = "abort";
    event.prompt_tokens = seq->prompt_len();
    event.cached_tokens = group.seqs[0]->cached_tokens;
    if (group.handle) group.handle->channel().push(std::move(event));
  }
  ++stats_.requests_aborted;
  groups_.erase(it);
  update_gauges();
}

void EngineCore::abort_all() {
  std::vector<uint64_t> ids;
  for (const auto& [id, group] : groups_) ids.push_back(id);
  for (uint64_t id : ids) abort_request(id);
}

void EngineCore::attach_host_tier(std::unique_ptr<HostTier> tier) {
  host_ = std::move(tier);
  cache_.set_host_tier(host_.get());
  if (hybrid_ != nullptr) hybrid_->set_host_tier(host_.get());
  update_gauges();
}

bool EngineCore::between_steps(bool idle) {
  if (host_ == nullptr) return false;
  // Write-ahead (kv/host_tier.h "Write-ahead"): the pages the next step could take, at most: a
  // new page for every running sequence and the step's token budget in pages; or, when more and
  // the host tier holds at least two max_model_len sequences, the pages of one, which a host hit
  // that long allocates in its admission step (else that step writes back what it evicts as one
  // large batch). The window's pages are held in both tiers until evicted, hence the condition.
  // Under pressure (fewer free and cached pages than the window) the registered pages of running
  // sequences too, at most the next step's pages a gap, about what a step registers: when such a
  // sequence ends, the pages it releases are stored already (PrefixCache::write_ahead).
  const int32_t ps = cache_.page_size();
  const int32_t next_step =
      scheduler_.num_running() + (options_.max_num_batched_tokens + ps - 1) / ps;
  const int32_t longest = (options_.max_model_len + ps - 1) / ps;
  const int32_t window =
      host_->num_pages() >= 2 * int64_t{longest} ? std::max(next_step, longest) : next_step;
  // The write-ahead's copies are issued after the next step's forward is launched (step()), or
  // now when no step follows (Backend::defer_copies()).
  Backend& backend = model_.backend();
  if (!idle) backend.defer_copies();
  const int32_t ahead =
      options_.host_write_ahead ? cache_.write_ahead(window, /*max_in_use=*/next_step) : 0;
  if (idle) backend.flush_copies();
  const uint64_t pinned = host_->counters().pieces_pinned;
  const bool more = host_->between_steps(idle);
  if (ahead > 0 || host_->counters().pieces_pinned != pinned) update_gauges();
  return more;
}

void EngineCore::step() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t_begin = Clock::now();
  // The schedule phase's copies (a host hit's loads, an admission's write-backs) are issued once
  // the forward is launched, so issuing them overlaps the GPU's work (Backend::defer_copies()).
  Backend& backend = model_.backend();
  if (host_ != nullptr) backend.defer_copies();
  if (drafter_ != nullptr && options_.num_speculative_tokens > 0) propose_drafts();
  scheduler_.schedule(step_);
  stats_.preemptions += static_cast<uint64_t>(step_.num_preempted);
  // The step's admission counters, once every admission of the step is made.
  auto count_admissions = [this] {
    stats_.prompt_tokens += static_cast<uint64_t>(step_.prompt_tokens);
    stats_.prefix_query_tokens += static_cast<uint64_t>(step_.prefix_query_tokens);
    stats_.prefix_hit_tokens += static_cast<uint64_t>(step_.prefix_hit_tokens);
    stats_.prefix_host_hit_tokens += static_cast<uint64_t>(step_.prefix_host_hit_tokens);
  };
  if (step_.empty()) {
    scheduler_.admit_after_launch(step_);  // (a deferred admission: no forward to overlap)
    count_admissions();
    SYV_CHECK(!scheduler_.has_work() || scheduler_.num_running() > 0)
        << "scheduler stalled: " << scheduler_.num_waiting() << " waiting, nothing admissible, "
        << cache_.pool().num_available() << " pages available";
    update_gauges();
    // Only loading sequences run (kv/inflight_loads.h): let their copies land for a moment
    // rather than spin the engine thread on the poll; a request that arrives meanwhile waits at
    // most this long to be admitted.
    backend.flush_copies();
    emit_pending();
    if (host_ != nullptr && host_->loads().num_unsettled() > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    return;
  }
  pad_verify_step();
  // Plain decode and verify steps replay their bucket's CUDA graph (padded); everything else runs
  // eagerly.
  const bool as_graph = graphs_ != nullptr && graphs_->accepts(step_);
  const Batch& batch = runner_.build(step_, as_graph ? graphs_->config().pages_per_seq : 0);
  // Hybrids: no step makes more delta-rule chunks than the memory plan counts scratch for (every
  // sequence counted, as if all were chunked).
  if (gdn_spare_chunks_ < kGdnPhasesSpareChunks && !batch.state_slots.empty()) {
    SYV_CHECK(gdn_chunk_bound(batch, 1) <=
              gdn_phases_max_chunks(batch.num_tokens(), gdn_spare_chunks_))
        << "step of " << batch.num_seqs() << " sequences, " << batch.num_tokens() << " tokens, "
        << batch.state_save_after.size() << " state saves: more delta-rule chunks than the "
        << "memory plan counts";
  }
  const bool plain_decode = step_.num_tokens == static_cast<int32_t>(step_.seqs.size());
  const uint64_t step_rows = step_.seqs.size();
  const uint64_t step_tokens = static_cast<uint64_t>(step_.num_tokens - step_.num_padding);
  uint64_t context_tokens = 0;
  if (plain_decode)
    for (const ScheduledSeq& s : step_.seqs)
      context_tokens += static_cast<uint64_t>(s.seq->num_computed) + 1;
  const Clock::time_point t_forward = Clock::now();
  Model::Outputs outputs;
  if (as_graph) {
    outputs = graphs_->run(batch);
  } else {
    model_.forward(batch, outputs);
  }
  // Host-tier hits admitted while the device runs the step (EngineOptions::
  // admit_loads_after_launch); their copies are issued with the schedule phase's, next.
  scheduler_.admit_after_launch(step_);
  count_admissions();
  backend.flush_copies();
  emit_pending();  // the previous step's, while the device runs this one
  const Tensor logits = outputs.logits;
  if (as_graph) {
    ++stats_.graph_steps;
    if (batch.num_tokens() > batch.num_seqs()) ++stats_.graph_verify_steps;
    stats_.graph_padding_rows +=
        static_cast<uint64_t>(graphs_->bucket_for(batch.num_seqs()) - batch.num_seqs());
  }
  const size_t rows = batch.logit_rows.size();
  SYV_CHECK(logits.ndim == 2 && logits.dim(0) == static_cast<int64_t>(rows) &&
            logits.dtype == DType::F32)
      << "model returned logits of rank " << logits.ndim << " with " << logits.dim(0)
      << " rows, expected " << rows;
  const int32_t vocab = static_cast<int32_t>(logits.dim(1));
  const std::vector<int32_t>& owner = runner_.row_owner();
  // Device sampling (only ids cross) unless the backend lacks it or a row wants logprobs.
  bool on_device = rows > 0 && model_.backend().supports_sampling();
  for (size_t r = 0; on_device && r < rows; ++r)
    on_device = !needs_host_sampling(step_.seqs[static_cast<size_t>(owner[r])].seq->params());
  std::vector<int32_t> device_ids;
  if (on_device) {
    std::vector<SampleRow> sample_rows(rows);
    std::vector<SamplePenalty> penalties;
    for (size_t r = 0; r < rows;) {
      const ScheduledSeq& s = step_.seqs[static_cast<size_t>(owner[r])];
      Sequence& seq = *s.seq;
      const SamplingParams& params = seq.params();
      SampleStream& stream = seq.group()->streams[static_cast<size_t>(seq.sample_index())];
      // A filler position's row (a padded verify step): greedy, unpenalised, its id dropped.
      auto skip_padding = [&] {
        for (int32_t j = 0; j < s.num_padding; ++j) sample_rows[r++] = SampleRow{};
      };
      if (s.num_drafts == 0) {
        sample_rows[r++] = make_sample_row(params, stream.sampler, penalties);
        skip_padding();
        continue;
      }
      // Row j as plain decoding would sample it after drafts 0..j-1: a copy of the state takes
      // the draws and the drafts; the real state follows only the tokens kept (sample_sequence).
      const bool penalised = params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                             params.frequency_penalty != 0.0f;
      SamplerState probe;
      if (penalised) probe = stream.sampler;
      probe.rng = stream.sampler.rng;
      for (int32_t j = 0; j <= s.num_drafts; ++j) {
        sample_rows[r++] = make_sample_row(params, probe, penalties);
        if (j < s.num_drafts && penalised) probe.add_output(seq.drafts[static_cast<size_t>(j)]);
      }
      skip_padding();
    }
    device_ids.resize(rows);
    model_.backend().sample(logits, sample_rows, penalties, device_ids.data());
  } else {
    host_logits_.resize(rows * static_cast<size_t>(vocab));
    if (rows > 0)
      model_.backend().download(host_logits_.data(), logits.data,
                                host_logits_.size() * sizeof(float));
  }
  ++stats_.steps;
  stats_.computed_tokens += step_tokens;
  const Clock::time_point t_output = Clock::now();

  // Sample (keeping drafts up to the first rejection), then commit what each sequence keeps, then
  // emit: the scheduler registers pages over tokens that are already in seq.tokens.
  results_.clear();
  result_begin_.assign(step_.seqs.size() + 1, 0);
  for (size_t i = 0, r = 0; i < step_.seqs.size(); ++i) {
    result_begin_[i] = results_.size();
    if (step_.seqs[i].num_prompt_rows > 0) {  // host rows: such a request never samples on device
      score_prompt(i, r, host_logits_.data(), vocab);
      r += static_cast<size_t>(step_.seqs[i].num_prompt_rows);
    }
    if (!step_.seqs[i].wants_logits) continue;
    sample_sequence(i, r, on_device ? nullptr : host_logits_.data(), vocab, device_ids);
    r += static_cast<size_t>(step_.seqs[i].num_drafts + step_.seqs[i].num_padding) + 1;
  }
  result_begin_[step_.seqs.size()] = results_.size();
  scheduler_.commit(step_);
  if (drafter_ != nullptr && options_.num_speculative_tokens > 0) {
    plan_drafts();
    drafter_->observe(step_, batch, outputs);
  }
  for (size_t i = 0; i < step_.seqs.size(); ++i) {
    const size_t begin = result_begin_[i], end = result_begin_[i + 1];
    if (begin == end) continue;
    Sequence& seq = *step_.seqs[i].seq;
    RequestGroup& group = *seq.group();
    const int32_t length_before = seq.length() - static_cast<int32_t>(end - begin);
    // Either all of the step's tokens of the sequence wait for the next launch, or none (its
    // events stay in order).
    bool wait = emit_after_launch_;
    for (size_t t = begin; wait && t < end; ++t)
      wait = emit_can_wait(group, seq, results_[t],
                           length_before + static_cast<int32_t>(t - begin) + 1);
    for (size_t t = begin; t < end; ++t) {
      if (seq.params().max_tokens > 0) ++stats_.generated_tokens;  // 0: nothing is returned
      const int32_t length = length_before + static_cast<int32_t>(t - begin) + 1;
      if (wait) {
        pending_emits_.push_back(
            {&group, &seq, std::move(results_[t]), length, group.seqs[0]->cached_tokens});
        continue;
      }
      // may end the sample and destroy the sequence and its group
      if (emit(group, seq, results_[t], length)) break;
    }
  }
  waker_.wake(to_wake_);  // the clients wake on the waker's thread while this one goes on
  update_gauges();
  const Clock::time_point t_end = Clock::now();
  stats_.schedule_seconds += std::chrono::duration<double>(t_forward - t_begin).count();
  stats_.forward_seconds += std::chrono::duration<double>(t_output - t_forward).count();
  stats_.output_seconds += std::chrono::duration<double>(t_end - t_output).count();
  const double forward_s = std::chrono::duration<double>(t_output - t_forward).count();
  if (plain_decode) {
    ++stats_.decode_steps;
    stats_.decode_rows += step_rows;
    stats_.decode_context_tokens += context_tokens;
    stats_.decode_forward_seconds += forward_s;
  } else {
    ++stats_.other_steps;
    stats_.other_tokens += step_tokens;
    stats_.other_forward_seconds += forward_s;
  }
}

void EngineCore::pad_verify_step() {
  // A step without drafts (every plain decode step) has nothing to pad: no O(S) walk for it.
  if (step_.num_tokens == static_cast<int32_t>(step_.seqs.size())) return;
  int32_t q = 0;
  if (graphs_ != nullptr) {
    q = graphs_->padded_query(step_);
    if (q > 0 && !verify_padding_pays(step_, q, options_.speculative_cost_knee)) {
      ++stats_.verify_padding_skipped;
      return;
    }
  } else if (options_.force_verify_padding) {
    q = padded_verify_query(step_, options_.max_num_seqs, 1 + options_.num_speculative_tokens,
                            hybrid_ != nullptr ? 1 : 0, options_.max_model_len);
  }
  if (q == 0) return;
  if (!scheduler_.pad_verify(step_, q)) {
    ++stats_.verify_padding_refused;
    return;
  }
  ++stats_.verify_padded_steps;
  stats_.verify_padding_tokens += static_cast<uint64_t>(step_.num_padding);
}

void EngineCore::plan_drafts() {
  const int32_t disable_at = options_.speculative_disable_by_batch_size;
  if (spec_policy_ == nullptr && disable_at == 0) return;  // every sequence may take k
  const int32_t k = options_.num_speculative_tokens;
  int32_t batch = 0;
  for (const Sequence* seq : scheduler_.running())
    batch += seq->state == SequenceState::kDecoding ? 1 : 0;
  // With graphs, probes share every probe_interval-th step (engine/spec_policy.h).
  const int32_t interval = spec_policy_ != nullptr ? spec_policy_->options().probe_interval : 0;
  const bool probe_step = graphs_ == nullptr || interval <= 0 || stats_.steps % interval == 0;
  for (Sequence* seq : scheduler_.running()) {
    if (seq->state != SequenceState::kDecoding) continue;
    const int32_t room = draft_room(*seq, k, options_.max_model_len, /*with_budget=*/false);
    seq->draft_probe = false;
    if (room <= 0) {
      seq->draft_budget = 0;
    } else if (spec_policy_ != nullptr) {  // honours disable_at too
      const SpecDecision d = spec_policy_->decide(seq->spec, room, batch, probe_step,
                                                  graphs_ != nullptr ? kVerifyPaddingCostBound : 0);
      seq->draft_budget = d.drafts;
      seq->draft_probe = d.probe;
    } else {
      seq->draft_budget = batch >= disable_at ? 0 : k;
    }
  }
}

void EngineCore::propose_drafts() {
  const int32_t k = options_.num_speculative_tokens;
  bool all_decoding = true, any = false;
  for (Sequence* seq : scheduler_.running()) {
    seq->drafts.clear();
    all_decoding = all_decoding && seq->state == SequenceState::kDecoding;
    if (seq->state != SequenceState::kDecoding) continue;
    const int32_t room = draft_room(*seq, k, options_.max_model_len);
    if (room <= 0) {
      // Room the policy (or the batch-size cutoff) left unused.
      if (draft_room(*seq, k, options_.max_model_len, /*with_budget=*/false) > 0)
        ++stats_.draft_skipped;
      continue;
    }
    drafter_->propose(*seq, room, seq->drafts);
    if (static_cast<int32_t>(seq->drafts.size()) > room) seq->drafts.resize(room);
    for (int32_t id : seq->drafts)
      SYV_CHECK(id >= 0 && id < vocab_size_) << "drafter proposed token " << id;
    any = any || !seq->drafts.empty();
  }
  // A step of uneven draft counts can replay a graph only padded or eagerly: the drafts actually
  // proposed (a prompt-lookup drafter finds some for a few sequences of the many its budget
  // allows) must pay for that too, else only the probes keep theirs. A step with a prefill runs
  // eagerly anyway.
  if (!any || spec_policy_ == nullptr || graphs_ == nullptr || !all_decoding) return;
  plans_.clear();
  for (const Sequence* seq : scheduler_.running())
    plans_.push_back({spec_policy_->acceptance(seq->spec), static_cast<int32_t>(seq->drafts.size()),
                      seq->draft_probe});
  if (spec_policy_->step_pays(plans_.data(), static_cast<int32_t>(plans_.size()),
                              kVerifyPaddingCostBound))
    return;
  for (Sequence* seq : scheduler_.running()) {
    if (!seq->draft_probe) seq->drafts.clear();
  }
  ++stats_.spec_steps_dropped;
}

void EngineCore::score_prompt(size_t i, size_t row, const float* host_rows, int32_t vocab) {
  const ScheduledSeq& s = step_.seqs[i];
  const Sequence& seq = *s.seq;
  RequestGroup& group = *seq.group();
  const int32_t k = seq.params().prompt_logprobs;
  SYV_CHECK_EQ(static_cast<int32_t>(group.prompt_logprobs.size()), s.prompt_rows_from)
      << "seq " << seq.id() << ": prompt rows out of order";
  for (int32_t j = 0; j < s.num_prompt_rows; ++j) {
    const float* logits = host_rows + (row + static_cast<size_t>(j)) * static_cast<size_t>(vocab);
    // The row at position p is the distribution of the token at p + 1.
    const int32_t token = seq.tokens[static_cast<size_t>(s.prompt_rows_from + j + 1)];
    SYV_CHECK(token >= 0 && token < vocab) << "prompt token " << token;
    const float lse = log_sum_exp(logits, vocab);
    PromptLogprob entry;
    entry.token = {token, logits[token] - lse};
    entry.rank = 1 + static_cast<int32_t>(std::count_if(
                         logits, logits + vocab, [&](float v) { return v > logits[token]; }));
    most_likely(logits, vocab, k, lse, score_scratch_, entry.top);
    group.prompt_logprobs.push_back(std::move(entry));
  }
}

void EngineCore::sample_sequence(size_t i, size_t row, const float* host_rows, int32_t vocab,
                                 const std::vector<int32_t>& device_ids) {
  ScheduledSeq& s = step_.seqs[i];
  Sequence& seq = *s.seq;
  RequestGroup& group = *seq.group();
  const SamplingParams& params = seq.params();
  SampleStream& stream = group.streams[static_cast<size_t>(seq.sample_index())];
  int32_t j = 0;
  for (;; ++j) {
    const size_t r = row + static_cast<size_t>(j);
    SampleResult sample;
    if (host_rows == nullptr) {
      SYV_CHECK(!stream.matcher) << "a constrained row was sampled on the device";
      sample.token_id = device_ids[r];
      // make_sample_row drew for a draft sequence's rows from a copy: replay the one draw here.
      if (s.num_drafts > 0 && params.temperature != 0.0f) stream.sampler.rng.uniform();
      stream.sampler.add_output(sample.token_id);
    } else {
      // Structured output: row j is masked by the grammar after the tokens kept before it, so a
      // draft the grammar refuses can never equal the sampled token (it is rejected).
      if (stream.matcher)
        fill_allowed(*stream.matcher, group.stop_ids, vocab, stream.sampler.allowed);
      sample = sampler_.sample(host_rows + r * static_cast<size_t>(vocab), vocab, params,
                               stream.sampler);
    }
    results_.push_back(std::move(sample));
    const int32_t token = results_.back().token_id;
    const bool stops =
        std::find(group.stop_ids.begin(), group.stop_ids.end(), token) != group.stop_ids.end();
    if (stream.matcher && !stops) {
      const bool accepted = stream.matcher->accept_token(token);
      SYV_CHECK(accepted) << "sampled token " << token << " is outside the grammar's mask";
    }
    if (j == s.num_drafts || stops || token != seq.drafts[static_cast<size_t>(j)]) break;
  }
  s.num_accepted = j;
  if (spec_policy_ != nullptr && s.num_drafts > 0) spec_policy_->observe(seq.spec, s.num_drafts, j);
  stats_.draft_tokens += static_cast<uint64_t>(s.num_drafts);
  stats_.accepted_tokens += static_cast<uint64_t>(j);
  static_assert(kMaxSpeculativeTokens == kSpecPositions);
  for (int32_t i = 0; i < s.num_drafts; ++i) {
    ++stats_.drafts_at[static_cast<size_t>(i)];
    if (i < j) ++stats_.accepted_at[static_cast<size_t>(i)];
  }
  if (s.num_drafts > 0) ++stats_.tokens_per_verify[static_cast<size_t>(j) + 1];
  for (size_t t = results_.size() - static_cast<size_t>(j) - 1; t < results_.size(); ++t)
    seq.tokens.push_back(results_[t].token_id);
}

bool EngineCore::past_min_tokens(const Sequence& seq, int32_t length) {
  // The first min_tokens tokens never end the sample (the sampler masks the stop ids for them).
  return length - seq.prompt_len() > seq.params().min_tokens;
}

bool EngineCore::is_stop_token(const RequestGroup& group, const Sequence& seq, int32_t token,
                               int32_t length) {
  return past_min_tokens(seq, length) &&
         std::find(group.stop_ids.begin(), group.stop_ids.end(), token) != group.stop_ids.end();
}

bool EngineCore::at_length_limit(const Sequence& seq, int32_t length) const {
  return length - seq.prompt_len() >= seq.params().max_tokens || length >= options_.max_model_len;
}

bool EngineCore::emit_can_wait(const RequestGroup& group, const Sequence& seq,
                               const SampleResult& sample, int32_t length) const {
  // emit()'s ways of ending a sample, each ruled out; the first token goes at once (time to
  // first token unchanged).
  const SamplingParams& params = seq.params();
  return params.stop.empty() && params.max_tokens > 0 && length - seq.prompt_len() > 1 &&
         !at_length_limit(seq, length) && !is_stop_token(group, seq, sample.token_id, length);
}

void EngineCore::emit_pending(const RequestGroup* group) {
  if (pending_emits_.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < pending_emits_.size(); ++i) {
    PendingEmit& p = pending_emits_[i];
    if (group != nullptr && p.group != group) {
      pending_emits_[kept++] = std::move(p);
      continue;
    }
    const bool ended = emit(*p.group, *p.seq, p.sample, p.length, p.cached_tokens);
    SYV_CHECK(!ended) << "seq " << p.seq->id() << ": a token emitted after the next launch ended "
                      << "its sample (emit_can_wait let it wait)";
  }
  pending_emits_.resize(kept);
  waker_.wake(to_wake_);
}

bool EngineCore::emit(RequestGroup& group, Sequence& seq, const SampleResult& sample,
                      int32_t length, int32_t cached_tokens) {
  const SamplingParams& params = seq.params();
  SampleStream& stream = group.streams[static_cast<size_t>(seq.sample_index())];
  Event event;
  event.sample_index = seq.sample_index();
  event.token_id = sample.token_id;
  event.logprob = params.logprobs ? sample.logprob : std::nullopt;
  event.top_logprobs = sample.top_logprobs;
  event.prompt_tokens = seq.prompt_len();
  // The request's prompt (sample 0), as when the token was drawn.
  event.cached_tokens = cached_tokens >= 0 ? cached_tokens : group.seqs[0]->cached_tokens;
  if (params.prompt_logprobs >= 0 && seq.sample_index() == 0 && length - seq.prompt_len() == 1) {
    SYV_CHECK_EQ(static_cast<int32_t>(group.prompt_logprobs.size()), seq.prompt_len() - 1)
        << "seq " << seq.id() << ": prompt logprobs missing at its first token";
    event.prompt_logprobs = std::move(group.prompt_logprobs);
    group.prompt_logprobs.clear();
  }
  if (params.max_tokens == 0) {  // the prompt was scored; the token drawn is not returned
    event.token_id = -1;
    event.finish_reason = "length";
    push_quiet(group, std::move(event));
    end_sample(group, seq);
    return true;
  }

  const bool may_stop = past_min_tokens(seq, length);
  const bool stop_token = is_stop_token(group, seq, sample.token_id, length);
  if (stop_token) {
    event.finish_reason = "stop";  // the stop token's own text is emitted only when asked for
    if (params.include_stop_str_in_output && stream.detokenizer)
      stream.held += stream.detokenizer->push(sample.token_id);
  } else if (stream.detokenizer) {
    const size_t new_text = stream.held.size();  // a match must end in this token's text
    stream.held += stream.detokenizer->push(sample.token_id);
    if (!params.stop.empty()) {
      const StopMatch match =
          may_stop ? find_stop(stream.held, params.stop, new_text) : StopMatch{};
      if (match.pos != std::string::npos) {
        const size_t end = match.pos + (params.include_stop_str_in_output ? match.len : 0);
        event.text = stream.held.substr(0, end);
        stream.held.clear();
        event.finish_reason = "stop";
      } else {
        const size_t keep = partial_stop_suffix(stream.held, params.stop);
        event.text = stream.held.substr(0, stream.held.size() - keep);
        stream.held.erase(0, stream.held.size() - keep);
      }
    } else {
      event.text = std::move(stream.held);
      stream.held.clear();
    }
  }
  if (!event.finished() && at_length_limit(seq, length)) event.finish_reason = "length";
  if (event.finished() && event.finish_reason != "stop" && stream.detokenizer) {
    // Nothing can match any more: release what was held back.
    event.text += stream.held + stream.detokenizer->flush();
    stream.held.clear();
  } else if (stop_token && stream.detokenizer) {
    event.text += stream.held + stream.detokenizer->flush();
    stream.held.clear();
  }
  const bool finished = event.finished();
  push_quiet(group, std::move(event));
  if (finished) end_sample(group, seq);
  return finished;
}

void EngineCore::push_quiet(RequestGroup& group, Event event) {
  if (!group.handle) return;
  group.handle->channel().push_quiet(std::move(event));
  // A group's tokens of one step are emitted one after another: one wake-up for them.
  if (to_wake_.empty() || to_wake_.back() != group.handle) to_wake_.push_back(group.handle);
}

void EngineCore::end_sample(RequestGroup& group, Sequence& seq) {
  scheduler_.finish(&seq);
  if (drafter_ != nullptr) drafter_->forget(seq);
  if (--group.unfinished > 0) return;
  ++stats_.requests_finished;
  groups_.erase(group.id);  // destroys the group and its sequences
}

void EngineCore::update_gauges() {
  const PagePool& pool = cache_.pool();
  stats_.pages_free = pool.num_free();
  stats_.pages_cached = pool.num_cached();
  stats_.pages_used = pool.num_used();
  stats_.running = scheduler_.num_running();
  stats_.waiting = scheduler_.num_waiting();
  stats_.graphs_captured = graphs_ ? graphs_->num_captured() : 0;
  if (host_ != nullptr) {
    const HostTierCounters& c = host_->counters();
    stats_.host_pages_total = host_->num_pages();
    stats_.host_pages_used = host_->num_pages_used();
    stats_.host_pages_kept = host_->num_pages_kept();
    stats_.host_checkpoints_total = host_->num_checkpoints();
    stats_.host_checkpoints_used = host_->num_checkpoints_used();
    stats_.host_page_hits = c.page_hits;
    stats_.host_checkpoint_hits = c.checkpoint_hits;
    stats_.host_pages_stored = c.pages_stored;
    stats_.host_pages_written_ahead = c.pages_written_ahead;
    stats_.host_write_ahead_waits = c.write_ahead_waits;
    stats_.host_checkpoints_stored = c.checkpoints_stored;
    stats_.host_bytes_to_host = c.bytes_to_host;
    stats_.host_bytes_from_host = c.bytes_from_host;
    stats_.host_copy_seconds = c.copy_seconds;
    stats_.host_pinned_bytes = host_->pinned_bytes();
    stats_.host_pieces_pinned = c.pieces_pinned;
    stats_.host_pin_seconds = c.pin_seconds;
    stats_.host_stores_short = c.stores_short;
    stats_.host_idle_pinning = host_->idle_pinning();
  }
  if (hybrid_ != nullptr) {
    const CheckpointPool& ck = hybrid_->pool();
    const HybridCounters& counters = hybrid_->counters();
    stats_.state_slots_used = ck.num_slots() - ck.num_free_slots();
    stats_.state_slots_total = ck.num_slots();
    stats_.checkpoints_total = ck.num_checkpoints();
    stats_.checkpoints_held = ck.num_held();
    stats_.checkpoints_cached = ck.num_cached();
    stats_.checkpoints_saved = counters.checkpoints_saved;
    stats_.checkpoints_shared = counters.checkpoints_shared;
    stats_.checkpoints_skipped = counters.checkpoints_skipped;
    stats_.checkpoints_loaded = counters.checkpoints_loaded;
  }
}

}  // namespace syv
