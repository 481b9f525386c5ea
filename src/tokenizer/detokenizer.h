// Incremental detokenizer for streaming: push ids one at a time, get back only text that is
// complete UTF-8. A multi-byte character split across tokens is held back until its last byte
// arrives. The concatenation of all push() results and the final flush() equals
// tokenizer.decode(all ids, skip_special_tokens).
//
// The Tokenizer must outlive the detokenizer. Not thread-safe (one per stream).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace syv {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true);

  // Returns the text completed by `id` (possibly empty).
  std::string push(int32_t id);
  // Returns what is still held back (an incomplete UTF-8 tail becomes U+FFFD, as in decode) and
  // resets the detokenizer for a new stream.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes not yet emitted: at most one incomplete UTF-8 sequence (< 4 bytes)
                         // or invalid bytes awaiting the lossy-conversion decision
};

}  // namespace syv
