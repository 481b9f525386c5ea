#include "server/metrics.h"

#include <cmath>
#include <cstdio>

#include "core/check.h"

namespace syv::server {

std::string prometheus_number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

std::string prometheus_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void append_metric(std::string& out, const std::string& name, const std::string& type,
                   const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n";
  out += "# TYPE " + name + " " + type + "\n";
  out += name + " " + prometheus_number(value) + "\n";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 1; i < bounds_.size(); ++i) {
    SYV_CHECK(bounds_[i - 1] < bounds_[i]) << "histogram bounds must increase";
  }
}

void Histogram::observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP " + name + " " + help + "\n";
  out += "# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? prometheus_number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + prometheus_number(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

namespace {

const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,
                                         0.5,   0.75,  1.0,  2.5,  5.0,  7.5,  10.0, 20.0, 40.0};
const std::vector<double> kItlBounds = {0.001, 0.0025, 0.005, 0.01,  0.015, 0.02, 0.025,
                                        0.03,  0.04,   0.05,  0.075, 0.1,   0.15, 0.2,
                                        0.3,   0.4,    0.5,   0.75,  1.0,   2.5};
const std::vector<double> kE2eBounds = {0.1,  0.25, 0.5,  1.0,   2.5,   5.0,  10.0,
                                        20.0, 40.0, 60.0, 120.0, 300.0, 600.0};

