#include "kv/page_pool.h"

#include <sstream>

#include "core/check.h"

namespace syv {

PagePool::PagePool(int32_t num_pages)
    : refcount_(num_pages, 0),
      cached_(num_pages, false),
      on_free_list_(num_pages, true),
      lru_prev_(num_pages, -1),
      lru_next_(num_pages, -1),
      on_lru_(num_pages, false),
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
  } else if (lru_head_ >= 0) {
    page = lru_head_;
    lru_remove(page);
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
    SYV_CHECK(on_lru_[page]) << "page " << page << " has refcount 0 but is neither free nor cached";
    lru_remove(page);
    --num_cached_;
  }
  ++refcount_[page];
}

void PagePool::release(int32_t page) {
  SYV_CHECK(page >= 0 && page < num_pages()) << "page " << page;
  SYV_CHECK(refcount_[page] > 0) << "release of unreferenced page " << page;
  if (--refcount_[page] > 0) return;
  if (cached_[page]) {
    lru_push_back(page);
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
  if (!cached && on_lru_[page]) {
    lru_remove(page);
    --num_cached_;
    free_list_.push_back(page);
    on_free_list_[page] = true;
    ++num_free_;
  }
  SYV_CHECK(!cached || refcount_[page] > 0) << "only a used page can become cached, page " << page;
}

void PagePool::lru_push_back(int32_t page) {
  lru_prev_[page] = lru_tail_;
  lru_next_[page] = -1;
  if (lru_tail_ >= 0)
    lru_next_[lru_tail_] = page;
  else
    lru_head_ = page;
  lru_tail_ = page;
  on_lru_[page] = true;
}

void PagePool::lru_remove(int32_t page) {
  const int32_t prev = lru_prev_[page], next = lru_next_[page];
  if (prev >= 0)
    lru_next_[prev] = next;
  else
    lru_head_ = next;
  if (next >= 0)
    lru_prev_[next] = prev;
  else
    lru_tail_ = prev;
  lru_prev_[page] = lru_next_[page] = -1;
  on_lru_[page] = false;
}

std::string PagePool::check_integrity() const {
  std::ostringstream err;
  const int32_t n = num_pages();
  int32_t free_count = 0, lru_count = 0;
  for (int32_t p = 0; p < n; ++p) {
    if (refcount_[p] < 0) err << "page " << p << " refcount " << refcount_[p] << "; ";
    const bool f = on_free_list_[p], l = on_lru_[p];
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
  int32_t walked = 0, prev = -1;
  for (int32_t p = lru_head_; p >= 0 && walked <= n; p = lru_next_[p], ++walked) {
    if (!on_lru_[p] || lru_prev_[p] != prev) {
      err << "LRU link broken at page " << p << "; ";
      break;
    }
    prev = p;
  }
  if (prev != lru_tail_) err << "LRU tail " << lru_tail_ << " vs walked end " << prev << "; ";
  if (walked != lru_count || lru_count != num_cached_)
    err << "LRU count " << num_cached_ << " vs walked " << walked << " vs flagged " << lru_count;
  return err.str();
}

}  // namespace syv
