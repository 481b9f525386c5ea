// Adaptive speculation (engine/spec_policy.h): the policy alone (acceptance 0 switches a sequence
// off within a few steps and probes come back every probe_interval steps; high acceptance keeps k;
// a large batch switches drafting off by the cost model; the batch-size cutoff), then in the
// engine: greedy output with adaptivity on is plain decoding's token for token, with n-gram,
// oracle and MTP drafters; wrong drafts are mostly skipped (and the MTP head runs no chain for
// them); adaptivity off is the old behaviour.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/mtp_drafter.h"
#include "engine/spec_policy.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"
#include "unit/mtp_fixture.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

SpecPolicyOptions policy_options(int32_t k) {
  SpecPolicyOptions o;
  o.k = k;
  o.knee = 8;
  o.draft_cost = 0;
  o.probe_interval = 10;
  return o;
}

TEST(SpecPolicy, ZeroAcceptanceSwitchesOffAndProbesPeriodically) {
  const SpecPolicy policy(policy_options(4));
  SpecState st;
  std::vector<int32_t> asked;
  for (int step = 0; step < 60; ++step) {
    const SpecDecision d = policy.decide(st, 4, 1);
    asked.push_back(d.drafts);
    if (d.drafts > 0) policy.observe(st, d.drafts, 0);  // every draft rejected
  }
  EXPECT_GT(asked[0], 0) << "the optimistic prior drafts at first";
  // Off within a few steps.
  int off_at = -1;
  for (int i = 0; i < 10 && off_at < 0; ++i)
    if (asked[static_cast<size_t>(i)] == 0) off_at = i;
  ASSERT_GE(off_at, 1);
  // From then on: one-draft probes exactly every probe_interval steps, nothing in between.
  int probes = 0;
  for (int i = off_at; i < 60; ++i) {
    const int32_t n = asked[static_cast<size_t>(i)];
    if ((i - off_at + 1) % 10 == 0) {
      EXPECT_EQ(n, 1) << "step " << i;
      ++probes;
    } else {
      EXPECT_EQ(n, 0) << "step " << i;
    }
  }
  EXPECT_GE(probes, 4);
  EXPECT_LT(policy.acceptance(st), 0.1);
}

TEST(SpecPolicy, AcceptedProbesTurnDraftingBackOn) {
  const SpecPolicy policy(policy_options(4));
  SpecState st;
  for (int i = 0; i < 20; ++i) policy.observe(st, 1, 0);  // a long run of rejections
  int step = 0;
  SpecDecision d = policy.decide(st, 4, 1);
  for (; d.drafts == 0 && step < 20; ++step) d = policy.decide(st, 4, 1);
  ASSERT_TRUE(d.probe) << "no probe within 20 steps";
  // A repetitive passage: every draft is kept from now on.
  for (step = 0; step < 8; ++step) {
    policy.observe(st, d.drafts, d.drafts);
    d = policy.decide(st, 4, 1);
  }
  EXPECT_EQ(d.drafts, 4);
  EXPECT_FALSE(d.probe);
}

TEST(SpecPolicy, HighAcceptanceKeepsK) {
  for (int32_t k : {1, 3, 6}) {
    const SpecPolicy policy(policy_options(k));
    SpecState st;
    for (int step = 0; step < 30; ++step) {
      const SpecDecision d = policy.decide(st, k, 2);
      // The prior may pick fewer than a large k; once drafts are kept, k.
      if (step == 0) {
        EXPECT_GT(d.drafts, 0);
      } else {
        ASSERT_EQ(d.drafts, k) << "k " << k << " step " << step;
      }
      policy.observe(st, d.drafts, d.drafts);
    }
    EXPECT_GT(policy.acceptance(st), 0.95);
    // Room caps the choice.
    EXPECT_EQ(policy.decide(st, 1, 2).drafts, 1);
  }
}

