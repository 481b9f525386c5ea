// The host tier's engine scenarios (tests/unit/host_tier_scenarios.h) on CUDA: pieces pinned
// between steps with cudaHostRegister, write-backs and loads on their two copy streams (the gather
// kernel), the compute stream ordered after the write-backs by events, loads polled with
// cudaEventQuery while their sequence is loading (kv/inflight_loads.h). Every resend served from
// the host equals a recompute (logprobs bit for bit, batch-invariant kernels), eviction storms with
// cancels keep both tiers' invariants and leak nothing. Skipped cleanly when no CUDA device is
// present.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "unit/host_tier_scenarios.h"

namespace syv::testing {
namespace {

LoadedModel load_cuda_fixture(const std::string& dir) {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  LoadedModel l;
  l.backend = make_cuda_backend(0);
  auto loaded =
      load_model(std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/" + dir, *l.backend);
  EXPECT_TRUE(loaded.ok()) << dir << ": " << loaded.message();
  if (loaded.ok()) l.model = std::move(loaded.value());
  return l;
}

class HostTierGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    fixture_loader() = &load_cuda_fixture;
  }
  void TearDown() override { release_models(); }
};

TEST_F(HostTierGpu, EvictedPrefixServedFromHostEqualsRecompute) {
  evicted_prefixes_served_from_host();
}

TEST_F(HostTierGpu, PinsOnlyBetweenStepsAheadOfEvictions) {
  pins_only_between_steps_ahead_of_evictions();
}

TEST_F(HostTierGpu, IdlePinsTheWholeTier) {
  idle_pins_the_whole_tier();
}

TEST_F(HostTierGpu, HybridMultiTurnResumesFromHostCheckpoints) {
  hybrid_multi_turn_resumes_from_host_checkpoints();
}

TEST_F(HostTierGpu, EvictionStormWithCancelsKeepsInvariants) {
  eviction_storm_with_cancels_keeps_invariants();
}

// Loading: the copy stream's own timing (the step counts are the CPU test's).
TEST_F(HostTierGpu, OtherSequencesStepWhileHostHitLoads) {
  other_sequences_step_while_host_hit_loads();
}

TEST_F(HostTierGpu, HitOnPagesInFlightWaitsAndCancelsKeepInvariants) {
  hit_on_pages_in_flight_waits_and_cancels_keep_invariants();
}

TEST_F(HostTierGpu, PreemptingALoadingSequenceKeepsInvariants) {
  preempting_a_loading_sequence_keeps_invariants();
}

// Write-backs during loads: on their own copy stream, never into a host entry a load reads.
TEST_F(HostTierGpu, WriteBacksDuringALoadDoNotWaitForIt) {
  write_backs_during_a_load_do_not_wait_for_it();
}

TEST_F(HostTierGpu, WriteBacksNeverOverwriteAHostEntryBeingLoaded) {
  write_backs_never_overwrite_a_host_entry_being_loaded();
}

TEST_F(HostTierGpu, EvictionStormWithLoadsInFlight) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true);
}

// Write-ahead (kv/host_tier.h "Write-ahead"): evicted pages were stored between steps.
TEST_F(HostTierGpu, WriteAheadLeavesEvictionsNothingToWriteBack) {
  write_ahead_leaves_evictions_nothing_to_write_back();
}

TEST_F(HostTierGpu, WriteAheadCoversALongHostHitsAdmission) {
  write_ahead_covers_a_long_host_hits_admission();
}

TEST_F(HostTierGpu, WriteAheadCoversARunningSequencesPages) {
  write_ahead_covers_a_running_sequences_pages();
}

TEST_F(HostTierGpu, EvictionStormWithWriteAhead) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/2,
                                               /*write_ahead=*/true);
}

}  // namespace
}  // namespace syv::testing
