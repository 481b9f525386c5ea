// Token masks: on a small hand-made vocabulary (exact sets, partial UTF-8 tokens, specials), and
// on the real Qwen3 vocabulary against a brute-force check of every token at many points of a
// JSON document; a session forced to reset between calls gives the same masks.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace syv::grammar {
namespace {

std::shared_ptr<GrammarSession> session(const std::string& gbnf,
                                        std::shared_ptr<const TokenTrie> trie,
                                        size_t max_bytes = size_t{64} << 20) {
  auto g = Grammar::parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.message();
  return std::make_shared<GrammarSession>(*g, std::move(trie), max_bytes);
}

std::set<int32_t> ids(const std::vector<uint64_t>& mask) {
  std::set<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w)
    for (int b = 0; b < 64; ++b)
      if ((mask[w] >> b) & 1u) out.insert(static_cast<int32_t>(w * 64 + static_cast<size_t>(b)));
  return out;
}

//                        0    1    2     3     4    5    6     7     8   9       10      11
const std::vector<std::string> kVocab = {"a",  "b", "ab", "ba",   "{",    "}", "\"",
                                         "aa", "",  "é",  "\xc3", "\xa9", "a", "abab"};

TEST(TokenMask, SmallVocabulary) {
  auto trie = std::make_shared<const TokenTrie>(kVocab);
  Matcher m(session(R"(root ::= "a"+ "b")", trie));
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{0, 2, 7, 12}));  // a, ab, aa, a (dup)
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_token(7));  // aa
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{0, 1, 2, 7, 12}));
  EXPECT_FALSE(m.accept_token(3));  // ba: refused, nothing changes
  EXPECT_FALSE(m.accept_token(8));  // the special token has no bytes
  ASSERT_TRUE(m.accept_token(1));   // b
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(ids(m.allowed_tokens()).empty());
  // "abab" goes past the end of the sentence: never allowed.
  Matcher m2(session(R"(root ::= "a"+ "b")", trie));
  EXPECT_FALSE(m2.token_allowed(13));
}

TEST(TokenMask, PartialUtf8Tokens) {
  auto trie = std::make_shared<const TokenTrie>(kVocab);
  Matcher m(session(R"(root ::= [é-ë] "}")", trie));
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{9, 10}));  // é, and its first byte
  ASSERT_TRUE(m.accept_token(10));
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{11}));  // the second byte
  ASSERT_TRUE(m.accept_token(11));
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{5}));
  EXPECT_FALSE(m.can_end());
}

std::shared_ptr<const TokenTrie> qwen3_trie(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_added(id)) bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  return std::make_shared<const TokenTrie>(std::move(bytes));
}

// Whether token `id` fits at `c`, by stepping its bytes one by one.
bool fits(Automaton& a, ConfigId c, const std::string& bytes) {
  if (bytes.empty()) return false;
  for (char b : bytes) {
    c = a.step(c, static_cast<uint8_t>(b));
    if (c == kDead) return false;
  }
  return true;
}

