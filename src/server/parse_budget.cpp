#include "server/parse_budget.h"

#include <utility>

namespace syv::server {

ParseBudget::Hold& ParseBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

ParseBudget::Hold::Grow ParseBudget::Hold::grow(size_t bytes) {
  if (budget_ == nullptr) return Grow::kTooLarge;  // a default-constructed hold has no budget
  const size_t capacity = budget_->capacity_;
  if (bytes > capacity || bytes_ > capacity - bytes) return Grow::kTooLarge;
  size_t used = budget_->in_use_.load();
  do {
    if (used > capacity || bytes > capacity - used) return Grow::kBusy;
  } while (!budget_->in_use_.compare_exchange_weak(used, used + bytes));
  bytes_ += bytes;
  return Grow::kOk;
}

void ParseBudget::Hold::release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->in_use_.fetch_sub(bytes_);
  bytes_ = 0;
}

}  // namespace syv::server
