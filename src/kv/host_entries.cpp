#include "kv/host_entries.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace syv {

HostEntries::HostEntries(int32_t size, int32_t open)
    : key_(static_cast<size_t>(size), 0),
      pins_(static_cast<size_t>(size), 0),
      keeps_(static_cast<size_t>(size), 0),
      pos_(static_cast<size_t>(size)),
      used_(static_cast<size_t>(size), false) {
  SYV_CHECK(size >= 0 && open >= 0 && open <= size)
      << "host entries: " << open << " open of " << size;
  this->open(open);
  by_key_.reserve(static_cast<size_t>(size));
}

void HostEntries::open(int32_t n) {
  SYV_CHECK(n >= open_ && n <= size())
      << "host entries: open " << n << " of " << size() << " with " << open_ << " open";
  // Lowest id on top: the new entries go under the free ones (all lower).
  free_.insert(free_.begin(), static_cast<size_t>(n - open_), 0);
  for (int32_t id = n - 1, at = 0; id >= open_; --id) free_[static_cast<size_t>(at++)] = id;
  open_ = n;
}

void HostEntries::check_used(int32_t id) const {
  SYV_CHECK(id >= 0 && id < size() && used_[static_cast<size_t>(id)])
      << "host entry " << id << " is not in use (size " << size() << ")";
}

int32_t HostEntries::find(uint64_t key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? -1 : it->second;
}

int32_t HostEntries::take(uint64_t key, bool* evicted, const std::function<bool(int32_t)>& busy) {
  SYV_CHECK(by_key_.count(key) == 0) << "host entry key " << key << " registered twice";
  *evicted = false;
  int32_t id = -1;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    for (int32_t candidate : lru_) {
      if (pins_[static_cast<size_t>(candidate)] == 0 && !(busy && busy(candidate))) {
        id = candidate;
        break;
      }
    }
    if (id < 0) return -1;
    const size_t i = static_cast<size_t>(id);
    by_key_.erase(key_[i]);
    lru_.erase(pos_[i]);
    used_[i] = false;
    *evicted = true;
  }
  const size_t i = static_cast<size_t>(id);
  key_[i] = key;
  pos_[i] = lru_.insert(lru_.end(), id);
  used_[i] = true;
  by_key_.emplace(key, id);
  return id;
}

void HostEntries::touch(int32_t id) {
  check_used(id);
  const size_t i = static_cast<size_t>(id);
  if (keeps_[i] == 0) lru_.splice(lru_.end(), lru_, pos_[i]);
}

void HostEntries::keep(int32_t id) {
  check_used(id);
  const size_t i = static_cast<size_t>(id);
  if (keeps_[i]++ > 0) return;
  lru_.erase(pos_[i]);
  ++num_kept_;
}

void HostEntries::unkeep(int32_t id) {
  check_used(id);
  const size_t i = static_cast<size_t>(id);
  SYV_CHECK(keeps_[i] > 0) << "unkeep of host entry " << id << ", which is not kept";
  if (--keeps_[i] > 0) return;
  pos_[i] = lru_.insert(lru_.end(), id);
  --num_kept_;
}

void HostEntries::pin(int32_t id) {
  check_used(id);
  ++pins_[static_cast<size_t>(id)];
}

void HostEntries::unpin(int32_t id) {
  check_used(id);
  SYV_CHECK(pins_[static_cast<size_t>(id)] > 0) << "unpin of unpinned host entry " << id;
  --pins_[static_cast<size_t>(id)];
}

void HostEntries::shrink(int32_t n) {
  SYV_CHECK(n >= 0 && n <= size()) << "host entries: shrink to " << n << " of " << size();
  for (int32_t id = n; id < size(); ++id) {
    const size_t i = static_cast<size_t>(id);
    SYV_CHECK_EQ(pins_[i], 0) << "host entries: shrink drops pinned entry " << id;
    SYV_CHECK_EQ(keeps_[i], 0) << "host entries: shrink drops kept entry " << id;
    if (!used_[i]) continue;
    by_key_.erase(key_[i]);
    lru_.erase(pos_[i]);
  }
  std::erase_if(free_, [n](int32_t id) { return id >= n; });
  open_ = std::min(open_, n);
  const size_t m = static_cast<size_t>(n);
  key_.resize(m);
  pins_.resize(m);
  keeps_.resize(m);
  pos_.resize(m);
  used_.resize(m);
}

int32_t HostEntries::num_pinned() const {
  int32_t n = 0;
  for (int32_t p : pins_) n += p > 0;
  return n;
}

std::string HostEntries::check_integrity() const {
  std::ostringstream err;
  std::vector<int32_t> seen(key_.size(), 0);
  for (int32_t id : free_) {
    if (id < 0 || id >= open_ || used_[static_cast<size_t>(id)]) {
      err << "free list holds bad or used entry " << id << "; ";
      return err.str();
    }
    ++seen[static_cast<size_t>(id)];
  }
  for (int32_t id : lru_) {
    if (id < 0 || id >= size() || !used_[static_cast<size_t>(id)]) {
      err << "LRU holds bad or unused entry " << id << "; ";
      return err.str();
    }
    ++seen[static_cast<size_t>(id)];
    if (id >= open_) err << "closed entry " << id << " in use; ";
    auto it = by_key_.find(key_[static_cast<size_t>(id)]);
    if (it == by_key_.end() || it->second != id)
      err << "entry " << id << " not mapped by its key; ";
  }
  int32_t kept = 0;
  for (size_t i = 0; i < keeps_.size(); ++i) {
    if (keeps_[i] < 0 || (keeps_[i] > 0 && !used_[i]))
      err << "entry " << i << " has " << keeps_[i] << " keeps, used " << used_[i] << "; ";
    if (keeps_[i] > 0 && used_[i]) {
      ++seen[i];  // off the LRU, but held
      ++kept;
      auto it = by_key_.find(key_[i]);
      if (it == by_key_.end() || it->second != static_cast<int32_t>(i))
        err << "kept entry " << i << " not mapped by its key; ";
    }
  }
  if (kept != num_kept_) err << "kept entries " << kept << ", counted " << num_kept_ << "; ";
  for (size_t i = 0; i < seen.size(); ++i) {
    const int32_t want = static_cast<int32_t>(i) < open_ ? 1 : 0;  // closed: on no list
    if (seen[i] != want) err << "entry " << i << " listed " << seen[i] << " times; ";
    if (pins_[i] < 0 || (pins_[i] > 0 && !used_[i]))
      err << "entry " << i << " has " << pins_[i] << " pins, used " << used_[i] << "; ";
  }
  if (by_key_.size() != lru_.size() + static_cast<size_t>(num_kept_))
    err << "key map holds " << by_key_.size() << " keys for " << lru_.size()
        << " entries on the LRU and " << num_kept_ << " kept";
  return err.str();
}

}  // namespace syv
