// The host tier under tensor parallelism (issue 21): the host tier scenarios
// (tests/unit/host_tier_scenarios.h) on fixtures split over 2 simulated CPU ranks
// (load_tensor_parallel), so every write-back and hit copies each rank's part of a page or
// checkpoint (CacheStore's external copies fan out to its mirrors). An evicted prefix comes back
// from the host bit for bit equal to its cold run and to the request alone (split too;
// unit_tensor_parallel_test has split = unsplit), the counters' bytes those of both ranks; a hybrid
// chat resumes each turn from host checkpoints.
#include <gtest/gtest.h>

#include "model/prepare_model.h"
#include "model/tensor_parallel.h"
#include "unit/host_tier_scenarios.h"

namespace syv::testing {
namespace {

// Rank 1's backends, alive until the models on them are released (TearDown).
std::vector<std::unique_ptr<Backend>>& rank_backends() {
  static std::vector<std::unique_ptr<Backend>> backends;
  return backends;
}

LoadedModel load_split_fixture(const std::string& dir) {
  LoadedModel l;
  l.backend = make_cpu_backend();
  rank_backends().push_back(make_cpu_backend());
  // model() makes rank 0's backend batch-invariant (a hit and a recompute compare bit for bit);
  // rank 1 sums its shard's partials alike.
  rank_backends().back()->set_batch_invariant(true);
  auto prepared = prepare_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + dir, *l.backend);
  SYV_CHECK(prepared.ok()) << prepared.message();
  auto model = load_tensor_parallel(prepared.value(),
                                    {l.backend.get(), rank_backends().back().get()}, LoadOptions{});
  SYV_CHECK(model.ok()) << model.message();
  l.model = std::move(model).value();
  return l;
}

class TensorParallelHostTier : public ::testing::Test {
 protected:
  void SetUp() override {
    release_models();
    fixture_loader() = &load_split_fixture;
  }
  void TearDown() override {
    release_models();
    rank_backends().clear();
    fixture_loader() = &load_cpu_fixture;
  }
};

TEST_F(TensorParallelHostTier, EvictedPrefixServedFromHostEqualsRecompute) {
  evicted_prefixes_served_from_host();
  // Both ranks' bytes in each host entry.
  Model& m = model("qwen3/tied_gqa2");
  auto core = make_core(m, opts("qwen3/tied_gqa2", 10, 0, 64, 0));
  EXPECT_EQ(core->store().external_page_bytes(), 2 * core->store().page_bytes());
}

TEST_F(TensorParallelHostTier, HybridMultiTurnResumesFromHostCheckpoints) {
  hybrid_multi_turn_resumes_from_host_checkpoints();
}

// The same with host-tier hits admitted after the step's launch (the default with CUDA).
TEST_F(TensorParallelHostTier, AdmittedAfterTheLaunchEqualsRecompute) {
  AdmitAfterLaunch on(1);
  evicted_prefixes_served_from_host();
  hybrid_multi_turn_resumes_from_host_checkpoints();
}

}  // namespace
}  // namespace syv::testing
