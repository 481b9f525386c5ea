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

// The rules with an alternative whose every element passes `ok(element, found)`, where `found`
// holds the rules found so far (a fixpoint over the alternatives).
template <typename Ok>
std::vector<bool> rules_with_alternative(const Grammar::Builder& b, Ok ok) {
  std::vector<bool> found(b.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < b.rules.size(); ++r) {
      if (found[r]) continue;
      for (const auto& alt : b.rules[r].alts) {
        if (std::all_of(alt.begin(), alt.end(), [&](const Element& e) { return ok(e, found); })) {
          found[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return found;
}

// Rules that can match some finite text: an alternative of byte sets and such rules.
std::vector<bool> productive_rules(const Grammar::Builder& b) {
  return rules_with_alternative(b, [](const Element& e, const std::vector<bool>& found) {
    return e.kind != ElemKind::kRule || found[static_cast<size_t>(e.arg)];
  });
}

// Rules that can match the empty string: an alternative of such rules only.
std::vector<bool> nullable_rules(const Grammar::Builder& b) {
  return rules_with_alternative(b, [](const Element& e, const std::vector<bool>& found) {
    return e.kind == ElemKind::kRule && found[static_cast<size_t>(e.arg)];
  });
}

struct Edge {
  int32_t to;
  bool push;  // the reference is followed by more elements: expanding it pushes a stack frame
};

// The rules `r` can expand to before consuming a byte: the leading rule references of each
// alternative, up to and including the first one that cannot be empty.
std::vector<std::vector<Edge>> leftmost_edges(const Grammar::Builder& b,
                                              const std::vector<bool>& nullable) {
  std::vector<std::vector<Edge>> edges(b.rules.size());
  for (size_t r = 0; r < b.rules.size(); ++r) {
    for (const auto& alt : b.rules[r].alts) {
      for (size_t i = 0; i < alt.size(); ++i) {
        const Element& e = alt[i];
        if (e.kind != ElemKind::kRule) break;
        edges[r].push_back({e.arg, i + 1 < alt.size()});
        if (!nullable[static_cast<size_t>(e.arg)]) break;
      }
    }
  }
  return edges;
}

// Strongly connected components (Tarjan, iterative): component id per rule.
std::vector<int32_t> components(const std::vector<std::vector<Edge>>& edges) {
  const size_t n = edges.size();
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on_stack(n, false);
  std::vector<int32_t> stack;
  std::vector<std::pair<int32_t, size_t>> call;
  int32_t next_index = 0, next_comp = 0;
  for (size_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    call.push_back({static_cast<int32_t>(s), 0});
    while (!call.empty()) {
      auto& [v, i] = call.back();
      const auto uv = static_cast<size_t>(v);
      if (i == 0 && index[uv] < 0) {
        index[uv] = low[uv] = next_index++;
        stack.push_back(v);
        on_stack[uv] = true;
      }
      if (i < edges[uv].size()) {
        const auto w = static_cast<size_t>(edges[uv][i++].to);
        if (index[w] < 0) {
          call.push_back({static_cast<int32_t>(w), 0});
        } else if (on_stack[w]) {
          low[uv] = std::min(low[uv], index[w]);
        }
        continue;
      }
      if (low[uv] == index[uv]) {
        for (;;) {
          const int32_t w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = next_comp;
          if (w == v) break;
        }
        ++next_comp;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) {
        const auto u = static_cast<size_t>(call.back().first);
        low[u] = std::min(low[u], low[static_cast<size_t>(done)]);
      }
    }
  }
  return comp;
}

// A cycle of leftmost references through a push (the expansion would grow the stack forever) as
// "a -> b -> a", or "" when there is none; `first` is its first rule. Cycles made only of
// references in tail position (`x ::= y x |` with y empty-matching) push nothing and are fine.
std::string find_cycle(const Grammar::Builder& b, const std::vector<std::vector<Edge>>& edges,
                       int32_t& first) {
  const std::vector<int32_t> comp = components(edges);
  for (size_t u = 0; u < edges.size(); ++u) {
    for (const Edge& e : edges[u]) {
      if (!e.push || comp[u] != comp[static_cast<size_t>(e.to)]) continue;
      // A path e.to -> ... -> u inside the component closes the cycle (breadth first).
      std::vector<int32_t> from(edges.size(), -2);
      std::vector<int32_t> queue{e.to};
      from[static_cast<size_t>(e.to)] = -1;
      for (size_t q = 0; q < queue.size() && from[u] == -2; ++q) {
        const auto x = static_cast<size_t>(queue[q]);
        for (const Edge& f : edges[x]) {
          const auto y = static_cast<size_t>(f.to);
          if (from[y] != -2 || comp[y] != comp[u]) continue;
          from[y] = static_cast<int32_t>(x);
          queue.push_back(f.to);
        }
      }
      std::vector<int32_t> path;
      for (int32_t x = static_cast<int32_t>(u); x >= 0; x = from[static_cast<size_t>(x)])
        path.push_back(x);
      std::string text = b.rules[u].name;
      for (auto it = path.rbegin(); it != path.rend(); ++it)
        text += " -> " + b.rules[static_cast<size_t>(*it)].name;
      first = static_cast<int32_t>(u);
      return text;
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
  if (!productive_rules(*this)[static_cast<size_t>(root->second)]) {
    return Status::Error("grammar: rule \"" + std::string(root_name) +
                         "\" matches no finite text (each of its alternatives needs a rule that "
                         "never ends, like x ::= \"a\" x)");
  }
  const std::vector<bool> nullable = nullable_rules(*this);
  int32_t first = -1;
  const std::string cycle = find_cycle(*this, leftmost_edges(*this, nullable), first);
  if (!cycle.empty()) {
    return Status::Error(
        grammar_position(source, rules[static_cast<size_t>(first)].defined_at) + "rule \"" +
        rules[static_cast<size_t>(first)].name +
        "\" is left-recursive (it can reach itself without matching a byte: " + cycle +
        "); write it right-recursive or with a repetition, e.g. expr ::= term (\"+\" term)*");
  }
  std::shared_ptr<Grammar> g(new Grammar());
  g->byte_sets_ = sets;
  g->root_ = root->second;
  g->source_ = std::string(source);
  g->elements_.reserve(num_elements);
  g->rule_alts_.push_back(0);
  g->rule_chain_.assign(rules.size(), -1);
  g->rule_chain_k_.assign(rules.size(), 0);
  for (size_t ri = 0; ri < rules.size(); ++ri) {
    const Rule& r = rules[ri];
    g->rule_names_.push_back(r.name);
    for (const Alt& alt : r.alts) {
      g->alt_starts_.push_back(static_cast<int32_t>(g->elements_.size()));
      g->elements_.insert(g->elements_.end(), alt.begin(), alt.end());
      g->elements_.push_back(Element{ElemKind::kEnd, 0});
      g->pos_rule_.resize(g->elements_.size(), static_cast<int32_t>(ri));
    }
    g->rule_alts_.push_back(static_cast<int32_t>(g->alt_starts_.size()));
  }
  // Chains whose x matches at least one byte per copy (see clamp_position).
  for (const Chain& c : chains) {
    if (c.x.kind == ElemKind::kRule && nullable[static_cast<size_t>(c.x.arg)]) continue;
    const auto id = static_cast<int32_t>(g->chains_.size());
    for (int32_t rule : c.rules) {
      g->rule_chain_[static_cast<size_t>(rule)] = id;
      g->rule_chain_k_[static_cast<size_t>(rule)] = rules[static_cast<size_t>(rule)].chain_k;
    }
    g->chains_.push_back(c.rules);
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

int32_t Grammar::clamp_position(int32_t pos, int32_t limit) const {
  const int32_t rule = pos_rule_[static_cast<size_t>(pos)];
  const int32_t chain = rule_chain_[static_cast<size_t>(rule)];
  if (chain < 0 || limit < 2 || rule_chain_k_[static_cast<size_t>(rule)] <= limit) return pos;
  const int32_t target = chains_[static_cast<size_t>(chain)][static_cast<size_t>(limit) - 1];
  const auto first_alt = [&](int32_t r) {
    return alt_starts_[static_cast<size_t>(rule_alts_[static_cast<size_t>(r)])];
  };
  return first_alt(target) + (pos - first_alt(rule));
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