TEST(TokenMask, Qwen3VocabularyMatchesBruteForce) {
  auto tok = Tokenizer::load(SYV_SOURCE_DIR "/third_party/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto trie = qwen3_trie(**tok);
  const auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20},
                   "tags": {"type": "array", "items": {"enum": ["x", "y z"]}},
                   "n": {"type": "integer", "minimum": -5, "maximum": 300},
                   "text": {"type": "string", "maxLength": 300}},
    "required": ["name", "tags", "n", "text"], "additionalProperties": false})"));
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = Grammar::parse(gbnf.value());
  ASSERT_TRUE(g.ok()) << g.message();
  Matcher m(std::make_shared<GrammarSession>(*g, trie));
  Automaton brute(*g);  // steps each token's bytes on its own, no trie
  // "text" runs far from its bound (300): those positions share masks through the clamped
  // repetition (Grammar::clamp_position), which this checks against the brute force too.
  const std::string doc = R"({"name": "Zoë \"q\"", "tags": ["y z", "x"], "n": 42, "text": ")" +
                          std::string(150, 'x') + R"( and then some words, ok?"})";
  const std::vector<int32_t> tokens = (*tok)->encode(doc, false);
  std::string so_far;
  int points = 0;
  for (size_t i = 0; i <= tokens.size(); ++i) {
    ConfigId c = brute.initial();
    for (char b : so_far) c = brute.step(c, static_cast<uint8_t>(b));
    ASSERT_NE(c, kDead);
    std::set<int32_t> expected;
    for (int32_t id = 0; id < trie->vocab_size(); ++id)
      if (fits(brute, c, trie->bytes(id))) expected.insert(id);
    const std::set<int32_t> mask = ids(m.allowed_tokens());
    ASSERT_EQ(mask, expected) << "after " << i << " tokens: " << so_far;
    EXPECT_GT(mask.size(), 0u);
    ++points;
    if (i == tokens.size()) break;
    ASSERT_TRUE(m.accept_token(tokens[i]))
        << "token " << i << " of the document refused: " << (*tok)->token_bytes(tokens[i]);
    so_far += (*tok)->token_bytes(tokens[i]);
  }
  EXPECT_TRUE(m.can_end());
  EXPECT_GT(points, 10);
}

TEST(TokenMask, BoundedRepetitionsFarFromTheirBoundShareMasks) {
  // Tokens of at most 4 bytes: a{0,40} with more than 5 copies left behaves like a{0,5}.
  auto trie = std::make_shared<const TokenTrie>(
      std::vector<std::string>{"a", "aa", "aaaa", "b", "ab", "aab", "ba"});
  auto g = Grammar::parse(R"(root ::= "a"{0,40} "b")");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g.value()->has_bounded_repetitions());
  auto s = std::make_shared<GrammarSession>(g.value(), trie);
  Matcher m(s);
  Automaton brute(g.value());
  std::string so_far;
  for (int step = 0; step < 30; ++step) {
    ConfigId c = brute.initial();
    for (char b : so_far) c = brute.step(c, static_cast<uint8_t>(b));
    std::set<int32_t> expected;
    for (int32_t id = 0; id < trie->vocab_size(); ++id)
      if (fits(brute, c, trie->bytes(id))) expected.insert(id);
    ASSERT_EQ(ids(m.allowed_tokens()), expected) << so_far.size() << " a's";
    const int32_t t = so_far.size() + 4 <= 40 ? 2 : 0;  // "aaaa" while it fits, then "a"
    ASSERT_TRUE(m.accept_token(t));
    so_far += trie->bytes(t);
    if (so_far.size() == 40) break;
  }
  EXPECT_EQ(so_far.size(), 40u);
  EXPECT_EQ(ids(m.allowed_tokens()), (std::set<int32_t>{3}));  // only "b" now
  EXPECT_LT(s->masks_computed(), 8u);  // far from the bound, one mask served them all
}

TEST(TokenMask, ResetSessionGivesTheSameMasks) {
  // A session bounded to almost nothing forgets everything between calls; its matchers re-import
  // their stacks and must see exactly what an unbounded session sees.
  auto trie = std::make_shared<const TokenTrie>(kVocab);
  const std::string gbnf = R"(root ::= ("a" | "ab" "{")* "}")";
  Matcher big(session(gbnf, trie));
  Matcher tiny(session(gbnf, trie, 1));
  for (int32_t t : {0, 2, 4, 7, 1, 4, 5}) {
    ASSERT_EQ(ids(big.allowed_tokens()), ids(tiny.allowed_tokens()));
    ASSERT_EQ(big.can_end(), tiny.can_end());
    ASSERT_EQ(big.accept_token(t), tiny.accept_token(t)) << t;
  }
  EXPECT_TRUE(tiny.finished());
}

}  // namespace
}  // namespace syv::grammar
