#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "server/metrics.h"

namespace syv::server {
namespace {

// Every non-comment line is `name{labels} value` with a parseable number.
void expect_valid_exposition(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$)");
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_GT(samples, 10);
}

TEST(ServerMetrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(3.0);
  std::string out;
  h.render("x_seconds", "help", out);
  EXPECT_NE(out.find("# TYPE x_seconds histogram"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_sum 4.05\n"), std::string::npos) << out;
}

TEST(ServerMetrics, RendersEveryNamedMetric) {
  Metrics m;
  m.add_prompt_tokens(12);
  m.add_generation_tokens(5);
  m.observe_ttft(0.02);
  m.observe_inter_token(0.004);
  m.count_finish("stop");
  m.count_response(200);
  m.count_response(401);
  EngineGauges g;
  g.requests_running = 2;
  g.requests_waiting = 3;
  g.kv_pages_used = 7;
  g.kv_pages_free = 93;
  g.prefix_cache_hit_tokens = 64;
  g.prefix_cache_query_tokens = 128;
  const std::string text = m.render(g);
  expect_valid_exposition(text);
  for (const char* line :
       {"syv_requests_running 2\n", "syv_requests_waiting 3\n", "syv_kv_pages_used 7\n",
        "syv_kv_pages_free 93\n", "syv_prefix_cache_hit_tokens_total 64\n",
        "syv_prefix_cache_query_tokens_total 128\n", "syv_prompt_tokens_total 12\n",
        "syv_generation_tokens_total 5\n", "syv_request_success_total{finish_reason=\"stop\"} 1\n",
        "syv_http_responses_total{code=\"401\"} 1\n", "syv_time_to_first_token_seconds_count 1\n",
        "syv_inter_token_latency_seconds_count 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

// The engine's snapshot as exported: KV pages (cached prefix pages count as free) and, for hybrid
// models, the state slots and the checkpoint pool.
TEST(ServerMetrics, ExportsEngineStatsWithTheCheckpointPool) {
  EngineStats s;
  s.running = 3;
  s.pages_used = 10;
  s.pages_free = 20;
  s.pages_cached = 5;
  s.state_slots_used = 3;
  s.state_slots_total = 16;
  s.checkpoints_total = 128;
  s.checkpoint_bytes = int64_t{128} * 3 * 1024 * 1024;
  s.checkpoints_held = 7;
  s.checkpoints_cached = 40;
  s.checkpoints_saved = 90;
  s.checkpoints_shared = 12;
  s.checkpoints_skipped = 2;
  s.checkpoints_loaded = 33;
  const std::string text = Metrics().render(EngineGauges::from(s));
  expect_valid_exposition(text);
  for (const char* line : {
           "syv_requests_running 3\n",
           "syv_kv_pages_used 10\n",
           "syv_kv_pages_free 25\n",
           "# TYPE syv_state_slots_used gauge\nsyv_state_slots_used 3\n",
           "# TYPE syv_state_slots_capacity gauge\nsyv_state_slots_capacity 16\n",
           "# TYPE syv_checkpoints_used gauge\nsyv_checkpoints_used 7\n",
           "# TYPE syv_checkpoints_cached gauge\nsyv_checkpoints_cached 40\n",
           "# TYPE syv_checkpoints_capacity gauge\nsyv_checkpoints_capacity 128\n",
           "# TYPE syv_checkpoint_pool_bytes gauge\nsyv_checkpoint_pool_bytes 402653184\n",
           "# TYPE syv_checkpoints_saved_total counter\nsyv_checkpoints_saved_total 90\n",
           "# TYPE syv_checkpoints_shared_total counter\nsyv_checkpoints_shared_total 12\n",
           "# TYPE syv_checkpoints_skipped_total counter\nsyv_checkpoints_skipped_total 2\n",
           "# TYPE syv_checkpoints_loaded_total counter\nsyv_checkpoints_loaded_total 33\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // A dense model reports an empty pool.
  const std::string dense = Metrics().render(EngineGauges::from(EngineStats{}));
  EXPECT_NE(dense.find("syv_checkpoints_capacity 0\n"), std::string::npos);
  EXPECT_NE(dense.find("syv_checkpoint_pool_bytes 0\n"), std::string::npos);
}

// The host tier: capacity and residents of both kinds, hits, stores, bytes each way, copy time,
// and its pinning (pinned bytes, pieces, time, stores short of the reserve).
TEST(ServerMetrics, ExportsTheEngineStepPhases) {
  EngineStats s;
  s.steps = 40;
  s.schedule_seconds = 0.5;
  s.forward_seconds = 2.25;
  s.output_seconds = 0.125;
  const std::string text = Metrics().render(EngineGauges::from(s));
  expect_valid_exposition(text);
  for (const char* line : {"# TYPE syv_engine_steps_total counter\nsyv_engine_steps_total 40\n",
                           "# TYPE syv_engine_step_seconds_total counter\n",
                           "syv_engine_step_seconds_total{phase=\"schedule\"} 0.5\n",
                           "syv_engine_step_seconds_total{phase=\"forward\"} 2.25\n",
                           "syv_engine_step_seconds_total{phase=\"output\"} 0.125\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
}

TEST(ServerMetrics, ExportsTheHostTier) {
  EngineStats s;
  s.host_pages_total = 4096;
  s.host_pages_used = 300;
  s.host_pages_kept = 40;
  s.host_checkpoints_total = 64;
  s.host_checkpoints_used = 9;
  s.prefix_host_hit_tokens = 1024;
  s.host_page_hits = 16;
  s.host_checkpoint_hits = 2;
  s.host_pages_stored = 310;
  s.host_pages_written_ahead = 44;
  s.host_checkpoints_stored = 11;
  s.host_bytes_to_host = 123456789;
  s.host_bytes_from_host = 4567;
  s.host_copy_seconds = 0.25;
  s.host_pinned_bytes = 268435456;
  s.host_pieces_pinned = 2;
  s.host_pin_seconds = 0.125;
  s.host_stores_short = 7;
  const std::string text = Metrics().render(EngineGauges::from(s));
  expect_valid_exposition(text);
  for (
      const char* line : {
          "# TYPE syv_host_tier_pages_capacity gauge\nsyv_host_tier_pages_capacity 4096\n",
          "# TYPE syv_host_tier_pages_resident gauge\nsyv_host_tier_pages_resident 300\n",
          "# TYPE syv_host_tier_pages_kept gauge\nsyv_host_tier_pages_kept 40\n",
          "syv_host_tier_checkpoints_capacity 64\n",
          "syv_host_tier_checkpoints_resident 9\n",
          "# TYPE syv_host_tier_hit_tokens_total counter\nsyv_host_tier_hit_tokens_total 1024\n",
          "syv_host_tier_page_hits_total 16\n",
          "syv_host_tier_checkpoint_hits_total 2\n",
          "syv_host_tier_pages_stored_total 310\n",
          "# TYPE syv_host_tier_pages_written_ahead_total counter\n"
          "syv_host_tier_pages_written_ahead_total 44\n",
          "syv_host_tier_checkpoints_stored_total 11\n",
          "syv_host_tier_bytes_to_host_total 123456789\n",
          "syv_host_tier_bytes_from_host_total 4567\n",
          "# TYPE syv_host_tier_copy_seconds_total counter\nsyv_host_tier_copy_seconds_total "
          "0.25\n",
          "# TYPE syv_host_tier_pinned_bytes gauge\nsyv_host_tier_pinned_bytes 268435456\n",
          "# TYPE syv_host_tier_pieces_pinned_total counter\nsyv_host_tier_pieces_pinned_total 2\n",
          "# TYPE syv_host_tier_pin_seconds_total counter\nsyv_host_tier_pin_seconds_total 0.125\n",
          "# TYPE syv_host_tier_stores_short_total counter\nsyv_host_tier_stores_short_total 7\n",
      }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

// CUDA graphs of the decode buckets: captured buckets, replayed steps and their padding rows; and
// speculative decoding's draft and accepted tokens, and its verify steps' padding.
TEST(ServerMetrics, ExportsGraphCounters) {
  EngineStats s;
  s.graphs_captured = 9;
  s.graph_steps = 1234;
  s.graph_verify_steps = 78;
  s.graph_padding_rows = 56;
  s.verify_padded_steps = 41;
  s.verify_padding_tokens = 97;
  s.verify_padding_refused = 3;
  s.verify_padding_skipped = 5;
  s.draft_tokens = 300;
  s.accepted_tokens = 120;
  s.draft_skipped = 7;
  const std::string text = Metrics().render(EngineGauges::from(s));
  expect_valid_exposition(text);
  for (const char* line : {
           "# TYPE syv_graphs_captured gauge\nsyv_graphs_captured 9\n",
           "# TYPE syv_graph_steps_total counter\nsyv_graph_steps_total 1234\n",
           "# TYPE syv_graph_verify_steps_total counter\nsyv_graph_verify_steps_total 78\n",
           "# TYPE syv_graph_padding_rows_total counter\nsyv_graph_padding_rows_total 56\n",
           "# TYPE syv_spec_verify_padded_steps_total counter\n"
           "syv_spec_verify_padded_steps_total 41\n",
           "# TYPE syv_spec_verify_padding_tokens_total counter\n"
           "syv_spec_verify_padding_tokens_total 97\n",
           "# TYPE syv_spec_verify_padding_refused_total counter\n"
           "syv_spec_verify_padding_refused_total 3\n",
           "# TYPE syv_spec_verify_padding_skipped_total counter\n"
           "syv_spec_verify_padding_skipped_total 5\n",
           "# TYPE syv_spec_draft_tokens_total counter\nsyv_spec_draft_tokens_total 300\n",
           "# TYPE syv_spec_accepted_tokens_total counter\nsyv_spec_accepted_tokens_total 120\n",
           "# TYPE syv_spec_skipped_total counter\nsyv_spec_skipped_total 7\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  const std::string off = Metrics().render(EngineGauges::from(EngineStats{}));
  EXPECT_NE(off.find("syv_graph_steps_total 0\n"), std::string::npos);
  EXPECT_EQ(off.find("by_position"), std::string::npos) << "no speculation, no position series";
}

// Speculation by draft depth and tokens per verify step: series up to the deepest position.
TEST(ServerMetrics, ExportsSpeculationByPositionAndTokensPerStep) {
  EngineStats s;
  s.drafts_at[0] = 50;
  s.drafts_at[1] = 40;
  s.accepted_at[0] = 30;
  s.accepted_at[1] = 12;
  s.tokens_per_verify[1] = 20;
  s.tokens_per_verify[2] = 18;
  s.tokens_per_verify[3] = 12;
  const std::string text = Metrics().render(EngineGauges::from(s));
  expect_valid_exposition(text);
  for (const char* line : {
           "syv_spec_draft_tokens_by_position_total{position=\"1\"} 50\n"
           "syv_spec_draft_tokens_by_position_total{position=\"2\"} 40\n# HELP",
           "syv_spec_accepted_tokens_by_position_total{position=\"1\"} 30\n"
           "syv_spec_accepted_tokens_by_position_total{position=\"2\"} 12\n",
           "syv_spec_verify_steps_by_tokens_total{tokens=\"1\"} 20\n"
           "syv_spec_verify_steps_by_tokens_total{tokens=\"2\"} 18\n"
           "syv_spec_verify_steps_by_tokens_total{tokens=\"3\"} 12\n# HELP",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

// The deployment's facts: absent until set (never guessed), then info series whose label values
// are escaped (a quote, a backslash, a line feed), the KV pool's gauges, and the memory plan's
// only when it sized the pool.
TEST(ServerMetrics, ExportsTheDeploymentFacts) {
  Metrics m;
  EXPECT_EQ(m.render(EngineGauges{}).find("syv_build_info"), std::string::npos);
  DeploymentFacts f;
  f.version = "0.1.0";
  f.git_commit = "0123456789ab-dirty";
  f.build_type = "Release";
  f.compiler = "GNU 12.2.0";
  f.cuda = "none";
  f.backend = "cpu";
  f.device_name = "Fake \"Quoted\" CPU \\ v2\nline two";
  f.device_memory_bytes = int64_t{1} << 30;
  f.kv_pool_pages = 4096;
  f.kv_page_size = 16;
  f.kv_bytes_per_token = 1024;
  f.kv_dtype = "f32";
  f.kv_sized_by = "kv-cache-mb";
  f.max_model_len = 2048;
  f.max_num_seqs = 8;
  f.max_num_batched_tokens = 512;
  m.set_deployment(f);
  std::string text = m.render(EngineGauges{});
  expect_valid_exposition(text);
  for (const char* line : {
           "syv_build_info{version=\"0.1.0\",git_commit=\"0123456789ab-dirty\",build_type="
           "\"Release\",compiler=\"GNU 12.2.0\",cuda=\"none\"} 1\n",
           "syv_device_info{backend=\"cpu\",name=\"Fake \\\"Quoted\\\" CPU \\\\ v2\\nline "
           "two\"} 1\n",
           "syv_device_memory_bytes 1073741824\n",
           "syv_kv_cache_info{dtype=\"f32\",sized_by=\"kv-cache-mb\"} 1\n",
           "syv_kv_pool_pages 4096\n",
           "syv_kv_page_size_tokens 16\n",
           "syv_kv_pool_tokens 65536\n",
           "syv_kv_bytes_per_token 1024\n",
           "syv_max_model_len 2048\n",
           "syv_max_num_seqs 8\n",
           "syv_max_num_batched_tokens 512\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("syv_memory_plan_"), std::string::npos) << text;

  f.backend = "cuda";
  f.device_index = 1;
  f.device_name = "NVIDIA H200";
  f.kv_sized_by = "gpu-memory-utilization";
  f.memory_plan = MemoryPlanFacts{0.9, 900, 300, 100, 50, 25};
  m.set_deployment(f);
  text = m.render(EngineGauges{});
  expect_valid_exposition(text);
  for (const char* line : {
           "syv_device_info{backend=\"cuda\",index=\"1\",name=\"NVIDIA H200\"} 1\n",
           "syv_kv_cache_info{dtype=\"f32\",sized_by=\"gpu-memory-utilization\"} 1\n",
           "syv_memory_plan_utilization 0.9\n",
           "syv_memory_plan_budget_bytes 900\n",
           "syv_memory_plan_weight_bytes 300\n",
           "syv_memory_plan_activation_bytes 100\n",
           "syv_memory_plan_runtime_reserve_bytes 50\n",
           "syv_memory_plan_state_bytes 25\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(ServerMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_label_value("plain"), "plain");
  EXPECT_EQ(prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServerMetrics, NumberFormat) {
  EXPECT_EQ(prometheus_number(3), "3");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_number(1.0 / 0.0), "+Inf");
}

}  // namespace
}  // namespace syv::server
