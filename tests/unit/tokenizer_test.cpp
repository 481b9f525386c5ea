// Tokenizer rules on small hand-written tokenizer.json files: refusals by name, merge spellings,
// added-token flags, tokenizer_config.json BOS/EOS/chat_template, invalid UTF-8, Split behaviors,
// and the UTF-8 / byte-level helpers. (Exactness against HF on the real Qwen3 tokenizer is
// tests/golden/tokenizer_test.cpp.)
#include <gtest/gtest.h>

#include <deque>
#include <nlohmann/json.hpp>
#include <thread>

#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace syv {
namespace {

using nlohmann::json;

const char* kQwenRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string ch(uint8_t b) {
  return byte_level::encode(std::string(1, static_cast<char>(b)));
}

// A byte-level BPE tokenizer.json: ids 0..255 are the bytes, then one id per merge result.
json make_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                    bool merges_as_pairs, json added_tokens = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ch(static_cast<uint8_t>(b))] = b;
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int>(vocab.size());
    if (merges_as_pairs) {
      merge_list.push_back(json::array({a, b}));
    } else {
      merge_list.push_back(a + " " + b);
    }
  }
  return json{
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", kQwenRegex}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab", vocab},
        {"merges", merge_list}}}};
}

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"h", "e"}, {"l", "l"},   {"he", "ll"},   {"hell", "o"}, {"Ġ", "w"},
    {"o", "r"}, {"Ġw", "or"}, {"Ġwor", "ld"}, {"l", "d"},    {"Ġ", "Ġ"}};

