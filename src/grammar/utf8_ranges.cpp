#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace syv::grammar {
namespace {

int utf8_len(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  if (lo > hi) return;
  for (uint32_t m : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= m && m < hi) {
      split(lo, m, out);
      split(m + 1, hi, out);
      return;
    }
  }
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  ByteRangeSeq seq;
  for (size_t i = 0; i < a.size(); ++i)
    seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges, bool negate) {
  std::vector<CodepointRange> cut;
  for (CodepointRange r : ranges) {
    if (r.lo > r.hi) continue;
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (r.lo > r.hi) continue;
    // Remove the surrogates: they have no UTF-8 encoding.
    if (r.lo < 0xD800 && r.hi >= 0xD800) {
      if (r.hi > 0xDFFF) cut.push_back({0xE000, r.hi});
      r.hi = 0xD7FF;
    } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
      if (r.hi <= 0xDFFF) continue;
      r.lo = 0xE000;
    }
    cut.push_back(r);
  }
  std::sort(cut.begin(), cut.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (CodepointRange r : cut) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (!negate) return merged;
  std::vector<CodepointRange> inverse;
  uint32_t next = 0;
  for (CodepointRange r : merged) {
    if (r.lo > next) inverse.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) inverse.push_back({next, kMaxCodepoint});
  return normalize_ranges(std::move(inverse), false);  // drops the surrogates again
}

std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<ByteRangeSeq> out;
  for (CodepointRange r : ranges) split(r.lo, r.hi, out);
  return out;
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  utf8::append(s, static_cast<char32_t>(cp));
  return s;
}

bool utf8_decode(const std::string& s, size_t& pos, uint32_t& cp) {
  if (pos >= s.size()) return false;
  const utf8::Decoded d = utf8::decode(s, pos);
  if (d.cp == utf8::kInvalid) return false;
  cp = static_cast<uint32_t>(d.cp);
  pos += d.length;
  return true;
}

}  // namespace syv::grammar
