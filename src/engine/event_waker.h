// Wakes the clients of request channels on a thread of its own. The engine thread queues a step's
// events with EventChannel::push_quiet() and hands the handles to wake() once per step: waking a
// client blocked in EventChannel::pop() is a futex system call and a context switch (~10 us a
// client with 512 streaming clients on a 2-core machine, against ~0.1 us for the queueing), which
// on the engine thread would sit between a step's sampling and the next step's launch (the
// "output" phase of EngineStats, 1.6-2.5 ms a step at 512 streaming requests through `syv serve`
// on an H200, 2026-12-02).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace syv {

class RequestHandle;

class EventWaker {
 public:
  EventWaker();   // starts the thread
  ~EventWaker();  // wakes every handle handed over, then joins
  EventWaker(const EventWaker&) = delete;
  EventWaker& operator=(const EventWaker&) = delete;

  // Takes the handles (leaving `handles` empty): their channels' clients are woken soon, on this
  // waker's thread, which keeps each handle alive until then. Events must be queued before.
  void wake(std::vector<std::shared_ptr<RequestHandle>>& handles);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable work_;
  std::vector<std::shared_ptr<RequestHandle>> pending_;  // guarded by mutex_
  bool stop_ = false;                                    // guarded by mutex_
  std::thread thread_;
};

}  // namespace syv
