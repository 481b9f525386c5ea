// CUDA-graph decode buckets without a GPU: bucket choice, padding, the dummy page beyond the
// pool, and the whole engine path through a fake graph backend (unit/fake_graph_backend.h) whose
// "graph" re-runs the captured step at each replay (so a replay reads the padded batch the engine
// staged, as a CUDA graph re-reads its staging). The fake model's output never depends on
// batching, so graphs on, lazy and off must give the same tokens; any wrong row, page or padding
// shows up as a difference (or as a read of an unwritten position, which the fake model aborts
// on).
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "backend/host_batch_meta.h"
#include "core/log.h"
#include "engine/graph_runner.h"
#include "unit/engine_harness.h"
#include "unit/fake_graph_backend.h"
#include "unit/fake_model.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

// The fake model on the fake graph backend.
class GraphFakeModel : public FakeModel {
 public:
  Backend& backend() override { return graphs_; }
  bool supports_graphs() const override { return true; }
  void reserve(int64_t tokens, int64_t rows) override { reservations.emplace_back(tokens, rows); }
  FakeGraphBackend graphs_;
  std::vector<std::pair<int64_t, int64_t>> reservations;
};

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = static_cast<int32_t>(rng() % 97);
  return out;
}

EngineOptions opts(const std::string& graphs, int32_t page, int32_t pages, int32_t budget,
                   int32_t chunk, int32_t max_seqs, int32_t max_graph_batch = 0) {
  EngineOptions o;
  o.page_size = page;
  o.num_pages = pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.max_num_seqs = max_seqs;
  o.cuda_graphs = graphs;
  o.max_graph_batch = max_graph_batch;
  return o;
}

TEST(GraphBuckets, PowersOfTwoAndMidpointsCappedAtTheMaximum) {
  EXPECT_EQ(graph_buckets(256),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(graph_buckets(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph_buckets(3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(graph_buckets(24), (std::vector<int32_t>{1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(graph_buckets(100), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100}));
  EXPECT_EQ(graph_buckets(512).back(), 512);
  const std::vector<int32_t> b = graph_buckets(256);
  EXPECT_EQ(bucket_index(b, 1), 0);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 3))], 4);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 8))], 8);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 9))], 16);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 17))], 24);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 129))], 192);
  EXPECT_EQ(b[static_cast<size_t>(bucket_index(b, 256))], 256);
  EXPECT_EQ(bucket_index(b, 257), -1);
  for (int32_t n = 17; n <= 256; ++n)  // padding stays under half of the real rows past 16
    EXPECT_LT(b[static_cast<size_t>(bucket_index(b, n))], n + n / 2 + 1) << n;
}

TEST(GraphBuckets, ModeParsingNamesTheOption) {
  EXPECT_EQ(parse_graph_mode("eager").value(), GraphMode::kEager);
  EXPECT_EQ(parse_graph_mode("lazy").value(), GraphMode::kLazy);
  EXPECT_EQ(parse_graph_mode("off").value(), GraphMode::kOff);
  Result<GraphMode> bad = parse_graph_mode("always");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(),
            "engine option cuda_graphs: expected eager, lazy or off, found \"always\"");
}

TEST(GraphBuckets, OnlyPlainDecodeStepsQualify) {
  std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams params;
  Sequence a(1, prompt, &params, 0, nullptr, nullptr), b(2, prompt, &params, 0, nullptr, nullptr);
  SchedulerOutput step;
  EXPECT_FALSE(is_graph_step(step, 8)) << "empty";
  step.seqs = {{&a, 1, true}, {&b, 1, true}};
  EXPECT_TRUE(is_graph_step(step, 8));
  EXPECT_TRUE(is_graph_step(step, 2));
  EXPECT_FALSE(is_graph_step(step, 1)) << "more sequences than the largest bucket";
  step.seqs[1].num_new_tokens = 2;
  EXPECT_FALSE(is_graph_step(step, 8)) << "a prefill chunk";
  step.seqs[1] = {&b, 1, false};
  EXPECT_FALSE(is_graph_step(step, 8)) << "a one-token chunk that wants no logits";
}

