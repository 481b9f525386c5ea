#include "grammar/token_masks.h"

#include "core/check.h"

namespace syv::grammar {

GrammarSession::GrammarSession(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenTrie> trie, size_t max_bytes)
    : trie_(std::move(trie)), automaton_(std::move(grammar)), max_bytes_(max_bytes) {
  SYV_CHECK(trie_ != nullptr) << "null token trie";
}

void GrammarSession::trim() {
  const size_t mask_bytes = masks_.size() * static_cast<size_t>(mask_words()) * sizeof(uint64_t);
  if (automaton_.memory_bytes() + mask_bytes <= max_bytes_) return;
  masks_.clear();
  canonical_.clear();
  automaton_.reset();
}

ConfigId GrammarSession::canonical(ConfigId c) {
  if (!automaton_.grammar().has_bounded_repetitions()) return c;
  auto it = canonical_.find(c);
  if (it != canonical_.end()) return it->second;
  Stacks s = automaton_.export_stacks(c);
  bool changed = false;
  const int32_t limit = trie_->max_depth() + 1;
  for (auto& stack : s.stacks) {
    for (int32_t& pos : stack) {
      const int32_t clamped = automaton_.grammar().clamp_position(pos, limit);
      changed = changed || clamped != pos;
      pos = clamped;
    }
  }
  const ConfigId out = changed ? automaton_.import_stacks(s) : c;
  canonical_.emplace(c, out);
  return out;
}

const std::vector<uint64_t>& GrammarSession::mask(ConfigId config) {
  SYV_CHECK(config >= 0) << "mask of a dead configuration";
  const ConfigId c = canonical(config);
  auto it = masks_.find(c);
  if (it != masks_.end()) return it->second;
  ++masks_computed_;
  std::vector<uint64_t> bits(static_cast<size_t>(mask_words()), 0);
  const auto& nodes = trie_->nodes();
  const auto& ids = trie_->token_ids();
  walk_.assign(static_cast<size_t>(trie_->max_depth()) + 1, kDead);
  walk_[0] = c;
  const int32_t n = static_cast<int32_t>(nodes.size());
  if (automaton_.can_continue(c)) {
    for (int32_t i = 1; i < n;) {
      const TokenTrie::Node& node = nodes[static_cast<size_t>(i)];
      const ConfigId next = automaton_.step(walk_[node.depth - 1u], node.byte);
      if (next == kDead) {
        i = node.end;
        continue;
      }
      for (int32_t k = node.tok_begin; k < node.tok_end; ++k) {
        const auto t = static_cast<uint32_t>(ids[static_cast<size_t>(k)]);
        bits[t >> 6] |= uint64_t{1} << (t & 63);
      }
      if (!automaton_.can_continue(next)) {
        i = node.end;
        continue;
      }
      walk_[node.depth] = next;
      ++i;
    }
  }
  auto& slot = masks_.emplace(c, std::move(bits)).first->second;
  if (config != c) masks_.emplace(config, slot);  // a copy: the next lookup skips canonical()
  return masks_.find(config)->second;
}

}  // namespace syv::grammar
