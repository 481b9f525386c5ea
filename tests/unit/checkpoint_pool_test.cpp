// Checkpoint pool (state slots + checkpoints), geometry (boundaries, chunk snapping) and the
// retention policy, as pure bookkeeping. The engine-level behaviour is in hybrid_engine_test.cpp.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/checkpoint_pool.h"

namespace syv {
namespace {

TEST(CheckpointPool, SlotsLowestFirstAndFreed) {
  CheckpointPool pool(3, 0);
  EXPECT_EQ(pool.allocate_slot(), 0);
  EXPECT_EQ(pool.allocate_slot(), 1);
  EXPECT_EQ(pool.allocate_slot(), 2);
  EXPECT_EQ(pool.allocate_slot(), -1);
  pool.free_slot(1);
  pool.free_slot(0);
  EXPECT_EQ(pool.num_free_slots(), 2);
  EXPECT_EQ(pool.check_integrity(), "");
  EXPECT_EQ(pool.allocate_slot(), 0);
  EXPECT_EQ(pool.allocate_slot(), 1);
  EXPECT_TRUE(pool.slot_in_use(1));
  EXPECT_EQ(pool.check_integrity(), "");
}

TEST(CheckpointPool, HoldsKeepsAndLruEviction) {
  CheckpointPool pool(1, 2);
  bool fresh = false;
  const int32_t a = pool.acquire(/*key=*/11, 64, &fresh);
  ASSERT_GE(a, 0);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(pool.find(11, 64), a);
  EXPECT_EQ(pool.find(11, 128), -1);           // same key, other length: never served
  EXPECT_EQ(pool.acquire(11, 64, &fresh), a);  // a second holder shares it
  EXPECT_FALSE(fresh);
  EXPECT_EQ(pool.refcount(a), 2);
  EXPECT_EQ(pool.acquire(11, 128, &fresh), -1);  // colliding key: skipped
  const int32_t b = pool.acquire(22, 128, &fresh);
  ASSERT_GE(b, 0);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(pool.acquire(33, 64, &fresh), -1);  // everything held: skipped, not evicted
  EXPECT_EQ(pool.num_held(), 2);
  EXPECT_EQ(pool.check_integrity(), "");

  // keep from any holder sticks; without it the last release frees.
  pool.release(a, /*keep=*/true);
  pool.release(a, /*keep=*/false);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_TRUE(pool.retained(a));
  pool.release(b, false);
  EXPECT_EQ(pool.find(22, 128), -1);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.check_integrity(), "");

  // A cached entry is revived by a hold, evicted (LRU head) when nothing is free.
  const int32_t c = pool.acquire(33, 64, &fresh);  // takes the free entry
  EXPECT_TRUE(fresh);
  pool.release(c, true);  // LRU: [a, c]
  pool.touch(a);          // a hit on a: LRU [c, a]
  const int32_t d = pool.acquire(44, 192, &fresh);
  EXPECT_EQ(d, c);  // c was the least recently used
  EXPECT_TRUE(fresh);
  EXPECT_EQ(pool.evictions(), 1u);
  EXPECT_EQ(pool.find(33, 64), -1);
  EXPECT_EQ(pool.find(11, 64), a);
  EXPECT_EQ(pool.acquire(11, 64, &fresh), a);  // revive a from the LRU
  EXPECT_FALSE(fresh);
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.check_integrity(), "");
  pool.release(a, false);  // was retained before: stays cached
  EXPECT_EQ(pool.num_cached(), 1);
  pool.release(d, false);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.check_integrity(), "");
}

