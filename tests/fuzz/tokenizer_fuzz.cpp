// libFuzzer target for the tokenizer: encode arbitrary bytes, decode them back, stream them
// through the incremental detokenizer.
//
// Tokenizer used: the folder in $SYV_FUZZ_TOKENIZER, else ./third_party/qwen3-tokenizer (make
// fuzz runs from the repository root), else a small embedded byte-level BPE tokenizer.json.
// The tokenizer must have no lstrip/rstrip added tokens (they drop whitespace on purpose).
//
// Asserted for every input x:
//   * every id is in [0, vocab_size);
//   * decode(encode(x)) == y where y is x with invalid UTF-8 replaced (U+FFFD per maximal
//     subpart), whenever y is already in NFC (otherwise the normalizer changes the text);
//   * the incremental detokenizer's chunks are valid UTF-8 and concatenate to decode(ids).
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::string embedded_tokenizer_json() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[syv::byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  }
  const std::pair<const char*, const char*> merges[] = {
      {"Ġ", "t"}, {"h", "e"},   {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"},  {"e", "r"}, {"o", "n"},
      {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"},   {"ä", "½"}, {"ä½", "ł"}, {"Ã", "©"}};
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    const std::string joined = std::string(a) + b;
    if (!vocab.contains(joined)) vocab[joined] = static_cast<int>(vocab.size());
    merge_list.push_back(std::string(a) + " " + b);
  }
  const int base = static_cast<int>(vocab.size());
  json added = json::array({
      {{"id", base}, {"content", "<|im_end|>"}, {"special", true}, {"normalized", false}},
      {{"id", base + 1}, {"content", "<think>"}, {"special", false}, {"normalized", false}},
      {{"id", base + 2},
       {"content", "word"},
       {"special", false},
       {"normalized", true},
       {"single_word", true}},
  });
  const char* regex =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  json tokenizer = {
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
  return tokenizer.dump();
}

std::unique_ptr<syv::Tokenizer> g_tokenizer;

bool is_nfc(const std::string& s) {
  utf8proc_uint8_t* nfc = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  if (nfc == nullptr) return false;
  // utf8proc_NFC stops at a NUL byte; compare only inputs without one.
  const bool same = s.find('\0') == std::string::npos && s == reinterpret_cast<const char*>(nfc);
  std::free(nfc);
  return same;
}

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir;
  if (const char* env = std::getenv("SYV_FUZZ_TOKENIZER")) {
    dir = env;
  } else if (std::ifstream("third_party/qwen3-tokenizer/tokenizer.json").good()) {
    dir = "third_party/qwen3-tokenizer";
  }
  auto loaded = dir.empty() ? syv::Tokenizer::from_json(embedded_tokenizer_json(), "")
                            : syv::Tokenizer::load(dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", loaded.message().c_str());
    std::abort();
  }
  g_tokenizer = std::move(loaded).value();
  std::fprintf(stderr, "tokenizer_fuzz: using %s tokenizer\n",
               dir.empty() ? "the embedded" : dir.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const syv::Tokenizer& tok = *g_tokenizer;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.encode(input);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size(), "id out of range");
  const std::string decoded = tok.decode(ids);
  check(syv::utf8::is_valid(decoded), "decode produced invalid UTF-8");
  const std::string repaired = syv::utf8::to_valid_lossy(input);
  if (is_nfc(repaired)) check(decoded == repaired, "decode(encode(x)) != x");
  for (bool skip : {false, true}) {
    syv::IncrementalDetokenizer detok(tok, skip);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = detok.push(id);
      check(syv::utf8::is_valid(chunk), "detokenizer emitted invalid UTF-8");
      streamed += chunk;
    }
    streamed += detok.flush();
    check(streamed == tok.decode(ids, skip), "detokenizer chunks != decode");
  }
  return 0;
}
