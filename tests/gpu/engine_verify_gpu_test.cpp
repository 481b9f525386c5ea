// Verify-shaped steps (tests/unit/engine_verify_test.cpp) on the CUDA backend: k = 1..4 oracle
// drafts that are right, wrong or right then wrong, batched with plain sequences, give exactly the
// tokens of plain decoding on the tiny Qwen3 fixtures, greedy and seeded (device sampling: each
// draft row is built from a copy of the sampler state). Batch-invariant mode makes every logits
// row independent of how many tokens its sequence fed, so there exactness is required of every
// fixture; the default mode (GEMV for a one-token decode vs GEMM for 1 + k tokens) is run as well,
// as engine_qwen3_gpu_test runs it; the hybrid Qwen3.5 fixtures in batch-invariant mode. Skipped
// when no CUDA device is present.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

// fixture: a folder under tests/fixtures ("qwen3/tied_gqa2", "hybrid/q35_r1_lllf").
void run_verify(const std::string& fixture, bool batch_invariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const char* root = std::getenv("SYV_SOURCE_DIR");
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  gpu->set_batch_invariant(batch_invariant);
  auto loaded =
      load_model(std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture, *gpu);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::unique_ptr<Model> model = std::move(loaded.value());
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

}  // namespace
}  // namespace syv::testing
