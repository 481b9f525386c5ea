#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace syv::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 512> char_to_byte{};  // every stand-in is below U+0200
  Tables() {
    char_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      byte_to_char[b] = c;
      char_to_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return tables().byte_to_char[b];
}

int char_to_byte(char32_t cp) {
  return cp < 512 ? tables().char_to_byte[cp] : -1;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

std::string decode_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const utf8::Decoded d = utf8::decode(token, i);
    const int b = d.cp == utf8::kInvalid ? -1 : char_to_byte(d.cp);
    if (b < 0) return std::string(token);
    out += static_cast<char>(b);
    i += d.length;
  }
  return out;
}

}  // namespace syv::byte_level
