// An intrusive doubly linked list over the ids [0, capacity), oldest first: appending an id as the
// newest, unlinking one and asking whether one is linked are O(1), walking is oldest to newest or
// back. The LRUs of PagePool and CheckpointPool and PrefixCache's registered pages in use.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace syv {

class IdList {
 public:
  explicit IdList(int32_t capacity = 0);

  int32_t capacity() const { return static_cast<int32_t>(on_.size()); }
  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(int32_t id) const { return on_[static_cast<size_t>(id)]; }
  int32_t oldest() const { return oldest_; }  // -1 when empty
  int32_t newest() const { return newest_; }  // -1 when empty
  // The linked id after / before linked `id` (-1 past the end).
  int32_t newer(int32_t id) const { return next_[static_cast<size_t>(id)]; }
  int32_t older(int32_t id) const { return prev_[static_cast<size_t>(id)]; }

  // Links `id` (not linked) as the newest.
  void push_newest(int32_t id);
  // Unlinks `id` (linked).
  void remove(int32_t id);

  // Links, flags and size agree. "" when sound, else the first problem (prefixed by `what`).
  std::string check_integrity(const char* what) const;

 private:
  std::vector<int32_t> prev_, next_;  // [capacity], -1: none
  std::vector<bool> on_;              // [capacity], linked
  int32_t oldest_ = -1, newest_ = -1, size_ = 0;
};

}  // namespace syv
