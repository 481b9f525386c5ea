// MTP speculative decoding on the CUDA backend (the CPU test is unit/engine_mtp_test.cpp): the
// hybrid Qwen3.5 fixtures with a random MTP head (unit/mtp_fixture.h), batch-invariant mode so a
// verify row is bit-identical to a decode row. Greedy output with k = 1, 2, 4 drafts equals plain
// decoding token for token, alone, batched, through chunked prefill, prefix hits and preemption;
// seeded sampling too (a verify row is built from a copy of the sampler state). With random
// weights almost every draft is rejected: acceptance is not tested here. Skipped without a CUDA
// device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "engine/mtp_drafter.h"
#include "unit/engine_harness.h"
#include "unit/mtp_fixture.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

EngineOptions hybrid_options(int32_t pages, int32_t budget, int32_t chunk, int32_t max_seqs,
                             int32_t k) {
  EngineOptions o = scenario_options(16, pages, budget, chunk, true, max_seqs);
  o.checkpoint_interval = 16;
  o.num_checkpoints = 64;
  o.num_speculative_tokens = k;
  o.speculative_method = k > 0 ? "mtp" : "";
  return o;
}

// head_graph_runs: the MTP head's forwards replayed as graphs (MtpDrafter::head_graph_runs).
RunResult run(Model& model, const EngineOptions& o, const std::vector<Request>& requests,
              int64_t* head_graph_runs = nullptr) {
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  return run_core(std::move(core).value(), requests, [&](const EngineCore& c) {
    const auto* mtp = dynamic_cast<const MtpDrafter*>(c.drafter());
    if (head_graph_runs != nullptr && mtp != nullptr) *head_graph_runs = mtp->head_graph_runs();
  });
}

class EngineMtpGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineMtpGpu, GreedyAndSeededEqualPlainDecoding) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  set_log_level(LogLevel::WARN);
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  gpu->set_batch_invariant(true);
  LoadOptions lo;
  lo.mtp = true;
  auto loaded = load_model(make_mtp_fixture(GetParam(), 3), *gpu, lo);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Model& m = *loaded.value();
  ASSERT_TRUE(m.has_mtp());
  const int32_t vocab = std::min<int32_t>(300, static_cast<int32_t>(m.config().vocab_size));
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::vector<Request> requests = make_requests(vocab, 5, 6, temperature);
    requests.push_back(requests[0]);  // a resend: prefix hits once the first finished
    const RunResult plain = run(m, hybrid_options(128, 4096, 0, 8, 0), requests);
    ASSERT_EQ(plain.tokens.size(), requests.size());
    for (int32_t k : {1, 2, 4}) {
      SCOPED_TRACE("k " + std::to_string(k));
      struct Scenario {
        const char* what;
        EngineOptions o;
      };
      Scenario scenarios[] = {
          {"batched", hybrid_options(128, 4096, 0, 8, k)},
          {"chunked prefill", hybrid_options(128, 24, 7, 8, k)},
          {"prefix hits", hybrid_options(128, 4096, 0, 2, k)},
          {"preemption", hybrid_options(9, 64, 0, 8, k)},
          {"graphs (decode and verify steps replayed, the head eager)",
           hybrid_options(128, 4096, 0, 8, k)},
          {"lazy graphs, batch of 2", hybrid_options(128, 4096, 0, 2, k)},
      };
      scenarios[4].o.cuda_graphs = "eager";
      scenarios[5].o.cuda_graphs = "lazy";
      for (const Scenario& s : scenarios) {
        SCOPED_TRACE(s.what);
        int64_t head_graph_runs = -1;
        const RunResult spec = run(m, s.o, requests, &head_graph_runs);
        EXPECT_EQ(spec.tokens, plain.tokens);
        EXPECT_GT(spec.stats.draft_tokens, 0u);
        if (s.o.cuda_graphs != "off") {
          EXPECT_GT(spec.stats.graph_verify_steps, 0u);
          EXPECT_GT(head_graph_runs, 0);
        } else {
          EXPECT_EQ(head_graph_runs, 0);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineMtpGpu,
                         ::testing::Values("q35_r1_lllf", "q35_r2_flfl_tied"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace syv::testing
