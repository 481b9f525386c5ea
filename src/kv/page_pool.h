// A pool of fixed-size KV pages identified by ids [0, num_pages), with reference counts.
//
// Every page is in exactly one of three states:
//   free    refcount 0, holds nothing worth keeping        (on the free list)
//   used    refcount > 0, mapped by at least one sequence
//   cached  refcount 0, but holds a full page registered in the prefix index (on the LRU list;
//           reusable by a prefix hit, evicted oldest-first when the free list is empty)
// A page is "cached" only while it is registered (set_cached(true)); registration is the prefix
// cache's business (prefix_cache.h). Evicting a cached page calls the eviction callback first so
// the index can forget it.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kv/id_list.h"

namespace syv {

class PagePool {
 public:
  explicit PagePool(int32_t num_pages);

  int32_t num_pages() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return num_free_; }      // empty pages
  int32_t num_cached() const { return num_cached_; }  // evictable pages with a cached prefix
  int32_t num_used() const { return num_pages() - num_free_ - num_cached_; }
  // Pages allocate() can hand out right now (free + evictable).
  int32_t num_available() const { return num_free_ + num_cached_; }

  // Called with a cached page's id just before allocate() reuses it.
  void set_evict_callback(std::function<void(int32_t)> callback) {
    on_evict_ = std::move(callback);
  }

  // A page with refcount 1: a free one if any, else the least recently released cached page
  // (evicted). Returns -1 when nothing is available.
  int32_t allocate();
  // refcount += 1. A cached page with refcount 0 leaves the LRU (a prefix hit revives it).
  void retain(int32_t page);
  // refcount -= 1 (must be > 0). At 0 the page goes to the LRU tail if cached, else to the free
  // list.
  void release(int32_t page);

  // The cached pages allocate() evicts first, oldest first: lru_oldest(), then lru_newer() of
  // each (-1 past the newest). Not to be changed while walking.
  int32_t lru_oldest() const { return lru_.oldest(); }
  int32_t lru_newer(int32_t page) const { return lru_.newer(page); }

  int32_t refcount(int32_t page) const { return refcount_[page]; }
  bool is_cached(int32_t page) const { return cached_[page]; }
  // Marks a used page as holding a registered prefix (true) or not (false). A cached page with
  // refcount 0 that is unmarked moves to the free list.
  void set_cached(int32_t page, bool cached);

  // Verifies counts, list membership and link consistency. Returns "" when sound, else a
  // description of the first problem.
  std::string check_integrity() const;

 private:
  std::vector<int32_t> refcount_;
  std::vector<bool> cached_;
  std::vector<int32_t> free_list_;  // stack of free page ids
  std::vector<bool> on_free_list_;
  IdList lru_;  // cached pages with refcount 0, least recently released first
  int32_t num_free_ = 0, num_cached_ = 0;
  std::function<void(int32_t)> on_evict_;
};

}  // namespace syv
