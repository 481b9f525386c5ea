#include "kv/page_pool.h"

#include <sstream>

#include "core/check.h"

namespace syv {

PagePool::PagePool(int32_t num_pages)
    : refcount_(num_pages, 0),
      cached_(num_pages, false),
      on_free_list_(num_pages, true),
      lru_(num_pages),
      num_free_(num_pages) {
  SYV_CHECK_GE(num_pages, 0) << "page pool size";
  free_list_.reserve(num_pages);
  // Stack: hand out low ids first (easier to read in tests and dumps).
  for (int32_t p = num_pages - 1; p >= 0; --p) free_list_.push_back(p);
}

int32_t PagePool::allocate() {
  int32_t page = -1;
  if (!free_list_.empty()) {
    page = free_list_.back();
    free_list_.pop_back();
    on_free_list_[page] = false;
    --num_free_;
  } else if (!lru_.empty()) {
    page = lru_.oldest();
    lru_.remove(page);
    --num_cached_;
    if (on_evict_) on_evict_(page);
    cached_[page] = false;
  } else {
    return -1;
  }
  refcount_[page] = 1;
  return page;
}

void PagePool::retain(int32_t page) {
  SYV_CHECK(page >= 0 && page < num_pages()) << "page " << page;
  SYV_CHECK(!on_free_list_[page]) << "retain of free page " << page;
  if (refcount_[page] == 0) {
    SYV_CHECK(lru_.contains(page))
        << "page " << page << " has refcount 0 but is neither free nor cached";
    lru_.remove(page);
    --num_cached_;
  }
  ++refcount_[page];
}

void PagePool::release(int32_t page) {
  SYV_CHECK(page >= 0 && page < num_pages()) << "page " << page;
  SYV_CHECK(refcount_[page] > 0) << "release of unreferenced page " << page;
  if (--refcount_[page] > 0) return;
  if (cached_[page]) {
    lru_.push_newest(page);
    ++num_cached_;
  } else {
    free_list_.push_back(page);
    on_free_list_[page] = true;
    ++num_free_;
  }
}

void PagePool::set_cached(int32_t page, bool cached) {
  SYV_CHECK(page >= 0 && page < num_pages()) << "page " << page;
  if (cached_[page] == cached) return;
  cached_[page] = cached;
  if (!cached && lru_.contains(page)) {
    lru_.remove(page);
    --num_cached_;
    free_list_.push_back(page);
    on_free_list_[page] = true;
    ++num_free_;
  }
  SYV_CHECK(!cached || refcount_[page] > 0) << "only a used page can become cached, page " << page;
}

std::string PagePool::check_integrity() const {
  std::ostringstream err;
  const int32_t n = num_pages();
  int32_t free_count = 0, lru_count = 0;
  for (int32_t p = 0; p < n; ++p) {
    if (refcount_[p] < 0) err << "page " << p << " refcount " << refcount_[p] << "; ";
    const bool f = on_free_list_[p], l = lru_.contains(p);
    if (f && l) err << "page " << p << " both free and on LRU; ";
    if ((f || l) && refcount_[p] != 0)
      err << "page " << p << " listed with refcount " << refcount_[p] << "; ";
    if (refcount_[p] == 0 && !f && !l) err << "page " << p << " unreferenced but unlisted; ";
    if (l && !cached_[p]) err << "page " << p << " on LRU but not cached; ";
    if (f && cached_[p]) err << "page " << p << " free but marked cached; ";
    free_count += f;
    lru_count += l;
    if (!err.str().empty()) return err.str();
  }
  if (free_count != num_free_ || static_cast<int32_t>(free_list_.size()) != num_free_)
    err << "free count " << num_free_ << " vs flagged " << free_count << " vs list "
        << free_list_.size();
  for (int32_t p : free_list_)
    if (p < 0 || p >= n || !on_free_list_[p]) err << "free list holds bad page " << p << "; ";
  err << lru_.check_integrity("LRU");
  if (lru_.size() != lru_count || lru_count != num_cached_)
    err << "LRU count " << num_cached_ << " vs listed " << lru_.size() << " vs flagged "
        << lru_count;
  return err.str();
}

}  // namespace syv
