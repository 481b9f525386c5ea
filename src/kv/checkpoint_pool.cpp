#include "kv/checkpoint_pool.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "core/check.h"

namespace syv {

// RetentionPolicy ------------------------------------------------------------------------------

Result<RetentionPolicy> RetentionPolicy::parse(const std::string& text) {
  RetentionPolicy policy;
  if (text == "dense") return policy;
  if (text == "boundaries") {
    policy.kind = Kind::kBoundaries;
    return policy;
  }
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(begin, &end, 10);
  if (!text.empty() && end == begin + text.size() && errno == 0 && n > 0 && n <= (1 << 30)) {
    policy.kind = Kind::kEvery;
    policy.every = static_cast<int32_t>(n);
    return policy;
  }
  return Status::Error(
      "prefix retention: expected 'dense', 'boundaries' or a positive token count "
      "N (keep one checkpoint every N tokens), found '" +
      text + "'");
}

std::string RetentionPolicy::to_string() const {
  switch (kind) {
    case Kind::kDense:
      return "dense";
    case Kind::kBoundaries:
      return "boundaries";
    case Kind::kEvery:
      return std::to_string(every);
  }
  return "?";
}

// CheckpointGeometry ---------------------------------------------------------------------------

CheckpointGeometry::CheckpointGeometry(int32_t page_size, int32_t interval)
    : page_size_(page_size), interval_(interval) {
  SYV_CHECK(page_size > 0 && interval > 0 && interval % page_size == 0)
      << "checkpoint interval " << interval << " must be a positive multiple of the page size "
      << page_size;
}

int32_t CheckpointGeometry::resend_boundary(int32_t prompt_len) const {
  return prompt_len < 1 ? 0 : (prompt_len - 1) / page_size_ * page_size_;
}

int32_t CheckpointGeometry::extension_boundary(int32_t prompt_len) const {
  return prompt_len / page_size_ * page_size_;
}

bool CheckpointGeometry::is_boundary(int32_t length, int32_t prompt_len) const {
  if (length <= 0) return false;
  return length % interval_ == 0 || length == resend_boundary(prompt_len) ||
         length == extension_boundary(prompt_len);
}

int32_t CheckpointGeometry::snap_chunk_end(int32_t begin, int32_t end, int32_t prompt_len) const {
  if (end <= begin) return end;
  // A replay boundary strictly inside the chunk comes first: otherwise a chunk reaching the end of
  // the prompt would jump over R (and N a multiple of C would leave no resend checkpoint).
  for (int32_t b : {resend_boundary(prompt_len), extension_boundary(prompt_len)}) {
    if (b > begin && b < end) return b;
  }
  // Else the last multiple of C in (begin, end], or `end` itself when it is a replay boundary.
  const int32_t last = end / interval_ * interval_;
  if (last > begin) return is_boundary(end, prompt_len) ? end : last;
  return end;
}

bool CheckpointGeometry::keep(const RetentionPolicy& policy, int32_t length,
                              int32_t prompt_len) const {
  const bool replay =
      length == resend_boundary(prompt_len) || length == extension_boundary(prompt_len);
  switch (policy.kind) {
    case RetentionPolicy::Kind::kDense:
      return true;
    case RetentionPolicy::Kind::kBoundaries:
      return replay;
    case RetentionPolicy::Kind::kEvery:
      return replay || (policy.every > 0 && length % policy.every == 0);
  }
  return false;
}

// CheckpointPool -------------------------------------------------------------------------------

CheckpointPool::CheckpointPool(int32_t num_slots, int32_t num_checkpoints)
    : slot_used_(static_cast<size_t>(num_slots), false),
      refcount_(static_cast<size_t>(num_checkpoints), 0),
      retained_(static_cast<size_t>(num_checkpoints), false),
      registered_(static_cast<size_t>(num_checkpoints), false),
      on_free_list_(static_cast<size_t>(num_checkpoints), true),
      key_(static_cast<size_t>(num_checkpoints), 0),
      length_(static_cast<size_t>(num_checkpoints), 0),
      lru_(num_checkpoints) {
  SYV_CHECK(num_slots >= 0 && num_checkpoints >= 0)
      << "checkpoint pool: " << num_slots << " slots, " << num_checkpoints << " checkpoints";
  for (int32_t s = num_slots - 1; s >= 0; --s) free_slots_.push_back(s);
  for (int32_t c = num_checkpoints - 1; c >= 0; --c) free_list_.push_back(c);
  by_key_.reserve(static_cast<size_t>(num_checkpoints));
}

int32_t CheckpointPool::allocate_slot() {
  if (free_slots_.empty()) return -1;
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  slot_used_[static_cast<size_t>(slot)] = true;
  return slot;
}

void CheckpointPool::free_slot(int32_t slot) {
  SYV_CHECK(slot >= 0 && slot < num_slots()) << "state slot " << slot;
  SYV_CHECK(slot_used_[static_cast<size_t>(slot)]) << "free of unused state slot " << slot;
  slot_used_[static_cast<size_t>(slot)] = false;
  // Keep the stack sorted so the lowest id is handed out first (readable dumps, stable tests).
  auto it = std::lower_bound(free_slots_.begin(), free_slots_.end(), slot, std::greater<>());
  free_slots_.insert(it, slot);
}

int32_t CheckpointPool::find(uint64_t key, int32_t length) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  return length_[static_cast<size_t>(it->second)] == length ? it->second : -1;
}