// The engine's samples, in exposition order.
struct EngineSample {
  const char* name;
  const char* type;
  const char* help;
  int64_t EngineGauges::*field;
};
const EngineSample kEngineSamples[] = {
    {"syv_requests_running", "gauge", "Requests in the engine's running batch.",
     &EngineGauges::requests_running},
    {"syv_requests_waiting", "gauge", "Requests waiting to be scheduled.",
     &EngineGauges::requests_waiting},
    {"syv_kv_pages_used", "gauge", "KV-cache pages held by requests.",
     &EngineGauges::kv_pages_used},
    {"syv_kv_pages_free", "gauge", "KV-cache pages free (reusable prefix pages included).",
     &EngineGauges::kv_pages_free},
    {"syv_state_slots_used", "gauge",
     "Recurrent-state slots held by running sequences (hybrid models).",
     &EngineGauges::state_slots_used},
    {"syv_state_slots_capacity", "gauge", "Recurrent-state slots (hybrid models).",
     &EngineGauges::state_slots_capacity},
    {"syv_checkpoints_used", "gauge",
     "Prefix-cache state checkpoints held by live sequences (hybrid models).",
     &EngineGauges::checkpoints_used},
    {"syv_checkpoints_cached", "gauge",
     "State checkpoints kept by the retention policy, reusable and evictable (hybrid models).",
     &EngineGauges::checkpoints_cached},
    {"syv_checkpoints_capacity", "gauge", "State checkpoint pool size (hybrid models).",
     &EngineGauges::checkpoints_capacity},
    {"syv_checkpoint_pool_bytes", "gauge", "Memory of the state checkpoint pool (hybrid models).",
     &EngineGauges::checkpoint_pool_bytes},
    {"syv_checkpoints_saved_total", "counter", "State checkpoints written.",
     &EngineGauges::checkpoints_saved},
    {"syv_checkpoints_shared_total", "counter",
     "Checkpoint boundaries whose checkpoint already existed (shared, not written).",
     &EngineGauges::checkpoints_shared},
    {"syv_checkpoints_skipped_total", "counter",
     "Checkpoint boundaries not saved because every pool entry was held.",
     &EngineGauges::checkpoints_skipped},
    {"syv_checkpoints_loaded_total", "counter",
     "Prefix-cache hits restored from a state checkpoint.", &EngineGauges::checkpoints_loaded},
    {"syv_graphs_captured", "gauge",
     "CUDA graphs captured: decode batch-size buckets, and verify steps per draft count.",
     &EngineGauges::graphs_captured},
    {"syv_graph_steps_total", "counter", "Engine steps replayed as a CUDA graph.",
     &EngineGauges::graph_steps},
    {"syv_graph_verify_steps_total", "counter",
     "Speculative verify steps replayed as a CUDA graph (of syv_graph_steps_total).",
     &EngineGauges::graph_verify_steps},
    {"syv_graph_padding_rows_total", "counter",
     "Dummy sequences that graph steps carried to fill their bucket.",
     &EngineGauges::graph_padding_rows},
    {"syv_spec_verify_padded_steps_total", "counter",
     "Speculative verify steps of uneven draft counts padded to one count (to replay a CUDA "
     "graph).",
     &EngineGauges::verify_padded_steps},
    {"syv_spec_verify_padding_tokens_total", "counter",
     "Filler positions padded verify steps fed after the drafts (computed, never kept).",
     &EngineGauges::verify_padding_tokens},
    {"syv_spec_verify_padding_refused_total", "counter",
     "Uneven verify steps left unpadded (eager) because the free KV pages could not hold the "
     "filler positions.",
     &EngineGauges::verify_padding_refused},
    {"syv_spec_verify_padding_skipped_total", "counter",
     "Uneven verify steps left unpadded (eager) because the filler rows would cost more than a "
     "graph replay saves (the adaptive-speculation cost model).",
     &EngineGauges::verify_padding_skipped},
    {"syv_spec_draft_tokens_total", "counter",
     "Speculative decoding: draft tokens fed to verify steps.", &EngineGauges::draft_tokens},
    {"syv_spec_accepted_tokens_total", "counter",
     "Speculative decoding: draft tokens kept (each one a generated token).",
     &EngineGauges::accepted_tokens},
    {"syv_spec_skipped_total", "counter",
     "Speculative decoding: decoding sequence-steps with room for drafts that asked for none "
     "(the adaptive policy or --speculative-disable-by-batch-size).",
     &EngineGauges::draft_skipped},
    {"syv_spec_steps_dropped_total", "counter",
     "Speculative decoding: steps whose drafts (all but probes) the adaptive policy dropped: with "
     "CUDA graphs, their uneven draft counts would have cost the batch more than they bring.",
     &EngineGauges::spec_steps_dropped},
    {"syv_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
     &EngineGauges::prefix_cache_hit_tokens},
    {"syv_host_tier_pages_capacity", "gauge", "Host tier size in KV pages (0: no host tier).",
     &EngineGauges::host_pages_capacity},
    {"syv_host_tier_pages_resident", "gauge", "KV pages held by the host tier.",
     &EngineGauges::host_pages_resident},
    {"syv_host_tier_pages_kept", "gauge",
     "Of the host tier's KV pages, those kept for preempted sequences until they resume.",
     &EngineGauges::host_pages_kept},
    {"syv_host_tier_checkpoints_capacity", "gauge",
     "Host tier size in state checkpoints (hybrid models).",
     &EngineGauges::host_checkpoints_capacity},
    {"syv_host_tier_checkpoints_resident", "gauge",
     "State checkpoints held by the host tier (hybrid models).",
     &EngineGauges::host_checkpoints_resident},
    {"syv_host_tier_hit_tokens_total", "counter",
     "Of the prefix-cache hit tokens, those served from the host tier.",
     &EngineGauges::host_hit_tokens},
    {"syv_host_tier_page_hits_total", "counter", "KV pages copied back from the host tier.",
     &EngineGauges::host_page_hits},
    {"syv_host_tier_checkpoint_hits_total", "counter",
     "State checkpoints copied back from the host tier into a state slot.",
     &EngineGauges::host_checkpoint_hits},
    {"syv_host_tier_pages_stored_total", "counter",
     "KV pages written to the host tier when the device pool evicted them.",
     &EngineGauges::host_pages_stored},
    {"syv_host_tier_pages_written_ahead_total", "counter",
     "KV pages written to the host tier between steps, ahead of their eviction (the step that "
     "evicts them then waits for no copy).",
     &EngineGauges::host_pages_written_ahead},
    {"syv_host_tier_checkpoints_stored_total", "counter",
     "State checkpoints written to the host tier when the device pool evicted them.",
     &EngineGauges::host_checkpoints_stored},
    {"syv_host_tier_bytes_to_host_total", "counter",
     "Bytes copied from the device to the host tier.", &EngineGauges::host_bytes_to_host},
    {"syv_host_tier_bytes_from_host_total", "counter",
     "Bytes copied from the host tier back to the device.", &EngineGauges::host_bytes_from_host},
    {"syv_host_tier_pinned_bytes", "gauge",
     "Host tier memory pinned so far (pinned between steps, a reserve ahead of evictions).",
     &EngineGauges::host_pinned_bytes},
    {"syv_host_tier_pieces_pinned_total", "counter",
     "Pieces of host tier memory pinned (always between steps).",
     &EngineGauges::host_pieces_pinned},
    {"syv_host_tier_stores_short_total", "counter",
     "Evicted pages and checkpoints not written to the host tier because its pinned reserve ran "
     "dry while it was still growing (forgotten, as without a tier, instead of pinning in the "
     "step).",
     &EngineGauges::host_stores_short},
    {"syv_prefix_cache_query_tokens_total", "counter",
     "Prompt tokens looked up in the prefix cache.", &EngineGauges::prefix_cache_query_tokens},
};

}  // namespace

