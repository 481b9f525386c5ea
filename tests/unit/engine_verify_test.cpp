// Verify-shaped steps (speculative decoding, engine/drafter.h): a decoding sequence fed its pending
// token plus k draft tokens gets k + 1 logits rows, keeps the drafts the model agrees with and
// advances over those only. With drafts that are the model's own tokens (all accepted), wrong ones
// (none accepted) or right for a while and then wrong (some accepted), every sequence's tokens
// must be exactly those of plain decoding: greedy and seeded sampling, dense (fake model, tiny
// Qwen3) and hybrid (Qwen3.5, Qwen3-Next: the recurrent state is rolled back past a rejected
// draft), batched with sequences that get no drafts, at budgets and pools that cut drafts short.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/ngram_drafter.h"
#include "model/model.h"
#include "unit/fake_model.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

TEST(EngineVerify, FakeModelGreedyEqualsPlainDecoding) {
  FakeModel model(97);
  const std::vector<Request> requests = make_requests(97, 1, 9, 0.0f);
  // Roomy; then a tight budget (drafts cut to what the decodes behind leave) with small pages and
  // chunks; then a pool so small that sequences are preempted (drafts never preempt anyone).
  expect_verify_equals_plain(model, scenario_options(16, 64, 4096, 0, true), requests, "roomy");
  expect_verify_equals_plain(model, scenario_options(4, 200, 12, 5, true), requests, "tight");
  expect_verify_equals_plain(model, scenario_options(4, 24, 64, 0, true, 4), requests, "small");
}

// Alone and with room, right drafts give k + 1 tokens a step: 1 + ceil((max_tokens - 1) / (k + 1))
// steps (the prefill samples the first token; no step drafts past max_tokens).
TEST(EngineVerify, RightDraftsGiveKPlusOneTokensAStep) {
  FakeModel model(97);
  const std::vector<Request> one = {greedy_request({5, 6, 7, 8, 9}, 20)};
  const RunResult plain = run(model, scenario_options(16, 64, 4096, 0, true), one);
  ASSERT_EQ(plain.tokens.at(0).size(), 20u);
  EXPECT_EQ(plain.stats.steps, 20u);
  for (int32_t k = 1; k <= 6; ++k) {
    auto drafter = std::make_unique<OracleDrafter>(Drafts::kRight, 97);
    drafter->expect(one[0].prompt_ids, plain.tokens[0]);
    EngineOptions o = scenario_options(16, 64, 4096, 0, true);
    o.num_speculative_tokens = k;
    const RunResult spec = run(model, o, one, std::move(drafter));
    EXPECT_EQ(spec.tokens.at(0), plain.tokens[0]) << "k " << k;
    EXPECT_EQ(spec.stats.steps, 1u + (19u + static_cast<uint64_t>(k)) / (k + 1)) << "k " << k;
    EXPECT_EQ(spec.stats.accepted_tokens, 19u - (spec.stats.steps - 1)) << "k " << k;
  }
}

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentLongestMatch) {
  std::vector<int32_t> out;
  NgramDrafter d(1, 4);
  d.propose_tokens({1, 2, 3, 4, 1, 2}, 3, out);  // [1, 2] at 0: then 3, 4, 1
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 1}));
  out.clear();
  d.propose_tokens({5, 1, 2, 9, 7, 2, 8, 1, 2}, 3, out);  // [1, 2] beats the later [2]
  EXPECT_EQ(out, (std::vector<int32_t>{9, 7, 2}));
  out.clear();
  NgramDrafter unigram(1, 1);
  unigram.propose_tokens({5, 1, 2, 9, 7, 2, 8, 1, 2}, 3, out);  // the most recent earlier [2]
  EXPECT_EQ(out, (std::vector<int32_t>{8, 1, 2}));
  out.clear();
  d.propose_tokens({1, 2, 1}, 5, out);  // only what exists after the match
  EXPECT_EQ(out, (std::vector<int32_t>{2, 1}));
  out.clear();
  NgramDrafter(2, 3).propose_tokens({1, 2, 3, 4, 5}, 4, out);  // no repeat: no drafts
  EXPECT_TRUE(out.empty());
  NgramDrafter(2, 3).propose_tokens({7}, 4, out);
  EXPECT_TRUE(out.empty());
}

