// Verify-shaped steps (tests/unit/engine_verify_test.cpp) on the CUDA backend: k = 1..4 oracle
// drafts that are right, wrong or right then wrong, batched with plain sequences, give exactly the
// tokens of plain decoding on the tiny Qwen3 fixtures, greedy and seeded (device sampling: each
// draft row is built from a copy of the sampler state). Batch-invariant mode makes every logits
// row independent of how many tokens its sequence fed, so there exactness is required of every
// fixture; the default mode (GEMV for a one-token decode vs GEMM for 1 + k tokens) is run as well,
// as engine_qwen3_gpu_test runs it; the hybrid Qwen3.5 fixtures in batch-invariant mode. Skipped
// when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

struct GpuModel {
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<Model> model;  // null when the load failed (reported as a test failure)
};

// fixture: a folder under tests/fixtures ("qwen3/tied_gqa2", "hybrid/q35_r1_lllf"), loaded on
// CUDA device 0.
GpuModel load_on_gpu(const std::string& fixture, bool batch_invariant) {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  GpuModel m;
  m.gpu = make_cuda_backend(0);
  m.gpu->set_batch_invariant(batch_invariant);
  auto loaded =
      load_model(std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture, *m.gpu);
  if (loaded.ok()) {
    m.model = std::move(loaded.value());
  } else {
    ADD_FAILURE() << fixture << ": " << loaded.message();
  }
  return m;
}

void run_verify(const std::string& fixture, bool batch_invariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const GpuModel m = load_on_gpu(fixture, batch_invariant);
  if (!m.model) return;
  Model* model = m.model.get();
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  const std::string what = fixture + (batch_invariant ? " invariant" : " default");
  expect_verify_equals_plain(*model, scenario_options(16, 64, 4096, 0, true),
                             make_requests(vocab, 2, 6, 0.0f), what + " greedy");
  expect_verify_equals_plain(*model, scenario_options(16, 64, 24, 7, true),
                             make_requests(vocab, 3, 6, 0.8f), what + " seeded");
}

auto fixture_name = [](const ::testing::TestParamInfo<const char*>& info) {
  return std::string(info.param);
};

class EngineVerifyGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineVerifyGpu, BatchInvariantEqualsPlainDecoding) {
  run_verify(std::string("qwen3/") + GetParam(), true);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVerifyGpu, ::testing::ValuesIn(kQwen3Fixtures),
                         fixture_name);

// The default mode on the fixtures engine_qwen3_gpu_test runs in it (untied_mha_hd32 has a known
// batched near-tie flip there, see that file).
class EngineVerifyGpuDefault : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineVerifyGpuDefault, EqualsPlainDecoding) {
  run_verify(std::string("qwen3/") + GetParam(), false);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVerifyGpuDefault,
                         ::testing::Values("tied_gqa2", "tied_gqa4_kv1_hd64", "untied_gqa4_hd24"),
                         fixture_name);

// Qwen3.5 on the GPU: the verify step snapshots each drafting sequence's recurrent state, rolls
// it back on a rejection and re-feeds the kept tokens (engine/drafter.h).
class EngineVerifyHybridGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineVerifyHybridGpu, BatchInvariantEqualsPlainDecoding) {
  run_verify(std::string("hybrid/") + GetParam(), true);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVerifyHybridGpu,
                         ::testing::Values("q35_r1_lllf", "q35_r2_flfl_tied"), fixture_name);

// Verify steps as CUDA graphs (engine/graph_runner.h): every request drafted by the oracle (so
// steps have one draft count), batch-invariant mode (padding rows cannot change a real row), graphs
// lazy vs off: the same tokens as plain decoding, and verify steps were replayed. The hybrid
// fixtures carry the verify state saves through the graph, dummy sequences included.
// (run_ngram_padded_graphs below: uneven draft counts, padded.)
void run_verify_graphs(const std::string& fixture) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const char* root = std::getenv("SYV_SOURCE_DIR");
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  gpu->set_batch_invariant(true);
  auto loaded =
      load_model(std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture, *gpu);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::unique_ptr<Model> model = std::move(loaded.value());
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  const std::vector<Request> requests = make_requests(vocab, 4, 5, 0.0f);
  EngineOptions base = scenario_options(16, 64, 4096, 0, true, 8);
  const RunResult plain = run(*model, base, requests);
  for (int32_t k : {1, 3}) {
    for (Drafts mode : {Drafts::kRight, Drafts::kPartial}) {
      SCOPED_TRACE(fixture + " k " + std::to_string(k) + " drafts " + name_of(mode));
      for (const char* graphs : {"off", "lazy"}) {
        auto drafter = std::make_unique<OracleDrafter>(mode, vocab);
        for (size_t i = 0; i < requests.size(); ++i)
          drafter->expect(requests[i].prompt_ids, plain.tokens[i]);
        EngineOptions o = base;
        o.num_speculative_tokens = k;
        o.cuda_graphs = graphs;
        const RunResult spec = run(*model, o, requests, std::move(drafter));
        if (::testing::Test::HasFatalFailure()) return;
        EXPECT_EQ(spec.tokens, plain.tokens) << "graphs " << graphs;
        if (std::string(graphs) == "lazy") {
          EXPECT_GT(spec.stats.graph_verify_steps, 0u);
        } else {
          EXPECT_EQ(spec.stats.graph_steps, 0u);
        }
      }
    }
  }
}

class EngineVerifyGraphsGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineVerifyGraphsGpu, VerifyGraphsEqualPlainDecoding) {
  run_verify_graphs(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVerifyGraphsGpu,
                         ::testing::Values("qwen3/tied_gqa2", "hybrid/q35_r1_lllf",
                                           "hybrid/q35_r2_flfl_tied"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

// N-gram speculation (prompt lookup) drafts uneven counts, 0..k per sequence: with graphs the
// verify steps are padded to one count and replay (bucket, 1 + most drafts) graphs
// (engine/verify_padding.h). Batch-invariant mode: the same tokens as graphs off and as plain
// decoding, the scheduling unchanged, and padded verify steps replayed. Dense and hybrid fixtures
// (the hybrids' filler states are never selected).
void run_ngram_padded_graphs(const std::string& fixture) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const GpuModel m = load_on_gpu(fixture, true);
  if (!m.model) return;
  Model& model = *m.model;
  const int32_t vocab = std::min<int32_t>(300, static_cast<int32_t>(model.config().vocab_size));
  std::vector<Request> requests = make_requests(vocab, 11, 8, 0.0f);
  repeat_prompt_phrase(requests, 5, 3);  // so the lookup finds earlier n-grams, not always
  EngineOptions base = scenario_options(16, 128, 4096, 0, true, 8);
  const RunResult plain = run(model, base, requests);
  for (int32_t k : {2, 4}) {
    SCOPED_TRACE(fixture + " k " + std::to_string(k));
    RunResult by_mode[2];
    const char* modes[2] = {"off", "lazy"};
    for (int i = 0; i < 2; ++i) {
      EngineOptions o = base;
      o.num_speculative_tokens = k;
      o.speculative_method = "ngram";
      o.ngram_min = 1;
      o.cuda_graphs = modes[i];
      o.speculative_cost_knee = 1e6;  // every uneven step's filler "pays": padding's exactness
      by_mode[i] = run(model, o, requests);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_EQ(by_mode[i].tokens, plain.tokens) << "graphs " << modes[i];
    }
    const EngineStats& off = by_mode[0].stats;
    const EngineStats& lazy = by_mode[1].stats;
    EXPECT_GT(off.draft_tokens, 0u);
    EXPECT_EQ(off.verify_padded_steps, 0u);
    EXPECT_GT(lazy.verify_padded_steps, 0u) << "uneven n-gram drafts were padded";
    EXPECT_GT(lazy.verify_padding_tokens, 0u);
    EXPECT_GE(lazy.graph_verify_steps, lazy.verify_padded_steps) << "every padded step replays";
    EXPECT_EQ(lazy.steps, off.steps) << "padding changes no scheduling decision";
    EXPECT_EQ(lazy.draft_tokens, off.draft_tokens);
    EXPECT_EQ(lazy.accepted_tokens, off.accepted_tokens);
    std::printf(
        "[ ngram graphs ] %s k %d: %llu steps, %llu verify graph replays, %llu padded "
        "(%llu filler positions, %llu refused), %llu drafts, %llu kept\n",
        fixture.c_str(), k, static_cast<unsigned long long>(lazy.steps),
        static_cast<unsigned long long>(lazy.graph_verify_steps),
        static_cast<unsigned long long>(lazy.verify_padded_steps),
        static_cast<unsigned long long>(lazy.verify_padding_tokens),
        static_cast<unsigned long long>(lazy.verify_padding_refused),
        static_cast<unsigned long long>(lazy.draft_tokens),
        static_cast<unsigned long long>(lazy.accepted_tokens));
  }
}

class EngineVerifyPaddedGraphsGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineVerifyPaddedGraphsGpu, NgramUnevenDraftsReplayGraphsAndEqualGraphsOff) {
  run_ngram_padded_graphs(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVerifyPaddedGraphsGpu,
                         ::testing::Values("qwen3/tied_gqa2", "hybrid/q35_r1_lllf",
                                           "hybrid/q35_r2_flfl_tied"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

}  // namespace
}  // namespace syv::testing