EngineGauges EngineGauges::from(const EngineStats& s) {
  EngineGauges g;
  g.requests_running = s.running;
  g.requests_waiting = s.waiting;
  g.kv_pages_used = s.pages_used;
  g.kv_pages_free = s.pages_free + s.pages_cached;
  g.prefix_cache_hit_tokens = static_cast<int64_t>(s.prefix_hit_tokens);
  g.prefix_cache_query_tokens = static_cast<int64_t>(s.prefix_query_tokens);
  g.state_slots_used = s.state_slots_used;
  g.state_slots_capacity = s.state_slots_total;
  g.checkpoints_used = s.checkpoints_held;
  g.checkpoints_cached = s.checkpoints_cached;
  g.checkpoints_capacity = s.checkpoints_total;
  g.checkpoint_pool_bytes = s.checkpoint_bytes;
  g.checkpoints_saved = static_cast<int64_t>(s.checkpoints_saved);
  g.checkpoints_shared = static_cast<int64_t>(s.checkpoints_shared);
  g.checkpoints_skipped = static_cast<int64_t>(s.checkpoints_skipped);
  g.checkpoints_loaded = static_cast<int64_t>(s.checkpoints_loaded);
  g.graph_steps = static_cast<int64_t>(s.graph_steps);
  g.graph_verify_steps = static_cast<int64_t>(s.graph_verify_steps);
  g.graph_padding_rows = static_cast<int64_t>(s.graph_padding_rows);
  g.verify_padded_steps = static_cast<int64_t>(s.verify_padded_steps);
  g.verify_padding_tokens = static_cast<int64_t>(s.verify_padding_tokens);
  g.verify_padding_refused = static_cast<int64_t>(s.verify_padding_refused);
  g.verify_padding_skipped = static_cast<int64_t>(s.verify_padding_skipped);
  g.draft_tokens = static_cast<int64_t>(s.draft_tokens);
  g.accepted_tokens = static_cast<int64_t>(s.accepted_tokens);
  g.draft_skipped = static_cast<int64_t>(s.draft_skipped);
  g.spec_steps_dropped = static_cast<int64_t>(s.spec_steps_dropped);
  g.drafts_at = s.drafts_at;
  g.accepted_at = s.accepted_at;
  g.tokens_per_verify = s.tokens_per_verify;
  g.graphs_captured = s.graphs_captured;
  g.host_pages_capacity = s.host_pages_total;
  g.host_pages_resident = s.host_pages_used;
  g.host_pages_kept = s.host_pages_kept;
  g.host_checkpoints_capacity = s.host_checkpoints_total;
  g.host_checkpoints_resident = s.host_checkpoints_used;
  g.host_hit_tokens = static_cast<int64_t>(s.prefix_host_hit_tokens);
  g.host_page_hits = static_cast<int64_t>(s.host_page_hits);
  g.host_checkpoint_hits = static_cast<int64_t>(s.host_checkpoint_hits);
  g.host_pages_stored = static_cast<int64_t>(s.host_pages_stored);
  g.host_pages_written_ahead = static_cast<int64_t>(s.host_pages_written_ahead);
  g.host_checkpoints_stored = static_cast<int64_t>(s.host_checkpoints_stored);
  g.host_bytes_to_host = static_cast<int64_t>(s.host_bytes_to_host);
  g.host_bytes_from_host = static_cast<int64_t>(s.host_bytes_from_host);
  g.host_copy_seconds = s.host_copy_seconds;
  g.host_pinned_bytes = s.host_pinned_bytes;
  g.host_pieces_pinned = static_cast<int64_t>(s.host_pieces_pinned);
  g.host_pin_seconds = s.host_pin_seconds;
  g.host_stores_short = static_cast<int64_t>(s.host_stores_short);
  g.engine_steps = static_cast<int64_t>(s.steps);
  g.step_schedule_seconds = s.schedule_seconds;
  g.step_forward_seconds = s.forward_seconds;
  g.step_output_seconds = s.output_seconds;
  return g;
}

Metrics::Metrics() : ttft_(kTtftBounds), itl_(kItlBounds), e2e_(kE2eBounds) {}

void Metrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finish_reasons_[reason];
}

void Metrics::count_response(int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[http_status];
}