std::unique_ptr<Tokenizer> load(const json& tokenizer, const std::string& config = "") {
  auto r = Tokenizer::from_json(tokenizer.dump(), config);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::string load_error(const json& tokenizer, const std::string& config = "") {
  auto r = Tokenizer::from_json(tokenizer.dump(), config);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.message();
}

json added(const std::string& content, int id, bool special, bool lstrip = false,
           bool rstrip = false, bool single_word = false, bool normalized = false) {
  return {{"id", id},          {"content", content}, {"single_word", single_word},
          {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
          {"special", special}};
}

TEST(TokenizerLoad, UnsupportedModelTypesAreRefusedByName) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    json t = make_tokenizer(kMerges, false);
    t["model"]["type"] = type;
    const std::string message = load_error(t);
    EXPECT_NE(message.find(type), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
  }
}

TEST(TokenizerLoad, UnsupportedComponentsAreRefusedByName) {
  json t = make_tokenizer(kMerges, false);
  t["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(load_error(t).find("Lowercase"), std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_NE(load_error(t).find("Metaspace"), std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(load_error(t).find("WordPiece"), std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["post_processor"] = {{"type", "TemplateProcessing"}};
  EXPECT_NE(load_error(t).find("TemplateProcessing"), std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["model"]["dropout"] = 0.1;
  EXPECT_NE(load_error(t).find("dropout"), std::string::npos);
  EXPECT_NE(Tokenizer::from_json("{not json", "").message().find("not valid JSON"),
            std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["added_tokens"] = json::array({{{"content", "<s>"}, {"special", "yes"}}});
  EXPECT_NE(load_error(t).find("wrong type"), std::string::npos);
  t = make_tokenizer(kMerges, false);
  t["model"]["vocab"]["a"] = "one";
  EXPECT_NE(load_error(t).find("model.vocab[\"a\"]"), std::string::npos);
}

TEST(TokenizerLoad, BadMergesNameTheEntry) {
  json t = make_tokenizer(kMerges, false);
  t["model"]["merges"][3] = "a b c";
  EXPECT_NE(load_error(t).find("model.merges[3]"), std::string::npos);
  t = make_tokenizer(kMerges, true);
  t["model"]["merges"][0] = json::array({"h", "zz"});
  const std::string message = load_error(t);
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("\"zz\""), std::string::npos) << message;
}

TEST(TokenizerEncode, BothMergeFormsGiveTheSameIds) {
  auto a = load(make_tokenizer(kMerges, false));
  auto b = load(make_tokenizer(kMerges, true));
  for (const char* text : {"hello world", "hellohello  world", "he ll o", "world"}) {
    EXPECT_EQ(a->encode(text), b->encode(text)) << text;
  }
  // "hello" -> h e l l o -> he ll o -> hell o -> hello; " world" -> Ġw or l d -> Ġwor ld -> Ġworld
  EXPECT_EQ(a->encode("hello world").size(), 2u);
  EXPECT_EQ(a->decode(a->encode("hello world")), "hello world");
  EXPECT_EQ(a->id_to_token(a->encode("hello world")[1]), "Ġworld");
}

TEST(TokenizerEncode, LowestRankMergesFirst) {
  // "ll" (rank 1) is merged before "hell"+"o" could; "he"+"ll" needs both.
  auto t = load(make_tokenizer({{"l", "l"}, {"e", "l"}, {"h", "e"}, {"he", "ll"}}, false));
  const auto ids = t->encode("hell");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(t->id_to_token(ids[0]), "hell");
  // "ell" prefers e+l (rank 1) over l+l? No: l+l has rank 0, so e + ll.
  const auto ell = t->encode("ell");
  ASSERT_EQ(ell.size(), 2u);
  EXPECT_EQ(t->id_to_token(ell[1]), "ll");
}

TEST(TokenizerAddedTokens, FlagsLstripRstripSingleWordSpecial) {
  json list = json::array({added("<s>", 266, true), added("[L]", 267, true, true),
                           added("[R]", 268, true, false, true),
                           added("cat", 269, false, false, false, true)});
  auto t = load(make_tokenizer(kMerges, false, list));
  ASSERT_NE(t, nullptr);
  const int32_t s = *t->token_to_id("<s>"), l = *t->token_to_id("[L]"), r = *t->token_to_id("[R]"),
                cat = *t->token_to_id("cat");
  const int32_t space = *t->token_to_id("Ġ"), a = *t->token_to_id("a"), b = *t->token_to_id("b");
  // Specials written in the text are recognised.
  EXPECT_EQ(t->encode("a<s>b"), (std::vector<int32_t>{a, s, b}));
  // lstrip swallows the spaces on its left only.
  EXPECT_EQ(t->encode("a   [L] b"), (std::vector<int32_t>{a, l, space, b}));
  // rstrip swallows the spaces on its right only.
  EXPECT_EQ(t->encode("a [R]   b"), (std::vector<int32_t>{a, space, r, b}));
  // single_word: matched only when no word character touches it.
  EXPECT_EQ(t->encode("a cat b"), (std::vector<int32_t>{a, space, cat, space, b}));
  for (const char* text : {"concat", "cats", "_cat", "cat9"}) {
    const auto ids = t->encode(text);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), cat), 0) << text;
  }
  const auto punct = t->encode("(cat)");
  EXPECT_EQ(std::count(punct.begin(), punct.end(), cat), 1);
  EXPECT_TRUE(t->is_special(s));
  EXPECT_FALSE(t->is_special(cat));
  // Decoding: the stripped spaces are gone; skip_special_tokens drops specials only.
  EXPECT_EQ(t->decode(t->encode("a   [L] b")), "a[L] b");
  EXPECT_EQ(t->decode(t->encode("x<s>cat [R] y"), true), "xcat y");
  // Longest match wins.
  json list2 = json::array({added("<a>", 266, true), added("<a><b>", 267, true)});
  auto t2 = load(make_tokenizer(kMerges, false, list2));
  EXPECT_EQ(t2->encode("<a><b><a>"),
            (std::vector<int32_t>{*t2->token_to_id("<a><b>"), *t2->token_to_id("<a>")}));
}