TEST(SpecPolicy, LargeBatchSwitchesOffByTheCostModel) {
  const SpecPolicy policy(policy_options(4));
  // Even with every draft kept, k drafts cost 1 + k * B / (B + 8) decode steps.
  EXPECT_EQ(policy.best_drafts(1.0, 4, 1), 4);
  EXPECT_EQ(policy.best_drafts(1.0, 4, 1024), 0);
  EXPECT_DOUBLE_EQ(policy.cost(2, 8), 2.0);
  EXPECT_DOUBLE_EQ(SpecPolicy::expected_tokens(0.5, 2), 1.75);
  SpecState st;
  for (int step = 0; step < 50; ++step) {
    const SpecDecision d = policy.decide(st, 4, 1024);
    EXPECT_EQ(d.drafts, 0) << "step " << step << ": no probe where no acceptance could pay";
    EXPECT_TRUE(d.skipped);
  }
  // Medium batches: fewer drafts pay than at batch 1, for the same acceptance.
  EXPECT_LT(policy.best_drafts(0.7, 4, 64), policy.best_drafts(0.7, 4, 1));
  // The drafter's own cost counts too.
  SpecPolicyOptions costly = policy_options(4);
  costly.draft_cost = 1.0;
  EXPECT_EQ(SpecPolicy(costly).best_drafts(0.9, 4, 1), 0);
}

TEST(SpecPolicy, DisableByBatchSize) {
  SpecPolicyOptions o = policy_options(4);
  o.disable_batch_size = 8;
  const SpecPolicy policy(o);
  SpecState st;
  EXPECT_GT(policy.decide(st, 4, 7).drafts, 0);
  for (int step = 0; step < 30; ++step) EXPECT_EQ(policy.decide(st, 4, 8).drafts, 0);
}

TEST(SpecPolicy, ProbesWaitForAProbeStep) {
  const SpecPolicy policy(policy_options(4));
  SpecState st;
  for (int i = 0; i < 20; ++i) policy.observe(st, 1, 0);  // switched off by its acceptance
  for (int step = 0; step < 30; ++step) {
    EXPECT_EQ(policy.decide(st, 4, 1, /*probe_step=*/false).drafts, 0) << "step " << step;
  }
  const SpecDecision d = policy.decide(st, 4, 1, /*probe_step=*/true);  // long due
  EXPECT_EQ(d.drafts, 1);
  EXPECT_TRUE(d.probe);
  EXPECT_EQ(policy.decide(st, 4, 1, true).drafts, 0) << "the probe restarted the count";
}

// With graphs a probe makes its step uneven: among many sequences it costs the batch more than
// its drafts could earn even if all were kept, so no probe is taken there; at small batches, or
// without graphs (uneven steps cost nothing extra), the switched-off sequence still probes.
TEST(SpecPolicy, ProbesOnlyWhereALoneDraftingStepCouldPay) {
  SpecPolicyOptions o = policy_options(4);
  o.knee = 32;  // CUDA's default
  const SpecPolicy policy(o);
  // k = 4 at a = 1 among 64: (64 + 4) / 64 = 1.0625 against 1 + 4 / 96 + 0.05 = 1.092.
  EXPECT_FALSE(policy.lone_draft_pays(4, 64, 0.05));
  EXPECT_TRUE(policy.lone_draft_pays(4, 64, 0.0));
  EXPECT_TRUE(policy.lone_draft_pays(4, 8, 0.05));  // (8 + 4) / 8 = 1.5 against 1.15
  EXPECT_TRUE(policy.lone_draft_pays(1, 1, 0.05)) << "one sequence: an even step";
  auto probes = [&](int32_t batch, double uneven_cost) {
    SpecState st;
    for (int i = 0; i < 20; ++i) policy.observe(st, 1, 0);  // switched off by its acceptance
    int n = 0;
    for (int step = 0; step < 40; ++step) n += policy.decide(st, 4, batch, true, uneven_cost).probe;
    return n;
  };
  EXPECT_EQ(probes(64, 0.05), 0);
  EXPECT_GT(probes(64, 0.0), 0);
  EXPECT_GT(probes(8, 0.05), 0);
}

