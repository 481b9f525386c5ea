// Verify steps of uneven draft counts padded to one count (engine/verify_padding.h), on the CPU:
// the padding decision as a pure function, and the whole engine path with padding forced
// (EngineOptions::force_verify_padding; the CPU backend has no graphs, the padding path is the
// same). Padding must change no token: greedy and seeded (rejection sampling) output equal plain
// decoding's on the fake model, Qwen3 and hybrid fixtures (filler states never selected); no
// scheduling decision (filler pages come from free pages and go back at commit); and no prefix
// page ever holds a filler position's K/V (a later prefix hit over those pages gives plain
// decoding's tokens on the fake model, whose K/V depends on the whole history).
// tests/unit/engine_graphs_test.cpp runs padded steps through graph replays.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/verify_padding.h"
#include "unit/fake_model.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

TEST(VerifyPadding, QueryIsOnePlusTheMostDraftsWhenCountsDiffer) {
  std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams params;
  Sequence a(1, prompt, &params, 0, nullptr, nullptr), b(2, prompt, &params, 0, nullptr, nullptr);
  Sequence c(3, prompt, &params, 0, nullptr, nullptr);
  a.num_computed = b.num_computed = c.num_computed = 2;
  SchedulerOutput step;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "empty";
  // Drafts 2, 0, 3: q = 4, every sequence fed 4 positions once padded.
  step.seqs = {{&a, 3, true}, {&b, 1, true}, {&c, 4, true}};
  step.seqs[0].num_drafts = 2;
  step.seqs[2].num_drafts = 3;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 4);
  EXPECT_EQ(padded_verify_query(step, 8, 4, 0, 100), 4) << "q == max_query fits";
  EXPECT_EQ(padded_verify_query(step, 8, 3, 0, 100), 0) << "q > max_query";
  EXPECT_EQ(padded_verify_query(step, 2, 5, 0, 100), 0) << "more sequences than the largest bucket";
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 5), 0) << "2 + 4 positions pass max_model_len 5";
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 6), 4) << "2 + 4 positions fit max_model_len 6";
  // Hybrids: exactly one verify save per draft, grouped by sequence; a checkpoint save too: no.
  EXPECT_EQ(padded_verify_query(step, 8, 5, 1, 100), 0) << "the verify saves are missing";
  step.state_saves = {{0, 1, 40}, {0, 2, 41}, {2, 1, 50}, {2, 2, 51}, {2, 3, 52}};
  EXPECT_EQ(padded_verify_query(step, 8, 5, 1, 100), 4);
  step.state_saves.insert(step.state_saves.begin() + 2, {1, 1, 7});
  EXPECT_EQ(padded_verify_query(step, 8, 5, 1, 100), 0) << "a save of the draftless sequence";
  step.state_saves.clear();
  // One draft count everywhere is a graph step as it is; no drafts at all is a plain decode step.
  step.seqs[1] = {&b, 4, true};
  step.seqs[1].num_drafts = 3;
  step.seqs[0] = {&a, 4, true};
  step.seqs[0].num_drafts = 3;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "one count";
  step.seqs = {{&a, 1, true}, {&b, 1, true}};
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "plain decode";
  // Anything but decode rows: a prefill chunk, a chunk without logits, prompt rows, padded.
  step.seqs = {{&a, 3, true}, {&b, 2, true}};
  step.seqs[0].num_drafts = 2;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "b: a two-token chunk";
  step.seqs[1] = {&b, 1, false};
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "b wants no logits";
  step.seqs[1] = {&b, 1, true};
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 3);
  step.seqs[1].num_prompt_rows = 1;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "b has a prompt row";
  step.seqs[1].num_prompt_rows = 0;
  step.seqs[1].num_padding = 2;
  EXPECT_EQ(padded_verify_query(step, 8, 5, 0, 100), 0) << "padded already";
}

EngineOptions forced(EngineOptions o) {
  o.force_verify_padding = true;
  return o;
}