TEST(TokenizerAddedTokens, NormalizedTokensMatchTheNormalizedText) {
  // "é" (U+00E9) with normalized=true also matches "e" + U+0301 after NFC.
  json list = json::array({added("\xC3\xA9x", 266, false, false, false, false, true)});
  auto t = load(make_tokenizer(kMerges, false, list));
  const int32_t id = *t->token_to_id("\xC3\xA9x");
  EXPECT_EQ(t->encode("\xC3\xA9x"), (std::vector<int32_t>{id}));
  EXPECT_EQ(t->encode("e\xCC\x81x"), (std::vector<int32_t>{id}));
}

TEST(TokenizerConfig, BosEosAndChatTemplate) {
  json list = json::array({added("<s>", 266, true), added("</s>", 267, true)});
  const json tok = make_tokenizer(kMerges, false, list);
  auto t =
      load(tok, json{{"add_bos_token", true},
                     {"add_eos_token", true},
                     {"bos_token", {{"content", "<s>"}, {"__type", "AddedToken"}}},
                     {"eos_token", "</s>"},
                     {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                    {{"name", "default"}, {"template", "D"}}})}}
                    .dump());
  ASSERT_NE(t, nullptr);
  const int32_t a = *t->token_to_id("a"), bos = *t->token_to_id("<s>"),
                eos = *t->token_to_id("</s>");
  EXPECT_EQ(t->encode("a"), (std::vector<int32_t>{bos, a, eos}));
  EXPECT_EQ(t->encode("a", false), (std::vector<int32_t>{a}));
  EXPECT_EQ(t->bos_token(), "<s>");
  EXPECT_EQ(t->eos_token_id(), eos);
  EXPECT_EQ(t->bos_token_id(), bos);
  EXPECT_EQ(t->chat_template(), "D");
  // No config: no BOS/EOS, no template.
  auto plain = load(tok);
  EXPECT_EQ(plain->encode("a"), (std::vector<int32_t>{a}));
  EXPECT_EQ(plain->chat_template(), "");
  EXPECT_FALSE(plain->eos_token_id().has_value());
  // add_bos_token with an unknown BOS is an error naming both.
  const std::string message =
      load_error(tok, json{{"add_bos_token", true}, {"bos_token", "<bos>"}}.dump());
  EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("<bos>"), std::string::npos) << message;
  EXPECT_NE(load_error(tok, json{{"add_eos_token", "yes"}}.dump()).find("add_eos_token"),
            std::string::npos);
}

