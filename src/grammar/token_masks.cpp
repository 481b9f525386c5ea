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
  automaton_.reset();
}

const std::vector<uint64_t>& GrammarSession::mask(ConfigId c) {
  SYV_CHECK(c >= 0) << "mask of a dead configuration";
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
  return masks_.emplace(c, std::move(bits)).first->second;
}

}  // namespace syv::grammar