void CheckpointPool::touch(int32_t id) {
  SYV_CHECK(id >= 0 && id < num_checkpoints() && registered_[static_cast<size_t>(id)])
      << "touch of unregistered checkpoint " << id;
  if (lru_.contains(id)) {
    lru_.remove(id);
    lru_.push_newest(id);
  }
}

int32_t CheckpointPool::acquire(uint64_t key, int32_t length, bool* fresh) {
  *fresh = false;
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    const int32_t id = it->second;
    const size_t i = static_cast<size_t>(id);
    if (length_[i] != length) return -1;  // a colliding key of another length: skip, never mix
    if (refcount_[i] == 0) {
      SYV_CHECK(lru_.contains(id)) << "checkpoint " << id << " registered, unheld and not cached";
      lru_.remove(id);
      --num_cached_;
    }
    ++refcount_[i];
    return id;
  }
  int32_t id = -1;
  if (!free_list_.empty()) {
    id = free_list_.back();
    free_list_.pop_back();
    on_free_list_[static_cast<size_t>(id)] = false;
  } else if (!lru_.empty()) {
    id = lru_.oldest();
    lru_.remove(id);
    --num_cached_;
    if (on_evict_) on_evict_(id, key_[static_cast<size_t>(id)], length_[static_cast<size_t>(id)]);
    unregister(id);
    ++evictions_;
  } else {
    return -1;
  }
  const size_t i = static_cast<size_t>(id);
  registered_[i] = true;
  retained_[i] = false;
  key_[i] = key;
  length_[i] = length;
  refcount_[i] = 1;
  by_key_.emplace(key, id);
  *fresh = true;
  return id;
}

void CheckpointPool::release(int32_t id, bool keep) {
  SYV_CHECK(id >= 0 && id < num_checkpoints()) << "checkpoint " << id;
  const size_t i = static_cast<size_t>(id);
  SYV_CHECK(refcount_[i] > 0) << "release of unheld checkpoint " << id;
  if (keep) retained_[i] = true;
  if (--refcount_[i] > 0) return;
  if (retained_[i]) {
    lru_.push_newest(id);
    ++num_cached_;
  } else {
    unregister(id);
    free_list_.push_back(id);
    on_free_list_[i] = true;
  }
}

void CheckpointPool::unregister(int32_t id) {
  const size_t i = static_cast<size_t>(id);
  auto it = by_key_.find(key_[i]);
  SYV_CHECK(it != by_key_.end() && it->second == id) << "checkpoint map lost entry " << id;
  by_key_.erase(it);
  registered_[i] = false;
  retained_[i] = false;
}

std::string CheckpointPool::check_integrity() const {
  std::ostringstream err;
  // Slots.
  int32_t unused = 0;
  for (size_t s = 0; s < slot_used_.size(); ++s) unused += !slot_used_[s];
  if (unused != num_free_slots())
    err << "slots: " << unused << " unused but " << num_free_slots() << " on the free stack; ";
  for (int32_t s : free_slots_)
    if (s < 0 || s >= num_slots() || slot_used_[static_cast<size_t>(s)])
      err << "slot free stack holds bad slot " << s << "; ";
  // Checkpoints.
  const int32_t n = num_checkpoints();
  int32_t registered = 0, lru_flagged = 0;
  for (int32_t c = 0; c < n && err.str().empty(); ++c) {
    const size_t i = static_cast<size_t>(c);
    const bool f = on_free_list_[i], l = lru_.contains(c);
    if (refcount_[i] < 0) err << "checkpoint " << c << " refcount " << refcount_[i] << "; ";
    if (f && (l || registered_[i] || refcount_[i] != 0))
      err << "free checkpoint " << c << " is also listed, registered or held; ";
    if (!f && !registered_[i]) err << "checkpoint " << c << " neither free nor registered; ";
    if (l && (refcount_[i] != 0 || !retained_[i]))
      err << "cached checkpoint " << c << " has refcount " << refcount_[i] << ", retained "
          << retained_[i] << "; ";
    if (registered_[i] && refcount_[i] == 0 && !l)
      err << "unheld checkpoint " << c << " is not on the LRU; ";
    if (registered_[i]) {
      ++registered;
      auto it = by_key_.find(key_[i]);
      if (it == by_key_.end() || it->second != c)
        err << "checkpoint " << c << " not mapped by its key; ";
    }
    lru_flagged += l;
  }
  if (!err.str().empty()) return err.str();
  if (registered != static_cast<int32_t>(by_key_.size()))
    err << "key map holds " << by_key_.size() << " entries for " << registered << " checkpoints; ";
  int32_t free_flagged = 0;
  for (size_t i = 0; i < on_free_list_.size(); ++i) free_flagged += on_free_list_[i];
  if (free_flagged != num_free())
    err << "free list " << num_free() << " vs flagged " << free_flagged;
  err << lru_.check_integrity("checkpoint LRU");
  if (lru_.size() != lru_flagged || lru_flagged != num_cached_)
    err << "checkpoint LRU count " << num_cached_ << " vs listed " << lru_.size() << " vs flagged "
        << lru_flagged;
  return err.str();
}

}  // namespace syv
