// The host tier's entry bookkeeping (kv/host_entries.h): free entries first, then the least
// recently used unpinned one; hits refresh; pinned and kept entries are never evicted; closed
// entries (memory not pinned yet) are never taken.
#include "kv/host_entries.h"

#include <gtest/gtest.h>

namespace syv {
namespace {

TEST(HostEntries, EvictsLeastRecentlyUsedUnpinned) {
  HostEntries e(3);
  bool evicted = true;
  EXPECT_EQ(e.take(10, &evicted), 0);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(e.take(11, &evicted), 1);
  EXPECT_EQ(e.take(12, &evicted), 2);
  EXPECT_EQ(e.num_used(), 3);
  EXPECT_EQ(e.find(11), 1);
  EXPECT_EQ(e.find(99), -1);
  e.touch(0);  // LRU order now 1, 2, 0
  e.pin(1);
  const int32_t id = e.take(13, &evicted);  // 1 is pinned: 2 goes
  EXPECT_EQ(id, 2);
  EXPECT_TRUE(evicted);
  EXPECT_EQ(e.find(12), -1);
  EXPECT_EQ(e.find(13), 2);
  EXPECT_EQ(e.check_integrity(), "");
  EXPECT_EQ(e.num_pinned(), 1);
  e.pin(0);
  e.pin(2);
  EXPECT_EQ(e.take(14, &evicted), -1);  // everything pinned: nothing registered
  EXPECT_EQ(e.find(14), -1);
  e.unpin(0);
  e.unpin(1);
  e.unpin(2);
  EXPECT_EQ(e.num_pinned(), 0);
  EXPECT_EQ(e.take(14, &evicted), 1);  // LRU: 1 (never touched since), then 0, then 2
  EXPECT_EQ(e.check_integrity(), "");
  HostEntries none(0);
  EXPECT_EQ(none.take(1, &evicted), -1);
  EXPECT_EQ(none.check_integrity(), "");
}

// Busy entries (read by a load in flight, kv/inflight_loads.h) are passed over like pinned ones,
// without a pin: the least recently used entry that is neither goes; none left is a miss.
TEST(HostEntries, BusyEntriesAreNotTaken) {
  HostEntries e(3);
  bool evicted = false;
  for (uint64_t key : {10u, 11u, 12u}) e.take(key, &evicted);  // LRU order 0, 1, 2
  auto busy = [](int32_t id) { return id == 0 || id == 2; };
  EXPECT_EQ(e.take(13, &evicted, busy), 1);  // 0 is busy: 1 goes
  EXPECT_TRUE(evicted);
  EXPECT_EQ(e.find(10), 0);
  e.pin(1);  // LRU order 0, 2, 1: 1 pinned, 0 and 2 busy
  EXPECT_EQ(e.take(14, &evicted, busy), -1);
  EXPECT_EQ(e.find(14), -1);
  EXPECT_EQ(e.take(14, &evicted), 0);  // no longer busy: the oldest goes
  EXPECT_EQ(e.find(10), -1);
  e.unpin(1);
  EXPECT_EQ(e.check_integrity(), "");
}

// Kept entries (a preempted sequence's pages, kv/host_tier.h "Kept for preempted sequences") leave
// the LRU: never taken, not moved by a hit; with their last keep dropped they come back as the
// most recently used. Every entry kept is a miss, as every entry pinned is.
TEST(HostEntries, KeptEntriesLeaveTheLruUntilTheirLastKeepIsDropped) {
  HostEntries e(3);
  bool evicted = false;
  for (uint64_t key : {10u, 11u, 12u}) e.take(key, &evicted);  // LRU order 0, 1, 2
  e.keep(0);
  e.keep(0);  // two keeps: one unkeep leaves it kept
  EXPECT_EQ(e.num_kept(), 1);
  e.touch(0);  // a hit on a kept entry: still off the LRU
  EXPECT_EQ(e.check_integrity(), "");
  EXPECT_EQ(e.take(13, &evicted), 1);  // 0 is kept: the oldest on the LRU, 1, goes
  EXPECT_EQ(e.find(10), 0);
  EXPECT_EQ(e.find(11), -1);
  e.unkeep(0);
  EXPECT_EQ(e.keeps(0), 1);
  EXPECT_EQ(e.take(14, &evicted), 2);  // still kept
  e.keep(1);
  e.keep(2);
  EXPECT_EQ(e.take(15, &evicted), -1);  // all kept: nothing registered
  EXPECT_EQ(e.find(15), -1);
  e.unkeep(0);  // back as the most recently used: LRU order 0
  e.unkeep(2);  // LRU order 0, 2
  EXPECT_EQ(e.num_kept(), 1);
  EXPECT_EQ(e.check_integrity(), "");
  EXPECT_EQ(e.take(15, &evicted), 0);  // the first one unkept is now the oldest
  EXPECT_EQ(e.find(10), -1);
  e.unkeep(1);
  EXPECT_EQ(e.num_kept(), 0);
  EXPECT_EQ(e.check_integrity(), "");
}

// shrink(n) (a tier that cannot get the memory of entries >= n) forgets them, used or free, and
// the entries below keep their keys, LRU order and free list.
TEST(HostEntries, ShrinkDropsTheEntriesAboveAndKeepsTheRest) {
  HostEntries e(5);
  bool evicted = false;
  EXPECT_EQ(e.take(10, &evicted), 0);
  EXPECT_EQ(e.take(11, &evicted), 1);
  EXPECT_EQ(e.take(12, &evicted), 2);
  e.shrink(2);  // entry 2 (used) and 3, 4 (free) go
  EXPECT_EQ(e.size(), 2);
  EXPECT_EQ(e.num_used(), 2);
  EXPECT_EQ(e.find(12), -1);
  EXPECT_EQ(e.find(11), 1);
  EXPECT_EQ(e.check_integrity(), "");
  EXPECT_EQ(e.take(13, &evicted), 0);  // full: the least recently used, 0, is reused
  EXPECT_TRUE(evicted);
  EXPECT_EQ(e.check_integrity(), "");
  e.shrink(0);
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(e.take(14, &evicted), -1);
  EXPECT_EQ(e.check_integrity(), "");
}

// Closed entries (memory not pinned yet) are never handed out; open(n) makes them free, lowest
// first; shrink to the open count ends the growth.
TEST(HostEntries, OnlyOpenEntriesAreTaken) {
  HostEntries e(5, 1);
  EXPECT_EQ(e.num_open(), 1);
  EXPECT_EQ(e.num_free(), 1);
  EXPECT_EQ(e.check_integrity(), "");
  bool evicted = true;
  EXPECT_EQ(e.take(10, &evicted), 0);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(e.num_free(), 0);
  EXPECT_EQ(e.take(11, &evicted), 0);  // no free open entry: the open one is evicted
  EXPECT_TRUE(evicted);
  e.open(3);
  EXPECT_EQ(e.num_free(), 2);
  EXPECT_EQ(e.check_integrity(), "");
  EXPECT_EQ(e.take(12, &evicted), 1);
  EXPECT_FALSE(evicted);
  EXPECT_EQ(e.take(13, &evicted), 2);
  EXPECT_EQ(e.take(14, &evicted), 0);  // full again: the least recently used, 0
  EXPECT_TRUE(evicted);
  e.shrink(e.num_open());
  EXPECT_EQ(e.size(), 3);
  EXPECT_EQ(e.num_used(), 3);
  EXPECT_EQ(e.check_integrity(), "");
  HostEntries closed(2, 0);
  EXPECT_EQ(closed.take(1, &evicted), -1);
  EXPECT_EQ(closed.check_integrity(), "");
}

}  // namespace
}  // namespace syv
