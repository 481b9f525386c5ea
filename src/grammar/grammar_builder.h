// Internal to the grammar module: rules under construction (gbnf_parser.cpp fills it) and the
// checks that turn it into a Grammar (grammar.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace syv::grammar {

// Grammar size limits: past them a grammar is refused (they bound the memory a hostile grammar
// text can make the compiler use).
constexpr int32_t kMaxRepetition = 4096;  // m and n of x{m,n}
constexpr size_t kMaxElements = size_t{1} << 21;

struct Grammar::Builder {
  using Alt = std::vector<Element>;  // without the closing kEnd
  struct Rule {
    std::string name;
    std::vector<Alt> alts;
    bool defined = false;
    size_t used_at = 0;     // source offset of the first reference (for "undefined" errors)
    size_t defined_at = 0;  // source offset of the definition (or of the item that generated it)
    int32_t chain = -1;     // the bounded repetition it is the k-th optional copy of, or -1
    int32_t chain_k = 0;
  };
  // x{m,n}'s optional part: rules[k - 1] = O_k, with O_1 ::= x |, O_k ::= x O_{k-1} |.
  struct Chain {
    Element x;
    std::vector<int32_t> rules;
  };
  std::vector<Chain> chains;
  std::vector<Rule> rules;
  std::unordered_map<std::string, int32_t> by_name;
  std::vector<ByteSet> sets;
  std::map<std::array<uint64_t, 4>, int32_t> set_index;
  size_t num_elements = 0;

  // The rule named `name`, created (undefined) on first sight.
  int32_t rule(const std::string& name, size_t at);
  // A fresh generated rule "<base>-<n>", defined.
  int32_t generated(const std::string& base, size_t at);
  Element bytes(const ByteSet& set);
  Element ref(int32_t r) { return Element{ElemKind::kRule, r}; }
  void add_alt(int32_t r, Alt alt) {
    num_elements += alt.size() + 1;
    rules[static_cast<size_t>(r)].alts.push_back(std::move(alt));
  }
  // Checks the rules (defined, root present, no left recursion) and flattens them. `source` is
  // the GBNF text, for line/column messages (grammar.cpp).
  Result<std::shared_ptr<const Grammar>> finish(std::string_view source, std::string_view root);
};

// "grammar line L, column C: " for an offset into `source`.
std::string grammar_position(std::string_view source, size_t offset);

}  // namespace syv::grammar
