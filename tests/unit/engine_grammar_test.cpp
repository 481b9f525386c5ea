// Structured outputs through the engine, with the real Qwen3 tokenizer and the fake model (its
// logits hash the whole history: noise, so only the grammar can make the output well-formed):
// greedy and seeded samples (n = 2) are complete, schema-conforming JSON that ends with EOS;
// a regex and a choice list hold; unconstrained requests batched with constrained ones are
// unchanged; verify steps with drafts the grammar forbids, allows, or half-allows give exactly
// the tokens of plain constrained decoding; the combinations the engine refuses are named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "core/log.h"
#include "engine/grammar_sessions.h"
#include "grammar/choice.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tokenizer/tokenizer.h"
#include "unit/engine_harness.h"
#include "unit/expect_error.h"
#include "unit/fake_model.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

using nlohmann::json;

const Tokenizer& tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto t = Tokenizer::load(std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer");
    EXPECT_TRUE(t.ok()) << t.message();
    return std::move(t.value());
  }();
  return *tok;
}

std::shared_ptr<const grammar::Grammar> compile(const Result<std::string>& gbnf) {
  EXPECT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar::Grammar::parse(gbnf.value());
  EXPECT_TRUE(g.ok()) << g.message();
  return g.value();
}

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    "ok": {"type": "boolean"}},
  "required": ["name", "age", "tags", "ok"], "additionalProperties": false})";

EngineOptions options() {
  EngineOptions o;
  o.page_size = 16;
  o.num_pages = 256;
  return o;
}

// The fake model with the tokenizer's vocabulary; EOS is the tokenizer's (<|im_end|>).
FakeModel& model() {
  static FakeModel m(tokenizer().vocab_size() + 267);  // padded like Qwen3's embedding
  return m;
}

Request request(const std::shared_ptr<const grammar::Grammar>& g, float temperature, uint64_t seed,
                int n = 1, const std::string& prompt = "Give me JSON:") {
  Request r;
  r.prompt_ids = tokenizer().encode(prompt);
  r.params.temperature = temperature;
  r.params.top_p = temperature > 0 ? 0.95f : 1.0f;
  r.params.seed = seed;
  r.params.n = n;
  r.params.max_tokens = 400;
  r.params.grammar = g;
  return r;
}