TEST(SpecPolicy, StepRatioCountsUnevenDraftCounts) {
  SpecPolicyOptions o = policy_options(4);
  o.knee = 32;  // CUDA's default
  const SpecPolicy policy(o);
  // Every sequence with the same k: the step's ratio is each sequence's E(k) / cost(k, B).
  std::vector<SpecPlan> even(16, SpecPlan{0.8, 2, false});
  EXPECT_NEAR(policy.step_ratio(even.data(), 16, 0.05),
              SpecPolicy::expected_tokens(0.8, 2) / policy.cost(2, 16), 1e-12);
  EXPECT_TRUE(policy.step_pays(even.data(), 16, 0.05));
  // No drafts: plain decoding, nothing to pay for.
  std::vector<SpecPlan> none(64, SpecPlan{0.1, 0, false});
  EXPECT_DOUBLE_EQ(policy.step_ratio(none.data(), 64, 0.05), 1.0);
  EXPECT_TRUE(policy.step_pays(none.data(), 64, 0.05));
  // Two of 64 sequences draft (each would pay alone): worth it without graphs, not when the
  // uneven counts cost the step a replay.
  std::vector<SpecPlan> few(64, SpecPlan{0.1, 0, false});
  few[3] = few[40] = SpecPlan{0.9, 1, false};
  EXPECT_GT(policy.best_drafts(0.9, 4, 64), 0);
  EXPECT_TRUE(policy.step_pays(few.data(), 64, 0.0));
  EXPECT_FALSE(policy.step_pays(few.data(), 64, 0.05));
  const double expect =
      (62 + 2 * SpecPolicy::expected_tokens(0.9, 1)) / 64 / (1 + 2 * (1.0 / (64 + 32)) + 0.05);
  EXPECT_NEAR(policy.step_ratio(few.data(), 64, 0.05), expect, 1e-12);
  // Most of a batch drafting with good acceptance still pays the uneven cost.
  std::vector<SpecPlan> most(8, SpecPlan{0.95, 4, false});
  most[0].drafts = 3;
  EXPECT_TRUE(policy.step_pays(most.data(), 8, 0.05));
}

// The engine with adaptivity on: output is plain decoding's, wrong drafts stop being asked for,
// right ones keep coming; adaptivity off asks every sequence for k every step (no skips).
TEST(EngineSpecAdaptive, OracleDraftsEqualPlainDecoding) {
  FakeModel model(97);
  const std::vector<Request> requests = make_requests(97, 4, 6, 0.0f);
  EngineOptions base = scenario_options(16, 64, 4096, 0, true);
  base.speculative_cost_knee = 8;  // drafting pays at these batches (a GPU-like cost model)
  const RunResult plain = run(model, base, requests);
  for (Drafts mode : {Drafts::kRight, Drafts::kWrong, Drafts::kPartial}) {
    SCOPED_TRACE(name_of(mode));
    RunResult by_mode[2];
    for (bool adaptive : {false, true}) {
      auto drafter = std::make_unique<OracleDrafter>(mode, 97);
      for (size_t i = 0; i < requests.size(); ++i)
        drafter->expect(requests[i].prompt_ids, plain.tokens[i]);
      EngineOptions o = base;
      o.num_speculative_tokens = 3;
      o.speculative_adaptive = adaptive;
      const RunResult spec = run(model, o, requests, std::move(drafter));
      for (size_t i = 0; i < requests.size(); ++i)
        EXPECT_EQ(spec.tokens.at(i), plain.tokens[i]) << "adaptive " << adaptive << " req " << i;
      by_mode[adaptive] = spec;
    }
    EXPECT_EQ(by_mode[0].stats.draft_skipped, 0u);
    const EngineStats& on = by_mode[1].stats;
    const EngineStats& off = by_mode[0].stats;
    if (mode == Drafts::kRight) {
      EXPECT_EQ(on.accepted_tokens, on.draft_tokens);
      EXPECT_EQ(on.draft_skipped, 0u);
      EXPECT_LE(on.steps, off.steps + 2);
    } else if (mode == Drafts::kWrong) {
      EXPECT_GT(on.draft_skipped, 0u);
      EXPECT_LT(on.draft_tokens * 2, off.draft_tokens);
    }
  }
}

