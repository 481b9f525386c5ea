// CUDA graphs under tensor parallelism without a GPU (model/tensor_parallel.h, the model's graph
// hooks in model/model.h, engine/graph_runner.h): fixtures split over N simulated ranks, each on a
// FakeGraphBackend (unit/fake_graph_backend.h: the CPU backend whose "graph" re-runs the captured
// step at each replay, reading the staged batch), through the engine with graphs on. Every rank
// captures, stages, replays and destroys the same graphs in step, with its context fixed while
// the engine runs; in batch-invariant mode the tokens and logprobs equal graphs off to the bit.
// With an MTP head the verify steps replay graphs while the head runs eagerly
// (supports_mtp_graphs() is false: mtp_forward() crosses the host).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/mtp_drafter.h"
#include "model/prepare_model.h"
#include "model/tensor_parallel.h"
#include "unit/engine_harness.h"
#include "unit/fake_graph_backend.h"
#include "unit/mtp_fixture.h"
#include "unit/tensor_parallel_requests.h"

namespace syv::testing {
namespace {

struct GraphRanks {
  std::vector<std::unique_ptr<FakeGraphBackend>> backends;  // [rank]; outlive the model
  std::unique_ptr<Model> model;
};

// `path`: a model folder. Every rank batch-invariant, so a padded replay's real rows compute the
// bits of the eager step.
GraphRanks load_graph_split(const std::string& path, int n, const LoadOptions& lo = {}) {
  GraphRanks r;
  std::vector<Backend*> backends;
  for (int i = 0; i < n; ++i) {
    r.backends.push_back(std::make_unique<FakeGraphBackend>());
    r.backends.back()->set_batch_invariant(true);
    backends.push_back(r.backends.back().get());
  }
  auto prepared = prepare_model(path, *backends[0], lo);
  EXPECT_TRUE(prepared.ok()) << prepared.message();
  if (!prepared.ok()) return r;
  auto model = load_tensor_parallel(prepared.value(), backends, lo);
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) r.model = std::move(model).value();
  return r;
}

struct EngineRun {
  std::vector<RequestOutput> outputs;  // per request
  EngineStats stats;
  int64_t head_rows = 0, head_graph_runs = 0;  // the MTP drafter's, when it has one
};

// Runs `requests` (submitted together) on a fresh engine over r.model. While it runs, with graphs
// on, every rank's backend has the engine's context fixed; once it is gone, every graph of every
// rank is destroyed and the context unfixed.
EngineRun run(GraphRanks& r, const EngineOptions& o, const std::vector<Request>& requests) {
  set_log_level(LogLevel::WARN);
  EngineRun out;
  {
    auto core = EngineCore::create(*r.model, nullptr, o);
    EXPECT_TRUE(core.ok()) << core.message();
    if (!core.ok()) return out;
    const bool graphs = core.value()->graphs() != nullptr;
    EXPECT_EQ(graphs, o.cuda_graphs != "off") << "graphs not set up as asked";
    const int64_t max_len = core.value()->options().max_model_len;
    for (size_t i = 0; graphs && i < r.backends.size(); ++i)
      EXPECT_EQ(r.backends[i]->fixed_max_context, max_len) << "rank " << i;
    Harness h(std::move(core).value());
    std::vector<uint64_t> ids;
    for (const Request& q : requests) ids.push_back(h.submit(q));
    h.run();
    h.expect_no_leaks();
    for (uint64_t id : ids) out.outputs.push_back(h.output(id));
    out.stats = h.core().stats();
    if (const auto* mtp = dynamic_cast<const MtpDrafter*>(h.core().drafter())) {
      out.head_rows = mtp->head_rows();
      out.head_graph_runs = mtp->head_graph_runs();
    }
  }
  for (size_t i = 0; i < r.backends.size(); ++i) {
    const FakeGraphBackend& b = *r.backends[i];
    EXPECT_EQ(b.destroyed, b.captured()) << "rank " << i << ": graphs left when the engine went";
    if (o.cuda_graphs != "off") {
      EXPECT_EQ(b.fixed_max_context, 0) << "rank " << i;
    }
  }
  return out;
}

// Rank 0's graphs were captured, staged and replayed once per graph step; every other rank's
// exactly alike (the same count, the same staged shapes in the same order).
void expect_ranks_in_step(const GraphRanks& r, const EngineStats& stats) {
  const FakeGraphBackend& first = *r.backends[0];
  EXPECT_GT(first.captured(), 0);
  EXPECT_EQ(first.replays, static_cast<int64_t>(stats.graph_steps));
  for (size_t i = 1; i < r.backends.size(); ++i) {
    const FakeGraphBackend& b = *r.backends[i];
    EXPECT_EQ(b.captured(), first.captured()) << "rank " << i;
    EXPECT_EQ(b.replays, first.replays) << "rank " << i;
    EXPECT_EQ(b.staged_shapes, first.staged_shapes) << "rank " << i;
    EXPECT_EQ(b.graph_shapes, first.graph_shapes) << "rank " << i;
  }
}

TEST(TensorParallelGraphs, EveryRankReplaysInStepAndGraphsEqualEagerSteps) {
  struct Case {
    const char* fixture;
    int ranks;
    const char* mode;  // "eager": every bucket at start-up; "lazy": on first use
  };
  uint64_t padding = 0;
  for (const Case& c : {Case{"tests/fixtures/qwen3/tied_gqa2", 2, "eager"},
                        Case{"tests/fixtures/qwen3/tied_gqa4_kv1_hd64", 4, "lazy"},
                        Case{"tests/fixtures/hybrid/q35_r1_lllf", 2, "eager"}}) {
    SCOPED_TRACE(std::string(c.fixture) + " over " + std::to_string(c.ranks) + " ranks, graphs " +
                 c.mode);
    GraphRanks r = load_graph_split(std::string(SYV_SOURCE_DIR) + "/" + c.fixture, c.ranks);
    ASSERT_TRUE(r.model);
    EXPECT_TRUE(r.model->supports_graphs());
    EXPECT_FALSE(r.model->supports_mtp_graphs());
    const std::vector<Request> requests =
        split_requests(static_cast<int32_t>(r.model->config().vocab_size));
    // Up to 8 sequences at once: buckets 1, 2, 4, 8 (3 decoding sequences pad to 4, 5..7 to 8).
    EngineOptions o = scenario_options(16, 128, 4096, 24, true, 8);
    const EngineRun eager = run(r, o, requests);
    for (const auto& b : r.backends) EXPECT_EQ(b->captured(), 0) << "graphs off captured";
    o.cuda_graphs = c.mode;
    const EngineRun graphs = run(r, o, requests);
    if (HasFailure()) return;
    EXPECT_GT(graphs.stats.graph_steps, 0u);
    EXPECT_EQ(eager.stats.graph_steps, 0u);
    EXPECT_EQ(graphs.stats.steps, eager.stats.steps);
    expect_same_outputs(graphs.outputs, eager.outputs);
    expect_ranks_in_step(r, graphs.stats);
    padding += graphs.stats.graph_padding_rows;
  }
  EXPECT_GT(padding, 0u) << "no scenario padded a step";
}

// MTP over 2 ranks with graphs: the verify steps replay graphs on both ranks, the head's forwards
// run eagerly (none replayed, and none captured: every rank's graphs are the engine's), and the
// outputs and the drafts accepted equal graphs off (batch-invariant ranks).
TEST(TensorParallelGraphs, MtpHeadRunsEagerlyBesideTheRanksGraphs) {
  LoadOptions lo;
  lo.mtp = true;
  GraphRanks r = load_graph_split(make_mtp_fixture("q35_r1_lllf", 3), 2, lo);
  ASSERT_TRUE(r.model);
  ASSERT_TRUE(r.model->has_mtp());
  const std::vector<Request> requests = shared_prefix_requests(
      std::min<int32_t>(300, static_cast<int32_t>(r.model->config().vocab_size)), 9, 6, 20, 10, 12);
  EngineOptions o = scenario_options(16, 128, 4096, 0, true, 4);
  o.speculative_method = "mtp";
  o.num_speculative_tokens = 2;
  const EngineRun eager = run(r, o, requests);
  o.cuda_graphs = "eager";
  const EngineRun graphs = run(r, o, requests);
  if (HasFailure()) return;
  expect_same_outputs(graphs.outputs, eager.outputs);
  EXPECT_GT(graphs.stats.graph_verify_steps, 0u) << "no verify step replayed a graph";
  EXPECT_GT(graphs.stats.draft_tokens, 0u);
  EXPECT_EQ(graphs.stats.draft_tokens, eager.stats.draft_tokens);
  EXPECT_EQ(graphs.stats.accepted_tokens, eager.stats.accepted_tokens);
  EXPECT_GT(graphs.head_rows, 0) << "the head never ran";
  EXPECT_EQ(graphs.head_rows, eager.head_rows);
  EXPECT_EQ(graphs.head_graph_runs, 0) << "the head's forwards were captured on rank 0 alone";
  expect_ranks_in_step(r, graphs.stats);
}

}  // namespace
}  // namespace syv::testing
