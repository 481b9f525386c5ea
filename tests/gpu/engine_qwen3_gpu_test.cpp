// The engine's exactness scenarios (tests/unit/engine_qwen3_test.cpp) on the CUDA backend: greedy
// output of every request alone vs batched, chunked at several sizes, after prefix hits and after
// preemption, on the tiny Qwen3 and Qwen3.5 fixtures; no page leaks. Skipped when no CUDA device is
// present.
//
// Exactness on the GPU needs every kernel to give a token the same bits whatever else is in the
// batch. In the default mode the GEMV (T <= 4) and cuBLASLt (T > 4) sum in different orders and the
// attention kernels differ between decode and prefill (split counts, the prefill vs decode path),
// so bf16 rounding can flip a near-tie greedy choice; a failure names the scenario and request.
// Batch-invariant mode (Backend::set_batch_invariant) makes every logits row independent of the
// batch, so there all four fixtures must pass every scenario.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backend/cuda/cuda_backend.h"
#include "core/log.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

// The six scenarios on tests/fixtures/<fixture> ("qwen3/tied_gqa2", "hybrid/q35_r1_lllf"), with
// the backend in batch-invariant mode or not.
void run_scenarios(const std::string& fixture, bool batch_invariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const char* root = std::getenv("SYV_SOURCE_DIR");
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  gpu->set_batch_invariant(batch_invariant);
  ASSERT_EQ(gpu->batch_invariant(), batch_invariant);
  auto loaded =
      load_model(std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture, *gpu);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::unique_ptr<Model> model = std::move(loaded.value());
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  std::mt19937 rng(42);
  std::vector<int32_t> shared(70);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r;
    if (i % 2 == 0) r.prompt_ids = shared;
    const int32_t tail = 1 + static_cast<int32_t>(rng() % 60);
    for (int32_t k = 0; k < tail; ++k) r.prompt_ids.push_back(static_cast<int32_t>(rng() % vocab));
    r.params.temperature = 0.0f;
    r.params.max_tokens = 4 + static_cast<int32_t>(rng() % 16);
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : requests)
    expected.push_back(run_requests(*model, scenario_options(16, 64, 4096, 0, false), {r})[0]
                           .samples.at(0)
                           .tokens);
  auto check = [&](const std::vector<RequestOutput>& got, const std::string& scenario) {
    ASSERT_EQ(got.size(), requests.size());
    for (size_t i = 0; i < got.size(); ++i)
      for (const SampleOutput& s : got[i].samples)
        EXPECT_EQ(s.tokens, expected[i]) << scenario << ", request " << i;
  };
  check(run_requests(*model, scenario_options(16, 256, 4096, 0, false), requests), "batched");
  for (int32_t chunk : {1, 7, 33})
    check(run_requests(*model, scenario_options(16, 256, 4096, chunk, false), requests),
          "chunk " + std::to_string(chunk));
  check(run_requests(*model, scenario_options(8, 256, 4096, 0, true, 2), requests),
        "prefix cache, 2 at a time");
  check(run_requests(*model, scenario_options(8, 20, 50, 0, true), requests),
        "tiny pool (preemption)");
}

class EngineQwen3Gpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineQwen3Gpu, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("qwen3/") + GetParam(), /*batch_invariant=*/false);
}

class EngineQwen3GpuBatchInvariant : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineQwen3GpuBatchInvariant, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("qwen3/") + GetParam(), /*batch_invariant=*/true);
}

// The hybrid Qwen3.5 fixtures: the prefix-cache scenario goes through state checkpoints, the tiny
// pool preempts and resumes sequences (their state recomputed from the prompt). The delta rule,
// conv and gated norm kernels are per sequence and row already, so batch-invariant mode makes
// every scenario exact; the default mode is run too.
class EngineHybridGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineHybridGpu, BatchInvariantGreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("hybrid/") + GetParam(), /*batch_invariant=*/true);
}
TEST_P(EngineHybridGpu, DefaultModeGreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("hybrid/") + GetParam(), /*batch_invariant=*/false);
}
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineHybridGpu,
                         ::testing::Values("q35_r1_lllf", "q35_r2_flfl_tied", "q35_nested_r2"));
// The mixture-of-experts fixtures: in batch-invariant mode the router, top-k and experts
// (backend/cuda/moe.cu's tiled path at every T) give each token the same bits whatever else is in
// the batch (one fp32 accumulator per output element over K in a fixed order, whichever tile shape
// or expert group the token lands in), so that mode is exact on all three. The default mode takes
// moe_gemv.cu's GEMVs up to kMoeGemvMaxTokens tokens and the tiled path above: a token's expert
// output then differs in rounding between a small and a large batch, as the dense GEMV's does.
class EngineMoeGpu : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineMoeGpu, BatchInvariantGreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("hybrid/") + GetParam(), /*batch_invariant=*/true);
}
TEST_P(EngineMoeGpu, DefaultModeGreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("hybrid/") + GetParam(), /*batch_invariant=*/false);
}
INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, EngineMoeGpu, ::testing::Values("q35moe_top2_r2"));
class EngineMoeGpuBatchInvariant : public ::testing::TestWithParam<const char*> {};
TEST_P(EngineMoeGpuBatchInvariant, GreedyOutputIsTheSameAloneBatchedChunkedCachedAndPreempted) {
  run_scenarios(std::string("hybrid/") + GetParam(), /*batch_invariant=*/true);
}
INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, EngineMoeGpuBatchInvariant,
                         ::testing::Values("qnext_top1_r2", "qnext_top2_r1"));
// Known failure in the default mode (H200, 2026-12-02 07:20 UTC): on both Qwen3-Next fixtures a
// request's greedy tokens differ batched vs alone (chunks 1 and 7, prefix cache, tiny pool). The
// attention and dense GEMMs of the default mode sum in another order batched than alone (see the
// untied_mha_hd32 note below), and these random routers have near-ties (transformers' own bf16
// moves a row by up to 0.93 relative L2 against its fp32: hybrid_golden_gpu_test.cpp), so a token
// goes to another expert. Batch-invariant mode passes them (above). Kept visible (run with
// --gtest_also_run_disabled_tests).
INSTANTIATE_TEST_SUITE_P(DISABLED_RouterNearTies, EngineMoeGpu,
                         ::testing::Values("qnext_top1_r2", "qnext_top2_r1"));

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineQwen3Gpu,
                         ::testing::Values("tied_gqa2", "tied_gqa4_kv1_hd64", "untied_gqa4_hd24"));
INSTANTIATE_TEST_SUITE_P(Fixtures, EngineQwen3GpuBatchInvariant,
                         ::testing::Values("tied_gqa2", "tied_gqa4_kv1_hd64", "untied_gqa4_hd24",
                                           "untied_mha_hd32"));
// Known failure in the default mode (H200, 2026-11-30): on untied_mha_hd32, request 6 picks token
// 63 instead of 306 at its 5th step when batched (and with chunks of 1 and 33): batched steps go
// through cuBLASLt and lone decode steps through the GEMV, which sum in different orders (this
// fixture's head_dim 32 takes the generic attention kernel, which is per-row already). The
// default mode keeps the faster kernels; batch-invariant mode passes it (above). Kept visible
// (run with --gtest_also_run_disabled_tests); see docs/cuda-backend.md "Batch invariance".
INSTANTIATE_TEST_SUITE_P(DISABLED_NotBatchInvariantYet, EngineQwen3Gpu,
                         ::testing::Values("untied_mha_hd32"));

}  // namespace
}  // namespace syv::testing