TEST(TokenizerEncode, InvalidUtf8IsReplacedLikePythonErrorsReplace) {
  auto t = load(make_tokenizer(kMerges, false));
  // Each maximal ill-formed subpart becomes one U+FFFD before encoding.
  EXPECT_EQ(t->encode("a\xFF"
                      "b"),
            t->encode("a\xEF\xBF\xBD"
                      "b"));
  EXPECT_EQ(t->encode("\xE2\x82"
                      "x"),
            t->encode("\xEF\xBF\xBD"
                      "x"));
  EXPECT_EQ(t->encode("\xED\xA0\x80"), t->encode("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(t->decode(t->encode("ok\xC3")), "ok\xEF\xBF\xBD");
}

TEST(TokenizerEncode, DecodeOfEncodeRoundTripsAndLongInputsWork) {
  auto t = load(make_tokenizer(kMerges, false));
  for (const std::string& text : {std::string("hello world\r\n\tx"), std::string(200000, ' '),
                                  std::string(200000, 'a'), std::string(100000, '\n') + "x",
                                  std::string("\xE4\xBD\xA0\xE5\xA5\xBD") + "  \xF0\x9F\x98\x80"}) {
    EXPECT_EQ(t->decode(t->encode(text)), text) << text.size();
  }
  EXPECT_TRUE(t->encode("").empty());
  EXPECT_EQ(t->decode({}), "");
}

TEST(TokenizerEncode, ConcurrentEncodesAgree) {
  auto t = load(make_tokenizer(kMerges, false));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "hello world " + std::to_string(i) + " ";
  const auto expected = t->encode(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { ok[i] = t->encode(text) == expected; });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

std::vector<std::string> split_with(const std::string& behavior, const std::string& text,
                                    bool invert = false) {
  json spec = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"String", "-"}}},
                     {"behavior", behavior},
                     {"invert", invert}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  auto pt = PreTokenizer::from_json(spec);
  EXPECT_TRUE(pt.ok()) << pt.message();
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pt.value()->pre_tokenize(text, pieces, storage);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

// The examples of HF's SplitDelimiterBehavior documentation.
TEST(PreTokenizer, SplitBehaviorsMatchHfDocumentation) {
  using V = std::vector<std::string>;
  const std::string text = "the-final--countdown";
  EXPECT_EQ(split_with("Removed", text), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_with("Isolated", text), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_with("MergedWithPrevious", text), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_with("MergedWithNext", text), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_with("Contiguous", text), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split_with("Removed", text, true), (V{"-", "-", "-"}));
}

TEST(PreTokenizer, ByteLevelRegexAndPrefixSpace) {
  json spec = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  auto pt = PreTokenizer::from_json(spec);
  ASSERT_TRUE(pt.ok()) << pt.message();
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pt.value()->pre_tokenize("Hello world's 42", pieces, storage);
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{" Hello", " world", "'s", " 42"}));
  EXPECT_FALSE(PreTokenizer::from_json(json{{"type", "Whitespace"}}).ok());
  EXPECT_NE(PreTokenizer::from_json(nullptr).message().find("ByteLevel"), std::string::npos);
}

TEST(PreTokenizer, WhitespaceFollowsOniguruma) {
  // \s is Unicode White_Space (as in Oniguruma): U+180E and U+200B are not whitespace,
  // U+3000 and U+0085 are.
  const std::string rewritten = rewrite_oniguruma_pattern("[^\\s\\p{L}]\\s+\\S");
  EXPECT_EQ(rewritten.find("\\s"), std::string::npos) << rewritten;
  EXPECT_EQ(rewritten.find("\\S"), std::string::npos) << rewritten;
  auto re = Regex::compile("\\s+", false);
  ASSERT_TRUE(re.ok());
  std::vector<std::pair<size_t, size_t>> m;
  re.value()->find_all(
      "a\xE1\xA0\x8E"
      "b\xE2\x80\x8B"
      "c\xE3\x80\x80"
      "d\xC2\x85"
      "e",
      m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (std::pair<size_t, size_t>{9, 12}));   // U+3000
  EXPECT_EQ(m[1], (std::pair<size_t, size_t>{13, 15}));  // U+0085
}

TEST(Utf8, MaximalSubpartsBecomeOneReplacementEach) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::to_valid_lossy("\xF0\x9F\x98 x"), r + " x");
  EXPECT_EQ(utf8::to_valid_lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8::to_valid_lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(utf8::to_valid_lossy("\xE0\x80\xAF"), r + r + r);
  EXPECT_EQ(utf8::to_valid_lossy("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\x98\x80 ok"));
  EXPECT_FALSE(utf8::is_valid("abcdefghij\x80"));
  EXPECT_EQ(utf8::complete_prefix_length("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xFF"), 3u);  // invalid is final, not pending
  EXPECT_EQ(utf8::complete_prefix_length("\xC3"), 0u);
}

TEST(ByteLevel, EveryByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const std::string raw(1, static_cast<char>(b));
    EXPECT_EQ(byte_level::decode_token(byte_level::encode(raw)), raw) << b;
  }
  EXPECT_EQ(byte_level::encode(" "), "\xC4\xA0");  // Ġ
  // A token with a character outside the alphabet decodes to its own bytes (HF behaviour).
  EXPECT_EQ(byte_level::decode_token("\xE4\xBD\xA0"), "\xE4\xBD\xA0");
}

}  // namespace
}  // namespace syv