// Prompt lookup on the Qwen3 fixtures: prompts that repeat themselves get drafts, and every token
// is plain decoding's, greedy and seeded.
TEST(EngineVerify, NgramSpeculationEqualsPlainDecoding) {
  LoadedModel l = load_cpu_fixture("qwen3/tied_gqa2");
  ASSERT_TRUE(l.model);
  const int32_t vocab = static_cast<int32_t>(l.model->config().vocab_size);
  for (float temperature : {0.0f, 0.8f}) {
    std::vector<Request> requests = make_requests(vocab, 9, 6, temperature);
    repeat_prompt_phrase(requests, 6, 3);  // so the lookup finds earlier n-grams
    EngineOptions o = scenario_options(16, 64, 4096, 0, true);
    const RunResult plain = run(*l.model, o, requests);
    o.num_speculative_tokens = 4;
    o.speculative_method = "ngram";
    o.ngram_min = 1;
    const RunResult spec = run(*l.model, o, requests);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(spec.tokens[i], plain.tokens[i]) << "T " << temperature << " request " << i;
    EXPECT_GT(spec.stats.draft_tokens, 0u) << "T " << temperature;
  }
}

TEST(EngineVerify, FakeModelRefusesBadOptions) {
  FakeModel model(97);
  EngineOptions o = scenario_options(16, 64, 4096, 0, true);
  o.num_speculative_tokens = -1;
  EXPECT_FALSE(EngineCore::create(model, nullptr, o).ok());
  o.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  auto bad = EngineCore::create(model, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("num_speculative_tokens"), std::string::npos) << bad.message();
  o.num_speculative_tokens = 2;
  o.speculative_method = "eagle";
  auto method = EngineCore::create(model, nullptr, o);
  ASSERT_FALSE(method.ok());
  EXPECT_NE(method.message().find("speculative_method"), std::string::npos) << method.message();
  o.speculative_method = "ngram";
  o.ngram_min = 3;
  o.ngram_max = 2;
  EXPECT_FALSE(EngineCore::create(model, nullptr, o).ok());
  // The threaded engine has no other way to get a drafter: drafts without a method are refused.
  o.speculative_method.clear();
  Engine engine(model, nullptr, o);
  Status started = engine.start();
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.message().find("speculative_method"), std::string::npos) << started.message();
}

TEST(EngineVerify, Qwen3GreedyAndSeededEqualPlainDecoding) {
  for (const char* name : {"tied_gqa2", "untied_gqa4_hd24"}) {
    LoadedModel l = load_cpu_fixture(std::string("qwen3/") + name);
    ASSERT_TRUE(l.model);
    const int32_t vocab = static_cast<int32_t>(l.model->config().vocab_size);
    expect_verify_equals_plain(*l.model, scenario_options(16, 64, 4096, 0, true),
                               make_requests(vocab, 2, 6, 0.0f), std::string(name) + " greedy");
    expect_verify_equals_plain(*l.model, scenario_options(16, 64, 24, 7, true),
                               make_requests(vocab, 3, 6, 0.8f), std::string(name) + " seeded");
  }
}

TEST(EngineVerify, HybridGreedyEqualsPlainDecodingWithStateRollback) {
  for (const char* name : {"q35_r1_lllf", "qnext_top2_r1"}) {
    LoadedModel l = load_cpu_fixture(std::string("hybrid/") + name);
    ASSERT_TRUE(l.model);
    EngineOptions o = scenario_options(16, 128, 4096, 0, true, 8);
    o.checkpoint_interval = 32;  // boundaries inside decodes: drafts stop at them
    o.num_checkpoints = 32;
    const int32_t vocab =
        std::min<int32_t>(300, static_cast<int32_t>(l.model->config().vocab_size));
    expect_verify_equals_plain(*l.model, o, make_requests(vocab, 4, 6, 0.0f),
                               std::string(name) + " greedy");
  }
}

}  // namespace
}  // namespace syv::testing
