// UTF-8 helpers shared by the tokenizer and the incremental detokenizer.
//
// Invalid input is handled the way Rust's String::from_utf8_lossy and Python's
// bytes.decode("utf-8", errors="replace") do: each maximal subpart of an ill-formed sequence
// (Unicode 15, section 3.9, "U+FFFD substitution of maximal subparts") becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace syv::utf8 {

inline constexpr char32_t kInvalid = 0xFFFFFFFF;

struct Decoded {
  char32_t cp;     // the code point, or kInvalid
  size_t length;   // bytes consumed: the sequence, or its maximal ill-formed subpart (>= 1)
  bool truncated;  // invalid only because the input ended inside a well-formed prefix
};

// Decodes the sequence starting at s[pos] (pos < s.size()).
Decoded decode(std::string_view s, size_t pos);

bool is_valid(std::string_view s);
// s with every maximal ill-formed subpart replaced by U+FFFD; s itself when valid.
std::string to_valid_lossy(std::string_view s);
// Length of the longest prefix of s that ends on a sequence boundary such that the rest is a
// well-formed but incomplete sequence (0..3 bytes). Everything in the prefix, valid or not, is
// final: bytes appended later cannot change its lossy conversion.
size_t complete_prefix_length(std::string_view s);

void append(std::string& out, char32_t cp);

}  // namespace syv::utf8
