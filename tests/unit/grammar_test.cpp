// The GBNF parser and the byte-level recogniser: what each construct accepts and refuses, the
// compile-time errors (with their positions), and left recursion refused.
#include <gtest/gtest.h>

#include <string>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"
#include "unit/expect_error.h"

namespace syv::grammar {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << g.message();
  return g.ok() ? *g : nullptr;
}

// Whether `s` is a complete sentence / a prefix of one.
bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& s, bool whole = true) {
  Automaton a(g);
  ConfigId c = a.initial();
  for (char b : s) {
    if (c == kDead) return false;
    c = a.step(c, static_cast<uint8_t>(b));
  }
  if (c == kDead) return false;
  return !whole || a.accepting(c);
}

TEST(Grammar, LiteralsSequencesAlternatives) {
  auto g = compile(R"(root ::= "ab" ("c" | "de") tail
tail ::= "!" | )");
  EXPECT_TRUE(accepts(g, "abc"));
  EXPECT_TRUE(accepts(g, "abde!"));
  EXPECT_TRUE(accepts(g, "abd", false));
  EXPECT_FALSE(accepts(g, "abd"));
  EXPECT_FALSE(accepts(g, "abx"));
  EXPECT_FALSE(accepts(g, "abc!!"));
  EXPECT_FALSE(accepts(g, ""));
}

TEST(Grammar, Repetitions) {
  auto g = compile(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,} "g"{,1})");
  EXPECT_TRUE(accepts(g, "bddeff"));
  EXPECT_TRUE(accepts(g, "aaabbcddeeefffffg"));
  EXPECT_FALSE(accepts(g, "ddeff"));      // b+ needs one
  EXPECT_FALSE(accepts(g, "bdeff"));      // d{2}
  EXPECT_FALSE(accepts(g, "bddeeeeff"));  // e{1,3}
  EXPECT_FALSE(accepts(g, "bddef"));      // f{2,}
  EXPECT_FALSE(accepts(g, "bddeffgg"));   // g{,1}
  auto big = compile(R"(root ::= ("ab" | "c"){0,200})");
  EXPECT_TRUE(accepts(big, std::string(200, 'c')));
  EXPECT_FALSE(accepts(big, std::string(201, 'c')));
}