TEST(EngineSpecAdaptive, NgramOnQwen3EqualsPlainDecoding) {
  LoadedModel l = load_cpu_fixture("qwen3/tied_gqa2");
  ASSERT_TRUE(l.model);
  const int32_t vocab = static_cast<int32_t>(l.model->config().vocab_size);
  std::vector<Request> requests = make_requests(vocab, 11, 6, 0.0f);
  repeat_prompt_phrase(requests, 5, 3);  // so the lookup finds earlier n-grams
  EngineOptions o = scenario_options(16, 64, 4096, 0, true);
  const RunResult plain = run(*l.model, o, requests);
  o.num_speculative_tokens = 4;
  o.speculative_method = "ngram";
  o.ngram_min = 1;
  o.speculative_adaptive = true;
  o.speculative_cost_knee = 8;
  const RunResult spec = run(*l.model, o, requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(spec.tokens.at(i), plain.tokens[i]) << "request " << i;
  EXPECT_GT(spec.stats.draft_tokens, 0u);
  // The CPU default cost model: every request decodes in the same steps.
  o.speculative_cost_knee = -1;
  o.speculative_disable_by_batch_size = 2;
  const RunResult cut = run(*l.model, o, requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(cut.tokens.at(i), plain.tokens[i]) << "request " << i;
  EXPECT_GT(cut.stats.draft_skipped, 0u);
}

// MTP prepares its chains in observe(): a sequence the policy switched off gets no chain, so the
// head runs fewer rows; random head weights: almost every draft is rejected.
TEST(EngineSpecAdaptive, MtpChainsFollowThePolicy) {
  auto backend = make_cpu_backend();
  LoadOptions lo;
  lo.mtp = true;
  auto model = load_model(make_mtp_fixture("q35_r1_lllf", 3), *backend, lo);
  ASSERT_TRUE(model.ok()) << model.message();
  Model& m = *model.value();
  const int32_t vocab = std::min<int32_t>(300, static_cast<int32_t>(m.config().vocab_size));
  std::vector<Request> requests = make_requests(vocab, 5, 3, 0.0f);
  for (Request& r : requests) r.params.max_tokens = 40;
  EngineOptions o = scenario_options(16, 128, 4096, 0, true, 8);
  o.checkpoint_interval = 16;
  o.num_checkpoints = 64;
  set_log_level(LogLevel::WARN);
  const RunResult plain = run(m, o, requests);
  int64_t head_rows[2] = {0, 0};
  uint64_t drafts[2] = {0, 0};
  for (bool adaptive : {false, true}) {
    EngineOptions s = o;
    s.num_speculative_tokens = 3;
    s.speculative_method = "mtp";
    s.speculative_adaptive = adaptive;
    s.speculative_cost_knee = 8;
    auto core = EngineCore::create(m, nullptr, s);
    ASSERT_TRUE(core.ok()) << core.message();
    Harness h(std::move(core).value());
    std::vector<uint64_t> ids;
    for (const Request& r : requests) ids.push_back(h.submit(r));
    h.run();
    h.expect_no_leaks();
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(h.output(ids[i]).samples.at(0).tokens, plain.tokens.at(i))
          << "adaptive " << adaptive << " request " << i;
    const auto* mtp = dynamic_cast<const MtpDrafter*>(h.core().drafter());
    ASSERT_NE(mtp, nullptr);
    head_rows[adaptive] = mtp->head_rows();
    drafts[adaptive] = h.core().stats().draft_tokens;
  }
  EXPECT_LT(drafts[1] * 2, drafts[0]);
  EXPECT_LT(head_rows[1], head_rows[0]);
}

TEST(EngineSpecAdaptive, RefusesBadOptions) {
  FakeModel model(97);
  EngineOptions o = scenario_options(16, 64, 4096, 0, true);
  o.num_speculative_tokens = 2;
  o.speculative_method = "ngram";
  o.speculative_disable_by_batch_size = -1;
  auto bad = EngineCore::create(model, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("speculative_disable_by_batch_size"), std::string::npos);
}

}  // namespace
}  // namespace syv::testing
