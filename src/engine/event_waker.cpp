#include "engine/event_waker.h"

#include "engine/engine.h"

namespace syv {

EventWaker::EventWaker() : thread_([this] { run(); }) {}

EventWaker::~EventWaker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void EventWaker::wake(std::vector<std::shared_ptr<RequestHandle>>& handles) {
  if (handles.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.empty()) {
      pending_.swap(handles);
    } else {
      pending_.insert(pending_.end(), handles.begin(), handles.end());
      handles.clear();
    }
  }
  work_.notify_one();
}

void EventWaker::run() {
  std::vector<std::shared_ptr<RequestHandle>> batch;
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      batch.swap(pending_);
      stop = stop_;
    }
    for (const std::shared_ptr<RequestHandle>& handle : batch) handle->channel().wake();
    batch.clear();  // releases the handles (and a finished request's channel with its last one)
    if (stop) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.empty()) return;  // else wake what came with the stop, then leave
    }
  }
}

}  // namespace syv
