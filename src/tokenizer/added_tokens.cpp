#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace syv {

bool is_white_space(char32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  // \w = Alphabetic + Mark + Decimal_Number + Connector_Punctuation + Join_Control.
  if (cp == 0x200C || cp == 0x200D) return true;
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;  // Other_Alphabetic symbols (circled and squared letters)
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

namespace {

// Code point ending at byte `end` (exclusive) of valid UTF-8 `s`; end > 0.
char32_t last_char(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return utf8::decode(s, start).cp;
}

// Start of the whitespace run that ends at `end`.
size_t trailing_space_start(std::string_view s, size_t end) {
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (!is_white_space(utf8::decode(s, start).cp)) break;
    end = start;
  }
  return end;
}

// End of the whitespace run that starts at `pos`.
size_t leading_space_end(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const utf8::Decoded d = utf8::decode(s, pos);
    if (!is_white_space(d.cp)) break;
    pos += d.length;
  }
  return pos;
}

}  // namespace

void AddedTokenMatcher::add(std::string pattern, const AddedToken* token) {
  if (pattern.empty()) return;
  const auto index = static_cast<uint32_t>(patterns_.size());
  auto& bucket = by_first_byte_[static_cast<uint8_t>(pattern[0])];
  patterns_.push_back({std::move(pattern), token});
  bucket.push_back(index);
  // Longest first; among equal lengths the earlier pattern wins (stable).
  std::stable_sort(bucket.begin(), bucket.end(), [this](uint32_t a, uint32_t b) {
    return patterns_[a].text.size() > patterns_[b].text.size();
  });
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Split>& out) const {
  if (text.empty()) return;
  size_t start_offset = 0;  // end of the previous split
  size_t pos = 0;           // where the search for the next match starts
  while (pos < text.size()) {
    // Leftmost-longest: the first position where any pattern matches, the longest there.
    const Pattern* match = nullptr;
    size_t match_start = pos;
    for (; match_start < text.size(); ++match_start) {
      const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[match_start])];
      for (uint32_t index : bucket) {
        const std::string& p = patterns_[index].text;
        if (text.compare(match_start, p.size(), p) == 0) {
          match = &patterns_[index];
          break;
        }
      }
      if (match != nullptr) break;
    }
    if (match == nullptr) break;
    size_t start = match_start;
    size_t stop = match_start + match->text.size();
    pos = stop;
    const AddedToken& token = *match->token;
    if (token.single_word) {
      const bool word_before = start > 0 && is_word_char(last_char(text, start));
      const bool word_after = stop < text.size() && is_word_char(utf8::decode(text, stop).cp);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text, start), start_offset);
    if (token.rstrip) stop = leading_space_end(text, stop);
    start = std::min(start, stop);  // only an all-whitespace token could invert them
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace syv