void Metrics::set_deployment(DeploymentFacts facts) {
  std::lock_guard<std::mutex> lock(mu_);
  deployment_ = std::move(facts);
}

namespace {

// Speculative decoding by draft position and tokens per verify step: labelled series up to the
// deepest position drafted so far (none without speculation).
void render_speculation(std::string& out, const EngineGauges& e) {
  size_t depth = 0;
  while (depth < e.drafts_at.size() && e.drafts_at[depth] > 0) ++depth;
  if (depth == 0) return;
  auto series = [&](const char* name, const char* help, const char* label, size_t from,
                    size_t count, const auto& values) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (size_t i = from; i < from + count; ++i)
      out += std::string(name) + "{" + label + "=\"" + std::to_string(i + (from == 0 ? 1 : 0)) +
             "\"} " + std::to_string(values[i]) + "\n";
  };
  series("syv_spec_draft_tokens_by_position_total",
         "Speculative decoding: draft tokens fed at each depth (1 = first draft).", "position", 0,
         depth, e.drafts_at);
  series("syv_spec_accepted_tokens_by_position_total",
         "Speculative decoding: draft tokens kept at each depth.", "position", 0, depth,
         e.accepted_at);
  series("syv_spec_verify_steps_by_tokens_total",
         "Speculative decoding: a sequence's verify steps by the tokens they produced (kept "
         "drafts + 1).",
         "tokens", 1, depth + 1, e.tokens_per_verify);
}

}  // namespace

std::string Metrics::render(const EngineGauges& engine) const {
  std::string out;
  for (const EngineSample& e : kEngineSamples) {
    append_metric(out, e.name, e.type, e.help, static_cast<double>(engine.*e.field));
  }
  append_metric(
      out, "syv_host_tier_copy_seconds_total", "counter",
      "Host time spent issuing host-tier copies (the copies themselves on the CPU backend; on "
      "CUDA they run on the copy streams).",
      engine.host_copy_seconds);
  append_metric(
      out, "syv_host_tier_pin_seconds_total", "counter",
      "Engine-thread time spent pinning host tier memory between steps (its faulting in runs "
      "on a background thread and is not counted).",
      engine.host_pin_seconds);
  render_speculation(out, engine);
  append_metric(out, "syv_engine_steps_total", "counter", "Engine steps that ran a forward pass.",
                static_cast<double>(engine.engine_steps));
  out +=
      "# HELP syv_engine_step_seconds_total Engine-thread time in those steps by phase: "
      "schedule (drafts, scheduler, batch build), forward (forward pass and sampling until "
      "the ids are on the host), output (commit, emit, detokenize). The GPU idles during "
      "schedule and output.\n# TYPE syv_engine_step_seconds_total counter\n";
  for (const auto& [phase, seconds] :
       {std::pair<const char*, double>{"schedule", engine.step_schedule_seconds},
        {"forward", engine.step_forward_seconds},
        {"output", engine.step_output_seconds}})
    out += std::string("syv_engine_step_seconds_total{phase=\"") + phase + "\"} " +
           prometheus_number(seconds) + "\n";
  append_metric(out, "syv_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
                static_cast<double>(prompt_tokens_.load()));
  append_metric(out, "syv_generation_tokens_total", "counter", "Tokens generated.",
                static_cast<double>(generation_tokens_.load()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (deployment_) render_deployment_facts(*deployment_, out);
    out += "# HELP syv_request_success_total Finished samples by finish reason.\n";
    out += "# TYPE syv_request_success_total counter\n";
    for (const char* reason : {"stop", "length", "tool_calls", "abort"}) {
      auto it = finish_reasons_.find(reason);
      out += std::string("syv_request_success_total{finish_reason=\"") + reason + "\"} " +
             std::to_string(it == finish_reasons_.end() ? 0 : it->second) + "\n";
    }
    out += "# HELP syv_http_responses_total HTTP responses by status code.\n";
    out += "# TYPE syv_http_responses_total counter\n";
    for (const auto& [code, n] : responses_) {
      out += "syv_http_responses_total{code=\"" + std::to_string(code) + "\"} " +
             std::to_string(n) + "\n";
    }
  }
  ttft_.render("syv_time_to_first_token_seconds", "Time from request arrival to its first token.",
               out);
  itl_.render("syv_inter_token_latency_seconds", "Time between consecutive tokens of a sample.",
              out);
  e2e_.render("syv_e2e_request_latency_seconds", "Time from request arrival to its last token.",
              out);
  return out;
}

}  // namespace syv::server
