// EngineOptions::emit_after_launch: a continuing token's event is made after the next step's
// forward is launched. Every client still sees exactly the events it sees with it off (tokens,
// text, logprobs, cached tokens, finish reasons), across stop strings, stop tokens, min_tokens,
// n > 1, prompt logprobs, length limits, speculative verify steps, and a cancel mid-stream (the
// pending tokens reach the client before the abort); and the events really do wait a step.
// The real Qwen3 tokenizer (for text and stop strings) over the fake model.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "tokenizer/tokenizer.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"
#include "unit/qwen3_tokenizer.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

EngineOptions options(int32_t emit_after_launch) {
  EngineOptions o;
  o.page_size = 16;
  o.num_pages = 256;
  o.max_num_batched_tokens = 64;  // prompts take several chunks, decodes share steps with them
  o.emit_after_launch = emit_after_launch;
  return o;
}

struct Outputs {
  std::vector<RequestOutput> outputs;
  EngineStats stats;
};

// Runs `requests` together (each submitted at step submit_at[i], default 0), cancelling request
// `cancel` (an index) after `cancel_after_steps` steps when >= 0.
Outputs run_text(Model& model, const Tokenizer& tokenizer, EngineOptions o,
                 const std::vector<Request>& requests, std::unique_ptr<Drafter> drafter = nullptr,
                 int cancel = -1, int cancel_after_steps = 0) {
  set_log_level(LogLevel::WARN);
  auto core = EngineCore::create(model, &tokenizer, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  if (drafter) core.value()->set_drafter(std::move(drafter));
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  for (int s = 0; s < cancel_after_steps && h.core().has_work(); ++s) h.step();
  if (cancel >= 0) h.cancel(ids.at(static_cast<size_t>(cancel)));
  h.run();
  h.expect_no_leaks();
  Outputs out;
  out.stats = h.core().stats();
  for (uint64_t id : ids) {
    out.outputs.push_back(h.output(id));
    EXPECT_TRUE(h.ended(id)) << "request " << id << " has not ended";
  }
  return out;
}

void expect_same(const Outputs& off, const Outputs& on, const std::string& what) {
  ASSERT_EQ(off.outputs.size(), on.outputs.size()) << what;
  for (size_t i = 0; i < off.outputs.size(); ++i) {
    const auto& a = off.outputs[i].samples;
    const auto& b = on.outputs[i].samples;
    ASSERT_EQ(a.size(), b.size()) << what << ", request " << i;
    for (size_t s = 0; s < a.size(); ++s) {
      SCOPED_TRACE(what + ", request " + std::to_string(i) + ", sample " + std::to_string(s));
      EXPECT_EQ(a[s].tokens, b[s].tokens);
      EXPECT_EQ(a[s].text, b[s].text);
      EXPECT_EQ(a[s].finish_reason, b[s].finish_reason);
      EXPECT_EQ(a[s].cached_tokens, b[s].cached_tokens);
      EXPECT_EQ(a[s].prompt_tokens, b[s].prompt_tokens);
      EXPECT_EQ(a[s].logprobs, b[s].logprobs);
      EXPECT_EQ(a[s].prompt_logprobs.size(), b[s].prompt_logprobs.size());
      EXPECT_EQ(a[s].events, b[s].events);
      EXPECT_FALSE(a[s].finish_reason.empty());
    }
  }
  EXPECT_EQ(off.stats.generated_tokens, on.stats.generated_tokens) << what;
  EXPECT_EQ(off.stats.steps, on.stats.steps) << what;
}

// Requests of every kind emit() distinguishes; stop strings and stop tokens taken from the greedy
// continuation so that they do match partway.
std::vector<Request> mixed_requests(Model& model, const Tokenizer& tokenizer) {
  Request base;
  base.prompt_ids = tokenizer.encode("The quick brown fox jumps over the lazy dog, and then");
  base.params.temperature = 0.0f;
  base.params.max_tokens = 30;
  base.params.ignore_eos = true;
  const Outputs greedy = run_text(model, tokenizer, options(0), {base});
  const SampleOutput& g = greedy.outputs.at(0).samples.at(0);
  EXPECT_EQ(g.tokens.size(), 30u);
  EXPECT_GT(g.text.size(), 20u);

  std::vector<Request> out;
  out.push_back(base);  // plain, to the length limit
  Request stop_string = base;
  stop_string.params.stop = {g.text.substr(g.text.size() / 2, 4)};
  out.push_back(stop_string);
  Request stop_token = base;
  stop_token.params.stop_token_ids = {g.tokens.at(12)};
  out.push_back(stop_token);
  Request min_tokens = stop_token;
  min_tokens.params.min_tokens = 20;  // the stop token is masked until then
  out.push_back(min_tokens);
  Request sampled = base;
  sampled.params.temperature = 1.0f;
  sampled.params.seed = 7;
  sampled.params.n = 3;
  sampled.params.logprobs = true;
  sampled.params.top_logprobs = 2;
  out.push_back(sampled);
  Request prompt_logprobs = base;
  prompt_logprobs.params.prompt_logprobs = 2;
  prompt_logprobs.params.max_tokens = 5;
  out.push_back(prompt_logprobs);
  for (int32_t n : {1, 2, 3}) {
    Request short_one = base;
    short_one.params.max_tokens = n;
    out.push_back(short_one);
  }
  Request shared = base;  // a prefix hit on the first request's pages
  shared.prompt_ids.push_back(g.tokens.at(0));
  out.push_back(shared);
  Request include = stop_string;
  include.params.include_stop_str_in_output = true;
  out.push_back(include);
  return out;
}

TEST(EngineEmitAfterLaunch, EveryClientSeesTheSameEvents) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  const std::vector<Request> requests = mixed_requests(model, *tokenizer);
  const Outputs off = run_text(model, *tokenizer, options(0), requests);
  const Outputs on = run_text(model, *tokenizer, options(1), requests);
  expect_same(off, on, "together");
  // Cancelled mid-stream: what was generated before the cancel reaches the client, then the
  // abort, as with it off.
  for (int after : {3, 9}) {
    const Outputs off_c = run_text(model, *tokenizer, options(0), requests, nullptr, 0, after);
    const Outputs on_c = run_text(model, *tokenizer, options(1), requests, nullptr, 0, after);
    EXPECT_EQ(off_c.outputs.at(0).samples.at(0).finish_reason, "abort");
    EXPECT_FALSE(off_c.outputs.at(0).samples.at(0).tokens.empty());
    expect_same(off_c, on_c, "cancelled after " + std::to_string(after) + " steps");
  }
  // The CPU backend runs ops synchronously: -1 (auto) leaves it off there.
  EXPECT_FALSE(model.backend().asynchronous());
}

