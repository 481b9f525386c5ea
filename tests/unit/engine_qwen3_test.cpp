// The engine's exactness scenarios on the real tiny Qwen3 fixtures (CPU backend): greedy output
// of every sequence is identical alone, batched, chunked at several sizes, after a prefix hit,
// after preemption, and for n > 1 samples sharing the prompt's pages; no page leaks.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

class EngineQwen3 : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineQwen3, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  LoadedModel l = load_cpu_fixture(std::string("qwen3/") + GetParam());
  ASSERT_TRUE(l.model);
  const int32_t vocab = static_cast<int32_t>(l.model->config().vocab_size);
  std::mt19937 rng(42);
  std::vector<int32_t> shared(70);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r;
    if (i % 2 == 0) r.prompt_ids = shared;  // a common prefix: prefix hits
    const int32_t tail = 1 + static_cast<int32_t>(rng() % 60);
    for (int32_t k = 0; k < tail; ++k) r.prompt_ids.push_back(static_cast<int32_t>(rng() % vocab));
    r.params.temperature = 0.0f;
    r.params.max_tokens = 4 + static_cast<int32_t>(rng() % 16);
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  Request multi = requests[0];
  multi.params.n = 3;
  requests.push_back(multi);

  // Reference: each request alone, no prefix cache, no chunking.
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : requests) {
    Request solo = r;
    solo.params.n = 1;
    expected.push_back(run_requests(*l.model, scenario_options(16, 64, 4096, 0, false), {solo})[0]
                           .samples.at(0)
                           .tokens);
  }
  auto check = [&](const std::vector<RequestOutput>& got, const std::string& scenario) {
    ASSERT_EQ(got.size(), requests.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].samples.size(), static_cast<size_t>(requests[i].params.n)) << scenario;
      for (const SampleOutput& s : got[i].samples)
        EXPECT_EQ(s.tokens, expected[i]) << scenario << ", request " << i;
    }
  };
  EngineStats stats;
  check(run_requests(*l.model, scenario_options(16, 256, 4096, 0, false), requests), "batched");
  for (int32_t chunk : {1, 7, 33}) {
    check(run_requests(*l.model, scenario_options(16, 256, 4096, chunk, false), requests),
          "chunk " + std::to_string(chunk));
  }
  check(run_requests(*l.model, scenario_options(8, 256, 4096, 0, true, 2), requests, &stats),
        "prefix cache, 2 at a time");
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
  check(run_requests(*l.model, scenario_options(8, 20, 50, 0, true), requests, &stats),
        "tiny pool");
  EXPECT_GT(stats.preemptions, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineQwen3, ::testing::ValuesIn(kQwen3Fixtures));

}  // namespace
}  // namespace syv::testing
