// Page pool and prefix cache bookkeeping.
#include <gtest/gtest.h>

#include <random>

#include "kv/id_list.h"
#include "kv/page_pool.h"
#include "kv/prefix_cache.h"

namespace syv {
namespace {

// The walk order after pushes and removals (head, middle, tail), and the integrity check.
TEST(IdList, PushRemoveAndWalkBothWays) {
  IdList list(6);
  for (int32_t id : {4, 1, 5, 0}) list.push_newest(id);
  list.remove(1);  // middle
  list.remove(4);  // oldest
  list.push_newest(4);
  list.remove(4);  // newest
  list.push_newest(2);
  std::vector<int32_t> forward, backward;
  for (int32_t id = list.oldest(); id >= 0; id = list.newer(id)) forward.push_back(id);
  for (int32_t id = list.newest(); id >= 0; id = list.older(id)) backward.push_back(id);
  EXPECT_EQ(forward, (std::vector<int32_t>{5, 0, 2}));
  EXPECT_EQ(backward, (std::vector<int32_t>{2, 0, 5}));
  EXPECT_EQ(list.size(), 3);
  EXPECT_TRUE(list.contains(0));
  EXPECT_FALSE(list.contains(4));
  EXPECT_EQ(list.check_integrity("list"), "");
  for (int32_t id : forward) list.remove(id);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.oldest(), -1);
  EXPECT_EQ(list.newest(), -1);
  EXPECT_EQ(list.check_integrity("list"), "");
}

TEST(PagePool, AllocateRetainReleaseAndLruEviction) {
  PagePool pool(4);
  std::vector<int32_t> evicted;
  pool.set_evict_callback([&](int32_t p) { evicted.push_back(p); });
  std::vector<int32_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(pool.allocate());
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.allocate(), -1);
  pool.set_cached(1, true);
  pool.set_cached(2, true);
  pool.retain(1);
  pool.release(1);
  EXPECT_EQ(pool.num_cached(), 0);
  pool.release(2);  // cached, LRU: [2]
  pool.release(1);  // cached, LRU: [2, 1]
  pool.release(0);  // free
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_EQ(pool.check_integrity(), "");
  EXPECT_EQ(pool.allocate(), 0);  // free pages first
  EXPECT_EQ(pool.allocate(), 2);  // then the oldest cached page
  EXPECT_EQ(evicted, std::vector<int32_t>{2});
  EXPECT_FALSE(pool.is_cached(2));
  pool.retain(1);  // a prefix hit revives the cached page
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.check_integrity(), "");
  pool.set_cached(1, false);
  for (int32_t p : {0, 1, 2, 3}) pool.release(p);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.check_integrity(), "");
}

TEST(PrefixIndex, ACollidingKeyIsAMissNotWrongKv) {
  PrefixIndex index(4, 4);
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  const uint64_t key = PrefixIndex::page_key(PrefixIndex::root_key(), a.data(), 4);
  ASSERT_TRUE(index.insert(PrefixIndex::root_key(), key, a.data(), 2));
  EXPECT_EQ(index.find(PrefixIndex::root_key(), key, a.data()), 2);
  // Same key (as if the hash collided) but other tokens or another parent: a miss.
  EXPECT_EQ(index.find(PrefixIndex::root_key(), key, b.data()), -1);
  EXPECT_EQ(index.find(PrefixIndex::root_key() + 1, key, a.data()), -1);
  EXPECT_FALSE(index.insert(PrefixIndex::root_key(), key, b.data(), 3));  // key taken
  EXPECT_EQ(index.check_integrity(), "");
  index.erase(2);
  EXPECT_EQ(index.find(PrefixIndex::root_key(), key, a.data()), -1);
  EXPECT_EQ(index.size(), 0);
}

TEST(PrefixCache, MatchFollowsTheChainAndSurvivesRelease) {
  PrefixCache cache(8, 2, true);
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> pages;
  uint64_t parent = PrefixIndex::root_key();
  for (int i = 0; i < 3; ++i) {
    pages.push_back(cache.pool().allocate());
    parent = cache.insert(parent, &tokens[2 * i], pages.back());
  }
  PrefixHit hit = cache.match(tokens.data(), 7);
  EXPECT_EQ(hit.length, 6);
  EXPECT_EQ(hit.pages, pages);
  EXPECT_EQ(cache.match(tokens.data(), 5).length, 4);  // whole pages within the limit only
  // Another prefix diverging in page 1 reuses only page 0.
  const std::vector<int32_t> other = {5, 6, 7, 0, 9, 10};
  EXPECT_EQ(cache.match(other.data(), 6).length, 2);
  // Same tokens at another place in the chain: no hit (the key covers the whole prefix).
  const std::vector<int32_t> shifted = {7, 8, 9, 10};
  EXPECT_EQ(cache.match(shifted.data(), 4).length, 0);
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) cache.pool().release(*it);
  EXPECT_EQ(cache.pool().num_cached(), 3);
  EXPECT_EQ(cache.check_integrity(), "");
  hit = cache.match(tokens.data(), 7);
  EXPECT_EQ(cache.num_evictable(hit), 3);
  cache.acquire(hit);
  EXPECT_EQ(cache.pool().num_cached(), 0);
  for (auto it = hit.pages.rbegin(); it != hit.pages.rend(); ++it) cache.pool().release(*it);
  // Filling the pool evicts the cached pages (tail first) and the index forgets them.
  for (int i = 0; i < 6; ++i) cache.pool().allocate();
  EXPECT_EQ(cache.match(tokens.data(), 7).length, 4);  // the tail page went first
  cache.pool().allocate();
  cache.pool().allocate();
  EXPECT_EQ(cache.match(tokens.data(), 7).length, 0);
  EXPECT_EQ(cache.check_integrity(), "");
}

TEST(PrefixCache, DisabledNeverHits) {
  PrefixCache cache(4, 2, false);
  const std::vector<int32_t> tokens = {1, 2, 3};
  const int32_t page = cache.pool().allocate();
  cache.insert(PrefixIndex::root_key(), tokens.data(), page);
  EXPECT_EQ(cache.match(tokens.data(), 3).length, 0);
  cache.pool().release(page);
  EXPECT_EQ(cache.pool().num_free(), 4);
}

}  // namespace
}  // namespace syv

namespace syv {
namespace {

TEST(PrefixCacheLookahead, APageMatchesOnlyWithTheSameNextToken) {
  PrefixCache cache(8, 4, /*enabled=*/true, /*lookahead=*/1);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int32_t page = cache.pool().allocate();
  const uint64_t key = cache.insert(PrefixIndex::root_key(), a.data(), page);
  EXPECT_EQ(key, PrefixIndex::page_key(PrefixIndex::root_key(), a.data(), 5));
  cache.pool().release(page);
  EXPECT_EQ(cache.match(a.data(), 9).length, 4);
  EXPECT_EQ(cache.match(a.data(), 4).length, 0) << "the next token must be within max_tokens";
  std::vector<int32_t> b = a;
  b[4] = 50;  // same page, another next token
  EXPECT_EQ(cache.match(b.data(), 9).length, 0);
  EXPECT_EQ(cache.check_integrity(), "");
}

}  // namespace
}  // namespace syv