TEST(EngineEmitAfterLaunch, VerifyStepsSeeTheSameEvents) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  // The greedy ones that follow the plain greedy path (the oracle drafts it): no sampling, no
  // min_tokens mask.
  std::vector<Request> requests;
  for (const Request& r : mixed_requests(model, *tokenizer))
    if (r.params.temperature == 0.0f && r.params.min_tokens == 0) requests.push_back(r);
  ASSERT_GE(requests.size(), 8u);
  const Outputs plain = run_text(model, *tokenizer, options(0), requests);
  // Per prompt, the longest plain output (the others are its prefixes).
  std::map<std::vector<int32_t>, std::vector<int32_t>> longest;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& t = plain.outputs[i].samples.at(0).tokens;
    std::vector<int32_t>& l = longest[requests[i].prompt_ids];
    if (t.size() > l.size()) l = t;
  }
  // Drafts right up to a point, then wrong: verify steps keep 1..k + 1 tokens per sequence.
  auto drafter = [&] {
    auto oracle = std::make_unique<OracleDrafter>(Drafts::kPartial,
                                                  static_cast<int32_t>(tokenizer->vocab_size()));
    for (const auto& [prompt, tokens] : longest) oracle->expect(prompt, tokens);
    return oracle;
  };
  EngineOptions off = options(0), on = options(1);
  off.num_speculative_tokens = on.num_speculative_tokens = 3;
  const Outputs off_run = run_text(model, *tokenizer, off, requests, drafter());
  const Outputs on_run = run_text(model, *tokenizer, on, requests, drafter());
  expect_same(off_run, on_run, "verify steps");
  EXPECT_GT(on_run.stats.steps, 0u);
  EXPECT_LT(on_run.stats.steps, plain.stats.steps) << "no draft was accepted";
}

// With it on, a continuing token's event arrives one step later (after the next step's launch);
// the first token and the last arrive in their own step.
TEST(EngineEmitAfterLaunch, ContinuingTokensWaitForTheNextStep) {
  auto tokenizer = load_qwen3_tokenizer();
  ASSERT_TRUE(tokenizer);
  FakeModel model(tokenizer->vocab_size());
  set_log_level(LogLevel::WARN);
  for (int32_t mode : {0, 1}) {
    SCOPED_TRACE(mode ? "on" : "off");
    auto core = EngineCore::create(model, tokenizer.get(), options(mode));
    ASSERT_TRUE(core.ok()) << core.message();
    Harness h(std::move(core).value());
    Request r;
    r.prompt_ids = tokenizer->encode("Hello");
    r.params.temperature = 0.0f;
    r.params.max_tokens = 6;
    r.params.ignore_eos = true;
    const uint64_t id = h.submit(r);
    std::vector<size_t> seen;  // tokens the client holds after each step
    while (h.core().has_work()) {
      h.step();
      seen.push_back(h.output(id).samples.empty() ? 0 : h.output(id).samples[0].tokens.size());
    }
    // One prefill step, then one token a step.
    ASSERT_EQ(seen.size(), 6u);
    const std::vector<size_t> want_off = {1, 2, 3, 4, 5, 6};
    const std::vector<size_t> want_on = {1, 1, 2, 3, 4, 6};
    EXPECT_EQ(seen, mode ? want_on : want_off);
    EXPECT_EQ(h.output(id).samples[0].finish_reason, "length");
  }
}

}  // namespace
}  // namespace syv::testing
