// Added tokens of tokenizer.json ("added_tokens": specials such as <|im_end|> and others such as
// <think>), matched in the text before the model sees it, as HF's AddedVocabulary does:
// leftmost-longest match among all contents, then the token's flags:
//   single_word: the match is dropped (and scanning resumes after it) when a word character
//                (Unicode \w) touches it on either side;
//   lstrip / rstrip: the token also swallows the whitespace (Unicode White_Space) to its
//                left / right;
//   normalized: matched against the normalized text (one matcher per kind, see Tokenizer).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace syv {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  struct Split {
    size_t start, end;  // byte range in the text
    int32_t id;         // the added token's id, or -1 for ordinary text
  };

  // `pattern` is what is searched for (the content, or its normalized form); `token` must
  // outlive the matcher.
  void add(std::string pattern, const AddedToken* token);
  bool empty() const { return patterns_.empty(); }

  // Cuts valid UTF-8 `text` into ordinary-text and added-token splits covering all of it
  // (HF's find_matches). An empty text gives no splits.
  void split(std::string_view text, std::vector<Split>& out) const;

 private:
  struct Pattern {
    std::string text;
    const AddedToken* token;
  };
  std::vector<Pattern> patterns_;
  // Indices into patterns_ by first byte, longest first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

// Unicode predicates used by the added-token rules (Rust regex \w and \s semantics).
bool is_word_char(char32_t cp);
bool is_white_space(char32_t cp);

}  // namespace syv
