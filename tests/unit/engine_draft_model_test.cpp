// Draft-model speculative decoding (engine/draft_model_drafter.h) with the trained pair
// models/tiny-dense (target) and models/tiny-draft (docs/models.md): greedy and seeded output equal
// plain decoding token for token, batched, with chunked prefill and a catch-up spread over steps,
// with a draft KV pool too small for every sequence; the pair accepts drafts (trained weights);
// greedy output equals transformers' (the tiny-dense fixture); the draft's pages are all returned;
// the refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "engine/draft_model_drafter.h"
#include "unit/engine_harness.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

std::string repo(const std::string& path) {
  return std::string(SYV_SOURCE_DIR) + "/" + path;
}

struct Pair {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<Model> target, draft;
  Pair() {
    auto t = load_model(repo("models/tiny-dense"), *backend);
    auto d = load_model(repo("models/tiny-draft"), *backend);
    EXPECT_TRUE(t.ok() && d.ok()) << t.message() << d.message();
    if (t.ok()) target = std::move(t.value());
    if (d.ok()) draft = std::move(d.value());
  }
};

// The first `n` held-out prompts of the tiny-dense fixture and transformers' greedy tokens.
struct Fixture {
  std::vector<std::vector<int32_t>> prompts, greedy;
};
Fixture fixture(size_t n) {
  std::ifstream in(repo("tests/fixtures/tiny/tiny-dense/greedy256.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  Fixture f;
  for (size_t i = 0; i < n; ++i) {
    f.prompts.push_back(j["prompts"][i].get<std::vector<int32_t>>());
    f.greedy.push_back(j["tokens"][i].get<std::vector<int32_t>>());
  }
  return f;
}

EngineOptions base_options() {
  EngineOptions o;
  o.page_size = 16;
  o.num_pages = 256;
  o.max_num_batched_tokens = 512;
  o.max_num_seqs = 16;
  return o;
}

// k = 0: plain decoding. Checks that the draft's pages all come back.
RunResult run(Pair& p, EngineOptions o, int32_t k, const std::vector<Request>& requests) {
  set_log_level(LogLevel::WARN);
  o.num_speculative_tokens = k;
  o.speculative_method = k > 0 ? "draft" : "";
  o.draft_model = k > 0 ? p.draft.get() : nullptr;
  auto core = EngineCore::create(*p.target, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  const auto* drafter = dynamic_cast<const DraftModelDrafter*>(core.value()->drafter());
  EXPECT_EQ(drafter != nullptr, k > 0);
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  if (drafter != nullptr) {
    EXPECT_EQ(drafter->pages_in_use(), 0) << "draft pages leaked";
    EXPECT_GT(drafter->draft_rows(), 0);
  }
  RunResult out;
  out.stats = h.core().stats();
  for (uint64_t id : ids) out.tokens.push_back(h.output(id).samples.at(0).tokens);
  return out;
}

std::vector<Request> requests(const Fixture& f, int32_t max_tokens, float temperature) {
  std::vector<Request> out;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    Request r;
    r.prompt_ids = f.prompts[i];
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.temperature = temperature;
    r.params.top_p = temperature > 0 ? 0.9f : 1.0f;
    r.params.seed = 100 + i;
    out.push_back(r);
  }
  return out;
}

TEST(EngineDraftModel, GreedyEqualsPlainDecodingAndTransformers) {
  Pair p;
  ASSERT_TRUE(p.target && p.draft);
  const Fixture f = fixture(6);
  const std::vector<Request> reqs = requests(f, 40, 0.f);
  const RunResult plain = run(p, base_options(), 0, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(plain.tokens[i], std::vector<int32_t>(f.greedy[i].begin(), f.greedy[i].begin() + 40))
        << "prompt " << i << " vs transformers";
  }
  for (int32_t k : {1, 3, 5}) {
    const RunResult spec = run(p, base_options(), k, reqs);
    EXPECT_EQ(spec.tokens, plain.tokens) << "k " << k;
    EXPECT_GT(spec.stats.accepted_tokens, spec.stats.draft_tokens / 4)
        << "k " << k << ": the trained pair accepts drafts";
    EXPECT_LT(spec.stats.steps, plain.stats.steps) << "k " << k;
  }
}

TEST(EngineDraftModel, SeededSamplingEqualsPlainDecoding) {
  Pair p;
  ASSERT_TRUE(p.target && p.draft);
  const std::vector<Request> reqs = requests(fixture(5), 32, 0.8f);
  const RunResult plain = run(p, base_options(), 0, reqs);
  EXPECT_EQ(run(p, base_options(), 3, reqs).tokens, plain.tokens);
}

// A step budget below the prompts' length: chunked prefills, and a catch-up of at most that many
// tokens, so a sequence catches up over several steps before it gets drafts. A draft pool of 6
// pages: sequences whose draft pages cannot grow go without drafts.
TEST(EngineDraftModel, ChunkedCatchUpAndASmallDraftPoolKeepTheOutput) {
  Pair p;
  ASSERT_TRUE(p.target && p.draft);
  const std::vector<Request> reqs = requests(fixture(6), 24, 0.f);
  EngineOptions chunked = base_options();
  chunked.max_num_batched_tokens = 20;
  const RunResult plain = run(p, chunked, 0, reqs);
  EXPECT_EQ(run(p, chunked, 2, reqs).tokens, plain.tokens) << "chunked";
  EngineOptions small = base_options();
  small.draft_num_pages = 6;
  const RunResult tight = run(p, small, 3, reqs);
  EXPECT_EQ(tight.tokens, plain.tokens) << "small draft pool";
  EXPECT_GT(tight.stats.accepted_tokens, 0u);
}

TEST(EngineDraftModel, Refusals) {
  Pair p;
  ASSERT_TRUE(p.target && p.draft);
  set_log_level(LogLevel::WARN);
  EngineOptions o = base_options();
  o.num_speculative_tokens = 2;
  o.speculative_method = "draft";
  auto none = EngineCore::create(*p.target, nullptr, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no draft_model"), std::string::npos) << none.message();
  o.draft_model = p.draft.get();
  o.speculative_method = "ngram";
  auto stray = EngineCore::create(*p.target, nullptr, o);
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.message().find("without speculative_method draft"), std::string::npos)
      << stray.message();
  // A hybrid draft is refused by name.
  auto hybrid = load_model(repo("models/tiny-hybrid"), *p.backend);
  ASSERT_TRUE(hybrid.ok()) << hybrid.message();
  auto refused =
      DraftModelDrafter::create(**hybrid, p.target->config().vocab_size, 16, 8, 2, 1024, 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("recurrent"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace syv::testing
