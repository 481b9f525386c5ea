// The pushdown recogniser of a Grammar, built lazily into a DFA over "configurations".
//
// A stack is a list of element positions, bottom first; its top is always a kBytes element (the
// next byte it can take), the positions below are where to continue once the rule above ends
// (llama.cpp's stacks). A configuration is the set of stacks alive after some input, plus
// whether some stack has ended (the input so far is a sentence of the grammar). Stacks are stored
// as interned (position, parent) nodes, so equal stacks are equal ids and a configuration is a
// sorted list of node ids, interned to a ConfigId.
//
// step(c, byte) is memoized per (configuration, byte): a mask computation that walks the token
// trie (token_masks.h) revisits the same configurations thousands of times, and a memoized step is
// one array load. Configurations are never freed; memory_bytes() tells the owner when to reset()
// (which bumps generation(): ids from an older generation are meaningless; a Matcher keeps its
// stacks to re-import them).
//
// Not thread-safe: one owner thread (the engine's).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"

namespace syv::grammar {

using ConfigId = int32_t;
constexpr ConfigId kDead = -1;  // no stack alive and not accepting: nothing matches

// A configuration in plain form (bottom-first position lists), to survive a reset().
struct Stacks {
  std::vector<std::vector<int32_t>> stacks;
  bool accept = false;
};

class Automaton {
 public:
  explicit Automaton(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  // The configuration before any input.
  ConfigId initial();
  // The configuration after `byte`, kDead when no stack takes it.
  ConfigId step(ConfigId c, uint8_t byte) {
    const size_t i = static_cast<size_t>(c) * 256 + byte;
    if (transitions_[i] == kUnknown) {
      const ConfigId next = compute_step(c, byte);  // may grow transitions_
      transitions_[i] = next;
    }
    return transitions_[i];
  }
  // Some stack has ended: the input so far is a complete sentence.
  bool accepting(ConfigId c) const { return configs_[static_cast<size_t>(c)].accept; }
  // Some stack can take another byte.
  bool can_continue(ConfigId c) const { return !configs_[static_cast<size_t>(c)].tops.empty(); }

  Stacks export_stacks(ConfigId c) const;
  ConfigId import_stacks(const Stacks& s);

  uint64_t generation() const { return generation_; }
  size_t num_configs() const { return configs_.size(); }
  size_t memory_bytes() const;
  // Forgets every configuration and node (ids of the old generation become invalid).
  void reset();

 private:
  static constexpr int32_t kUnknown = -2;
  struct Node {
    int32_t pos;     // element position
    int32_t parent;  // node below, -1 at the bottom
  };
  struct Config {
    std::vector<int32_t> tops;  // sorted node ids whose position is a kBytes element
    bool accept = false;
  };
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  int32_t node(int32_t pos, int32_t parent);
  // Expands (pos, parent) to kBytes tops, into scratch_tops_ / scratch_accept_.
  void expand(int32_t pos, int32_t parent);
  ConfigId compute_step(ConfigId c, uint8_t byte);
  ConfigId intern(std::vector<int32_t>& tops, bool accept);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;
  std::vector<Config> configs_;
  std::unordered_map<std::vector<int32_t>, ConfigId, VecHash> config_index_;  // accept as -2 tail
  std::vector<int32_t> transitions_;                                          // [configs * 256]
  ConfigId initial_ = kDead;
  uint64_t generation_ = 0;
  // scratch
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::unordered_set<uint64_t> seen_;
  std::vector<int32_t> scratch_tops_;
  bool scratch_accept_ = false;
};

}  // namespace syv::grammar
