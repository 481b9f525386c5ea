// Token masks of one grammar over one vocabulary: for a configuration of the grammar's automaton,
// the tokens whose whole byte string keeps some stack alive (or ends the sentence).
//
// A mask is computed by walking the token trie once, stepping the automaton per trie node (each
// step memoized, automaton.h) and skipping the subtree of every refused prefix; it is then kept
// per configuration, so a configuration seen again (the inside of a string, the same place in a
// schema, another request with the same grammar) costs a lookup. Stop tokens are not part of a
// mask: the caller allows them where Automaton::accepting() says the sentence may end.
//
// Bounded repetitions far from their bound share masks: a configuration is first canonicalized
// (Grammar::clamp_position with the longest token + 1: `char{0,400}` with 300 left behaves like
// any other count above that for every token), and masks are cached by the canonical form.
//
// Memory is bounded: past `max_bytes` (automaton + cached masks) everything is forgotten and the
// automaton's generation moves on (Matcher re-imports its stacks). Not thread-safe: one owner
// thread (the engine's).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/token_trie.h"

namespace syv::grammar {

class GrammarSession {
 public:
  GrammarSession(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 size_t max_bytes = size_t{256} << 20);

  Automaton& automaton() { return automaton_; }
  const TokenTrie& trie() const { return *trie_; }
  int32_t mask_words() const { return (trie_->vocab_size() + 63) / 64; }
  // Bit t (word t / 64, bit t % 64) set when token t may come next in configuration `c` (not
  // kDead). Valid until the next call on this session.
  const std::vector<uint64_t>& mask(ConfigId c);
  // Resets when over the memory bound; call only between matcher operations.
  void trim();

  size_t masks_computed() const { return masks_computed_; }
  size_t masks_cached() const { return masks_.size(); }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  Automaton automaton_;
  size_t max_bytes_;
  ConfigId canonical(ConfigId c);

  std::unordered_map<ConfigId, std::vector<uint64_t>> masks_;
  std::unordered_map<ConfigId, ConfigId> canonical_;  // configuration -> its canonical form
  std::vector<ConfigId> walk_;                        // configuration at each trie depth
  size_t masks_computed_ = 0;
};

}  // namespace syv::grammar
