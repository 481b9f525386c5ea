// The host tier under the device cache on tiny dense and hybrid models, CPU backend (the
// scenarios are tests/unit/host_tier_scenarios.h; tests/gpu/host_tier_engine_gpu_test.cpp runs
// them on CUDA).
#include <gtest/gtest.h>

#include "unit/host_tier_scenarios.h"

namespace syv::testing {
namespace {

TEST(HostTier, PlanIsValidatedAndSplitLikeTheDevice) {
  // 1 MiB, pages of 1 KiB and checkpoints of 4 KiB, the device holding 3/4 pages, 1/4 checkpoints:
  // 64 checkpoints (256 KiB), the rest in pages (768).
  const HostTierPlan plan = split_host_budget(1 << 20, 1024, 4096, 3 << 20, 1 << 20);
  EXPECT_EQ(plan.num_checkpoints, 64);
  EXPECT_EQ(plan.num_pages, 768);
  const HostTierPlan dense = split_host_budget(1 << 20, 1024, 0, 3 << 20, 0);
  EXPECT_EQ(dense.num_checkpoints, 0);
  EXPECT_EQ(dense.num_pages, 1024);
  // Checkpoints for a model without recurrent state, negative counts, a budget without a page.
  EngineOptions o = opts("qwen3/tied_gqa2", 16, 0, 0, 0);
  o.host_num_checkpoints = 4;
  auto bad = EngineCore::create(model("qwen3/tied_gqa2"), nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("host_num_checkpoints: the model has no recurrent state"),
            std::string::npos)
      << bad.message();
  o = opts("qwen3/tied_gqa2", 16, 0, -1, 0);
  bad = EngineCore::create(model("qwen3/tied_gqa2"), nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("expected >= 0"), std::string::npos) << bad.message();
  o = opts("qwen3/tied_gqa2", 16, 0, 0, 0);
  o.host_cache_bytes = 10;
  bad = EngineCore::create(model("qwen3/tied_gqa2"), nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("hold no page"), std::string::npos) << bad.message();
  // A byte budget is split into pages; prefix caching off turns the tier off.
  o.host_cache_bytes = 1 << 20;
  auto core = make_core(model("qwen3/tied_gqa2"), o);
  ASSERT_NE(core->host_tier(), nullptr);
  EXPECT_EQ(int64_t{core->host_tier()->num_pages()} * core->store().page_bytes(),
            (int64_t{1} << 20) / core->store().page_bytes() * core->store().page_bytes());
  EXPECT_EQ(core->stats().host_pages_total, core->host_tier()->num_pages());
  o.enable_prefix_caching = false;
  EXPECT_EQ(make_core(model("qwen3/tied_gqa2"), o)->host_tier(), nullptr);
}

TEST(HostTier, EvictedPrefixServedFromHostEqualsRecompute) {
  evicted_prefixes_served_from_host();
}

TEST(HostTier, PinsOnlyBetweenStepsAheadOfEvictions) {
  pins_only_between_steps_ahead_of_evictions();
}

TEST(HostTier, IdlePinsTheWholeTier) {
  idle_pins_the_whole_tier();
}

TEST(HostTier, HybridMultiTurnResumesFromHostCheckpoints) {
  hybrid_multi_turn_resumes_from_host_checkpoints();
}

TEST(HostTier, EvictionStormWithCancelsKeepsInvariants) {
  eviction_storm_with_cancels_keeps_invariants();
}

// Loading (kv/inflight_loads.h), on a CPU backend whose copies land late (deferred_copy_backend.h).
TEST(HostTierLoading, OtherSequencesStepWhileHostHitLoads) {
  other_sequences_step_while_host_hit_loads();
}

TEST(HostTierLoading, HitOnPagesInFlightWaitsAndCancelsKeepInvariants) {
  hit_on_pages_in_flight_waits_and_cancels_keep_invariants();
}

TEST(HostTierLoading, PreemptingALoadingSequenceKeepsInvariants) {
  preempting_a_loading_sequence_keeps_invariants();
}

TEST(HostTierLoading, EvictionStormWithCancelsKeepsInvariants) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true);
}

// Write-backs during a load (kv/host_tier.h "Copies"): on their own stream, never into what the
// load reads.
TEST(HostTierLoading, WriteBacksDuringALoadDoNotWaitForIt) {
  write_backs_during_a_load_do_not_wait_for_it();
}

TEST(HostTierLoading, WriteBacksNeverOverwriteAHostEntryBeingLoaded) {
  write_backs_never_overwrite_a_host_entry_being_loaded();
}

TEST(HostTierLoading, EvictionStormWithWriteBacksDuringLoads) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/6);
}

// Write-ahead (kv/host_tier.h "Write-ahead"): evicted pages were stored between steps.
TEST(HostTierLoading, WriteAheadLeavesEvictionsNothingToWriteBack) {
  write_ahead_leaves_evictions_nothing_to_write_back();
}

TEST(HostTierLoading, WriteAheadCoversALongHostHitsAdmission) {
  write_ahead_covers_a_long_host_hits_admission();
}

TEST(HostTierLoading, WriteAheadCoversARunningSequencesPages) {
  write_ahead_covers_a_running_sequences_pages();
}

TEST(HostTierLoading, EvictionStormWithWriteAhead) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/6,
                                               /*write_ahead=*/true);
}

// The same with every write-ahead of two pages or more split into batches (1, 2, 4, ... pages:
// HostTier::store_pages_ahead), each landing on its own (17 such write-aheads, of 2-3 pages):
// integrity every step, no copy racing another, every sample equal to its solo run. Which event
// a page's reuse follows is checked by host_tier_admission_test's
// AnEvictionWaitsForItsOwnWriteAheadBatchOnly (this storm does not catch a page naming an
// earlier batch: no host hit reads such a page back here).
TEST(HostTierLoading, EvictionStormWithWriteAheadInSmallBatches) {
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/6,
                                               /*write_ahead=*/true, /*first_ahead_batch=*/1);
}

}  // namespace
}  // namespace syv::testing
