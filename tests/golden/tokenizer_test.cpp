// syv's tokenizer against HF `tokenizers` on the real Qwen3 tokenizer.json: every fixture case
// (tests/fixtures/tokenizer/qwen3_cases.json, made by tools/fixtures/make_tokenizer_fixtures.py)
// must give exactly the same ids and the same decode with and without special tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace syv {
namespace {

const std::string kTokenizerDir = SYV_SOURCE_DIR "/third_party/qwen3-tokenizer";
const std::string kFixture = SYV_SOURCE_DIR "/tests/fixtures/tokenizer/qwen3_cases.json";

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream in(kFixture);
    EXPECT_TRUE(in.good()) << kFixture;
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }();
  return j;
}

const Tokenizer& qwen3() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto r = Tokenizer::load(kTokenizerDir);
    if (!r.ok()) {
      ADD_FAILURE() << r.message() << " (run tools/setup/fetch-tokenizer.sh)";
      std::abort();
    }
    return std::move(r).value();
  }();
  return *tok;
}

std::string show(const std::string& s) {
  return nlohmann::json(s).dump().substr(0, 200);
}

std::string show(const std::vector<int32_t>& ids) {
  return nlohmann::json(ids).dump();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

TEST(Qwen3Tokenizer, FixtureHasEnoughCases) {
  EXPECT_GE(fixture()["cases"].size(), 300u);
  EXPECT_EQ(fixture()["add_special_tokens"], true);
}

TEST(Qwen3Tokenizer, EncodeMatchesHfForEveryCase) {
  const Tokenizer& tok = qwen3();
  int failures = 0;
  for (const auto& c : fixture()["cases"]) {
    const std::string text = c["text"];
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    const auto ids = tok.encode(text);
    if (ids != expected) {
      ++failures;
      ADD_FAILURE() << "text " << show(text) << "\n  syv " << show(ids) << "\n  hf  "
                    << show(expected);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Qwen3Tokenizer, DecodeMatchesHfForEveryCase) {
  const Tokenizer& tok = qwen3();
  for (const auto& section : {"cases", "decode_cases"}) {
    for (const auto& c : fixture()[section]) {
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << show(ids);
      EXPECT_EQ(tok.decode(ids, true), c["decoded_skip"].get<std::string>()) << show(ids);
    }
  }
}

TEST(Qwen3Tokenizer, IncrementalDetokenizerMatchesDecode) {
  const Tokenizer& tok = qwen3();
  for (const auto& section : {"cases", "decode_cases"}) {
    for (const auto& c : fixture()[section]) {
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        IncrementalDetokenizer detok(tok, skip);
        std::string streamed;
        for (int32_t id : ids) streamed += detok.push(id);
        streamed += detok.flush();
        EXPECT_EQ(streamed, c[skip ? "decoded_skip" : "decoded"].get<std::string>()) << show(ids);
      }
    }
  }
}

// Invalid UTF-8 is encoded as HF encodes bytes.decode("utf-8", errors="replace").
TEST(Qwen3Tokenizer, InvalidUtf8EncodesLikeReplacementDecoding) {
  const Tokenizer& tok = qwen3();
  for (const auto& c : fixture()["invalid_utf8_cases"]) {
    const std::string bytes = from_hex(c["bytes_hex"]);
    EXPECT_EQ(tok.encode(bytes), c["ids"].get<std::vector<int32_t>>()) << c["bytes_hex"];
    EXPECT_EQ(tok.decode(tok.encode(bytes)), c["replaced"].get<std::string>()) << c["bytes_hex"];
  }
}

// Hand-written tokenizer.json files exercising added-token flags (lstrip, rstrip, single_word,
// normalized, special, tokens already in the vocabulary) and both merge spellings.
TEST(SmallTokenizers, AddedTokenFlagsAndMergeFormsMatchHf) {
  ASSERT_EQ(fixture()["small"].size(), 2u);
  for (const auto& variant : fixture()["small"]) {
    auto loaded = Tokenizer::from_json(variant["tokenizer_json"].get<std::string>(), "");
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    const Tokenizer& tok = *loaded.value();
    for (const auto& c : variant["cases"]) {
      const std::string text = c["text"];
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok.encode(text), ids) << variant["merge_form"] << " " << show(text);
      EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << show(text);
      EXPECT_EQ(tok.decode(ids, true), c["decoded_skip"].get<std::string>()) << show(text);
    }
  }
}

TEST(Qwen3Tokenizer, ConfigRulesAndVocabulary) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.eos_token_id(), 151645);
  EXPECT_EQ(tok.bos_token(), "");
  EXPECT_FALSE(tok.bos_token_id().has_value());
  EXPECT_NE(tok.chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.token_to_id("Hello"), 9707);
  EXPECT_FALSE(tok.token_to_id("not a token at all").has_value());
  EXPECT_EQ(tok.id_to_token(151667), "<think>");
  EXPECT_EQ(tok.id_to_token(9707), "Hello");
  EXPECT_EQ(tok.id_to_token(-1), "");
  EXPECT_EQ(tok.id_to_token(tok.vocab_size()), "");
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is an added token but not special
  EXPECT_FALSE(tok.is_special(9707));
  // Qwen3 adds no BOS: encode with and without special tokens agree.
  EXPECT_EQ(tok.encode("Hello world", true), tok.encode("Hello world", false));
  // Out-of-range ids are skipped by decode.
  EXPECT_EQ(tok.decode({9707, -5, 1 << 30, 1879}), "Hello world");
}

}  // namespace
}  // namespace syv
