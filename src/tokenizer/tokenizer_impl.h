// Internals of Tokenizer (tokenizer.h): the loaded pieces of tokenizer.json and
// tokenizer_config.json and the encode/decode pipeline. Not part of the public API.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace syv {

class TokenizerImpl {
 public:
  static Result<std::unique_ptr<TokenizerImpl>> create(const std::string& tokenizer_json,
                                                       const std::string& tokenizer_config_json);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;

  // Bytes of one token after the ByteLevel decoder; empty for unknown ids.
  std::string_view token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  bool is_added(int32_t id) const;

  int32_t vocab_size = 0;
  std::string chat_template;
  std::string bos_token, eos_token;  // empty when not set
  std::optional<int32_t> bos_id, eos_id;
  bool add_bos = false, add_eos = false;

 private:
  Status load_tokenizer_json(const std::string& text);
  Status load_config_json(const std::string& text);
  Status load_added_tokens(const nlohmann::json& list);
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;

  std::unique_ptr<BpeModel> model_;
  Normalizer normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<std::unique_ptr<AddedToken>> added_;      // in HF order: specials, then the others
  std::unordered_map<std::string, int32_t> added_ids_;  // content -> id
  std::unordered_map<int32_t, const AddedToken*> added_by_id_;
  AddedTokenMatcher raw_matcher_;              // tokens with normalized=false, on the raw text
  AddedTokenMatcher normalized_matcher_;       // tokens with normalized=true, on normalized text
  std::vector<uint8_t> special_;               // [vocab_size]
  std::string token_bytes_data_;               // all tokens' decoded bytes, back to back
  std::vector<uint32_t> token_bytes_offsets_;  // [vocab_size + 1]
};

}  // namespace syv
