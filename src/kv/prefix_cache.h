// The page pool plus the prefix index: what the scheduler allocates from and looks prefixes up in.
//
// Lifecycle of a full page: a sequence allocates it, fills it, and registers it (insert) once all
// of its tokens' K/V are written. When the last sequence releases it, it stays in the pool's LRU
// as "cached" and a later match() can revive it; when the pool runs out of free pages, allocate()
// evicts the least recently released cached page and the index forgets it.
//
// Host tier (kv/host_tier.h, set_host_tier): a page the pool evicts is first written back to the
// host tier, and match() continues past the last device page into the host tier; acquire() pins
// the hit's host entries and load_host_pages() enqueues their copies into the sequence's new
// device pages and registers those pages at once: until the load settles (kv/inflight_loads.h)
// they are in flight, and a hit on them must wait for it (the Scheduler does).
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

#include "kv/host_tier.h"
#include "kv/id_list.h"
#include "kv/page_pool.h"
#include "kv/prefix_index.h"

namespace syv {

struct PrefixHit {
  // Tokens [0, length) are covered by `pages` (device pages, in order), then by `host_pages`
  // (host-tier entries of the pages after them, in order). length = (pages + host_pages) x page
  // size.
  std::vector<int32_t> pages;
  std::vector<int32_t> host_pages;
  std::vector<uint64_t> keys;  // chain keys of all of them (a sequence continues from keys.back())
  int32_t length = 0;          // tokens covered; a multiple of the page size
  // Hybrid models: the state snapshot at `length`, a device checkpoint or else a host-tier
  // checkpoint (-1: none / dense).
  int32_t checkpoint = -1;
  int32_t host_checkpoint = -1;
  int32_t num_pages() const { return static_cast<int32_t>(pages.size() + host_pages.size()); }
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

  // The host tier evicted pages are written back to and matched in (null: none). Set once,
  // before the first allocation; it must outlive the cache.
  void set_host_tier(HostTier* host) {
    host_ = host;
    host_entry_of_.assign(static_cast<size_t>(pool_.num_pages()), -1);
    in_use_ = IdList(pool_.num_pages());
  }
  HostTier* host_tier() const { return host_; }

  // Longest cached prefix of tokens[0, max_tokens), in whole pages (each followed by its
  // lookahead tokens within max_tokens): device pages, then host-tier pages. Nothing is retained:
  // call acquire() before anything else allocates from the pool (allocation may evict them).
  PrefixHit match(const int32_t* tokens, int32_t max_tokens) const;
  // Retains every device page of the hit (cached pages leave the LRU) and pins its host pages and
  // host checkpoint, so allocations cannot evict them before they are loaded.
  void acquire(const PrefixHit& hit);
  // After acquire() and the allocation of the sequence's pages: enqueues the copy of each host
  // page of the hit into pages[hit.pages.size() + i], registers it under its key (`tokens`: the
  // sequence's) and unpins it. Returns the load, recorded in the host tier's loads() with the host
  // entries it reads, which no write-back reuses until it settles (kv/host_tier.h "Copies"; the
  // empty ticket when the hit has no host page or the copies were synchronous). The host
  // checkpoint stays pinned (HybridState::admit loads and unpins it).
  LoadTicket load_host_pages(const PrefixHit& hit, const std::vector<int32_t>& pages,
                             const int32_t* tokens);
  // How many of the hit's pages sit in the LRU (they stop being available once acquired).
  int32_t num_evictable(const PrefixHit& hit) const;

  // Registers `page` (retained by the caller, all page_size tokens' K/V written) as holding
  // `tokens` (page_size, then the lookahead tokens that follow) after the prefix keyed `parent`.
  // Returns the page's chain key whether or not it was registered (an identical page may already be
  // cached; then this one stays private).
  uint64_t insert(uint64_t parent, const int32_t* tokens, int32_t page);

  // Between steps, with a host tier: copies the cached pages that the next `pages` allocations
  // would evict (the pool's free pages go first, then the LRU's oldest) to the host tier now, as
  // one batch that nothing waits for, unless the tier holds them already. When allocate() later
  // evicts such a page its write-back is already done (HostTier::store_page finds the key), so the
  // step that evicts it does not wait for a copy (kv/host_tier.h "Write-ahead").
  // Under pressure (the free and cached pages are fewer than `pages`: some of those allocations
  // would have to wait for pages in use now to be released, and would then evict them) the same
  // batch also copies registered pages still in use (a running sequence's, immutable once
  // registered, so the copy is final): of the newest `pages - pool().num_available()` of them (by
  // registration or revival: a released sequence's tail is evicted first), those the tier does
  // not hold, at most `max_in_use` a call and never more than `pages` copied in all. A sequence
  // that ends under pressure thus releases pages the tier holds already, instead of a window's
  // worth to copy at once, which the allocation evicting them would wait for. When some are copied,
  // those the tier holds already are refreshed in its LRU first (so that storing the others does
  // not evict them). Called after every step: a page's host entry, once found, is remembered
  // (host_entry_of_), so a window the tier holds whole costs a key compare a page. Returns the
  // pages copied.
  int32_t write_ahead(int32_t pages, int32_t max_in_use = 0);

  // Pool, index and host tier integrity, that exactly the registered pages are marked cached and,
  // with a host tier, that the in-use list is sound and holds every registered page in use.
  std::string check_integrity() const;

 private:
  int32_t page_size_;
  bool enabled_;
  PagePool pool_;
  PrefixIndex index_;
  HostTier* host_ = nullptr;
  // Per device page: the host page entry last found holding its key (-1: none known). A hint
  // for write_ahead(), checked against the entry's key before use (HostTier::holds_page).
  std::vector<int32_t> host_entry_of_;
  // With a host tier: the registered pages in use (write_ahead() under pressure), oldest
  // registration or revival first. It holds every registered page with a reference and, until
  // write_ahead() walks past them, pages released or evicted since (it unlinks those).
  IdList in_use_;
  std::vector<HostTier::AheadPage> ahead_;  // write_ahead()'s lists, reused
  std::vector<int32_t> held_;

  // Lists a registered `page` for write_ahead(): in ahead_ to copy, or in held_ (its entry) when
  // the host tier holds it. Returns whether it was listed to copy.
  bool plan_write_ahead(int32_t page);
  // Links `page` (registered, in use) as the in-use list's newest; no-op without a host tier.
  void mark_in_use(int32_t page);
  std::string check_in_use() const;
};

}  // namespace syv
