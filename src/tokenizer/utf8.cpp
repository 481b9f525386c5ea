#include "tokenizer/utf8.h"

#include <cstdint>

namespace syv::utf8 {

Decoded decode(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {b0, 1, false};
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {kInvalid, 1, false};
  }
  for (int k = 1; k <= need; ++k) {
    if (pos + k >= s.size()) return {kInvalid, static_cast<size_t>(k), true};
    const auto b = static_cast<unsigned char>(s[pos + k]);
    const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) return {kInvalid, static_cast<size_t>(k), false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, static_cast<size_t>(need + 1), false};
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t word;
      __builtin_memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Decoded d = decode(s, i);
    if (d.cp == kInvalid) return false;
    i += d.length;
  }
  return true;
}

std::string to_valid_lossy(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const Decoded d = decode(s, i);
    if (d.cp == kInvalid) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.data() + i, d.length);
    }
    i += d.length;
  }
  return out;
}

size_t complete_prefix_length(std::string_view s) {
  // Only the last 3 bytes can start an incomplete sequence; walk from a safe point before them.
  // Decodes from the start: callers keep s short (the detokenizer's pending bytes).
  size_t i = 0;
  while (i < s.size()) {
    const Decoded d = decode(s, i);
    if (d.truncated) return i;
    i += d.length;
  }
  return s.size();
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace syv::utf8
