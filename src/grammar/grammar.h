// A compiled context-free grammar over bytes, parsed from GBNF text (llama.cpp's grammar format;
// docs/structured-outputs.md has the syntax syv accepts).
//
// Compiled form: every rule is a list of alternatives, every alternative a run of elements ended
// by kEnd, all in one flat array. An element matches one byte from a set (kBytes) or expands a
// rule (kRule). Repetition, groups and optional items are desugared into generated rules at
// parse time (`x*` -> `r ::= x r |`, right-recursive, so the matcher's stack does not grow with
// the repetition); a character class over code points beyond ASCII becomes a generated rule whose
// alternatives are the UTF-8 byte sequences of its ranges, so the matcher only ever sees bytes.
//
// Compile-time checks: every referenced rule is defined, the root exists, and no rule can reach
// itself without consuming a byte (left recursion, including through empty-matching prefixes);
// the matcher expands rules eagerly and would loop forever on one.
//
// A Grammar is immutable once built and may be shared by any number of matchers and threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace syv::grammar {

// 256 bits: which bytes an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

enum class ElemKind : uint8_t {
  kBytes,  // arg: index into byte_sets()
  kRule,   // arg: rule id
  kEnd,    // ends an alternative
};

struct Element {
  ElemKind kind = ElemKind::kEnd;
  int32_t arg = 0;
};

class Grammar {
 public:
  // Parses GBNF text and compiles it with `root` as the start rule. Errors name the line and
  // column ("grammar line 3, column 12: expected ...") or the rule ("rule \"expr\" is
  // left-recursive: expr -> term -> expr").
  static Result<std::shared_ptr<const Grammar>> parse(std::string_view text,
                                                      std::string_view root = "root");

  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_names_.size()); }
  const std::string& rule_name(int32_t rule) const {
    return rule_names_[static_cast<size_t>(rule)];
  }
  // The alternatives of `rule`: element positions alt_starts()[i] for i in
  // [rule_alts()[rule], rule_alts()[rule + 1]).
  const std::vector<int32_t>& rule_alts() const { return rule_alts_; }
  const std::vector<int32_t>& alt_starts() const { return alt_starts_; }
  int32_t root() const { return root_; }
  // The GBNF text it was parsed from.
  const std::string& source() const { return source_; }

  // Bounded repetitions: x{m,n}'s optional copies are rules O_1..O_{n-m} (O_k ::= x O_{k-1} |).
  // When x cannot match the empty string, a stack inside O_k with k > limit behaves like one
  // inside O_limit for any input of fewer than `limit` bytes; this maps such a position to the
  // same place in O_limit (token masks share one cache entry for them: token_masks.h). Other
  // positions are returned unchanged.
  int32_t clamp_position(int32_t pos, int32_t limit) const;
  bool has_bounded_repetitions() const { return !chains_.empty(); }

  // Building blocks, for the parser (gbnf_parser.cpp) only.
  struct Builder;

 private:
  Grammar() = default;
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::string> rule_names_;
  std::vector<int32_t> rule_alts_;   // [num_rules + 1] offsets into alt_starts_
  std::vector<int32_t> alt_starts_;  // element position of each alternative's first element
  int32_t root_ = 0;
  std::string source_;
  std::vector<int32_t> pos_rule_;             // [elements] the rule each position belongs to
  std::vector<int32_t> rule_chain_;           // [rules] chain id, or -1
  std::vector<int32_t> rule_chain_k_;         // [rules] k of O_k
  std::vector<std::vector<int32_t>> chains_;  // chain id -> O_1, O_2, ...
};

// GBNF string-literal escaping of `bytes` (quotes not included): printable ASCII as is, `"` and
// `\` escaped, everything else as \xHH per byte... except valid UTF-8 above ASCII, kept as is.
// Front-ends (json_schema.h, regex.h, choice lists) use it to emit literals.
std::string gbnf_escape(std::string_view bytes);

}  // namespace syv::grammar