TEST(Grammar, CharacterClassesAndUtf8) {
  auto g =
      compile(R"(root ::= [a-c0-9_] [^a-z] [é-ë] . [\x00-\x1f] [\u4e00-\u9fff] "東京" [^"\\])");
  EXPECT_TRUE(accepts(g, "bXêz\n中東京é"));
  EXPECT_TRUE(accepts(g, "9-é😀\t龍東京\x7f"));
  EXPECT_FALSE(accepts(g, "dXêz\n中東京é"));   // d not in [a-c0-9_]
  EXPECT_FALSE(accepts(g, "bxêz\n中東京é"));   // x in a-z
  EXPECT_FALSE(accepts(g, "bXez\n中東京é"));   // e not in [é-ë]
  EXPECT_FALSE(accepts(g, "bXêz\n中東京\""));  // " excluded
  EXPECT_FALSE(accepts(g, "bXêz\nA東京é"));    // not CJK
  // Invalid UTF-8 never matches a class, a literal or '.'.
  auto any = compile(R"(root ::= .+)");
  EXPECT_TRUE(accepts(any, "héllo 🚀"));
  EXPECT_FALSE(accepts(any, "\xc3"));              // truncated
  EXPECT_FALSE(accepts(any, "\xc0\xaf"));          // overlong
  EXPECT_FALSE(accepts(any, "\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(accepts(any, "\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(accepts(any, "\xf4\x8f\xbf\xbf"));   // U+10FFFF
}

TEST(Grammar, EscapesAndComments) {
  auto g = compile(
      "# a comment\nroot ::= \"\\x41\\u00e9\\n\\t\\\"\\\\\" # trailing\n\n"
      "  other ::= \"x\"  # unused\n");
  EXPECT_TRUE(accepts(g, "Aé\n\t\"\\"));
}

TEST(Grammar, NestedRulesAndNewlinesInGroups) {
  auto g = compile(R"(root ::= object
object ::= "{" (
    pair
    ("," pair)*
  )? "}"
pair ::= [a-z]+ ":" value
value ::= [0-9]+ | object)");
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_TRUE(accepts(g, "{a:1,b:{c:{}},d:22}"));
  EXPECT_FALSE(accepts(g, "{a:1,}"));
  EXPECT_FALSE(accepts(g, "{a:{}"));
}

TEST(Grammar, Errors) {
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\" missing"),
                   "grammar line 1, column 14: rule \"missing\" is used but never defined");
  EXPECT_ERROR_HAS(Grammar::parse("start ::= \"a\""), "no rule named \"root\"");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a"), "line 1, column 10: unterminated string");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= [a-"), "unterminated character class");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= [z-a]"), "out of order");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"\\q\""), "unknown escape \\q");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\"{3,1}"), "maximum is below the minimum");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\"{99999}"), "repetition count above 4096");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\"\nroot ::= \"b\""),
                   "line 2, column 1: rule \"root\" is defined twice");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\" )"), "line 1, column 14: expected the end");
  EXPECT_ERROR_HAS(Grammar::parse("root = \"a\""), "expected \"::=\"");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= <[1234]>"), "token references");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= loop\nloop ::= loop"),
                   "rule \"root\" matches no finite text");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"a\" root"), "matches no finite text");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= \"\xff\""), "invalid UTF-8");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= (((((((((((((((((((((((((((((((((((((((((((((((("
                                  "((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
                                  "((((((((((((((((((((((((((((((((((((((\"a\"))"),
                   "nested too deeply");
}

TEST(Grammar, LeftRecursionRefused) {
  EXPECT_ERROR_HAS(Grammar::parse("root ::= root \"a\" | \"b\""),
                   "line 1, column 1: rule \"root\" is left-recursive", "root -> root");
  EXPECT_ERROR_HAS(Grammar::parse("root ::= expr\nexpr ::= term \"+\" | \"x\"\nterm ::= expr"),
                   "is left-recursive", "expr -> term -> expr");
  // Through a prefix that can be empty.
  EXPECT_ERROR_HAS(Grammar::parse("root ::= ws root \"a\" | \"b\"\nws ::= \" \"*"),
                   "rule \"root\" is left-recursive");
  // Right recursion is fine, and so is repeating something that can be empty (the repetition's
  // reference is a tail call: it pushes nothing).
  auto g = compile("root ::= \"a\" root | \"b\"");
  EXPECT_TRUE(accepts(g, "aaab"));
  auto opt = compile("root ::= (\"a\"? | \"b\"*)* \"c\"");
  EXPECT_TRUE(accepts(opt, "aabbbac"));
  EXPECT_TRUE(accepts(opt, "c"));
  EXPECT_FALSE(accepts(opt, "ab"));
  auto empty = compile("root ::= \"\"+ \"x\"\nloop ::= loop");
  EXPECT_TRUE(accepts(empty, "x"));
}

TEST(Grammar, AmbiguityDoesNotBlowUp) {
  // Each byte could be either alternative: without deduplicated stacks the set would double.
  auto g = compile(R"(root ::= ("a" | "a" | [a-b])*)");
  EXPECT_TRUE(accepts(g, std::string(2000, 'a')));
}

TEST(Grammar, Utf8Sequences) {
  // Every code point in the ranges matches one sequence; none outside does.
  const auto ranges =
      normalize_ranges({{0x41, 0x10FF}, {0xD000, 0xE100}, {0x10000, 0x10010}}, true);
  const auto seqs = utf8_sequences(ranges);
  auto in_seqs = [&](const std::string& s) {
    for (const auto& seq : seqs) {
      if (seq.size() != s.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < s.size(); ++i)
        ok = ok && static_cast<uint8_t>(s[i]) >= seq[i].first &&
             static_cast<uint8_t>(s[i]) <= seq[i].second;
      if (ok) return true;
    }
    return false;
  };
  for (uint32_t cp = 0; cp <= kMaxCodepoint; cp += (cp < 0x20000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const bool excluded = (cp >= 0x41 && cp <= 0x10FF) || (cp >= 0xD000 && cp <= 0xE100) ||
                          (cp >= 0x10000 && cp <= 0x10010);
    ASSERT_EQ(in_seqs(utf8_encode(cp)), !excluded) << std::hex << cp;
  }
}

}  // namespace
}  // namespace syv::grammar
