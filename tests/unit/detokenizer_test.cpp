// IncrementalDetokenizer: the chunks concatenate to decode(all ids), and no chunk ever ends inside
// a UTF-8 character. Random id sequences on the real Qwen3 vocabulary (many of its tokens are
// single bytes of multi-byte characters), plus hand-picked splits.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace syv {
namespace {

const Tokenizer& qwen3() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto r = Tokenizer::load(SYV_SOURCE_DIR "/third_party/qwen3-tokenizer");
    if (!r.ok()) {
      ADD_FAILURE() << r.message() << " (run tools/setup/fetch-tokenizer.sh)";
      std::abort();
    }
    return std::move(r).value();
  }();
  return *tok;
}

int32_t byte_id(const Tokenizer& tok, uint8_t b) {
  return *tok.token_to_id(byte_level::encode(std::string(1, static_cast<char>(b))));
}

// Streams ids and checks every chunk; returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   std::vector<std::string>* chunks = nullptr) {
  IncrementalDetokenizer detok(tok, skip);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk));
    if (chunks) chunks->push_back(chunk);
    all += chunk;
  }
  const std::string tail = detok.flush();
  EXPECT_TRUE(utf8::is_valid(tail));
  if (chunks) chunks->push_back(tail);
  return all + tail;
}

TEST(IncrementalDetokenizer, HoldsBackSplitCharacters) {
  const Tokenizer& tok = qwen3();
  // U+1F600 (F0 9F 98 80) as four single-byte tokens, then "!".
  const std::vector<int32_t> ids = {byte_id(tok, 0xF0), byte_id(tok, 0x9F), byte_id(tok, 0x98),
                                    byte_id(tok, 0x80), *tok.token_to_id("!")};
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(tok, ids, true, &chunks), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80", "!", ""}));
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementAsInDecode) {
  const Tokenizer& tok = qwen3();
  // A lone continuation byte is final at once; a truncated sequence only at flush.
  const std::vector<int32_t> ids = {byte_id(tok, 0x80), *tok.token_to_id("a"), byte_id(tok, 0xE4),
                                    byte_id(tok, 0xBD)};
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(tok, ids, true, &chunks), tok.decode(ids));
  EXPECT_EQ(chunks, (std::vector<std::string>{"\xEF\xBF\xBD", "a", "", "", "\xEF\xBF\xBD"}));
  // A truncated sequence followed by ASCII is replaced as soon as the ASCII arrives.
  chunks.clear();
  stream(tok, {byte_id(tok, 0xE4), *tok.token_to_id("a")}, true, &chunks);
  EXPECT_EQ(chunks, (std::vector<std::string>{"",
                                              "\xEF\xBF\xBD"
                                              "a",
                                              ""}));
}

TEST(IncrementalDetokenizer, SpecialTokensFollowSkipFlag) {
  const Tokenizer& tok = qwen3();
  const std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi 你好<|im_end|>");
  EXPECT_EQ(stream(tok, ids, true), "user\nhi 你好");
  EXPECT_EQ(stream(tok, ids, false), "<|im_start|>user\nhi 你好<|im_end|>");
  // A special between the bytes of a split character does not break it when skipped.
  const int32_t im_end = *tok.token_to_id("<|im_end|>");
  EXPECT_EQ(stream(tok, {byte_id(tok, 0xC3), im_end, byte_id(tok, 0xA9)}, true), "\xC3\xA9");
  EXPECT_EQ(stream(tok, {byte_id(tok, 0xC3), im_end, byte_id(tok, 0xA9)}, false),
            tok.decode({byte_id(tok, 0xC3), im_end, byte_id(tok, 0xA9)}));
}

TEST(IncrementalDetokenizer, RandomSequencesConcatenateToDecode) {
  const Tokenizer& tok = qwen3();
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> any_id(-3, tok.vocab_size() + 3);
  std::uniform_int_distribution<int> high_byte(0x80, 0xFF);
  std::uniform_int_distribution<int> kind(0, 9);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int32_t> ids(static_cast<size_t>(1 + trial % 24));
    for (auto& id : ids) {
      id = kind(rng) < 5 ? byte_id(tok, static_cast<uint8_t>(high_byte(rng))) : any_id(rng);
    }
    for (bool skip : {false, true}) {
      ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << "trial " << trial;
    }
  }
}

TEST(IncrementalDetokenizer, StreamingRealTextMatchesDecode) {
  const Tokenizer& tok = qwen3();
  const std::string text =
      "Emoji 👨‍👩‍👧‍👦 and flags 🇯🇵🇺🇸, CJK 机器学习, Arabic "
      "مرحبا, "
      "combining "
      "\xC3\xA9, "
      "code `for (;;) {}`\r\n\tdone <think>ok</think> <|im_end|>";
  const auto ids = tok.encode(text);
  EXPECT_EQ(stream(tok, ids, false), text);
  IncrementalDetokenizer detok(tok);
  detok.push(byte_id(tok, 0xE4));
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.push(*tok.token_to_id("a")), "a");  // flush reset the stream
}

}  // namespace
}  // namespace syv
