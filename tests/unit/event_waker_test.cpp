// engine/event_waker.h: events queued quietly reach a client blocked in next() once the waker has
// their handles, in order; the waker keeps a handle alive until it has woken it and wakes what it
// was handed before it is destroyed; try_next() gives what is queued. The timeouts are hang bounds,
// never the outcome: a lost wake-up would leave the client waiting its whole 60 s and then report a
// timeout.
#include "engine/event_waker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "engine/engine.h"

namespace syv {
namespace {

constexpr std::chrono::milliseconds kHang{60000};

TEST(EventWaker, WakesAClientBlockedOnAQuietPush) {
  EventWaker waker;
  auto handle = std::make_shared<RequestHandle>(7, 1);
  std::promise<void> waiting;
  auto client = std::async(std::launch::async, [&] {
    std::vector<int32_t> ids;
    Event e;
    waiting.set_value();
    while (handle->next(e, kHang) == NextStatus::kEvent) ids.push_back(e.token_id);
    return ids;
  });
  waiting.get_future().wait();
  std::vector<std::shared_ptr<RequestHandle>> to_wake;
  for (int32_t id : {11, 12}) {
    Event e;
    e.token_id = id;
    handle->channel().push_quiet(std::move(e));
    to_wake.push_back(handle);
    waker.wake(to_wake);
    EXPECT_TRUE(to_wake.empty()) << "wake() takes the handles";
  }
  Event last;
  last.token_id = 13;
  last.finish_reason = "length";
  handle->channel().push_quiet(std::move(last));
  to_wake.push_back(handle);
  waker.wake(to_wake);
  EXPECT_EQ(client.get(), (std::vector<int32_t>{11, 12, 13})) << "in order, then the end";
}

// try_next(): nothing queued is a timeout, queued events come in order without a wake-up, and
// once every sample finished and the queue is drained, the end. (That it no longer pays a timed
// wait for the timeout is a cost, not an outcome: `syv bench host-tier`'s step parts show it.)
TEST(EventChannel, TryNextGivesWhatIsQueuedThenTheEnd) {
  RequestHandle handle(3, 2);
  Event e;
  EXPECT_EQ(handle.try_next(e), NextStatus::kTimeout);
  for (int32_t sample : {0, 1}) {
    Event done;
    done.sample_index = sample;
    done.token_id = 20 + sample;
    done.finish_reason = "stop";
    handle.channel().push_quiet(std::move(done));
    ASSERT_EQ(handle.try_next(e), NextStatus::kEvent) << "queued, never woken";
    EXPECT_EQ(e.token_id, 20 + sample);
  }
  EXPECT_EQ(handle.try_next(e), NextStatus::kEnd) << "both samples finished, nothing queued";
}

TEST(EventWaker, KeepsHandlesAliveAndWakesWhatItHoldsWhenDestroyed) {
  std::vector<std::future<NextStatus>> clients;
  std::vector<std::weak_ptr<RequestHandle>> watched;
  {
    EventWaker waker;
    std::vector<std::shared_ptr<RequestHandle>> to_wake;
    for (uint64_t id = 0; id < 16; ++id) {
      auto handle = std::make_shared<RequestHandle>(id, 1);
      watched.push_back(handle);
      clients.push_back(std::async(std::launch::async, [handle] {
        Event e;
        return handle->next(e, kHang);
      }));
      Event e;
      e.token_id = static_cast<int32_t>(id);
      handle->channel().push_quiet(std::move(e));
      to_wake.push_back(handle);  // the only owners left are the clients and the waker
    }
    waker.wake(to_wake);
  }  // destroyed: everything handed over was woken
  for (auto& client : clients) EXPECT_EQ(client.get(), NextStatus::kEvent);
  clients.clear();  // the clients' copies of the handles go with their states
  for (const auto& w : watched) EXPECT_TRUE(w.expired()) << "the waker released its handles";
}

}  // namespace
}  // namespace syv