std::vector<RequestOutput> generate(const std::vector<Request>& requests,
                                    EngineOptions o = options(),
                                    std::unique_ptr<Drafter> drafter = nullptr) {
  set_log_level(LogLevel::WARN);
  auto core = EngineCore::create(model(), &tokenizer(), o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (drafter) core.value()->set_drafter(std::move(drafter));
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  std::vector<RequestOutput> out;
  for (uint64_t id : ids) out.push_back(h.output(id));
  return out;
}

void expect_conforms(const SampleOutput& s) {
  SCOPED_TRACE(s.text);
  EXPECT_EQ(s.finish_reason, "stop");
  json v;
  ASSERT_NO_THROW(v = json::parse(s.text));
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.size(), 4u);
  ASSERT_TRUE(v["name"].is_string());
  EXPECT_LE(v["name"].get<std::string>().size(), 8u * 4);
  ASSERT_TRUE(v["age"].is_number_integer());
  EXPECT_GE(v["age"].get<int>(), 0);
  EXPECT_LE(v["age"].get<int>(), 120);
  ASSERT_TRUE(v["tags"].is_array());
  EXPECT_LE(v["tags"].size(), 3u);
  for (const auto& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b");
  EXPECT_TRUE(v["ok"].is_boolean());
  // The last token is the stop token, and the text is every other token's.
  ASSERT_FALSE(s.tokens.empty());
  EXPECT_EQ(s.tokens.back(), *tokenizer().eos_token_id());
}

TEST(EngineGrammar, GreedyAndSeededSamplesConformToTheSchema) {
  auto g = compile(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
  std::vector<Request> requests;
  for (uint64_t seed : {1, 2, 3})
    requests.push_back(request(g, 0.0f, seed, 1, "p" + std::to_string(seed)));
  for (uint64_t seed : {4, 5, 6}) requests.push_back(request(g, 1.0f, seed, 2));
  const auto out = generate(requests);
  int samples = 0;
  for (const RequestOutput& r : out)
    for (const SampleOutput& s : r.samples) {
      expect_conforms(s);
      ++samples;
    }
  EXPECT_EQ(samples, 9);
  // Seeded output is reproducible, and alone == batched.
  const auto again = generate({requests[4]});
  EXPECT_EQ(again[0].samples[0].tokens, out[4].samples[0].tokens);
  EXPECT_EQ(again[0].samples[1].tokens, out[4].samples[1].tokens);
}

TEST(EngineGrammar, RegexChoiceAndGbnf) {
  auto regex = compile(grammar::regex_to_gbnf(R"(\d{3}-[a-f]{2,4}(!|\?))"));
  auto choice = compile(grammar::choice_gbnf({"red", "green", "blue violet"}));
  auto gbnf = compile(std::string(R"(root ::= "<" [a-z]{1,6} ("," [a-z]{1,6}){0,3} ">")"));
  const auto out = generate({request(regex, 1.0f, 7), request(choice, 1.0f, 8),
                             request(choice, 0.0f, 9), request(gbnf, 0.8f, 10)});
  EXPECT_TRUE(std::regex_match(out[0].samples[0].text, std::regex(R"(\d{3}-[a-f]{2,4}(!|\?))")))
      << out[0].samples[0].text;
  for (int i : {1, 2}) {
    const std::string& t = out[static_cast<size_t>(i)].samples[0].text;
    EXPECT_TRUE(t == "red" || t == "green" || t == "blue violet") << t;
  }
  EXPECT_TRUE(
      std::regex_match(out[3].samples[0].text, std::regex(R"(<[a-z]{1,6}(,[a-z]{1,6}){0,3}>)")))
      << out[3].samples[0].text;
  for (const auto& r : out) EXPECT_EQ(r.samples[0].finish_reason, "stop");
}

TEST(EngineGrammar, UnconstrainedNeighboursAreUnchanged) {
  auto g = compile(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
  Request plain = request(nullptr, 1.0f, 11, 1, "Tell me something");
  plain.params.max_tokens = 30;
  plain.params.ignore_eos = true;
  const auto alone = generate({plain});
  const auto mixed = generate({request(g, 1.0f, 12), plain, request(g, 0.0f, 13)});
  EXPECT_EQ(mixed[1].samples[0].tokens, alone[0].samples[0].tokens);
  expect_conforms(mixed[0].samples[0]);
  expect_conforms(mixed[2].samples[0]);
}

// Verify steps: the row of draft j is masked after the tokens kept before it, so drafts the
// grammar forbids are rejected and the output is plain constrained decoding's, token for token.
TEST(EngineGrammar, DraftsRespectTheMask) {
  auto g = compile(grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
  const std::vector<Request> requests = {request(g, 0.0f, 21, 1, "first"),
                                         request(g, 1.0f, 22, 1, "second")};
  const auto plain = generate(requests);
  for (Drafts mode : {Drafts::kRight, Drafts::kWrong, Drafts::kPartial}) {
    for (int32_t k : {1, 3}) {
      SCOPED_TRACE(std::string(name_of(mode)) + " k " + std::to_string(k));
      auto drafter =
          std::make_unique<OracleDrafter>(mode, static_cast<int32_t>(model().config().vocab_size));
      for (size_t i = 0; i < requests.size(); ++i)
        drafter->expect(requests[i].prompt_ids, plain[i].samples[0].tokens);
      EngineOptions o = options();
      o.num_speculative_tokens = k;
      const auto spec = generate(requests, o, std::move(drafter));
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(spec[i].samples[0].tokens, plain[i].samples[0].tokens);
        expect_conforms(spec[i].samples[0]);
      }
    }
  }
}

// The engine's sessions: one per grammar object (so requests sharing a compiled grammar share its
// masks), the least recently used dropped past the bound; fill_allowed adds the stop ids only
// where the grammar may end, and alone when the grammar allows nothing.
TEST(EngineGrammar, SessionsAndAllowedTokens) {
  GrammarSessions sessions(tokenizer(), /*max_sessions=*/2);
  auto a = compile(grammar::choice_gbnf({"yes", "no"}));
  auto b = compile(grammar::choice_gbnf({"x"}));
  auto c = compile(grammar::choice_gbnf({"y"}));
  const auto sa = sessions.session(a);
  EXPECT_EQ(sessions.session(a), sa);
  EXPECT_GT(sessions.trie_seconds(), 0.0);
  sessions.session(b);
  sessions.session(c);  // drops a's session (the matchers holding it keep it alive)
  EXPECT_NE(sessions.session(a), sa);

  const int32_t vocab = static_cast<int32_t>(model().config().vocab_size);
  const int32_t eos = *tokenizer().eos_token_id();
  const std::vector<int32_t> stops = {eos};
  auto bit = [](const std::vector<uint64_t>& w, int32_t t) {
    return ((w[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1u) != 0;
  };
  grammar::Matcher m(sessions.session(b));
  std::vector<uint64_t> allowed;
  fill_allowed(m, stops, vocab, allowed);
  ASSERT_EQ(allowed.size(), static_cast<size_t>((vocab + 63) / 64));
  const int32_t x = tokenizer().encode("x", false).at(0);
  EXPECT_TRUE(bit(allowed, x));
  EXPECT_FALSE(bit(allowed, eos));  // "" is not a sentence of root ::= "x"
  for (int32_t t = tokenizer().vocab_size(); t < vocab; ++t) EXPECT_FALSE(bit(allowed, t));
  ASSERT_TRUE(m.accept_token(x));
  fill_allowed(m, stops, vocab, allowed);
  EXPECT_TRUE(bit(allowed, eos));
  EXPECT_FALSE(bit(allowed, x));
  size_t on = 0;
  for (uint64_t w : allowed) on += static_cast<size_t>(__builtin_popcountll(w));
  EXPECT_EQ(on, 1u);  // finished: only the stop token

  // A vocabulary that cannot continue the sentence ("y" has no token): nothing fits, so only
  // the stop ids are allowed and the sample stops.
  auto small = std::make_shared<const grammar::TokenTrie>(std::vector<std::string>{"x", "z", ""});
  grammar::Matcher stuck(std::make_shared<grammar::GrammarSession>(
      compile(std::string(R"(root ::= "x" "y")")), small));
  ASSERT_TRUE(stuck.accept_token(0));
  fill_allowed(stuck, {2}, 3, allowed);
  ASSERT_EQ(allowed.size(), 1u);
  EXPECT_EQ(allowed[0], uint64_t{1} << 2);
}

TEST(EngineGrammar, RefusedCombinations) {
  auto g = compile(grammar::choice_gbnf({"x"}));
  auto core = EngineCore::create(model(), &tokenizer(), options());
  ASSERT_TRUE(core.ok());
  Request r = request(g, 0.0f, 1);
  r.params.ignore_eos = true;
  EXPECT_ERROR_HAS(core.value()->validate(r), "ignore_eos: cannot be combined");
  r.params.ignore_eos = false;
  r.params.min_tokens = 2;
  EXPECT_ERROR_HAS(core.value()->validate(r), "min_tokens: cannot be combined");
  auto bare = EngineCore::create(model(), nullptr, options());
  ASSERT_TRUE(bare.ok());
  EXPECT_ERROR_HAS(bare.value()->validate(request(g, 0.0f, 1)), "no tokenizer");
}

}  // namespace
}  // namespace syv::testing
