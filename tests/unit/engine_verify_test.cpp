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

TEST(EngineVerify, FakeModelRefusesBadOptions) {
  FakeModel model(97);
  EngineOptions o = scenario_options(16, 64, 4096, 0, true);
  o.num_speculative_tokens = -1;
  EXPECT_FALSE(EngineCore::create(model, nullptr, o).ok());
  o.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  auto bad = EngineCore::create(model, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("num_speculative_tokens"), std::string::npos) << bad.message();
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
