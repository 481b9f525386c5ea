// The engine's exactness scenarios on the real tiny Qwen3 fixtures and the trained tiny models
// (CPU backend): greedy output of every sequence is identical alone, batched, chunked at several
// sizes, after a prefix hit, after preemption, and for n > 1 samples sharing the prompt's pages;
// no page leaks. The trained models run them with fp8 and int4 KV (each mode against itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>

#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

// A model folder (relative to the repository) and the KV dtype its cache is built in
// (EngineOptions::kv_dtype; nullopt: the declared float KV). Within one KV dtype the scenarios are
// exact too: fp8 / int4 scales are per (token, kv head[, group]), written with the token, so they
// do not depend on what else is batched, how the prompt is chunked or whether its pages came
// from the prefix cache.
struct Case {
  std::string dir;
  std::optional<DType> kv_dtype;
  bool small = false;  // a smaller workload (the trained models are ~10x the fixtures' compute)
};

class EngineQwen3 : public ::testing::TestWithParam<Case> {};

TEST_P(EngineQwen3, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  const std::optional<DType> kv = GetParam().kv_dtype;
  LoadedModel l = load_cpu_model(GetParam().dir);
  ASSERT_TRUE(l.model);
  auto options = [&](int32_t page, int32_t pages, int32_t budget, int32_t chunk, bool prefix,
                     int32_t max_seqs = 256) {
    EngineOptions o = scenario_options(page, pages, budget, chunk, prefix, max_seqs);
    o.kv_dtype = kv;
    return o;
  };
  if (kv) {  // the engine's store holds K/V in that dtype (the option is not ignored)
    set_log_level(LogLevel::WARN);
    auto core = EngineCore::create(*l.model, nullptr, options(16, 64, 4096, 0, false));
    ASSERT_TRUE(core.ok()) << core.message();
    EXPECT_EQ((*core)->store().spec().kv_layers.at(0).dtype, *kv);
    const std::vector<LayerCacheKind>& kinds = (*core)->store().spec().layer_kinds;
    const auto first_kv = std::find(kinds.begin(), kinds.end(), LayerCacheKind::kPagedKV);
    ASSERT_NE(first_kv, kinds.end());
    EXPECT_TRUE((*core)->store().kv_view(static_cast<int32_t>(first_kv - kinds.begin())).scaled());
  }
  // 8 requests, the even ones with a common 70-token prefix: prefix hits (small: 6 requests, 40
  // shared tokens).
  const bool small = GetParam().small;
  std::vector<Request> requests =
      shared_prefix_requests(static_cast<int32_t>(l.model->config().vocab_size), 42, small ? 6 : 8,
                             small ? 40 : 70, small ? 30 : 60, small ? 8 : 16);
  Request multi = requests[0];
  multi.params.n = 3;
  requests.push_back(multi);

  // Reference: each request alone, no prefix cache, no chunking.
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : requests) {
    Request solo = r;
    solo.params.n = 1;
    expected.push_back(
        run_requests(*l.model, options(16, 64, 4096, 0, false), {solo})[0].samples.at(0).tokens);
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
  check(run_requests(*l.model, options(16, 256, 4096, 0, false), requests), "batched");
  for (int32_t chunk : {1, 7, 33}) {
    check(run_requests(*l.model, options(16, 256, 4096, chunk, false), requests),
          "chunk " + std::to_string(chunk));
  }
  check(run_requests(*l.model, options(8, 256, 4096, 0, true, 2), requests, &stats),
        "prefix cache, 2 at a time");
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
  check(run_requests(*l.model, options(8, 20, 50, 0, true), requests, &stats), "tiny pool");
  EXPECT_GT(stats.preemptions, 0u);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.dir;
  for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n + "_" + (info.param.kv_dtype ? std::string(dtype_name(*info.param.kv_dtype)) : "float");
}

std::vector<Case> fixture_cases() {
  std::vector<Case> cases;
  for (const char* f : kQwen3Fixtures)
    cases.push_back({std::string("tests/fixtures/qwen3/") + f, {}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineQwen3, ::testing::ValuesIn(fixture_cases()), case_name);

// The trained tiny models (docs/models.md), dense and hybrid, with fp8 and int4 KV.
INSTANTIATE_TEST_SUITE_P(QuantizedKv, EngineQwen3,
                         ::testing::Values(Case{"models/tiny-dense", DType::F8E4M3, true},
                                           Case{"models/tiny-dense", DType::U4X2, true},
                                           Case{"models/tiny-hybrid", DType::F8E4M3, true},
                                           Case{"models/tiny-hybrid", DType::U4X2, true}),
                         case_name);

}  // namespace
}  // namespace syv::testing
