#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "grammar/grammar_builder.h"
#include "grammar/utf8_ranges.h"

namespace syv::grammar {

std::string grammar_position(std::string_view source, size_t offset) {
  offset = std::min(offset, source.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

namespace {

// Rules that can match the empty string (a fixpoint over the alternatives).
std::vector<bool> nullable_rules(const Grammar::Builder& b) {
  std::vector<bool> nullable(b.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < b.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : b.rules[r].alts) {
        const bool empty = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == ElemKind::kRule && nullable[static_cast<size_t>(e.arg)];
        });
        if (empty) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// The rules `r` can expand to before consuming a byte: the leading rule references of each
// alternative, up to and including the first one that cannot be empty.
std::vector<std::vector<int32_t>> leftmost_edges(const Grammar::Builder& b,
                                                 const std::vector<bool>& nullable) {
  std::vector<std::vector<int32_t>> edges(b.rules.size());
  for (size_t r = 0; r < b.rules.size(); ++r) {
    for (const auto& alt : b.rules[r].alts) {
      for (const Element& e : alt) {
        if (e.kind != ElemKind::kRule) break;
        edges[r].push_back(e.arg);
        if (!nullable[static_cast<size_t>(e.arg)]) break;
      }
    }
  }
  return edges;
}

// A cycle of `edges` as "a -> b -> a", or "" when there is none (iterative DFS).
std::string find_cycle(const Grammar::Builder& b, const std::vector<std::vector<int32_t>>& edges,
                       int32_t& first) {
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> state(edges.size(), kNew);
  std::vector<std::pair<int32_t, size_t>> stack;  // (rule, next edge)
  for (size_t start = 0; start < edges.size(); ++start) {
    if (state[start] != kNew) continue;
    stack.push_back({static_cast<int32_t>(start), 0});
    state[start] = kOpen;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      const auto& out = edges[static_cast<size_t>(r)];
      if (next == out.size()) {
        state[static_cast<size_t>(r)] = kDone;
        stack.pop_back();
        continue;
      }
      const int32_t to = out[next++];
      if (state[static_cast<size_t>(to)] == kOpen) {
        size_t i = 0;
        while (stack[i].first != to) ++i;
        std::string path;
        for (; i < stack.size(); ++i)
          path += b.rules[static_cast<size_t>(stack[i].first)].name + " -> ";
        first = to;
        return path + b.rules[static_cast<size_t>(to)].name;
      }
      if (state[static_cast<size_t>(to)] == kNew) {
        state[static_cast<size_t>(to)] = kOpen;
        stack.push_back({to, 0});
      }
    }
  }
  return "";
}

}  // namespace

Result<std::shared_ptr<const Grammar>> Grammar::Builder::finish(std::string_view source,
                                                                std::string_view root_name) {
  for (const Rule& r : rules) {
    if (!r.defined) {
      return Status::Error(grammar_position(source, r.used_at) + "rule \"" + r.name +
                           "\" is used but never defined");
    }
  }
  auto root = by_name.find(std::string(root_name));
  if (root == by_name.end()) {
    return Status::Error("grammar: no rule named \"" + std::string(root_name) +
                         "\" (the start rule)");
  }
  const std::vector<bool> nullable = nullable_rules(*this);
  int32_t first = -1;
  const std::string cycle = find_cycle(*this, leftmost_edges(*this, nullable), first);
  if (!cycle.empty()) {
    return Status::Error(
        grammar_position(source, rules[static_cast<size_t>(first)].defined_at) + "rule \"" +
        rules[static_cast<size_t>(first)].name +
        "\" is left-recursive (it can reach itself without matching a byte: " + cycle +
        "); write it right-recursive or with a repetition, e.g. expr ::= term (\"+\" term)*, "
        "and never repeat something that can match the empty string");
  }
  std::shared_ptr<Grammar> g(new Grammar());
  g->byte_sets_ = sets;
  g->root_ = root->second;
  g->source_ = std::string(source);
  g->elements_.reserve(num_elements);
  g->rule_alts_.push_back(0);
  for (const Rule& r : rules) {
    g->rule_names_.push_back(r.name);
    for (const Alt& alt : r.alts) {
      g->alt_starts_.push_back(static_cast<int32_t>(g->elements_.size()));
      g->elements_.insert(g->elements_.end(), alt.begin(), alt.end());
      g->elements_.push_back(Element{ElemKind::kEnd, 0});
    }
    g->rule_alts_.push_back(static_cast<int32_t>(g->alt_starts_.size()));
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

std::string gbnf_escape(std::string_view bytes) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  const std::string s(bytes);
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n", ++i;
    } else if (c == '\r') {
      out += "\\r", ++i;
    } else if (c == '\t') {
      out += "\\t", ++i;
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      size_t next = i;
      uint32_t cp = 0;
      if (utf8_decode(s, next, cp)) {
        out.append(s, i, next - i);
        i = next;
      } else {
        out += "\\uFFFD";  // not UTF-8: no literal can hold the byte (literals are code points)
        ++i;
      }
    }
  }
  return out;
}

}  // namespace syv::grammar
