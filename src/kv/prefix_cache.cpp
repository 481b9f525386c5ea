#include "kv/prefix_cache.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace syv {

PrefixCache::PrefixCache(int32_t num_pages, int32_t page_size, bool enabled, int32_t lookahead)
    : page_size_(page_size),
      enabled_(enabled),
      pool_(num_pages),
      index_(num_pages, page_size, lookahead) {
  pool_.set_evict_callback([this](int32_t page) {
    if (host_ != nullptr && index_.contains(page))  // write-back
      host_->store_page(page, index_.parent_of(page), index_.key_of(page), index_.tokens_of(page));
    index_.erase(page);
  });
}

PrefixHit PrefixCache::match(const int32_t* tokens, int32_t max_tokens) const {
  PrefixHit hit;
  if (!enabled_) return hit;
  uint64_t parent = PrefixIndex::root_key();
  const int32_t n = index_.key_tokens();
  for (int32_t start = 0; start + n <= max_tokens; start += page_size_) {
    const uint64_t key = PrefixIndex::page_key(parent, tokens + start, n);
    // Device pages first; once one is missing, the rest must come from the host tier.
    const int32_t page = hit.host_pages.empty() ? index_.find(parent, key, tokens + start) : -1;
    if (page >= 0) {
      hit.pages.push_back(page);
    } else {
      const int32_t entry = host_ ? host_->find_page(parent, key, tokens + start) : -1;
      if (entry < 0) break;
      hit.host_pages.push_back(entry);
    }
    hit.keys.push_back(key);
    hit.length = start + page_size_;
    parent = key;
  }
  return hit;
}

void PrefixCache::acquire(const PrefixHit& hit) {
  for (int32_t page : hit.pages) {
    pool_.retain(page);
    mark_in_use(page);
  }
  SYV_CHECK(host_ != nullptr || (hit.host_pages.empty() && hit.host_checkpoint < 0))
      << "a hit in the host tier without a host tier";
  for (int32_t entry : hit.host_pages) host_->pin_page(entry);
  if (hit.host_checkpoint >= 0) host_->pin_checkpoint(hit.host_checkpoint);
}

LoadTicket PrefixCache::load_host_pages(const PrefixHit& hit, const std::vector<int32_t>& pages,
                                        const int32_t* tokens) {
  if (hit.host_pages.empty()) return LoadTicket{};
  const size_t first = hit.pages.size();
  SYV_CHECK(pages.size() >= first + hit.host_pages.size() &&
            hit.keys.size() == static_cast<size_t>(hit.num_pages()))
      << "host pages loaded into " << pages.size() << " pages for a hit of " << hit.num_pages()
      << " pages with " << hit.keys.size() << " keys";
  const int32_t n = index_.key_tokens();
  const std::vector<int32_t> loaded(
      pages.begin() + static_cast<std::ptrdiff_t>(first),
      pages.begin() + static_cast<std::ptrdiff_t>(first + hit.host_pages.size()));
  CopyEvent event = host_->load_pages(hit.host_pages, loaded);  // one batch, one event
  for (size_t i = 0; i < hit.host_pages.size(); ++i) {
    const size_t idx = first + i;
    const uint64_t parent = idx == 0 ? PrefixIndex::root_key() : hit.keys[idx - 1];
    const int32_t* page_tokens = tokens + idx * static_cast<size_t>(page_size_);
    SYV_CHECK_EQ(PrefixIndex::page_key(parent, page_tokens, n), hit.keys[idx])
        << "host page " << hit.host_pages[i] << " loaded for other tokens";
    insert(parent, page_tokens, pages[idx]);
    host_entry_of_[static_cast<size_t>(pages[idx])] = hit.host_pages[i];  // a hint: it holds it
    host_->unpin_page(hit.host_pages[i]);
  }
  // The host entries stay busy (not reused by a write-back) until the load settles.
  return host_->loads().add(std::move(event), loaded, -1, hit.host_pages);
}

bool PrefixCache::plan_write_ahead(int32_t page) {
  const uint64_t key = index_.key_of(page);
  int32_t& entry = host_entry_of_[static_cast<size_t>(page)];
  if (entry < 0 || !host_->holds_page(entry, key)) {
    entry = host_->find_page(index_.parent_of(page), key, index_.tokens_of(page));
  }
  if (entry >= 0) {
    held_.push_back(entry);
    return false;
  }
  ahead_.push_back({page, index_.parent_of(page), key, index_.tokens_of(page)});
  return true;
}

int32_t PrefixCache::write_ahead(int32_t pages, int32_t max_in_use) {
  if (host_ == nullptr) return 0;
  ahead_.clear();
  held_.clear();  // host entries of the window's pages stored already
  int32_t left = pages - pool_.num_free();
  for (int32_t page = pool_.lru_oldest(); page >= 0 && left > 0;
       page = pool_.lru_newer(page), --left) {
    if (index_.contains(page)) plan_write_ahead(page);
  }
  // Under pressure: the newest registered pages in use, as many as the window lacks.
  int32_t short_by = pages - pool_.num_available();
  int32_t copies_left =
      std::min(max_in_use, pages - static_cast<int32_t>(ahead_.size()));  // <= pages in all
  for (int32_t page = in_use_.newest(); page >= 0 && short_by > 0 && copies_left > 0;) {
    const int32_t older = in_use_.older(page);
    if (pool_.refcount(page) == 0 || !index_.contains(page)) {
      in_use_.remove(page);  // released (cached: the LRU's, above) or evicted since
    } else {
      --short_by;
      copies_left -= plan_write_ahead(page);
    }
    page = older;
  }
  if (ahead_.empty()) return 0;
  // The host copies are the ones the evictions will want: keep them fresh, so that the batch's
  // entries are taken from older ones.
  for (int32_t entry : held_) host_->touch_page(entry);
  return host_->store_pages_ahead(ahead_, held_);
}

void PrefixCache::mark_in_use(int32_t page) {
  if (host_ == nullptr) return;
  if (in_use_.contains(page)) in_use_.remove(page);
  in_use_.push_newest(page);
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
    mark_in_use(page);
  }
  return key;
}

std::string PrefixCache::check_integrity() const {
  std::string err = pool_.check_integrity();
  if (!err.empty()) return "page pool: " + err;
  err = index_.check_integrity();
  if (!err.empty()) return "prefix index: " + err;
  if (host_ != nullptr) {
    err = host_->check_integrity();
    if (!err.empty()) return err;
  }
  for (int32_t p = 0; p < pool_.num_pages(); ++p) {
    if (pool_.is_cached(p) != index_.contains(p)) {
      std::ostringstream out;
      out << "page " << p << " cached flag " << pool_.is_cached(p) << " but indexed "
          << index_.contains(p);
      return out.str();
    }
  }
  return host_ != nullptr ? check_in_use() : "";
}

std::string PrefixCache::check_in_use() const {
  std::string err = in_use_.check_integrity("in-use list");
  if (!err.empty()) return err;
  for (int32_t p = 0; p < pool_.num_pages(); ++p) {
    if (!in_use_.contains(p) && index_.contains(p) && pool_.refcount(p) > 0)
      return "registered page " + std::to_string(p) + " in use is not on the in-use list";
  }
  return "";
}

}  // namespace syv
