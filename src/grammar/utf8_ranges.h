// Code point ranges as UTF-8 byte-range sequences (the construction of RE2 / Rust's
// regex-syntax `Utf8Sequences`): [U+0080, U+07FF] is the one sequence [C2-DF][80-BF], while
// [U+0041, U+00FF] splits into [41-7F] and [C2-C3][80-BF]. A byte string is the UTF-8 encoding
// of a code point in the ranges exactly when it matches one of the sequences.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace syv::grammar {

struct CodepointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

// One UTF-8 sequence: one inclusive byte range per encoded byte (1 to 4 of them).
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Sorted, merged, surrogates (U+D800..U+DFFF) removed; the complement when `negate`.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges, bool negate);

// The sequences of `ranges` (normalized: sorted, disjoint, no surrogates), in order.
std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodepointRange>& ranges);

// UTF-8 encoding of `cp` (<= kMaxCodepoint, not a surrogate); tokenizer/utf8.h's.
std::string utf8_encode(uint32_t cp);

// Decodes one code point from `s` at `pos` (advanced past it). False on invalid UTF-8 (overlong
// forms, surrogates, truncation, values past U+10FFFF), as tokenizer/utf8.h judges it.
bool utf8_decode(const std::string& s, size_t& pos, uint32_t& cp);

}  // namespace syv::grammar
