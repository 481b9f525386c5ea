#include "kv/host_piece_faulter.h"

#include <utility>

#include "core/check.h"

namespace syv {

HostPieceFaulter::~HostPieceFaulter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool HostPieceFaulter::has(int kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_kind_ == kind || done_[kind].has_value();
}

bool HostPieceFaulter::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_kind_ >= 0;
}

void HostPieceFaulter::start(int kind, size_t bytes) {
  SYV_CHECK(kind == 0 || kind == 1) << "host piece kind " << kind;
  if (!background_) {
    SYV_CHECK(!done_[kind].has_value()) << "host piece of kind " << kind << " not taken";
    done_[kind] = fault_in_host_pages(bytes, touch_);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SYV_CHECK(job_kind_ < 0 && !done_[kind].has_value())
        << "host piece faulter: start while busy (kind " << job_kind_ << ") or not taken";
    job_kind_ = kind;
    job_bytes_ = bytes;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
}

std::optional<Result<HostPages>> HostPieceFaulter::take(int kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<Result<HostPages>> piece = std::move(done_[kind]);
  done_[kind].reset();
  return piece;
}

void HostPieceFaulter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_kind_ >= 0; });
    if (stop_) return;
    const size_t bytes = job_bytes_;
    lock.unlock();
    Result<HostPages> pages = fault_in_host_pages(bytes, touch_);  // the slow part, unlocked
    lock.lock();
    done_[job_kind_] = std::move(pages);
    job_kind_ = -1;
    cv_.notify_all();
  }
}

}  // namespace syv
