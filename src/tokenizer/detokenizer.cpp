#include "tokenizer/detokenizer.h"

#include "tokenizer/utf8.h"

namespace syv {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  // decode() skips the same ids, so skipping here keeps the concatenation equal to it.
  if (id < 0 || id >= tokenizer_.vocab_size()) return {};
  if (skip_special_tokens_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  // Emit everything up to a trailing, still incomplete UTF-8 sequence. Lossy conversion of the
  // emitted prefix equals that of the whole stream's prefix, because the cut is at a sequence
  // boundary that later bytes cannot move.
  const size_t complete = utf8::complete_prefix_length(pending_);
  if (complete == 0) return {};
  std::string out = utf8::to_valid_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = utf8::to_valid_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace syv
