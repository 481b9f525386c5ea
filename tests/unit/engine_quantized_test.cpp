// Quantized checkpoints through the engine (CPU backend): a `syv quantize`d tiny Qwen3 fixture
// (fp8 blocks, gptq and awq groups) gives every request the same greedy tokens batched, chunked,
// after prefix hits and after preemption as alone, and the same tokens as the float model on its
// dequantized weights (the CPU backend computes a quantized linear as that dense weight through
// the same sgemm, so the two are bit-identical). No page leaks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"
#include "unit/quantized_fixture.h"

namespace syv::testing {
namespace {

namespace fs = std::filesystem;

struct Case {
  const char* name;
  QuantizeFormat format;
  int32_t group_size;  // awq / gptq
};

class EngineQuantized : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::WARN);
    base_ = fs::path(::testing::TempDir()) /
            ("syv_engine_quant_" + std::to_string(::getpid()) + "_" + GetParam().name);
  }
  void TearDown() override { fs::remove_all(base_); }

  static LoadedModel load(const fs::path& dir) {
    LoadedModel l;
    l.backend = make_cpu_backend();
    auto model = load_model(dir.string(), *l.backend);
    EXPECT_TRUE(model.ok()) << model.message();
    if (model.ok()) l.model = std::move(model.value());
    return l;
  }

  fs::path base_;
};

TEST_P(EngineQuantized, GreedyTokensAreTheSameAloneBatchedChunkedCachedAndAsTheDequantizedModel) {
  const std::string fixture = "qwen3/tied_gqa2";
  ASSERT_TRUE(quantize_fixture(fixture, GetParam().format, GetParam().group_size, base_ / "q"));
  ASSERT_TRUE(write_dequantized_folder(fs::path(SYV_SOURCE_DIR) / "tests/fixtures" / fixture,
                                       base_ / "q", base_ / "d"));
  LoadedModel q = load(base_ / "q"), d = load(base_ / "d");
  ASSERT_TRUE(q.model && d.model);
  ASSERT_TRUE(q.model->config().quant.quantized());

  // 8 requests, the even ones with a common 40-token prefix: prefix hits.
  const std::vector<Request> requests =
      shared_prefix_requests(static_cast<int32_t>(q.model->config().vocab_size), 7, 8, 40, 40, 12);

  // Reference: each request alone on the quantized model, no prefix cache, no chunking.
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : requests) {
    expected.push_back(run_requests(*q.model, scenario_options(16, 64, 4096, 0, false), {r})[0]
                           .samples.at(0)
                           .tokens);
    ASSERT_EQ(expected.back().size(), static_cast<size_t>(r.params.max_tokens));
  }
  auto check = [&](const std::vector<RequestOutput>& got, const std::string& scenario) {
    ASSERT_EQ(got.size(), requests.size()) << scenario;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i].samples.at(0).tokens, expected[i]) << scenario << ", request " << i;
  };
  EngineStats stats;
  check(run_requests(*q.model, scenario_options(16, 256, 4096, 0, false), requests), "batched");
  check(run_requests(*q.model, scenario_options(16, 256, 4096, 7, false), requests, &stats),
        "chunk 7");
  check(run_requests(*q.model, scenario_options(8, 256, 4096, 0, true, 2), requests, &stats),
        "prefix cache, 2 at a time");
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
  check(run_requests(*q.model, scenario_options(8, 20, 50, 13, true), requests, &stats),
        "tiny pool, chunk 13, prefix cache");
  EXPECT_GT(stats.preemptions, 0u);
  // The float model on the dequantized weights, batched with chunks and prefix hits.
  check(run_requests(*d.model, scenario_options(8, 256, 64, 11, true, 4), requests),
        "dequantized float model");
}

INSTANTIATE_TEST_SUITE_P(Formats, EngineQuantized,
                         ::testing::Values(Case{"fp8", QuantizeFormat::kFp8, 128},
                                           Case{"gptq", QuantizeFormat::kGptq, 32},
                                           Case{"awq", QuantizeFormat::kAwq, 64}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace syv::testing
