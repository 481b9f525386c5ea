// Hugging Face `tokenizer.json` tokenizer: byte-level BPE as used by Qwen (and GPT-2 style models).
//
// Pipeline of encode(text), matching HF `tokenizers` exactly:
//   1. added tokens (specials and others) are cut out of the raw text first, longest match wins,
//      honouring their lstrip/rstrip/single_word flags; special tokens written in the text are
//      recognised as specials;
//   2. every remaining segment is normalized (NFC when the normalizer says so), pre-tokenized
//      (Split with the model's PCRE2 regex, then ByteLevel byte->unicode mapping) and BPE-merged;
//   3. a BOS token is prepended only when tokenizer_config.json says `add_bos_token: true`
//      (Qwen3 adds none), an EOS only when it says `add_eos_token: true`.
// decode(ids) maps tokens back through the ByteLevel decoder; bytes that do not form valid UTF-8
// become U+FFFD (as HF's `String::from_utf8_lossy`). See docs/tokenizer.md.
//
// Thread safety: a loaded Tokenizer is immutable apart from an internal, mutex-guarded word cache;
// encode/decode may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace syv {

class TokenizerImpl;

class Tokenizer {
 public:
  // Reads <model_dir>/tokenizer.json and, when present, <model_dir>/tokenizer_config.json.
  // A GGUF file or a Hugging Face cache root is explained first (io/model_folder.h).
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& model_dir);
  // tokenizer_config_json may be empty (no BOS/EOS rules, no chat template).
  static Result<std::unique_ptr<Tokenizer>> from_json(const std::string& tokenizer_json,
                                                      const std::string& tokenizer_config_json);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Ids of `text`. add_special_tokens adds BOS/EOS only where tokenizer_config.json asks for them.
  // Any byte string is accepted; see docs/tokenizer.md for invalid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Text of `ids`; ids outside [0, vocab_size()) are skipped. skip_special_tokens drops tokens
  // whose added-token entry has "special": true.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // Raw bytes of one token after the ByteLevel decoder (may be a partial UTF-8 sequence);
  // empty for ids out of range. Used by IncrementalDetokenizer.
  std::string token_bytes(int32_t id) const;

  // One past the largest id (model vocab and added tokens together).
  int32_t vocab_size() const;
  // Id of a vocabulary entry or added token, written as in tokenizer.json ("Ġthe", "<|im_end|>").
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string as written in tokenizer.json; empty for unknown ids.
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // An added token (tokenizer.json "added_tokens", special or not: <think>, <tool_call> ...),
  // which encode() cuts out of text before BPE.
  bool is_added(int32_t id) const;

  // tokenizer_config.json "chat_template": a string, or the "default" entry of a list of
  // {name, template}; empty if none.
  const std::string& chat_template() const;
  // Content of bos_token / eos_token in tokenizer_config.json (string or {"content": ...});
  // empty if not set.
  std::string bos_token() const;
  std::string eos_token() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

}  // namespace syv
