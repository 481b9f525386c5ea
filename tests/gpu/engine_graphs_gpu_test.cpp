// The engine's decode steps as CUDA graphs (engine/graph_runner.h) against the same engine with
// graphs off, on the Qwen3 fixtures and two hybrid Qwen3.5 ones: the greedy tokens must be
// identical. Skipped without a GPU.
//
//  * Default mode, no padding: every decode step has a bucket's size (1, 2, 4 or 8 sequences in
//    lockstep), so a replay computes exactly what the eager step computes (the same kernels on the
//    same shapes; decode attention's split count follows the batch shape only), so the two must
//    agree to the bit, on every fixture.
//  * Batch-invariant mode (Backend::set_batch_invariant), with padding: arrivals, random lengths,
//    chunked prefill, prefix hits and preemption give decode steps of every size, padded to their
//    bucket with dummy rows; invariant kernels make a real row's bits independent of them.
//  * A timing on qwen3 shapes (random weights): the engine's decode step with graphs on/off.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

#include "backend/cuda/cuda_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

struct GpuModel {
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<Model> model;
};

GpuModel load(const std::string& dir, bool random_weights = false) {
  GpuModel s;
  s.gpu = make_cuda_backend(0);
  LoadOptions lo;
  lo.random_weights = random_weights;
  lo.seed = 1;
  auto model = load_model(dir, *s.gpu, lo);
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) s.model = std::move(model.value());
  return s;
}

// SYV_SOURCE_DIR in the environment wins: a build carried to another machine finds the sources.
std::string source_dir() {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  return root ? root : SYV_SOURCE_DIR;
}

// "tied_gqa2" (a Qwen3 fixture) or "hybrid/q35_r1_lllf" (any folder under tests/fixtures).
std::string fixture(const std::string& name) {
  const bool has_folder = name.find('/') != std::string::npos;
  return source_dir() + "/tests/fixtures/" + (has_folder ? "" : "qwen3/") + name;
}

EngineOptions opts(const std::string& graphs, int32_t page, int32_t pages, int32_t budget,
                   int32_t chunk, bool prefix, int32_t max_seqs) {
  EngineOptions o;
  o.page_size = page;
  o.num_pages = pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.enable_prefix_caching = prefix;
  o.max_num_seqs = max_seqs;
  o.cuda_graphs = graphs;
  o.max_graph_batch = 8;  // buckets 1, 2, 4, 8
  return o;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // per request, sample 0
  EngineStats stats;
};

