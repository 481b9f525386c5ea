#include "kv/prefix_cache.h"

#include <sstream>

#include "core/check.h"

namespace syv {

PrefixCache::PrefixCache(int32_t num_pages, int32_t page_size, bool enabled, int32_t lookahead)
    : page_size_(page_size),
      enabled_(enabled),
      pool_(num_pages),
      index_(num_pages, page_size, lookahead) {
  pool_.set_evict_callback([this](int32_t page) { index_.erase(page); });
}

PrefixHit PrefixCache::match(const int32_t* tokens, int32_t max_tokens) const {
  PrefixHit hit;
  if (!enabled_) return hit;
  uint64_t parent = PrefixIndex::root_key();
  const int32_t n = index_.key_tokens();
  for (int32_t start = 0; start + n <= max_tokens; start += page_size_) {
    const uint64_t key = PrefixIndex::page_key(parent, tokens + start, n);
    const int32_t page = index_.find(parent, key, tokens + start);
    if (page < 0) break;
    hit.pages.push_back(page);
    hit.keys.push_back(key);
    hit.length = start + page_size_;
    parent = key;
  }
  return hit;
}

void PrefixCache::acquire(const PrefixHit& hit) {
  for (int32_t page : hit.pages) pool_.retain(page);
}

int32_t PrefixCache::num_evictable(const PrefixHit& hit) const {
  int32_t n = 0;
  for (int32_t page : hit.pages) n += pool_.refcount(page) == 0;
  return n;
}

uint64_t PrefixCache::insert(uint64_t parent, const int32_t* tokens, int32_t page) {
  const uint64_t key = PrefixIndex::page_key(parent, tokens, index_.key_tokens());
  SYV_CHECK(pool_.refcount(page) > 0) << "insert of unretained page " << page;
  if (enabled_ && !index_.contains(page) && index_.insert(parent, key, tokens, page)) {
    pool_.set_cached(page, true);
  }
  return key;
}

std::string PrefixCache::check_integrity() const {
  std::string err = pool_.check_integrity();
  if (!err.empty()) return "page pool: " + err;
  err = index_.check_integrity();
  if (!err.empty()) return "prefix index: " + err;
  for (int32_t p = 0; p < pool_.num_pages(); ++p) {
    if (pool_.is_cached(p) != index_.contains(p)) {
      std::ostringstream out;
      out << "page " << p << " cached flag " << pool_.is_cached(p) << " but indexed "
          << index_.contains(p);
      return out.str();
    }
  }
  return "";
}

}  // namespace syv
