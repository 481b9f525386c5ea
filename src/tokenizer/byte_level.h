// GPT-2 byte-level alphabet: every byte maps to one printable code point (bytes that are printable
// Latin-1 map to themselves, the rest to U+0100 + n), so any byte string is a string of
// vocabulary characters. Used by the ByteLevel pre-tokenizer and decoder.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace syv::byte_level {

// Code point standing for byte b.
char32_t byte_to_char(uint8_t b);
// Byte that code point cp stands for, or -1 if cp is not in the alphabet.
int char_to_byte(char32_t cp);
// The byte-level string of raw bytes (each byte becomes its UTF-8 encoded stand-in).
std::string encode(std::string_view bytes);
// Inverse of encode for one token, as HF's ByteLevel decoder does it: when every character of
// `token` is in the alphabet the bytes they stand for, otherwise the token's own UTF-8 bytes.
std::string decode_token(std::string_view token);

}  // namespace syv::byte_level
