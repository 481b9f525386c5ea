// Prometheus text exposition (format 0.0.4) of the server's counters, latency histograms and the
// engine's gauges. Metric names (all prefixed "syv_"; see docs/server.md):
//   syv_requests_running, syv_requests_waiting                       gauges (engine)
//   syv_kv_pages_used, syv_kv_pages_free                             gauges (engine)
//   syv_state_slots_used, syv_state_slots_capacity, syv_checkpoints_used,
//   syv_checkpoints_cached, syv_checkpoints_capacity, syv_checkpoint_pool_bytes
//                                                     gauges (engine; hybrid models, 0 otherwise)
//   syv_checkpoints_saved_total, syv_checkpoints_shared_total, syv_checkpoints_skipped_total,
//   syv_checkpoints_loaded_total                      counters (engine; hybrid models)
//   syv_prefix_cache_hit_tokens_total, syv_prefix_cache_query_tokens_total   counters (engine)
//   syv_host_tier_pages_capacity, syv_host_tier_pages_resident, syv_host_tier_checkpoints_capacity,
//   syv_host_tier_checkpoints_resident                 gauges (engine; host tier, 0 when off)
//   syv_host_tier_hit_tokens_total, syv_host_tier_page_hits_total,
//   syv_host_tier_checkpoint_hits_total, syv_host_tier_pages_stored_total,
//   syv_host_tier_checkpoints_stored_total, syv_host_tier_bytes_to_host_total,
//   syv_host_tier_bytes_from_host_total, syv_host_tier_copy_seconds_total,
//   syv_host_tier_pieces_pinned_total, syv_host_tier_pin_seconds_total,
//   syv_host_tier_stores_short_total                   counters (host tier)
//   syv_host_tier_pinned_bytes                         gauge (host tier)
//   syv_prompt_tokens_total, syv_generation_tokens_total             counters
//   syv_request_success_total{finish_reason}                         counter
//   syv_http_responses_total{code}                                   counter
//   syv_time_to_first_token_seconds, syv_inter_token_latency_seconds,
//   syv_e2e_request_latency_seconds                                  histograms
//   the deployment's facts: build, device, KV pool and memory plan (deployment_facts.h), once
//   set_deployment() has been called
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/stats.h"
#include "server/deployment_facts.h"