// Oracle drafts for two requests in three (the third decodes plainly in the same steps): every
// step with both kinds is uneven and padded.
// The cost guard: F filler positions over B sequences cost F / (B + knee) of a plain decode step,
// padded while that is at most kVerifyPaddingCostBound (0.05).
TEST(VerifyPadding, PaysWhileTheFillerCostsLessThanAReplaySaves) {
  std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams params;
  std::vector<std::unique_ptr<Sequence>> seqs;
  SchedulerOutput step;
  auto with_drafts = [&](const std::vector<int32_t>& drafts) {
    seqs.clear();
    step.seqs.clear();
    for (int32_t d : drafts) {
      seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size() + 1), prompt,
                                                &params, 0, nullptr, nullptr));
      step.seqs.push_back({seqs.back().get(), 1 + d, true});
      step.seqs.back().num_drafts = d;
    }
  };
  with_drafts({4, 3});  // q 5: one filler position over 2 sequences
  EXPECT_TRUE(verify_padding_pays(step, 5, 32)) << "1 <= 0.05 x 34";
  EXPECT_FALSE(verify_padding_pays(step, 5, 0)) << "1 > 0.05 x 2: every row a full decode row";
  with_drafts({4, 0});  // 4 filler positions
  EXPECT_FALSE(verify_padding_pays(step, 5, 32)) << "4 > 1.7";
  EXPECT_TRUE(verify_padding_pays(step, 5, 100)) << "4 <= 5.1";
  with_drafts(std::vector<int32_t>(64, 4));
  step.seqs[0].num_drafts = 0;  // 4 filler positions over 64 sequences
  EXPECT_TRUE(verify_padding_pays(step, 5, 32)) << "4 <= 0.05 x 96 = 4.8";
  step.seqs[1].num_drafts = 3;  // and 1 more
  EXPECT_FALSE(verify_padding_pays(step, 5, 32)) << "5 > 4.8";
}

TEST(VerifyPadding, FakeModelTokensEqualPlainDecoding) {
  FakeModel model(97);
  const std::vector<Request> requests = make_requests(97, 1, 9, 0.0f);
  expect_verify_equals_plain(model, forced(scenario_options(16, 64, 4096, 0, true)), requests,
                             "roomy");
  expect_verify_equals_plain(model, forced(scenario_options(4, 200, 12, 5, true)), requests,
                             "tight");
  expect_verify_equals_plain(model, forced(scenario_options(4, 24, 64, 0, true, 4)), requests,
                             "small");
}

TEST(VerifyPadding, Qwen3GreedyAndSeededTokensEqualPlainDecoding) {
  LoadedModel l = load_cpu_fixture("qwen3/tied_gqa2");
  ASSERT_TRUE(l.model);
  const int32_t vocab = static_cast<int32_t>(l.model->config().vocab_size);
  expect_verify_equals_plain(*l.model, forced(scenario_options(16, 64, 4096, 0, true)),
                             make_requests(vocab, 2, 6, 0.0f), "greedy");
  // Rejection sampling with fixed seeds (top-p, penalties): filler rows take no draw.
  expect_verify_equals_plain(*l.model, forced(scenario_options(16, 64, 24, 7, true)),
                             make_requests(vocab, 3, 6, 0.8f), "seeded");
}

TEST(VerifyPadding, HybridTokensEqualPlainDecodingWithStateRollback) {
  for (const char* name : {"q35_r1_lllf", "qnext_top2_r1"}) {
    LoadedModel l = load_cpu_fixture(std::string("hybrid/") + name);
    ASSERT_TRUE(l.model);
    EngineOptions o = forced(scenario_options(16, 128, 4096, 0, true, 8));
    o.checkpoint_interval = 32;  // boundaries inside decodes: drafts stop there, filler does not
    o.num_checkpoints = 32;
    const int32_t vocab =
        std::min<int32_t>(300, static_cast<int32_t>(l.model->config().vocab_size));
    expect_verify_equals_plain(*l.model, o, make_requests(vocab, 4, 6, 0.0f),
                               std::string(name) + " greedy");
  }
}

RunResult run_uneven(Model& model, EngineOptions o, const std::vector<Request>& requests,
                     const std::vector<std::vector<int32_t>>& plain, Drafts mode) {
  auto oracle =
      std::make_unique<OracleDrafter>(mode, static_cast<int32_t>(model.config().vocab_size));
  for (size_t i = 0; i < requests.size(); ++i) oracle->expect(requests[i].prompt_ids, plain[i]);
  return run(model, o, requests, std::make_unique<UnevenDrafter>(std::move(oracle)));
}

