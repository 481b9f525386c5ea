// Content-addressed index of full KV pages: key = xxHash3(page's token ids, seed = parent's key),
// chained from root_key(), so a key stands for the whole prefix up to the page's end. A lookup
// compares the stored parent key and token ids as well, so a hash collision can never serve wrong
// KV: it is a miss.
//
// Lookahead (models with an MTP head, engine/mtp_drafter.h): a page's key also covers the
// `lookahead` tokens after it, because what the page holds at its last positions depends on them
// (the MTP head's K/V of position p is computed from token p + 1). Such a page is found only by a
// prefix that continues with the same tokens.
//
// The index only maps keys to page ids; whether those pages are kept alive is the pool's business
// (prefix_cache.h ties the two together). Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace syv {

class PrefixIndex {
 public:
  PrefixIndex(int32_t num_pages, int32_t page_size, int32_t lookahead = 0);

  // Key of the empty prefix (the parent of a sequence's first page).
  static constexpr uint64_t root_key() { return 0x5359565f524f4f54ull; }  // "SYV_ROOT"
  // Key of the page holding tokens[0, n) after the prefix keyed `parent`.
  static uint64_t page_key(uint64_t parent, const int32_t* tokens, int32_t n);

  int32_t page_size() const { return page_size_; }
  int32_t lookahead() const { return lookahead_; }
  // Tokens a key covers: the page's page_size, then `lookahead` more.
  int32_t key_tokens() const { return page_size_ + lookahead_; }
  int32_t size() const { return static_cast<int32_t>(by_key_.size()); }

  // The page registered under `key` whose parent key and key_tokens() tokens equal these, or -1.
  int32_t find(uint64_t parent, uint64_t key, const int32_t* tokens) const;
  // Registers `page` (not yet registered) as holding `tokens` (key_tokens() of them) after
  // `parent`. Returns
  // false (and registers nothing) when the key is already taken by another page.
  bool insert(uint64_t parent, uint64_t key, const int32_t* tokens, int32_t page);
  // Forgets `page` if registered (eviction).
  void erase(int32_t page);
  bool contains(int32_t page) const { return registered_[page]; }
  // A registered page's key, parent key and key_tokens() tokens (the host tier stores them).
  uint64_t key_of(int32_t page) const { return key_[static_cast<size_t>(page)]; }
  uint64_t parent_of(int32_t page) const { return parent_[static_cast<size_t>(page)]; }
  const int32_t* tokens_of(int32_t page) const {
    return &tokens_[static_cast<size_t>(page) * static_cast<size_t>(key_tokens())];
  }

  // Each key maps to a registered page with that key; each registered page is mapped; every key
  // equals the hash of its parent and tokens. "" when sound.
  std::string check_integrity() const;

 private:
  int32_t page_size_;
  int32_t lookahead_;
  std::unordered_map<uint64_t, int32_t> by_key_;
  std::vector<bool> registered_;  // [num_pages]
  std::vector<uint64_t> key_;     // [num_pages]
  std::vector<uint64_t> parent_;  // [num_pages]
  std::vector<int32_t> tokens_;   // [num_pages * key_tokens()]
};

}  // namespace syv