namespace syv::server {

class Histogram {
 public:
  // `bounds` are the upper bounds of the buckets, strictly increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the HELP/TYPE lines and the _bucket{le=...}, _sum and _count samples.
  void render(const std::string& name, const std::string& help, std::string& out) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds_.size() + 1], not cumulative; last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// Gauges and counters owned by the engine, read at scrape time.
struct EngineGauges {
  int64_t requests_running = 0;
  int64_t requests_waiting = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_pages_free = 0;
  int64_t prefix_cache_hit_tokens = 0;    // cumulative
  int64_t prefix_cache_query_tokens = 0;  // cumulative
  // Hybrid models (0 otherwise): recurrent-state slots and the checkpoint pool.
  int64_t state_slots_used = 0;
  int64_t state_slots_capacity = 0;
  int64_t checkpoints_used = 0;    // held by live sequences
  int64_t checkpoints_cached = 0;  // kept by the retention policy, reusable, evictable
  int64_t checkpoints_capacity = 0;
  int64_t checkpoint_pool_bytes = 0;  // capacity in bytes
  int64_t checkpoints_saved = 0;      // cumulative
  int64_t checkpoints_shared = 0;     // cumulative: boundary already had its checkpoint
  int64_t checkpoints_skipped = 0;    // cumulative: boundary not saved, every entry held
  int64_t checkpoints_loaded = 0;     // cumulative: prefix hits restored from a checkpoint
  // CUDA graphs of the decode buckets (0 when graphs are off).
  int64_t graph_steps = 0;             // cumulative: steps replayed as their bucket's graph
  int64_t graph_verify_steps = 0;      // cumulative: of those, speculative verify steps
  int64_t graph_padding_rows = 0;      // cumulative: dummy sequences those steps carried
  int64_t verify_padded_steps = 0;     // cumulative: uneven verify steps padded to one count
  int64_t verify_padding_tokens = 0;   // cumulative: filler positions they fed
  int64_t verify_padding_refused = 0;  // cumulative: not padded, the free pages being short
  int64_t verify_padding_skipped = 0;  // cumulative: not padded, the filler costing too much
  int64_t draft_tokens = 0;            // cumulative: speculative drafts fed to verify steps
  int64_t accepted_tokens = 0;         // cumulative: of those, drafts kept
  int64_t spec_steps_dropped = 0;      // cumulative: steps whose drafts the policy dropped
  int64_t draft_skipped = 0;  // cumulative: sequence-steps the adaptive policy left undrafted
  // Cumulative, by draft position and by tokens a verify step produced (EngineStats).
  std::array<uint64_t, kSpecPositions> drafts_at{}, accepted_at{};
  std::array<uint64_t, kSpecPositions + 2> tokens_per_verify{};
  int64_t graphs_captured = 0;
  // Host tier (kv/host_tier.h; 0 when off).
  int64_t host_pages_capacity = 0;
  int64_t host_pages_resident = 0;
  int64_t host_pages_kept = 0;
  int64_t host_checkpoints_capacity = 0;
  int64_t host_checkpoints_resident = 0;
  int64_t host_hit_tokens = 0;           // cumulative: prefix-hit tokens served from the host tier
  int64_t host_page_hits = 0;            // cumulative: pages copied back to the device
  int64_t host_checkpoint_hits = 0;      // cumulative: checkpoints copied back into a state slot
  int64_t host_pages_stored = 0;         // cumulative: evicted pages written to the host
  int64_t host_pages_written_ahead = 0;  // cumulative: pages written to the host before eviction
  int64_t host_checkpoints_stored = 0;   // cumulative: evicted checkpoints written to the host
  int64_t host_bytes_to_host = 0;        // cumulative
  int64_t host_bytes_from_host = 0;      // cumulative
  double host_copy_seconds = 0;          // cumulative: host time issuing the copies
  int64_t host_pinned_bytes = 0;         // host tier memory pinned so far
  int64_t host_pieces_pinned = 0;        // cumulative: pieces pinned (between steps)
  double host_pin_seconds = 0;           // cumulative: engine-thread time pinning them
  int64_t host_stores_short = 0;         // cumulative: evictions not written back (reserve dry)
  // The engine thread's time in steps that ran a forward (EngineStats): the GPU idles during
  // schedule and output, as steps are not overlapped.
  int64_t engine_steps = 0;          // cumulative: forward passes
  double step_schedule_seconds = 0;  // cumulative: drafts, scheduler, batch build
  double step_forward_seconds = 0;   // cumulative: forward + sampling until ids are on the host
  double step_output_seconds = 0;    // cumulative: commit, emit, detokenize

  // The engine's snapshot as exported (kv_pages_free counts reusable cached-prefix pages).
  static EngineGauges from(const EngineStats& stats);
};

class Metrics {
 public:
  Metrics();

  void add_prompt_tokens(int64_t n) { prompt_tokens_ += n; }
  void add_generation_tokens(int64_t n) { generation_tokens_ += n; }
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_inter_token(double seconds) { itl_.observe(seconds); }
  void observe_e2e(double seconds) { e2e_.observe(seconds); }
  void count_finish(const std::string& reason);
  void count_response(int http_status);
  // The facts of the deployment, exported from now on (before: their series are absent, never
  // guessed). Called once start-up knows them (the engine started).
  void set_deployment(DeploymentFacts facts);

  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t generation_tokens() const { return generation_tokens_; }

  std::string render(const EngineGauges& engine) const;

 private:
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> generation_tokens_{0};
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> finish_reasons_;
  std::map<int, int64_t> responses_;
  std::optional<DeploymentFacts> deployment_;  // guarded by mu_
};

// Formats a sample value the way Prometheus expects (integers without a fraction, +Inf).
std::string prometheus_number(double value);

// A label value escaped for the Prometheus text format: backslash, double quote and line feed
// as \\, \" and \n.
std::string prometheus_label_value(const std::string& value);

// Appends one metric without labels: its HELP and TYPE lines and its sample.
void append_metric(std::string& out, const std::string& name, const std::string& type,
                   const std::string& help, double value);

}  // namespace syv::server
