// kv/inflight_loads.h on a copy stream that lands late (deferred_copy_backend.h): tickets in
// stream order, the pages, slots and host entries in flight, polling, ordering, and what lands
// when; and the deferred backend's two streams themselves.
#include "kv/inflight_loads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "unit/deferred_copy_backend.h"

namespace syv::testing {
namespace {

TEST(InflightLoads, SynchronousCopiesAreNeverInFlight) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  InflightLoads loads(*cpu);
  float src = 1.0f, dst = 0.0f;
  const LoadTicket t = loads.add(cpu->copy_async(&dst, &src, sizeof(float), CopyDir::kIn), {3}, 1);
  EXPECT_FALSE(t.pending());
  EXPECT_TRUE(loads.settled(t));
  EXPECT_EQ(dst, 1.0f);
  EXPECT_EQ(loads.num_unsettled(), 0);
  EXPECT_FALSE(loads.newest_into({3}).pending());
}

TEST(InflightLoads, PollSettlesInStreamOrderAndOrderingSettlesEarlierLoads) {
  DeferredCopyBackend backend;
  backend.set_polls_to_land(2);
  InflightLoads loads(backend);
  std::vector<float> host = {1, 2, 3}, device = {0, 0, 0};
  const LoadTicket a =
      loads.add(backend.copy_async(&device[0], &host[0], sizeof(float), CopyDir::kIn), {4, 5}, -1);
  const LoadTicket b =
      loads.add(backend.copy_async(&device[1], &host[1], sizeof(float), CopyDir::kIn), {6}, 2);
  ASSERT_TRUE(a.pending() && b.pending());
  EXPECT_LT(a.id, b.id);
  EXPECT_TRUE(std::isnan(device[0]) && std::isnan(device[1]));  // garbage until they land
  EXPECT_EQ(loads.newest_into({1, 4}).id, a.id);
  EXPECT_EQ(loads.newest_into({5, 6}).id, b.id);
  EXPECT_FALSE(loads.newest_into({1, 2}).pending());
  EXPECT_EQ(InflightLoads::newer(a, b).id, b.id);
  EXPECT_EQ(loads.check_integrity(), "");

  // The first poll asks about b (a poll of a and b: not done), then a (its second poll: landed).
  loads.poll();
  EXPECT_TRUE(loads.settled(a));
  EXPECT_FALSE(loads.settled(b));
  EXPECT_EQ(device[0], 1.0f);
  EXPECT_EQ(backend.num_pending(), 1);
  EXPECT_TRUE(loads.newest_into({4, 5}).id == 0 && loads.newest_into({6}).id == b.id);
  EXPECT_EQ(loads.check_integrity(), "");
  loads.poll();  // b's second poll
  EXPECT_TRUE(loads.settled(b));
  EXPECT_EQ(device[0], 1.0f);
  EXPECT_EQ(device[1], 2.0f);
  EXPECT_EQ(loads.num_unsettled(), 0);
  EXPECT_TRUE(loads.page_loads().empty() && loads.slot_loads().empty());

  // Ordering after the newer load settles the older one too, and lands both.
  const LoadTicket c =
      loads.add(backend.copy_async(&device[2], &host[2], sizeof(float), CopyDir::kIn), {7}, -1);
  const LoadTicket d =
      loads.add(backend.copy_async(&device[0], &host[1], sizeof(float), CopyDir::kIn), {8}, -1);
  loads.order_after(d);
  EXPECT_TRUE(loads.settled(c) && loads.settled(d));
  EXPECT_EQ(device[2], 3.0f);
  EXPECT_EQ(device[0], 2.0f);
  EXPECT_EQ(loads.check_integrity(), "");

  // wait_all() lands everything.
  const LoadTicket e =
      loads.add(backend.copy_async(&device[1], &host[0], sizeof(float), CopyDir::kIn), {9}, 3);
  loads.wait_all();
  EXPECT_TRUE(loads.settled(e));
  EXPECT_EQ(device[1], 1.0f);
  EXPECT_EQ(backend.num_pending(), 0);
}

// The host entries a load reads are tracked until it settles (the host tier keeps them from
// write-backs meanwhile), by landing or by ordering, a newer load's reads outliving an older one's.
TEST(InflightLoads, HostEntriesAreReadUntilTheirLoadSettles) {
  DeferredCopyBackend backend;
  backend.set_polls_to_land(1);
  InflightLoads loads(backend);
  std::vector<float> host = {1, 2}, device = {0, 0};
  const LoadTicket a = loads.add(
      backend.copy_async(&device[0], &host[0], sizeof(float), CopyDir::kIn), {4}, -1, {10, 11}, -1);
  const LoadTicket b = loads.add(
      backend.copy_async(&device[1], &host[1], sizeof(float), CopyDir::kIn), {}, 2, {11}, 3);
  EXPECT_TRUE(loads.reads_host_page(10) && loads.reads_host_page(11));
  EXPECT_TRUE(loads.reads_host_checkpoint(3));
  EXPECT_FALSE(loads.reads_host_page(3) || loads.reads_host_checkpoint(10));
  EXPECT_EQ(loads.host_page_reads().at(11), b.id);
  EXPECT_EQ(loads.check_integrity(), "");
  loads.order_after(a);  // 11 is still read by b
  EXPECT_FALSE(loads.reads_host_page(10));
  EXPECT_TRUE(loads.reads_host_page(11) && loads.reads_host_checkpoint(3));
  EXPECT_EQ(loads.check_integrity(), "");
  loads.poll();  // b lands at its first poll
  EXPECT_TRUE(loads.settled(b));
  EXPECT_TRUE(loads.host_page_reads().empty() && loads.host_checkpoint_reads().empty());
  EXPECT_EQ(device[1], 2.0f);
}

// The deferred backend's two streams (backend.h CopyDir) are independent: a write-back enqueued
// after a load lands at order_after_copy while the load stays pending, and the load's events are
// not answered by the write-back's; a copy that touches the bytes of a pending copy of the other
// stream is counted as a hazard (and its destination is garbage at once), one of the same stream
// is not.
TEST(DeferredCopyBackend, StreamsLandIndependentlyAndCrossStreamOverlapsAreHazards) {
  DeferredCopyBackend backend;
  backend.set_polls_to_land(2);
  std::vector<float> host = {1, 2, 3, 4}, device = {5, 6, 7, 8};
  const CopyEvent load = backend.copy_async(&device[0], &host[0], sizeof(float), CopyDir::kIn);
  const CopyEvent wb = backend.copy_async(&host[2], &device[2], sizeof(float), CopyDir::kOut);
  EXPECT_EQ(backend.num_hazards(), 0u);
  EXPECT_EQ(backend.num_pending(CopyDir::kIn), 1);
  EXPECT_EQ(backend.num_pending(CopyDir::kOut), 1);
  backend.order_after_copy(wb);  // lands the write-back only
  EXPECT_EQ(host[2], 7.0f);
  EXPECT_TRUE(std::isnan(device[0]));
  EXPECT_EQ(backend.num_pending(CopyDir::kIn), 1);
  EXPECT_TRUE(backend.copy_done(wb));
  EXPECT_FALSE(backend.copy_done(load));  // its first poll
  EXPECT_TRUE(backend.copy_done(load));   // its second
  EXPECT_EQ(device[0], 1.0f);
  EXPECT_EQ(backend.num_landed(), 2u);

  // A write-back into host bytes a pending load reads: a hazard, and the load lands garbage.
  const CopyEvent load2 = backend.copy_async(&device[1], &host[1], sizeof(float), CopyDir::kIn);
  backend.copy_async(&host[1], &device[3], sizeof(float), CopyDir::kOut);
  EXPECT_EQ(backend.num_hazards(), 1u);
  backend.wait_copy(load2);
  EXPECT_TRUE(std::isnan(device[1]));
  // The same on one stream is in order: no hazard, and the earlier copy reads the old bytes.
  host[0] = 9;
  const CopyEvent first = backend.copy_async(&device[2], &host[0], sizeof(float), CopyDir::kIn);
  const CopyEvent second = backend.copy_async(&host[0], &device[3], sizeof(float), CopyDir::kIn);
  EXPECT_EQ(backend.num_hazards(), 1u);
  backend.wait_copy(second);
  EXPECT_TRUE(backend.copy_done(first));
  EXPECT_EQ(device[2], 9.0f);
  EXPECT_EQ(host[0], 8.0f);
  backend.wait_copy(wb);
}

// A stream waiting for a copy of another (order_copies_after_copy) orders its copies after that
// copy without landing it: the write-back a load waits for stays in flight until it is polled or
// the load lands (which lands it first); a load into the page it reads is no hazard, and the page
// is garbage only once the write-back read it; a write-ahead ordered after the load is after the
// write-back too.
TEST(DeferredCopyBackend, CopiesOrderedAfterAnotherStreamsCopyLandAfterIt) {
  DeferredCopyBackend backend;
  backend.set_polls_to_land(2);
  std::vector<float> host = {1, 2, 3, 4}, device = {5, 6, 7, 8};
  const CopyEvent wb = backend.copy_async(&host[0], &device[0], sizeof(float), CopyDir::kOut);
  backend.order_copies_after_copy(wb, CopyDir::kIn);
  const CopyEvent load = backend.copy_async(&device[0], &host[1], sizeof(float), CopyDir::kIn);
  EXPECT_EQ(backend.num_hazards(), 0u);
  EXPECT_EQ(device[0], 5.0f) << "the write-back has not read it yet";
  EXPECT_EQ(backend.num_pending(CopyDir::kOut), 1);
  backend.order_copies_after_copy(load, CopyDir::kAhead);
  const CopyEvent ahead = backend.copy_async(&device[2], &host[0], sizeof(float), CopyDir::kAhead);
  EXPECT_EQ(backend.num_hazards(), 0u) << "it reads what the write-back writes, after it";
  EXPECT_EQ(backend.num_pending(), 3);
  EXPECT_FALSE(backend.copy_done(wb));
  EXPECT_TRUE(backend.copy_done(wb));  // landed alone
  EXPECT_EQ(host[0], 5.0f);
  EXPECT_TRUE(std::isnan(device[0])) << "garbage until the load lands";
  EXPECT_EQ(backend.num_pending(), 2);
  backend.wait_copy(ahead);
  EXPECT_EQ(backend.num_pending(), 0);
  EXPECT_EQ(device[0], 2.0f);
  EXPECT_EQ(device[2], 5.0f);
  EXPECT_TRUE(backend.copy_done(wb) && backend.copy_done(load));
  // Unordered, the same copies race: a write-back reading a page a pending load writes.
  backend.copy_async(&device[3], &host[2], sizeof(float), CopyDir::kIn);
  backend.copy_async(&host[3], &device[3], sizeof(float), CopyDir::kOut);
  EXPECT_EQ(backend.num_hazards(), 1u);
}

}  // namespace
}  // namespace syv::testing