TEST(GraphBuckets, PaddedBatchAppendsDummySequencesOnTheDummyPage) {
  // Three decoding sequences, page table width 4, page size 16.
  Batch real;
  real.token_ids = {11, 12, 13};
  real.positions = {20, 3, 47};
  real.seq_starts = {0, 1, 2, 3};
  real.context_lens = {21, 4, 48};
  real.max_pages_per_seq = 4;
  real.page_table = {7, 2, -1, -1, 5, -1, -1, -1, 1, 3, 9, -1};
  real.logit_rows = {0, 1, 2};
  Batch padded;
  pad_decode_batch(real, 8, /*dummy_page=*/40, padded);
  EXPECT_EQ(padded.num_seqs(), 8);
  EXPECT_EQ(padded.token_ids, (std::vector<int32_t>{11, 12, 13, 0, 0, 0, 0, 0}));
  EXPECT_EQ(padded.positions, (std::vector<int32_t>{20, 3, 47, 0, 0, 0, 0, 0}));
  EXPECT_EQ(padded.context_lens, (std::vector<int32_t>{21, 4, 48, 1, 1, 1, 1, 1}));
  EXPECT_EQ(padded.seq_starts, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(padded.logit_rows, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(padded.max_pages_per_seq, 4);
  ASSERT_EQ(padded.page_table.size(), 32u);
  EXPECT_TRUE(
      std::equal(real.page_table.begin(), real.page_table.end(), padded.page_table.begin()));
  for (size_t s = 3; s < 8; ++s) {
    EXPECT_EQ(padded.page_table[s * 4], 40);
    for (size_t j = 1; j < 4; ++j) EXPECT_EQ(padded.page_table[s * 4 + j], -1);
  }
  // The backends' own consistency checks accept it; padding rows write the dummy page's slot 0.
  const HostBatchMeta meta = build_host_batch_meta(padded, 16);
  EXPECT_EQ(meta.slot_mapping[0], 2 * 16 + 4);  // position 20: page index 1
  EXPECT_EQ(meta.slot_mapping[2], 9 * 16 + 15);
  for (size_t t = 3; t < 8; ++t) EXPECT_EQ(meta.slot_mapping[t], 40 * 16);
  // Refilling with fewer real sequences reuses the vectors and leaves no stale row behind.
  real.token_ids.resize(1);
  real.positions.resize(1);
  real.seq_starts.resize(2);
  real.context_lens.resize(1);
  real.page_table.resize(4);
  real.logit_rows.resize(1);
  pad_decode_batch(real, 8, 40, padded);
  EXPECT_EQ(padded.token_ids, (std::vector<int32_t>{11, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(padded.page_table[4], 40);
  EXPECT_EQ(padded.page_table[5], -1);
  (void)build_host_batch_meta(padded, 16);
}

TEST(GraphBuckets, VerifyStepsWithOneDraftCountQualify) {
  std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams params;
  Sequence a(1, prompt, &params, 0, nullptr, nullptr), b(2, prompt, &params, 0, nullptr, nullptr);
  SchedulerOutput step;
  step.seqs = {{&a, 3, true}, {&b, 3, true}};
  step.seqs[0].num_drafts = step.seqs[1].num_drafts = 2;
  EXPECT_EQ(graph_step_query(step, 8, 3, 0), 3);
  EXPECT_EQ(graph_step_query(step, 8, 2, 0), 0) << "more tokens per sequence than max_query";
  EXPECT_FALSE(is_graph_step(step, 8)) << "not a plain decode step";
  // Hybrids: two verify saves per sequence (after 1 and 2 tokens), or no graph.
  EXPECT_EQ(graph_step_query(step, 8, 3, 1), 0) << "the saves are missing";
  step.state_saves = {{0, 1, 40}, {0, 2, 41}, {1, 1, 42}, {1, 2, 43}};
  EXPECT_EQ(graph_step_query(step, 8, 3, 1), 3);
  step.state_saves.pop_back();
  EXPECT_EQ(graph_step_query(step, 8, 3, 1), 0) << "one sequence short of a save";
  step.state_saves.clear();
  step.seqs[1].num_drafts = 1;
  step.seqs[1].num_new_tokens = 2;
  EXPECT_EQ(graph_step_query(step, 8, 4, 0), 0) << "different draft counts";
  step.seqs[1] = {&b, 3, true};  // three prompt tokens, no drafts: a prefill chunk
  EXPECT_EQ(graph_step_query(step, 8, 4, 0), 0);
}

TEST(GraphBuckets, PaddedVerifyBatchRepeatsTheShapeForTheDummySequences) {
  // Two hybrid sequences of q = 3 tokens (pending + 2 drafts), page size 16, width 2.
  Batch real;
  real.token_ids = {11, 12, 13, 21, 22, 23};
  real.positions = {20, 21, 22, 3, 4, 5};
  real.seq_starts = {0, 3, 6};
  real.context_lens = {23, 6};
  real.max_pages_per_seq = 2;
  real.page_table = {7, 2, 5, -1};
  real.logit_rows = {0, 1, 2, 3, 4, 5};
  real.state_slots = {3, 0};
  real.state_save_starts = {0, 2, 4};
  real.state_save_after = {1, 2, 1, 2};
  real.state_save_dests = {30, 31, 36, 37};
  Batch padded;
  pad_decode_batch(real, 4, /*dummy_page=*/40, padded);
  EXPECT_EQ(padded.num_seqs(), 4);
  EXPECT_EQ(padded.token_ids, (std::vector<int32_t>{11, 12, 13, 21, 22, 23, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(padded.positions, (std::vector<int32_t>{20, 21, 22, 3, 4, 5, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(padded.seq_starts, (std::vector<int32_t>{0, 3, 6, 9, 12}));
  EXPECT_EQ(padded.context_lens, (std::vector<int32_t>{23, 6, 3, 3}));
  EXPECT_EQ(padded.logit_rows.size(), 12u);
  EXPECT_EQ(padded.state_slots, (std::vector<int32_t>{3, 0, -1, -1}));
  EXPECT_EQ(padded.state_save_starts, (std::vector<int32_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(padded.state_save_after, (std::vector<int32_t>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(padded.state_save_dests.size(), 8u);
  const HostBatchMeta meta = build_host_batch_meta(padded, 16);
  for (size_t t = 6; t < 12; ++t) EXPECT_EQ(meta.slot_mapping[t], 40 * 16 + (t - 6) % 3);
}

TEST(GraphBuckets, PaddedHybridBatchGivesTheDummySequencesNoStateSlot) {
  Batch real;
  real.token_ids = {11, 12};
  real.positions = {20, 3};
  real.seq_starts = {0, 1, 2};
  real.context_lens = {21, 4};
  real.max_pages_per_seq = 2;
  real.page_table = {7, 2, 5, -1};
  real.logit_rows = {0, 1};
  real.state_slots = {3, 0};
  Batch padded;
  pad_decode_batch(real, 4, /*dummy_page=*/40, padded);
  EXPECT_EQ(padded.state_slots, (std::vector<int32_t>{3, 0, -1, -1}));
  (void)build_host_batch_meta(padded, 16);
  real.state_slots.clear();  // a dense model's batch: no slots either way
  pad_decode_batch(real, 4, 40, padded);
  EXPECT_TRUE(padded.state_slots.empty());
}

struct GraphRunResult {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
  std::vector<FakeGraphBackend::Shape> staged;
  int32_t captured = 0, destroyed = 0;
  int64_t fixed_max_context = -1;
  EngineOptions resolved;
};

// Requests arrive over the first steps (so decode batches of every size occur), with random
// prompt and output lengths; every step's integrity is checked by the harness.
GraphRunResult run_engine(const EngineOptions& o, uint32_t seed, int32_t num_requests) {
  set_log_level(LogLevel::WARN);
  GraphFakeModel model;
  GraphRunResult out;
  {
    auto core = EngineCore::create(model, nullptr, o);
    EXPECT_TRUE(core.ok()) << core.message();
    if (!core.ok()) return out;
    out.resolved = core.value()->options();
    Harness h(std::move(core).value());
    std::mt19937 rng(seed);
    std::vector<uint64_t> ids;
    const std::vector<int32_t> shared = random_tokens(rng, 37);
    for (int32_t i = 0; i < num_requests; ++i) {
      std::vector<int32_t> prompt = i % 3 == 0 ? shared : std::vector<int32_t>{};
      const std::vector<int32_t> tail = random_tokens(rng, 1 + static_cast<int32_t>(rng() % 40));
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      Request r = greedy_request(prompt, 1 + static_cast<int32_t>(rng() % 30));
      r.params.ignore_eos = true;
      ids.push_back(h.submit(r));
      if (rng() % 2) h.step();
    }
    h.run();
    h.expect_no_leaks();
    for (uint64_t id : ids) out.tokens.push_back(h.output(id).samples.at(0).tokens);
    out.stats = h.core().stats();
  }  // the engine (and its graphs) are gone here
  out.staged = model.graphs_.staged_shapes;
  out.captured = model.graphs_.captured();
  out.destroyed = model.graphs_.destroyed;
  out.fixed_max_context = model.graphs_.fixed_max_context;
  return out;
}

TEST(EngineGraphs, GraphsOnLazyAndOffGiveTheSameTokens) {
  // (page size, pages, budget, chunk, max_num_seqs, max_graph_batch)
  const std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int32_t>> configs = {
      {16, 256, 2048, 0, 256, 0},
      {8, 256, 64, 7, 256, 0},
      {16, 256, 2048, 0, 5, 0},
      {4, 40, 50, 0, 256, 0},  // tiny pool: preemption
      {16, 256, 2048, 1, 256, 8}};
  for (const auto& [page, pages, budget, chunk, seqs, gmax] : configs) {
    const std::string name = "page " + std::to_string(page) + " pages " + std::to_string(pages) +
                             " budget " + std::to_string(budget) + " chunk " +
                             std::to_string(chunk) + " seqs " + std::to_string(seqs);
    SCOPED_TRACE(name);
    const GraphRunResult off =
        run_engine(opts("off", page, pages, budget, chunk, seqs, gmax), 7, 24);
    const GraphRunResult eager =
        run_engine(opts("eager", page, pages, budget, chunk, seqs, gmax), 7, 24);
    const GraphRunResult lazy =
        run_engine(opts("lazy", page, pages, budget, chunk, seqs, gmax), 7, 24);
    if (HasFatalFailure()) return;
    EXPECT_EQ(eager.tokens, off.tokens);
    EXPECT_EQ(lazy.tokens, off.tokens);
    EXPECT_EQ(off.stats.graph_steps, 0u);
    EXPECT_EQ(off.captured, 0);
    EXPECT_EQ(off.resolved.cuda_graphs, "off");
    EXPECT_GT(eager.stats.graph_steps, 0u);
    EXPECT_EQ(lazy.stats.graph_steps, eager.stats.graph_steps);
    EXPECT_EQ(eager.stats.steps, off.stats.steps) << "graphs change no scheduling decision";
    // The largest bucket: min(max_graph_batch or 256, max_num_seqs, budget).
    const int32_t max_batch = std::min({gmax > 0 ? gmax : 256, seqs, budget});
    EXPECT_EQ(eager.resolved.max_graph_batch, max_batch);
    const std::vector<int32_t> buckets = graph_buckets(max_batch);
    EXPECT_EQ(eager.captured, static_cast<int32_t>(buckets.size())) << "eager: every bucket";
    EXPECT_LE(lazy.captured, eager.captured) << "lazy: only the buckets used";
    EXPECT_EQ(eager.destroyed, eager.captured);
    EXPECT_EQ(lazy.destroyed, lazy.captured);
    EXPECT_EQ(eager.fixed_max_context, 0) << "unfixed again when the engine is gone";
    // Every replayed batch is a full bucket: T = S = R, the fixed page-table width.
    const int32_t width = (eager.resolved.max_model_len + page - 1) / page;
    ASSERT_EQ(eager.staged.size(), eager.stats.graph_steps);
    for (const FakeGraphBackend::Shape& s : eager.staged) {
      EXPECT_EQ(s.tokens, s.seqs);
      EXPECT_EQ(s.rows, s.seqs);
      EXPECT_EQ(s.width, width);
      EXPECT_TRUE(std::find(buckets.begin(), buckets.end(), s.seqs) != buckets.end()) << s.seqs;
    }
  }
}

// Verify steps (every running sequence drafted by an oracle, right, wrong or partly right) replay
// the graph of (bucket, 1 + drafts): the same tokens as graphs off, and verify replays happen.
TEST(EngineGraphs, VerifyStepsRunAsGraphsAndGiveTheSameTokens) {
  set_log_level(LogLevel::WARN);
  std::vector<Request> requests = make_requests(97, 5, 9, 0.0f);
  auto run_with = [&](const std::string& graphs, int32_t k, Drafts mode,
                      const std::vector<std::vector<int32_t>>* plain) {
    GraphFakeModel model;
    EngineOptions o = opts(graphs, 16, 256, 2048, 0, 256, 16);
    o.num_speculative_tokens = k;
    auto core = EngineCore::create(model, nullptr, o);
    EXPECT_TRUE(core.ok()) << core.message();
    if (plain != nullptr) {
      auto drafter = std::make_unique<OracleDrafter>(mode, 97);
      for (size_t i = 0; i < requests.size(); ++i)
        drafter->expect(requests[i].prompt_ids, (*plain)[i]);
      core.value()->set_drafter(std::move(drafter));
    }
    syv::testing::RunResult r = run_core(std::move(core).value(), requests);
    return std::make_pair(r, model.graphs_.staged_shapes);
  };
  const auto [plain, plain_shapes] = run_with("off", 0, Drafts::kRight, nullptr);
  for (int32_t k : {1, 3}) {
    for (Drafts mode : {Drafts::kRight, Drafts::kWrong, Drafts::kPartial}) {
      SCOPED_TRACE(std::string("k ") + std::to_string(k) + " drafts " + name_of(mode));
      const auto [off, off_shapes] = run_with("off", k, mode, &plain.tokens);
      const auto [lazy, shapes] = run_with("lazy", k, mode, &plain.tokens);
      if (HasFatalFailure()) return;
      EXPECT_EQ(off.tokens, plain.tokens);
      EXPECT_EQ(lazy.tokens, plain.tokens);
      EXPECT_EQ(lazy.stats.steps, off.stats.steps) << "graphs change no scheduling decision";
      EXPECT_EQ(lazy.stats.draft_tokens, off.stats.draft_tokens);
      EXPECT_EQ(lazy.stats.accepted_tokens, off.stats.accepted_tokens);
      EXPECT_GT(lazy.stats.graph_verify_steps, 0u);
      EXPECT_LE(lazy.stats.graph_verify_steps, lazy.stats.graph_steps);
      // Every replay is a full bucket of S sequences x q tokens, q <= 1 + k.
      size_t verify_shapes = 0;
      for (const FakeGraphBackend::Shape& s : shapes) {
        EXPECT_EQ(s.tokens % s.seqs, 0);
        EXPECT_EQ(s.rows, s.tokens);
        EXPECT_LE(s.tokens / s.seqs, 1 + k);
        verify_shapes += s.tokens > s.seqs;
      }
      EXPECT_EQ(verify_shapes, lazy.stats.graph_verify_steps);
    }
  }
}

// Uneven draft counts (0..k per sequence, engine/verify_padding.h): each verify step is padded to
// 1 + its most drafts and replays the graph of (bucket, q); the same tokens as graphs off, the same
// scheduling, and every padded step a graph replay of a full bucket.
TEST(EngineGraphs, UnevenVerifyStepsArePaddedAndReplayGraphs) {
  set_log_level(LogLevel::WARN);
  std::vector<Request> requests = make_requests(97, 6, 11, 0.0f);
  auto run_with = [&](const std::string& graphs, int32_t k, Drafts mode,
                      const std::vector<std::vector<int32_t>>* plain) {
    GraphFakeModel model;
    EngineOptions o = opts(graphs, 4, 256, 2048, 0, 256, 16);
    o.num_speculative_tokens = k;
    o.speculative_cost_knee = 1e6;  // every uneven step's filler "pays": padding's exactness
    auto core = EngineCore::create(model, nullptr, o);
    EXPECT_TRUE(core.ok()) << core.message();
    if (plain != nullptr) {
      auto oracle = std::make_unique<OracleDrafter>(mode, 97);
      for (size_t i = 0; i < requests.size(); ++i)
        oracle->expect(requests[i].prompt_ids, (*plain)[i]);
      core.value()->set_drafter(std::make_unique<UnevenDrafter>(std::move(oracle)));
    }
    syv::testing::RunResult r = run_core(std::move(core).value(), requests);
    return std::make_pair(r, model.graphs_.staged_shapes);
  };
  const auto [plain, plain_shapes] = run_with("off", 0, Drafts::kRight, nullptr);
  for (int32_t k : {2, 4}) {
    for (Drafts mode : {Drafts::kRight, Drafts::kPartial, Drafts::kWrong}) {
      SCOPED_TRACE(std::string("k ") + std::to_string(k) + " drafts " + name_of(mode));
      const auto [off, off_shapes] = run_with("off", k, mode, &plain.tokens);
      const auto [lazy, shapes] = run_with("lazy", k, mode, &plain.tokens);
      if (HasFatalFailure()) return;
      EXPECT_EQ(off.tokens, plain.tokens);
      EXPECT_EQ(lazy.tokens, plain.tokens);
      EXPECT_EQ(off.stats.verify_padded_steps, 0u) << "no graphs, no padding";
      EXPECT_GT(lazy.stats.verify_padded_steps, 0u);
      EXPECT_GT(lazy.stats.verify_padding_tokens, 0u);
      EXPECT_EQ(lazy.stats.verify_padding_refused, 0u) << "a roomy pool";
      EXPECT_GE(lazy.stats.graph_verify_steps, lazy.stats.verify_padded_steps)
          << "every padded step replays";
      EXPECT_EQ(lazy.stats.steps, off.stats.steps) << "padding changes no scheduling decision";
      EXPECT_EQ(lazy.stats.computed_tokens, off.stats.computed_tokens);
      EXPECT_EQ(lazy.stats.draft_tokens, off.stats.draft_tokens);
      EXPECT_EQ(lazy.stats.accepted_tokens, off.stats.accepted_tokens);
      EXPECT_EQ(lazy.stats.prefix_hit_tokens, off.stats.prefix_hit_tokens);
      size_t verify_shapes = 0;
      for (const FakeGraphBackend::Shape& s : shapes) {
        EXPECT_EQ(s.tokens % s.seqs, 0);
        EXPECT_EQ(s.rows, s.tokens);
        EXPECT_LE(s.tokens / s.seqs, 1 + k);
        verify_shapes += s.tokens > s.seqs;
      }
      EXPECT_EQ(verify_shapes, lazy.stats.graph_verify_steps);
    }
  }
}

// Plain decoding of `requests`, then adaptive speculation (k = 3, CUDA's knee) without graphs and
// with lazy graphs, each with the oracle drafter `mode` knowing the first `known` prompts' plain
// output (the others get no drafts).
struct AdaptiveRuns {
  syv::testing::RunResult plain, off, lazy;
};
AdaptiveRuns adaptive_runs(const std::vector<Request>& requests, Drafts mode, size_t known) {
  auto run_with = [&](const std::string& graphs, bool spec,
                      const std::vector<std::vector<int32_t>>* plain) {
    GraphFakeModel model;
    EngineOptions o = opts(graphs, 4, 1024, 2048, 0, 256, 32);
    if (spec) {
      o.num_speculative_tokens = 3;
      o.speculative_adaptive = true;
      o.speculative_cost_knee = 32;
    }
    auto core = EngineCore::create(model, nullptr, o);
    EXPECT_TRUE(core.ok()) << core.message();
    if (plain != nullptr) {
      auto oracle = std::make_unique<OracleDrafter>(mode, 97);
      for (size_t i = 0; i < known; ++i) oracle->expect(requests[i].prompt_ids, (*plain)[i]);
      core.value()->set_drafter(std::move(oracle));
    }
    return run_core(std::move(core).value(), requests);
  };
  AdaptiveRuns r;
  r.plain = run_with("off", false, nullptr);
  r.off = run_with("off", true, &r.plain.tokens);
  r.lazy = run_with("lazy", true, &r.plain.tokens);
  return r;
}

// Adaptive speculation with graphs: wrong drafts switch sequences off; the few that would still
// draft (or probe) in a step would make it uneven (padded or eager for the whole batch), so the
// policy drops such steps' drafts but the probes (spec_policy.h); output stays plain decoding's.
TEST(EngineGraphs, AdaptiveSpeculationDropsDraftsThatWouldCostTheBatchAReplay) {
  set_log_level(LogLevel::WARN);
  const std::vector<Request> requests = make_requests(97, 24, 40, 0.0f);
  const AdaptiveRuns r = adaptive_runs(requests, Drafts::kWrong, requests.size());
  EXPECT_EQ(r.off.tokens, r.plain.tokens);
  EXPECT_EQ(r.lazy.tokens, r.plain.tokens);
  EXPECT_EQ(r.off.stats.spec_steps_dropped, 0u) << "without graphs uneven steps cost nothing extra";
  EXPECT_GT(r.lazy.stats.spec_steps_dropped, 0u);
  EXPECT_LT(r.lazy.stats.draft_tokens, r.off.stats.draft_tokens);
  EXPECT_GT(r.lazy.stats.draft_tokens, 0u) << "the prior drafts, then the probes";
}

// The step is weighed by the drafts actually proposed, not by the budgets: a prompt-lookup
// drafter finds drafts for a few sequences of the many its budget allows (here the oracle knows
// one prompt of 24), and one sequence drafting makes the whole step uneven. Weighed by the budgets
// (every sequence at the optimistic prior, k drafts each) that step looked paying and every step
// ran uneven (H200, Qwen3-8B shape, n-gram: adaptive at 0.92 of plain at B = 32 and 64).
TEST(EngineGraphs, AdaptiveSpeculationWeighsTheDraftsProposed) {
  set_log_level(LogLevel::WARN);
  const std::vector<Request> requests = make_requests(97, 24, 40, 0.0f);
  const AdaptiveRuns r = adaptive_runs(requests, Drafts::kRight, 1);  // drafts for one sequence
  EXPECT_EQ(r.off.tokens, r.plain.tokens);
  EXPECT_EQ(r.lazy.tokens, r.plain.tokens);
  EXPECT_EQ(r.off.stats.spec_steps_dropped, 0u);
  EXPECT_GT(r.off.stats.accepted_tokens, 0u) << "without graphs the one sequence drafts";
  EXPECT_GT(r.lazy.stats.spec_steps_dropped, 0u);
  EXPECT_LT(r.lazy.stats.draft_tokens, r.off.stats.draft_tokens);
}

TEST(EngineGraphs, EagerCapturesSmallBatchVerifyGraphsAtStartUp) {
  set_log_level(LogLevel::WARN);
  for (const std::string mode : {"eager", "lazy"}) {
    GraphFakeModel model;
    EngineOptions o = opts(mode, 4, 256, 2048, 0, 64, 32);  // buckets 1 2 4 8 16 24 32
    o.num_speculative_tokens = 3;
    auto core = EngineCore::create(model, nullptr, o);
    ASSERT_TRUE(core.ok()) << core.message();
    ASSERT_NE(core.value()->graphs(), nullptr);
    // eager: 7 decode graphs + q = 2..4 for the 5 buckets of at most 16 sequences.
    EXPECT_EQ(core.value()->graphs()->num_captured(), mode == "eager" ? 7 + 5 * 3 : 0) << mode;
  }
}

TEST(EngineGraphs, ReservesTheLargestStepAndFixesTheContext) {
  set_log_level(LogLevel::WARN);
  GraphFakeModel model;
  EngineOptions o = opts("lazy", 16, 100, 48, 0, 32);
  o.max_model_len = 1000;
  o.max_prompt_logprob_rows = 16;
  auto core = EngineCore::create(model, nullptr, o);
  ASSERT_TRUE(core.ok()) << core.message();
  EXPECT_EQ(model.graphs_.fixed_max_context, 1000);
  ASSERT_EQ(model.reservations.size(), 1u);
  // 32 sampling rows (one per sequence) and 16 prompt-logprob rows.
  EXPECT_EQ(model.reservations[0], (std::pair<int64_t, int64_t>(48, 48)));
  const GraphRunner* g = core.value()->graphs();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->config().pages_per_seq, 63);  // ceil(1000 / 16)
  EXPECT_EQ(g->config().dummy_page, 100);    // one page beyond the pool
  EXPECT_EQ(core.value()->cache().pool().num_pages(), 100) << "the pool does not see it";
  EXPECT_EQ(model.cache_config().num_pages, 101);
  EXPECT_EQ(g->num_captured(), 0) << "lazy";
  core.value().reset();
  EXPECT_EQ(model.reservations.back(), (std::pair<int64_t, int64_t>(0, 0))) << "released";
}

TEST(EngineGraphs, OffWithALogLineWhenTheModelCannotRunGraphs) {
  set_log_level(LogLevel::WARN);
  FakeModel model;  // CPU backend: no graphs
  auto core = EngineCore::create(model, nullptr, opts("eager", 16, 64, 256, 0, 8));
  ASSERT_TRUE(core.ok()) << core.message();
  EXPECT_EQ(core.value()->options().cuda_graphs, "off");
  EXPECT_EQ(core.value()->graphs(), nullptr);
  EXPECT_EQ(model.cache_config().num_pages, 64) << "no dummy page";
}

TEST(EngineGraphs, BadOptionsAreErrors) {
  set_log_level(LogLevel::WARN);
  GraphFakeModel model;
  auto bad_mode = EngineCore::create(model, nullptr, opts("sometimes", 16, 64, 256, 0, 8));
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_EQ(bad_mode.message(),
            "engine option cuda_graphs: expected eager, lazy or off, found \"sometimes\"");
  auto bad_batch = EngineCore::create(model, nullptr, opts("eager", 16, 64, 256, 0, 8, -1));
  ASSERT_FALSE(bad_batch.ok());
  EXPECT_EQ(bad_batch.message(), "engine option max_graph_batch: expected >= 0, found -1");
}

// Qwen3 (CPU backend here): after reserve() a larger forward() is refused (on CUDA it would move
// buffers a captured graph writes); reserve(0, 0) lifts that.
TEST(EngineGraphs, Qwen3RefusesToOutgrowItsReservation) {
  set_log_level(LogLevel::WARN);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto model = load_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/tied_gqa2", *cpu);
  ASSERT_TRUE(model.ok()) << model.message();
  Model& m = *model.value();
  EXPECT_FALSE(m.supports_graphs()) << "the CPU backend has no graphs";
  CacheConfig cache;
  cache.page_size = 16;
  cache.num_pages = 4;
  auto store = make_cache_store(m, cache);
  ASSERT_TRUE(store.ok()) << store.message();
  auto prefill = [](int32_t n) {
    Batch b;
    for (int32_t i = 0; i < n; ++i) {
      b.token_ids.push_back(i + 1);
      b.positions.push_back(i);
    }
    b.seq_starts = {0, n};
    b.context_lens = {n};
    b.max_pages_per_seq = 1;
    b.page_table = {0};
    b.logit_rows = {n - 1};
    return b;
  };
  m.reserve(4, 2);
  EXPECT_EQ(m.forward(prefill(4)).dim(0), 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(m.forward(prefill(5)), "exceeds reserve\\(4, 2\\)");
  m.reserve(0, 0);
  EXPECT_EQ(m.forward(prefill(5)).dim(0), 1);
}

}  // namespace
}  // namespace syv::testing