// Runs the requests (submitted together) on a fresh engine. A graphs-off run gets the fixed
// context a graphs-on engine sets (it fixes batch-invariant mode's attention split count; the
// default mode's does not depend on it), so both compute every decode step the same way.
Outcome run(GpuModel& s, const EngineOptions& o, const std::vector<Request>& requests) {
  set_log_level(LogLevel::WARN);
  Outcome out;
  auto core = EngineCore::create(*s.model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return out;
  const bool graphs = core.value()->graphs() != nullptr;
  EXPECT_EQ(graphs, o.cuda_graphs != "off") << "graphs not set up as asked";
  if (!graphs) s.gpu->set_fixed_max_context(core.value()->options().max_model_len);
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  for (uint64_t id : ids) out.tokens.push_back(h.output(id).samples.at(0).tokens);
  out.stats = h.core().stats();
  s.gpu->set_fixed_max_context(0);
  return out;
}

std::vector<Request> make_requests(int32_t vocab, int32_t n, bool equal_lengths, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(70);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  std::vector<Request> requests;
  for (int32_t i = 0; i < n; ++i) {
    Request r;
    if (i % 2 == 0) r.prompt_ids = shared;
    const int32_t tail = 1 + static_cast<int32_t>(rng() % 60);
    for (int32_t k = 0; k < tail; ++k)
      r.prompt_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
    r.params.temperature = 0.0f;
    r.params.max_tokens = equal_lengths ? 12 : 4 + static_cast<int32_t>(rng() % 16);
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  return requests;
}

class EngineGraphsGpu : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// (name, requests, page, pages, budget, chunk, prefix, max_num_seqs): each decode step's size is a
// bucket: all requests of a wave are admitted in one step and, with equal max_tokens, decode in
// lockstep and finish together.
TEST_P(EngineGraphsGpu, UnpaddedGraphStepsEqualEagerStepsToTheBit) {
  GpuModel s = load(fixture(GetParam()));
  ASSERT_TRUE(s.model);
  const int32_t vocab = static_cast<int32_t>(s.model->config().vocab_size);
  const std::vector<Request> requests = make_requests(vocab, 8, /*equal_lengths=*/true, 42);
  std::vector<std::pair<std::string, std::pair<std::vector<Request>, EngineOptions>>> scenarios;
  for (size_t i = 0; i < requests.size(); ++i)
    scenarios.push_back({"alone " + std::to_string(i),
                         {{requests[i]}, opts("eager", 16, 64, 4096, 0, false, 256)}});
  scenarios.push_back({"8 together", {requests, opts("eager", 16, 256, 4096, 0, false, 256)}});
  scenarios.push_back({"waves of 4", {requests, opts("lazy", 16, 256, 4096, 0, false, 4)}});
  scenarios.push_back(
      {"2 together", {{requests[0], requests[3]}, opts("eager", 16, 64, 4096, 0, false, 256)}});
  // Hybrids too: checkpoints inside a prefill chunk are saved by the forward itself, so a prompt is
  // one chunk whatever boundaries (resend, shared prefix) it holds and pairs stay in lockstep.
  scenarios.push_back(
      {"prefix cache, 2 at a time", {requests, opts("eager", 8, 256, 4096, 0, true, 2)}});
  for (auto& [name, scenario] : scenarios) {
    auto& [reqs, on] = scenario;
    EngineOptions off = on;
    off.cuda_graphs = "off";
    const Outcome g = run(s, on, reqs);
    const Outcome e = run(s, off, reqs);
    if (HasFailure()) return;
    EXPECT_EQ(g.tokens, e.tokens) << name;
    EXPECT_GT(g.stats.graph_steps, 0u) << name;
    EXPECT_EQ(g.stats.graph_padding_rows, 0u) << name << ": the scenario was meant to need none";
    EXPECT_EQ(e.stats.graph_steps, 0u) << name;
    EXPECT_EQ(g.stats.steps, e.stats.steps) << name;
  }
}

TEST_P(EngineGraphsGpu, PaddedGraphStepsEqualEagerStepsInBatchInvariantMode) {
  GpuModel s = load(fixture(GetParam()));
  ASSERT_TRUE(s.model);
  s.gpu->set_batch_invariant(true);
  const int32_t vocab = static_cast<int32_t>(s.model->config().vocab_size);
  const std::vector<Request> requests = make_requests(vocab, 8, /*equal_lengths=*/false, 43);
  std::vector<std::pair<std::string, EngineOptions>> scenarios = {
      {"batched", opts("eager", 16, 256, 4096, 0, false, 256)},
      {"chunk 1", opts("lazy", 16, 256, 4096, 1, false, 256)},
      {"chunk 7", opts("eager", 16, 256, 4096, 7, false, 256)},
      {"chunk 33", opts("eager", 16, 256, 4096, 33, false, 256)},
      {"prefix cache, 3 at a time", opts("eager", 8, 256, 4096, 0, true, 3)},
      {"tiny pool (preemption)", opts("eager", 8, 20, 50, 0, true, 256)}};
  uint64_t padding = 0;
  for (auto& [name, on] : scenarios) {
    EngineOptions off = on;
    off.cuda_graphs = "off";
    const Outcome g = run(s, on, requests);
    const Outcome e = run(s, off, requests);
    if (HasFailure()) break;
    EXPECT_EQ(g.tokens, e.tokens) << name;
    EXPECT_GT(g.stats.graph_steps, 0u) << name;
    EXPECT_EQ(g.stats.steps, e.stats.steps) << name;
    padding += g.stats.graph_padding_rows;
  }
  EXPECT_GT(padding, 0u) << "no scenario padded a step";
  s.gpu->set_batch_invariant(false);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineGraphsGpu, ::testing::ValuesIn(kQwen3Fixtures));
// Hybrid Qwen3.5: padding sequences carry state slot -1 (the recurrent ops skip them).
INSTANTIATE_TEST_SUITE_P(Hybrid, EngineGraphsGpu,
                         ::testing::Values("hybrid/q35_r1_lllf", "hybrid/q35_r2_flfl_tied"));

// The engine's decode step time (wall clock of EngineCore::step(): schedule, batch, forward,
// sampling), B sequences decoding in lockstep: graphs off (the eager engine as it is) and graphs
// on. Printed; the tokens of both must agree to the bit when no step was padded. Environment:
// SYV_GRAPHS_TIMING_CONFIG (a config folder, default tools/bench/configs/qwen3-0.6b, random
// weights), SYV_GRAPHS_TIMING_PROMPTS (prompt lengths, default 32), SYV_GRAPHS_TIMING_MAX_MODEL_LEN
// (default: the pool's).
TEST(EngineGraphsGpuTiming, PrintsDecodeStepTimeWithAndWithoutGraphs) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const char* config_env = std::getenv("SYV_GRAPHS_TIMING_CONFIG");
  const std::string config =
      config_env ? config_env : source_dir() + "/tools/bench/configs/qwen3-0.6b";
  std::vector<int32_t> prompts = {32};
  if (const char* e = std::getenv("SYV_GRAPHS_TIMING_PROMPTS")) {
    prompts.clear();
    std::stringstream list(e);
    for (std::string item; std::getline(list, item, ',');) prompts.push_back(std::stoi(item));
  }
  const char* mml = std::getenv("SYV_GRAPHS_TIMING_MAX_MODEL_LEN");
  GpuModel s = load(config, /*random_weights=*/true);
  ASSERT_TRUE(s.model);
  const std::string name = config.substr(config.find_last_of('/') + 1);
  const int32_t vocab = static_cast<int32_t>(s.model->config().vocab_size);
  const int32_t out_len = 64;
  for (int32_t prompt : prompts) {
    for (int32_t batch : {1, 8, 32, 64}) {
      std::mt19937 rng(static_cast<uint32_t>(batch));
      std::vector<Request> requests(static_cast<size_t>(batch));
      for (Request& r : requests) {
        r.prompt_ids.resize(static_cast<size_t>(prompt));
        for (int32_t& t : r.prompt_ids)
          t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
        r.params.temperature = 0.0f;
        r.params.max_tokens = out_len;
        r.params.ignore_eos = true;
      }
      enum { kEager, kGraphs, kRuns };
      double median_ms[kRuns] = {}, capture_s = 0;
      uint64_t padding = 0;
      int32_t max_model_len = 0;
      std::vector<std::vector<int32_t>> tokens[kRuns];
      for (int mode = 0; mode < kRuns; ++mode) {
        EngineOptions o;
        o.page_size = 64;
        o.num_pages = std::max(256, batch * ((prompt + out_len) / 64 + 2));
        o.max_num_seqs = 64;
        o.max_num_batched_tokens = 4096;
        o.max_model_len = mml ? std::atoi(mml) : 0;
        o.cuda_graphs = mode == kGraphs ? "eager" : "off";
        o.max_graph_batch = 64;
        set_log_level(LogLevel::WARN);
        const auto t0 = std::chrono::steady_clock::now();
        auto core = EngineCore::create(*s.model, nullptr, o);
        ASSERT_TRUE(core.ok()) << core.message();
        max_model_len = core.value()->options().max_model_len;
        if (mode == kGraphs)
          capture_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Harness h(std::move(core).value());
        std::vector<uint64_t> ids;
        for (const Request& r : requests) ids.push_back(h.submit(r));
        std::vector<double> decode_ms;
        while (h.core().has_work()) {
          const EngineStats before = h.core().stats();
          const auto t = std::chrono::steady_clock::now();
          h.core().step();
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                  .count();
          const EngineStats& after = h.core().stats();
          const uint64_t in = after.computed_tokens - before.computed_tokens;
          const uint64_t out = after.generated_tokens - before.generated_tokens;
          // Graph-eligible: every scheduled token is a sequence's last (one token in, one out).
          if (mode == kGraphs) {
            EXPECT_EQ(after.graph_steps > before.graph_steps, in > 0 && in == out)
                << "step " << after.steps;
          }
          // Timed: a decode step of every sequence (long prompts stagger the tail).
          if (in == static_cast<uint64_t>(batch) && out == in && h.core().has_work())
            decode_ms.push_back(ms);
        }
        h.drain();
        for (uint64_t id : ids) tokens[mode].push_back(h.output(id).samples.at(0).tokens);
        if (mode == kGraphs) padding = h.core().stats().graph_padding_rows;
        std::sort(decode_ms.begin(), decode_ms.end());
        ASSERT_FALSE(decode_ms.empty());
        median_ms[mode] = decode_ms[decode_ms.size() / 2];
        s.gpu->set_fixed_max_context(0);
      }
      // Bit-identical when no graph step was padded (prompts prefilled in one step: lockstep);
      // padded steps equal eager ones only with batch-invariant kernels (see the tests above).
      if (padding == 0) {
        EXPECT_EQ(tokens[kGraphs], tokens[kEager]) << "batch " << batch;
      }
      std::printf(
          "| engine decode step | %s (random) | batch %3d | context %d..%d (max_model_len %d) | "
          "eager %.3f ms | graphs %.3f ms | %.2fx | engine start incl. 9 captures %.2f s | %llu "
          "padding rows |\n",
          name.c_str(), batch, prompt + 1, prompt + out_len, max_model_len, median_ms[kEager],
          median_ms[kGraphs], median_ms[kEager] / median_ms[kGraphs], capture_s,
          static_cast<unsigned long long>(padding));
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace syv::testing
