// The engine's side of structured outputs (SamplingParams::grammar): the vocabulary as a token
// trie, built once from the tokenizer on the first constrained request, and one GrammarSession
// (grammar/token_masks.h: the grammar's automaton and its cached token masks) per grammar,
// shared by every request that carries the same compiled Grammar (the server hands identical
// requests the same one), kept for the most recently used `max_sessions` grammars.
//
// Which tokens a grammar may produce: every id with bytes except the tokenizer's added tokens
// (<|im_end|>, <think>, <tool_call> ...: the server's reasoning and tool-call parsers would act on
// them; the text they spell is still reachable through ordinary tokens). The stop ids are allowed
// by fill_allowed() where the grammar's sentence is complete.
//
// Engine thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "grammar/matcher.h"

namespace syv {

class Tokenizer;

class GrammarSessions {
 public:
  GrammarSessions(const Tokenizer& tokenizer, size_t max_sessions = 8,
                  size_t max_bytes_per_session = size_t{32} << 20);

  // The session of `g` (created, and the trie built, on first use).
  std::shared_ptr<grammar::GrammarSession> session(
      const std::shared_ptr<const grammar::Grammar>& g);

  // Seconds the trie took to build (0 before the first session).
  double trie_seconds() const { return trie_seconds_; }

 private:
  const Tokenizer& tokenizer_;
  size_t max_sessions_;
  size_t max_bytes_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  double trie_seconds_ = 0;
  // Most recently used first.
  std::list<
      std::pair<std::shared_ptr<const grammar::Grammar>, std::shared_ptr<grammar::GrammarSession>>>
      sessions_;
};

// The tokens `matcher` allows next, as SamplerState::allowed words for a `vocab`-sized logits
// row: the grammar's mask, plus `stop_ids` where the sentence is complete. When that leaves
// nothing (a grammar that can match nothing more), the stop ids alone: the sample ends.
void fill_allowed(grammar::Matcher& matcher, const std::vector<int32_t>& stop_ids, int32_t vocab,
                  std::vector<uint64_t>& allowed);

}  // namespace syv
