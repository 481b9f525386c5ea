#include "kv/id_list.h"

#include <sstream>

#include "core/check.h"

namespace syv {

IdList::IdList(int32_t capacity)
    : prev_(static_cast<size_t>(capacity), -1),
      next_(static_cast<size_t>(capacity), -1),
      on_(static_cast<size_t>(capacity), false) {
  SYV_CHECK_GE(capacity, 0) << "id list capacity";
}

void IdList::push_newest(int32_t id) {
  const size_t i = static_cast<size_t>(id);
  SYV_CHECK(id >= 0 && id < capacity() && !on_[i]) << "id " << id << " linked twice";
  prev_[i] = newest_;
  next_[i] = -1;
  (newest_ >= 0 ? next_[static_cast<size_t>(newest_)] : oldest_) = id;
  newest_ = id;
  on_[i] = true;
  ++size_;
}

void IdList::remove(int32_t id) {
  const size_t i = static_cast<size_t>(id);
  SYV_CHECK(id >= 0 && id < capacity() && on_[i]) << "id " << id << " unlinked but not linked";
  const int32_t prev = prev_[i], next = next_[i];
  (prev >= 0 ? next_[static_cast<size_t>(prev)] : oldest_) = next;
  (next >= 0 ? prev_[static_cast<size_t>(next)] : newest_) = prev;
  prev_[i] = next_[i] = -1;
  on_[i] = false;
  --size_;
}

std::string IdList::check_integrity(const char* what) const {
  std::ostringstream err;
  int32_t walked = 0, prev = -1;
  for (int32_t id = oldest_; id >= 0; prev = id, id = next_[static_cast<size_t>(id)]) {
    if (id >= capacity() || !on_[static_cast<size_t>(id)] ||
        prev_[static_cast<size_t>(id)] != prev || ++walked > size_) {
      err << what << " link broken at " << id << "; ";
      return err.str();
    }
  }
  int32_t flagged = 0;
  for (size_t i = 0; i < on_.size(); ++i) flagged += on_[i];
  if (prev != newest_) err << what << " newest " << newest_ << " vs walked end " << prev << "; ";
  if (walked != size_ || flagged != size_)
    err << what << " size " << size_ << " vs walked " << walked << " vs flagged " << flagged
        << "; ";
  return err.str();
}

}  // namespace syv