TEST(CheckpointPool, RandomOperationsKeepIntegrity) {
  std::mt19937 rng(7);
  CheckpointPool pool(4, 6);
  std::vector<int32_t> holds, slots;
  for (int step = 0; step < 5000; ++step) {
    const int op = static_cast<int>(rng() % 5);
    if (op == 0) {
      bool fresh = false;
      const uint64_t key = rng() % 12;
      const int32_t id = pool.acquire(key, static_cast<int32_t>(key * 64 + 64), &fresh);
      if (id >= 0) holds.push_back(id);
    } else if (op == 1 && !holds.empty()) {
      const size_t i = rng() % holds.size();
      pool.release(holds[i], rng() % 2 == 0);
      holds.erase(holds.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 2) {
      const int32_t s = pool.allocate_slot();
      if (s >= 0) slots.push_back(s);
    } else if (op == 3 && !slots.empty()) {
      const size_t i = rng() % slots.size();
      pool.free_slot(slots[i]);
      slots.erase(slots.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const uint64_t key = rng() % 12;
      const int32_t id = pool.find(key, static_cast<int32_t>(key * 64 + 64));
      if (id >= 0) pool.touch(id);
    }
    ASSERT_EQ(pool.check_integrity(), "") << "step " << step;
    int32_t held = 0;
    for (int32_t c = 0; c < pool.num_checkpoints(); ++c) held += pool.refcount(c);
    ASSERT_EQ(held, static_cast<int32_t>(holds.size()));
  }
  for (int32_t id : holds) pool.release(id, false);
  for (int32_t s : slots) pool.free_slot(s);
  EXPECT_EQ(pool.num_held(), 0);
  EXPECT_EQ(pool.num_free_slots(), 4);
  EXPECT_EQ(pool.check_integrity(), "");
}

TEST(CheckpointGeometry, BoundariesAndChunkSnapping) {
  const CheckpointGeometry g(/*page=*/16, /*interval=*/64);
  // N = 200: R = E = 192.  N = 192: R = 176, E = 192.  N = 10: no page boundary.
  EXPECT_EQ(g.resend_boundary(200), 192);
  EXPECT_EQ(g.extension_boundary(200), 192);
  EXPECT_EQ(g.resend_boundary(192), 176);
  EXPECT_EQ(g.extension_boundary(192), 192);
  EXPECT_EQ(g.resend_boundary(10), 0);
  EXPECT_FALSE(g.is_boundary(0, 10));
  EXPECT_TRUE(g.is_boundary(64, 200));
  EXPECT_TRUE(g.is_boundary(192, 200));
  EXPECT_FALSE(g.is_boundary(176, 200));
  EXPECT_TRUE(g.is_boundary(176, 192));
  EXPECT_TRUE(g.is_boundary(256, 200));  // decode crosses a multiple of C
  // Chunks stop on a replay boundary inside them, else on the last multiple of C.
  EXPECT_EQ(g.snap_chunk_end(0, 200, 200), 192);
  EXPECT_EQ(g.snap_chunk_end(0, 150, 200), 128);
  EXPECT_EQ(g.snap_chunk_end(0, 50, 200), 50);      // no boundary inside
  EXPECT_EQ(g.snap_chunk_end(60, 67, 200), 64);     // small chunks reach every boundary
  EXPECT_EQ(g.snap_chunk_end(192, 200, 200), 200);  // the tail after R
  EXPECT_EQ(g.snap_chunk_end(128, 192, 192), 176);  // R before E = N
  EXPECT_EQ(g.snap_chunk_end(176, 192, 192), 192);
  EXPECT_EQ(g.snap_chunk_end(255, 256, 200), 256);  // a decode step
}

TEST(RetentionPolicy, ParseAndKeep) {
  auto dense = RetentionPolicy::parse("dense");
  auto bounds = RetentionPolicy::parse("boundaries");
  auto every = RetentionPolicy::parse("128");
  ASSERT_TRUE(dense.ok() && bounds.ok() && every.ok());
  EXPECT_EQ(every.value().every, 128);
  EXPECT_EQ(every.value().to_string(), "128");
  EXPECT_EQ(bounds.value().to_string(), "boundaries");
  for (const char* bad : {"", "0", "-64", "12x", "Dense", "99999999999"}) {
    auto r = RetentionPolicy::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected 'dense', 'boundaries'"), std::string::npos);
  }
  const CheckpointGeometry g(16, 64);
  // Prompt 200 (R = E = 192); checkpoints at 64, 128, 192 and, while decoding, 256.
  for (int32_t len : {64, 128, 192, 256}) EXPECT_TRUE(g.keep(dense.value(), len, 200)) << len;
  EXPECT_FALSE(g.keep(bounds.value(), 64, 200));
  EXPECT_FALSE(g.keep(bounds.value(), 256, 200));
  EXPECT_TRUE(g.keep(bounds.value(), 192, 200));
  EXPECT_FALSE(g.keep(every.value(), 64, 200));
  EXPECT_TRUE(g.keep(every.value(), 128, 200));
  EXPECT_TRUE(g.keep(every.value(), 192, 200));
  EXPECT_TRUE(g.keep(every.value(), 256, 200));
  // Prompt 192: R = 176 and E = 192 are both replay boundaries.
  EXPECT_TRUE(g.keep(bounds.value(), 176, 192));
  EXPECT_TRUE(g.keep(bounds.value(), 192, 192));
  EXPECT_FALSE(g.keep(bounds.value(), 128, 192));
}

}  // namespace
}  // namespace syv
