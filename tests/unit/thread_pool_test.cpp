#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace syv {
namespace {

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

// Two threads (e.g. the engine thread and a test's reference run) share the global pool: every
// call must still cover its whole range and return (a lost job once deadlocked the engine tests).
TEST(ThreadPool, ConcurrentCallersEachGetTheirWholeRange) {
  ThreadPool pool(2);
  std::atomic<long> total{0};
  auto work = [&] {
    for (int i = 0; i < 3000; ++i) {
      pool.parallel_for(64, [&](int64_t b, int64_t e) { total += e - b; });
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2L * 3000 * 64);
}

}  // namespace
}  // namespace syv
