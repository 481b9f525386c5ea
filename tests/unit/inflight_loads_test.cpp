// kv/inflight_loads.h on a copy stream that lands late (deferred_copy_backend.h): tickets in
// stream order, the pages and slots in flight, polling, ordering, and what lands when.
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
  const LoadTicket t = loads.add(cpu->copy_async(&dst, &src, sizeof(float)), {3}, 1);
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
      loads.add(backend.copy_async(&device[0], &host[0], sizeof(float)), {4, 5}, -1);
  const LoadTicket b = loads.add(backend.copy_async(&device[1], &host[1], sizeof(float)), {6}, 2);
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
  const LoadTicket c = loads.add(backend.copy_async(&device[2], &host[2], sizeof(float)), {7}, -1);
  const LoadTicket d = loads.add(backend.copy_async(&device[0], &host[1], sizeof(float)), {8}, -1);
  loads.order_after(d);
  EXPECT_TRUE(loads.settled(c) && loads.settled(d));
  EXPECT_EQ(device[2], 3.0f);
  EXPECT_EQ(device[0], 2.0f);
  EXPECT_EQ(loads.check_integrity(), "");

  // wait_all() lands everything.
  const LoadTicket e = loads.add(backend.copy_async(&device[1], &host[0], sizeof(float)), {9}, 3);
  loads.wait_all();
  EXPECT_TRUE(loads.settled(e));
  EXPECT_EQ(device[1], 1.0f);
  EXPECT_EQ(backend.num_pending(), 0);
}

}  // namespace
}  // namespace syv::testing