// Draft counts 0..k per sequence: padding changes no token and no scheduling decision (the same
// steps, tokens computed, drafts fed and kept, prefix hits as unpadded), and counts what it fed.
TEST(VerifyPadding, UnevenDraftsChangeNoTokenAndNoSchedulingDecision) {
  FakeModel model(97);
  const std::vector<Request> requests = make_requests(97, 5, 12, 0.0f);
  for (int32_t pages : {256, 30}) {  // roomy, and a pool that preempts and refuses padding
    EngineOptions base = scenario_options(4, pages, 4096, 0, true, 8);
    const RunResult plain = run(model, base, requests);
    uint64_t refused = 0;
    for (int32_t k : {2, 4}) {
      for (Drafts mode : {Drafts::kRight, Drafts::kPartial, Drafts::kWrong}) {
        SCOPED_TRACE("pages " + std::to_string(pages) + " k " + std::to_string(k) + " drafts " +
                     name_of(mode));
        EngineOptions o = base;
        o.num_speculative_tokens = k;
        const RunResult eager = run_uneven(model, o, requests, plain.tokens, mode);
        const RunResult padded = run_uneven(model, forced(o), requests, plain.tokens, mode);
        if (HasFatalFailure()) return;
        EXPECT_EQ(eager.tokens, plain.tokens);
        EXPECT_EQ(padded.tokens, plain.tokens);
        EXPECT_EQ(eager.stats.verify_padded_steps, 0u);
        EXPECT_GT(padded.stats.verify_padded_steps, 0u);
        EXPECT_GT(padded.stats.verify_padding_tokens, padded.stats.verify_padded_steps);
        EXPECT_EQ(padded.stats.steps, eager.stats.steps);
        EXPECT_EQ(padded.stats.computed_tokens, eager.stats.computed_tokens);
        EXPECT_EQ(padded.stats.draft_tokens, eager.stats.draft_tokens);
        EXPECT_EQ(padded.stats.accepted_tokens, eager.stats.accepted_tokens);
        EXPECT_EQ(padded.stats.preemptions, eager.stats.preemptions);
        EXPECT_EQ(padded.stats.prefix_hit_tokens, eager.stats.prefix_hit_tokens);
        if (pages == 256) {
          EXPECT_EQ(padded.stats.verify_padding_refused, 0u);
        }
        refused += padded.stats.verify_padding_refused;
      }
    }
    if (pages == 30) {
      EXPECT_GT(refused, 0u) << "the tight pool left some steps unpadded";
    }
  }
}

// Filler K/V lies beyond the sequence's computed length, so it is never registered: requests
// that resend earlier prompts + outputs hit the pages those sequences wrote while padded, and
// still get exactly the tokens a cold engine gives them.
TEST(VerifyPadding, PrefixHitsOverPagesThatHeldFillerGivePlainTokens) {
  FakeModel model(97);
  const std::vector<Request> first = make_requests(97, 8, 9, 0.0f);
  const EngineOptions base = scenario_options(4, 256, 4096, 0, true, 16);
  const RunResult plain = run(model, base, first);
  std::vector<Request> second = first;
  for (size_t i = 0; i < second.size(); ++i) {
    second[i].prompt_ids.insert(second[i].prompt_ids.end(), plain.tokens[i].begin(),
                                plain.tokens[i].end());
    second[i].params.max_tokens = 7;
  }
  EngineOptions cold = base;
  cold.enable_prefix_caching = false;
  const RunResult expected = run(model, cold, second);

  EngineOptions o = forced(base);
  o.num_speculative_tokens = 3;
  auto oracle = std::make_unique<OracleDrafter>(Drafts::kPartial, 97);
  for (size_t i = 0; i < first.size(); ++i) oracle->expect(first[i].prompt_ids, plain.tokens[i]);
  auto core = EngineCore::create(model, nullptr, o);
  ASSERT_TRUE(core.ok()) << core.message();
  core.value()->set_drafter(std::make_unique<UnevenDrafter>(std::move(oracle)));
  Harness h(std::move(core).value());  // integrity checked after every step
  std::vector<uint64_t> ids;
  for (const Request& r : first) ids.push_back(h.submit(r));
  h.run();
  ASSERT_GT(h.core().stats().verify_padded_steps, 0u);
  const uint64_t hits_before = h.core().stats().prefix_hit_tokens;
  for (const Request& r : second) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  EXPECT_GT(h.core().stats().prefix_hit_tokens, hits_before) << "the resends hit";
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(h.output(ids[i]).samples.at(0).tokens, plain.tokens[i]) << "request " << i;
    EXPECT_EQ(h.output(ids[first.size() + i]).samples.at(0).tokens, expected.tokens[i])
        << "resend " << i;
  }
}

}  // namespace
}  // namespace syv::testing
