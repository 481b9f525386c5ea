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

// A DeferredCopyBackend that counts forwards (prepare_batch: one per eager forward) and notes, for
// each load call (a copy into the device, CopyDir::kIn), how many forwards had begun by then.
class LaunchOrderBackend : public DeferredCopyBackend {
 public:
  BatchMeta prepare_batch(const syv::Batch& batch, int32_t page_size) override {
    ++forwards_;
    return DeferredCopyBackend::prepare_batch(batch, page_size);
  }
  CopyEvent copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir) override {
    if (dir == CopyDir::kIn) load_calls_.push_back(forwards_);
    return DeferredCopyBackend::copy_batch_async(ops, dir);
  }
  int64_t forwards() const { return forwards_; }
  const std::vector<int64_t>& load_calls() const { return load_calls_; }

 private:
  int64_t forwards_ = 0;
  std::vector<int64_t> load_calls_;
};

// C decodes; then A (its prefix evicted to the host tier) and B (no hit) arrive together. With
// admit_loads_after_launch off, both are admitted in the next step's schedule phase: A's load is
// enqueued before that step's forward and B runs in it. On, the schedule phase stops at A and A is
// admitted after the forward began (its load calls come after the step's prepare_batch), B a step
// later. Either way A loads while C steps and every output equals the recompute (A's logprobs bit
// for bit); nothing leaks.
TEST(HostTierAdmitAfterLaunch, HostHitAdmittedAfterTheForwardBegan) {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    for (int32_t after_launch : {0, 1}) {
      SCOPED_TRACE(std::string(dir) + (after_launch ? " after the launch" : " before it"));
      Model& m = model(dir, 3, &load_cpu_fixture_on<LaunchOrderBackend>);
      auto& backend = static_cast<LaunchOrderBackend&>(m.backend());
      backend.set_polls_to_land(3);
      std::mt19937 rng(11);
      EngineOptions o = opts(dir, 10, 1, 64, 16);
      o.admit_loads_after_launch = after_launch;
      Harness h(make_core(m, o));
      ASSERT_EQ(h.core().scheduler().config().admit_loads_after_launch, after_launch == 1);
      const EvictedPrefix e = evict_a_prefix(h, rng);
      const Request c = request(random_tokens(rng, 10), 20);
      const uint64_t c_id = h.submit(c);
      while (running_with(h, c.prompt_ids) == nullptr ||
             running_with(h, c.prompt_ids)->num_pending() != 1) {
        h.step();
        if (::testing::Test::HasFatalFailure()) return;
      }
      const Request b = request(random_tokens(rng, 12), 6);
      const uint64_t a_id = h.submit(e.a);
      const uint64_t b_id = h.submit(b);
      const int64_t forwards_before = backend.forwards();
      const size_t calls_before = backend.load_calls().size();
      const uint64_t host_hits_before = h.core().stats().prefix_host_hit_tokens;
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(backend.forwards(), forwards_before + 1);
      EXPECT_TRUE(is_loading(running_with(h, e.a.prompt_ids))) << "A is not loading";
      ASSERT_GT(backend.load_calls().size(), calls_before) << "A's admission enqueued no load";
      for (size_t i = calls_before; i < backend.load_calls().size(); ++i) {
        EXPECT_EQ(backend.load_calls()[i], forwards_before + after_launch) << "load call " << i;
      }
      EXPECT_EQ(running_with(h, b.prompt_ids) != nullptr, after_launch == 0)
          << "B runs in A's admission step only when A is admitted before the launch";
      EXPECT_GT(h.core().stats().prefix_host_hit_tokens, host_hits_before)
          << "the step did not count A's host hit";
      h.run();
      const SampleOutput& a_out = h.output(a_id).samples.at(0);
      EXPECT_EQ(a_out.tokens, e.cold_tokens);
      EXPECT_EQ(a_out.logprobs, e.cold_logprobs);  // bit for bit
      EXPECT_GT(a_out.cached_tokens, 0);
      EXPECT_EQ(h.output(b_id).samples.at(0).tokens, run_alone(dir, b));
      EXPECT_EQ(h.output(c_id).samples.at(0).tokens, run_alone(dir, c));
      expect_no_leaks(h);
    }
  }
}

// Host-tier hits admitted after the step's launch (EngineOptions::admit_loads_after_launch, the
// default with CUDA): the same scenarios, the same exactness and invariants.
TEST(HostTierAdmitAfterLaunch, EvictedPrefixServedFromHostEqualsRecompute) {
  AdmitAfterLaunch on(1);
  evicted_prefixes_served_from_host();
}

TEST(HostTierAdmitAfterLaunch, HybridMultiTurnResumesFromHostCheckpoints) {
  AdmitAfterLaunch on(1);
  hybrid_multi_turn_resumes_from_host_checkpoints();
}

TEST(HostTierAdmitAfterLaunch, EvictionStormWithCancelsKeepsInvariants) {
  AdmitAfterLaunch on(1);
  eviction_storm_with_cancels_keeps_invariants();
}

TEST(HostTierAdmitAfterLaunch, OtherSequencesStepWhileHostHitLoads) {
  AdmitAfterLaunch on(1);
  other_sequences_step_while_host_hit_loads();
}

TEST(HostTierAdmitAfterLaunch, HitOnPagesInFlightWaitsAndCancelsKeepInvariants) {
  AdmitAfterLaunch on(1);
  hit_on_pages_in_flight_waits_and_cancels_keep_invariants();
}

TEST(HostTierAdmitAfterLaunch, PreemptingALoadingSequenceKeepsInvariants) {
  AdmitAfterLaunch on(1);
  preempting_a_loading_sequence_keeps_invariants();
}

TEST(HostTierAdmitAfterLaunch, EvictionStormWithWriteBacksDuringLoads) {
  AdmitAfterLaunch on(1);
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/6);
}

TEST(HostTierAdmitAfterLaunch, WriteAheadCoversALongHostHitsAdmission) {
  AdmitAfterLaunch on(1);
  write_ahead_covers_a_long_host_hits_admission();
}

TEST(HostTierAdmitAfterLaunch, EvictionStormWithWriteAhead) {
  AdmitAfterLaunch on(1);
  eviction_storm_with_cancels_keeps_invariants(/*loading=*/true, /*polls=*/6,
                                               /*write_ahead=*/true);
}

}  // namespace
}  // namespace syv::testing
