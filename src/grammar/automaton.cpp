#include "grammar/automaton.h"

#include <algorithm>

#include "core/check.h"

namespace syv::grammar {

size_t Automaton::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ v.size();
  for (int32_t x : v) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(x)) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
  }
  return static_cast<size_t>(h);
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  SYV_CHECK(grammar_ != nullptr) << "null grammar";
}

void Automaton::reset() {
  nodes_.clear();
  node_index_.clear();
  configs_.clear();
  config_index_.clear();
  transitions_.clear();
  initial_ = kDead;
  ++generation_;
}

size_t Automaton::memory_bytes() const {
  size_t bytes = nodes_.size() * (sizeof(Node) + 32) + transitions_.size() * sizeof(int32_t);
  for (const Config& c : configs_)
    bytes += sizeof(Config) + 2 * c.tops.size() * sizeof(int32_t) + 64;
  return bytes;
}

int32_t Automaton::node(int32_t pos, int32_t parent) {
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = node_index_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({pos, parent});
  return it->second;
}

void Automaton::expand(int32_t pos, int32_t parent) {
  const auto& elems = grammar_->elements();
  const auto& rule_alts = grammar_->rule_alts();
  const auto& alt_starts = grammar_->alt_starts();
  work_.clear();
  seen_.clear();
  work_.push_back({pos, parent});
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    // Each (position, parent) is expanded once per call: without left recursion the expansion
    // terminates anyway, this bounds it for grammars with many empty-matching paths.
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(p)) << 32) | static_cast<uint32_t>(par);
    if (!seen_.insert(key).second) continue;
    const Element& e = elems[static_cast<size_t>(p)];
    switch (e.kind) {
      case ElemKind::kBytes:
        scratch_tops_.push_back(node(p, par));
        break;
      case ElemKind::kEnd:
        if (par < 0) {
          scratch_accept_ = true;
        } else {
          const Node n = nodes_[static_cast<size_t>(par)];
          work_.push_back({n.pos, n.parent});
        }
        break;
      case ElemKind::kRule: {
        // Tail call: nothing follows the reference in its alternative, so the rule returns
        // straight to our parent (keeps `x ::= y x |` repetitions from growing the stack).
        const int32_t cont =
            elems[static_cast<size_t>(p) + 1].kind == ElemKind::kEnd ? par : node(p + 1, par);
        for (int32_t a = rule_alts[static_cast<size_t>(e.arg)];
             a < rule_alts[static_cast<size_t>(e.arg) + 1]; ++a)
          work_.push_back({alt_starts[static_cast<size_t>(a)], cont});
        break;
      }
    }
  }
}

ConfigId Automaton::intern(std::vector<int32_t>& tops, bool accept) {
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  if (tops.empty() && !accept) return kDead;
  if (accept) tops.push_back(-2);
  auto it = config_index_.find(tops);
  if (it != config_index_.end()) return it->second;
  const ConfigId id = static_cast<ConfigId>(configs_.size());
  config_index_.emplace(tops, id);
  if (accept) tops.pop_back();
  configs_.push_back(Config{tops, accept});
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return id;
}

ConfigId Automaton::initial() {
  if (initial_ != kDead) return initial_;
  scratch_tops_.clear();
  scratch_accept_ = false;
  const int32_t root = grammar_->root();
  const auto& rule_alts = grammar_->rule_alts();
  for (int32_t a = rule_alts[static_cast<size_t>(root)];
       a < rule_alts[static_cast<size_t>(root) + 1]; ++a)
    expand(grammar_->alt_starts()[static_cast<size_t>(a)], -1);
  initial_ = intern(scratch_tops_, scratch_accept_);
  return initial_;
}

ConfigId Automaton::compute_step(ConfigId c, uint8_t byte) {
  const auto& elems = grammar_->elements();
  const auto& sets = grammar_->byte_sets();
  scratch_tops_.clear();
  scratch_accept_ = false;
  // configs_ may grow (and move) below only through intern(), after the loop.
  const std::vector<int32_t> tops = configs_[static_cast<size_t>(c)].tops;
  for (int32_t top : tops) {
    const Node n = nodes_[static_cast<size_t>(top)];
    const Element& e = elems[static_cast<size_t>(n.pos)];
    if (sets[static_cast<size_t>(e.arg)].has(byte)) expand(n.pos + 1, n.parent);
  }
  return intern(scratch_tops_, scratch_accept_);
}

Stacks Automaton::export_stacks(ConfigId c) const {
  Stacks s;
  const Config& config = configs_[static_cast<size_t>(c)];
  s.accept = config.accept;
  for (int32_t top : config.tops) {
    std::vector<int32_t> stack;
    for (int32_t n = top; n >= 0; n = nodes_[static_cast<size_t>(n)].parent)
      stack.push_back(nodes_[static_cast<size_t>(n)].pos);
    std::reverse(stack.begin(), stack.end());
    s.stacks.push_back(std::move(stack));
  }
  return s;
}

ConfigId Automaton::import_stacks(const Stacks& s) {
  std::vector<int32_t> tops;
  for (const auto& stack : s.stacks) {
    int32_t parent = -1;
    for (int32_t pos : stack) parent = node(pos, parent);
    if (parent >= 0) tops.push_back(parent);
  }
  return intern(tops, s.accept);
}

}  // namespace syv::grammar
