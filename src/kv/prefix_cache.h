// The page pool plus the prefix index: what the scheduler allocates from and looks prefixes up in.
//
// Lifecycle of a full page: a sequence allocates it, fills it, and registers it (insert) once all
// of its tokens' K/V are written. When the last sequence releases it, it stays in the pool's LRU
// as "cached" and a later match() can revive it; when the pool runs out of free pages, allocate()
// evicts the least recently released cached page and the index forgets it.
//
// Hybrid models: a hit also needs a recurrent-state checkpoint at the hit boundary. match() knows
// nothing of checkpoints; the engine's HybridState (engine/hybrid_state.h) shortens the hit to the
// longest boundary with a stored checkpoint and sets `checkpoint`. Dense models leave it -1.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/page_pool.h"
#include "kv/prefix_index.h"

namespace syv {

struct PrefixHit {
  std::vector<int32_t> pages;  // cached pages covering tokens [0, length), in order
  std::vector<uint64_t> keys;  // their chain keys (a sequence continues the chain from keys.back())
  int32_t length = 0;          // tokens covered; a multiple of the page size
  int32_t checkpoint = -1;     // hybrid models: state snapshot at `length` (-1: none / dense)
};

class PrefixCache {
 public:
  // enabled = false: match() always misses and insert() registers nothing (keys still chain).
  // lookahead: tokens after a page its key also covers (prefix_index.h; 1 with an MTP head).
  PrefixCache(int32_t num_pages, int32_t page_size, bool enabled, int32_t lookahead = 0);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t page_size() const { return page_size_; }
  int32_t lookahead() const { return index_.lookahead(); }
  bool enabled() const { return enabled_; }
  PagePool& pool() { return pool_; }
  const PagePool& pool() const { return pool_; }
  const PrefixIndex& index() const { return index_; }

  // Longest cached prefix of tokens[0, max_tokens), in whole pages (each followed by its
  // lookahead tokens within max_tokens). The pages are NOT retained:
  // call acquire() before anything else allocates from the pool (allocation may evict them).
  PrefixHit match(const int32_t* tokens, int32_t max_tokens) const;
  // Retains every page of the hit (cached pages leave the LRU).
  void acquire(const PrefixHit& hit);
  // How many of the hit's pages sit in the LRU (they stop being available once acquired).
  int32_t num_evictable(const PrefixHit& hit) const;

  // Registers `page` (retained by the caller, all page_size tokens' K/V written) as holding
  // `tokens` (page_size, then the lookahead tokens that follow) after the prefix keyed `parent`.
  // Returns the page's chain key whether or not it was registered (an identical page may already be
  // cached; then this one stays private).
  uint64_t insert(uint64_t parent, const int32_t* tokens, int32_t page);

  // Pool and index integrity, and that exactly the registered pages are marked cached.
  std::string check_integrity() const;

 private:
  int32_t page_size_;
  bool enabled_;
  PagePool pool_;
  PrefixIndex index_;
};

}  // namespace syv
