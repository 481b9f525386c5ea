// The engine's exactness scenarios on the real tiny Qwen3 fixtures (CPU backend): greedy output
// of every sequence is identical alone, batched, chunked at several sizes, after a prefix hit,
// after preemption, and for n > 1 samples sharing the prompt's pages; no page leaks.
#include <gtest/gtest.h>

#include <map>

#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

class EngineQwen3 : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineQwen3, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  LoadedModel l = load_cpu_fixture(std::string("qwen3/") + GetParam());
  ASSERT_TRUE(l.model);
  // 8 requests, the even ones with a common 70-token prefix: prefix hits.
  std::vector<Request> requests =
      shared_prefix_requests(static_cast<int32_t>(l.model->config().vocab_size), 42, 8, 70, 60, 16);
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
