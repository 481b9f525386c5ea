// kv/host_tier.h, one admission on the CPU backend: the page write-backs of an admission are
// listed while the pages are allocated and enqueued as one batch by order_loads_after_admission()
// (CacheStore::copy_pages_out: its copies run in no order), so a write-back listed later in the
// same admission must never take the host entry of one listed earlier; a hit's pages come back as
// one batch (load_pages) holding the bytes that were written back. On deferred copy streams
// (deferred_copy_backend.h): a write-back never queues behind a write-ahead in flight (their own
// streams, CopyDir::kOut and kAhead), one into a host entry whose write-ahead is in flight
// follows it (two writers of one entry on two streams; also when an eviction of the same admission
// found that write-ahead in flight), a write-ahead into a host entry that an admission's
// write-back batch (which only its loads wait for) may still be writing follows that batch, and
// an eviction waits for the write-ahead batch that copied its page, not for later ones.
#include "kv/host_tier.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/check.h"
#include "kv/cache_store.h"
#include "kv/prefix_index.h"
#include "unit/deferred_copy_backend.h"

namespace syv::testing {
namespace {

constexpr int32_t kPageSize = 4;

struct Tier {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<CacheStore> store;
  std::unique_ptr<HostTier> host;
};

// A store of `device_pages` pages (one float KV layer) and a host tier of `host_pages` entries, all
// pinned (pieces of one entry, faulted in on this thread), on `backend` (default: the CPU's).
Tier make_tier(int32_t host_pages, std::unique_ptr<Backend> backend = make_cpu_backend(),
               int32_t device_pages = 8) {
  Tier t;
  t.cpu = std::move(backend);
  CacheSpec spec;
  spec.add_kv_layer({2, 8, DType::F32});
  CacheConfig c;
  c.page_size = kPageSize;
  c.num_pages = device_pages;
  auto store = CacheStore::create(spec, c, *t.cpu);
  SYV_CHECK(store.ok()) << store.message();
  t.store = std::move(*store);
  HostPinOptions pin;
  pin.reserve_bytes = int64_t{1} << 30;
  pin.piece_bytes = 1;
  pin.fault_in_background = false;
  auto host = HostTier::create(*t.store, kPageSize, host_pages, 0, pin);
  SYV_CHECK(host.ok()) << host.message();
  t.host = std::move(*host);
  for (int i = 0; i < 4 * host_pages && t.host->reserve_short(); ++i) t.host->between_steps(true);
  SYV_CHECK(!t.host->reserve_short()) << "host tier not pinned";
  return t;
}

// Device page `page` filled with bytes derived from `seed`; returns them.
std::vector<unsigned char> fill_page(Tier& t, int32_t page, int seed) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.store->page_bytes()));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(seed * 31 + i);
  t.cpu->wait_copy(t.store->copy_page_in(bytes.data(), page));
  return bytes;
}

std::vector<unsigned char> read_page(Tier& t, int32_t page) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.store->page_bytes()));
  t.cpu->wait_copy(t.store->copy_page_out(page, bytes.data()));
  return bytes;
}

struct Key {
  std::vector<int32_t> tokens;
  uint64_t key = 0;
};
Key key_of(int first_token) {
  Key k;
  for (int i = 0; i < kPageSize; ++i) k.tokens.push_back(first_token + i);
  k.key = PrefixIndex::page_key(PrefixIndex::root_key(), k.tokens.data(), kPageSize);
  return k;
}

TEST(HostTierAdmission, WriteBacksListedInOneAdmissionNeverShareAnEntry) {
  Tier t = make_tier(2);
  const Key a = key_of(10), b = key_of(20), c = key_of(30);
  const std::vector<unsigned char> bytes_a = fill_page(t, 0, 1), bytes_b = fill_page(t, 1, 2);
  fill_page(t, 2, 3);
  t.host->begin_admission();
  const uint64_t dropped = t.host->counters().stores_dropped;
  t.host->store_page(0, PrefixIndex::root_key(), a.key, a.tokens.data());
  t.host->store_page(1, PrefixIndex::root_key(), b.key, b.tokens.data());
  // Both entries are targets of listed write-backs: the third eviction is not written back
  // (outside an admission it would have evicted the least recently used entry).
  t.host->store_page(2, PrefixIndex::root_key(), c.key, c.tokens.data());
  EXPECT_EQ(t.host->counters().stores_dropped, dropped + 1);
  EXPECT_NE(t.host->check_integrity(), "") << "an admission is open";
  t.host->order_loads_after_admission();
  t.host->end_admission(/*own_load_pending=*/false);
  EXPECT_EQ(t.host->check_integrity(), "");
  const int32_t ea = t.host->find_page(PrefixIndex::root_key(), a.key, a.tokens.data());
  const int32_t eb = t.host->find_page(PrefixIndex::root_key(), b.key, b.tokens.data());
  ASSERT_GE(ea, 0);
  ASSERT_GE(eb, 0);
  EXPECT_EQ(t.host->find_page(PrefixIndex::root_key(), c.key, c.tokens.data()), -1);
  // Both back as one batch, into other pages, in the other order.
  t.cpu->wait_copy(t.host->load_pages({eb, ea}, {5, 6}));
  EXPECT_EQ(read_page(t, 5), bytes_b);
  EXPECT_EQ(read_page(t, 6), bytes_a);
  EXPECT_EQ(t.host->counters().page_hits, 2u);
}

// Outside an admission each write-back is enqueued at once and a full tier evicts its least
// recently used entry, as before.
TEST(HostTierAdmission, OutsideAnAdmissionAFullTierEvictsItsOldestEntry) {
  Tier t = make_tier(2);
  const Key a = key_of(10), b = key_of(20), c = key_of(30);
  fill_page(t, 0, 1);
  fill_page(t, 1, 2);
  const std::vector<unsigned char> bytes_c = fill_page(t, 2, 3);
  t.host->store_page(0, PrefixIndex::root_key(), a.key, a.tokens.data());
  t.host->store_page(1, PrefixIndex::root_key(), b.key, b.tokens.data());
  t.host->store_page(2, PrefixIndex::root_key(), c.key, c.tokens.data());
  EXPECT_EQ(t.host->find_page(PrefixIndex::root_key(), a.key, a.tokens.data()), -1);
  const int32_t ec = t.host->find_page(PrefixIndex::root_key(), c.key, c.tokens.data());
  ASSERT_GE(ec, 0);
  EXPECT_EQ(t.host->counters().pages_evicted, 1u);
  t.cpu->wait_copy(t.host->load_pages({ec}, {7}));
  EXPECT_EQ(read_page(t, 7), bytes_c);
  EXPECT_EQ(t.host->check_integrity(), "");
}

// A tier on deferred copy streams (nothing lands before it is waited for or polled 100 times).
Tier make_deferred_tier(int32_t host_pages, DeferredCopyBackend*& copies,
                        int32_t device_pages = 8) {
  auto backend = std::make_unique<DeferredCopyBackend>();
  backend->set_polls_to_land(100);
  copies = backend.get();
  return make_tier(host_pages, std::move(backend), device_pages);
}

HostTier::AheadPage ahead_page(int32_t device_page, const Key& k) {
  return {device_page, PrefixIndex::root_key(), k.key, k.tokens.data()};
}

// The write-ahead of two pages is in flight when a page it missed is evicted: its write-back goes
// at once and the compute stream is ordered after it alone; the write-ahead stays in flight (on a
// stream shared with it, the step would have waited for it too). Every page comes back whole.
TEST(HostTierStreams, AWriteBackDoesNotQueueBehindAWriteAhead) {
  DeferredCopyBackend* copies = nullptr;
  Tier t = make_deferred_tier(4, copies);
  const Key a = key_of(10), b = key_of(20), c = key_of(30);
  const std::vector<unsigned char> bytes_a = fill_page(t, 0, 1), bytes_b = fill_page(t, 1, 2),
                                   bytes_c = fill_page(t, 2, 3);
  ASSERT_EQ(t.host->store_pages_ahead({ahead_page(0, a), ahead_page(1, b)}, {}), 2);
  EXPECT_EQ(copies->num_pending(CopyDir::kAhead), 1);
  t.host->store_page(2, PrefixIndex::root_key(), c.key, c.tokens.data());
  EXPECT_EQ(copies->num_pending(CopyDir::kOut), 0) << "the step is ordered after the write-back";
  EXPECT_EQ(copies->num_pending(CopyDir::kAhead), 1) << "the write-back waited for the write-ahead";
  EXPECT_EQ(copies->num_out_during_ahead(), 1u);
  const int32_t ea = t.host->find_page(PrefixIndex::root_key(), a.key, a.tokens.data());
  const int32_t eb = t.host->find_page(PrefixIndex::root_key(), b.key, b.tokens.data());
  const int32_t ec = t.host->find_page(PrefixIndex::root_key(), c.key, c.tokens.data());
  ASSERT_GE(ea, 0);
  ASSERT_GE(eb, 0);
  ASSERT_GE(ec, 0);
  t.cpu->wait_copy(t.host->load_pages({ea, eb, ec}, {5, 6, 7}));
  EXPECT_EQ(read_page(t, 5), bytes_a);
  EXPECT_EQ(read_page(t, 6), bytes_b);
  EXPECT_EQ(read_page(t, 7), bytes_c);
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
}

// A full tier of two entries, both written ahead and in flight: the eviction of a third page takes
// the least recently used of them, and its write-back (another stream) starts after that entry's
// write-ahead instead of racing it; the entry ends with the third page's bytes.
TEST(HostTierStreams, AWriteBackIntoAnEntryWrittenAheadFollowsIt) {
  DeferredCopyBackend* copies = nullptr;
  Tier t = make_deferred_tier(2, copies);
  const Key a = key_of(10), b = key_of(20), c = key_of(30);
  fill_page(t, 0, 1);
  const std::vector<unsigned char> bytes_b = fill_page(t, 1, 2), bytes_c = fill_page(t, 2, 3);
  ASSERT_EQ(t.host->store_pages_ahead({ahead_page(0, a), ahead_page(1, b)}, {}), 2);
  t.host->store_page(2, PrefixIndex::root_key(), c.key, c.tokens.data());
  EXPECT_EQ(copies->num_hazards(), 0u) << "the write-back raced the entry's write-ahead";
  EXPECT_EQ(t.host->counters().pages_evicted, 1u);
  EXPECT_EQ(t.host->find_page(PrefixIndex::root_key(), a.key, a.tokens.data()), -1);
  const int32_t eb = t.host->find_page(PrefixIndex::root_key(), b.key, b.tokens.data());
  const int32_t ec = t.host->find_page(PrefixIndex::root_key(), c.key, c.tokens.data());
  ASSERT_GE(eb, 0);
  ASSERT_GE(ec, 0);
  t.cpu->wait_copy(t.host->load_pages({eb, ec}, {5, 6}));
  EXPECT_EQ(read_page(t, 5), bytes_b);
  EXPECT_EQ(read_page(t, 6), bytes_c);
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
}

// The host hit of a sequence being admitted: c and d stored from device pages 2 and 3, then
// pinned, as the admission's lookup pins them.
struct PinnedHit {
  int32_t ec = -1, ed = -1;
  std::vector<unsigned char> bytes_c, bytes_d;
};
PinnedHit store_and_pin_hit(Tier& t, const Key& c, const Key& d) {
  const uint64_t root = PrefixIndex::root_key();
  PinnedHit h;
  h.bytes_c = fill_page(t, 2, 3);
  h.bytes_d = fill_page(t, 3, 4);
  t.host->store_page(2, root, c.key, c.tokens.data());
  t.host->store_page(3, root, d.key, d.tokens.data());
  h.ec = t.host->find_page(root, c.key, c.tokens.data());
  h.ed = t.host->find_page(root, d.key, d.tokens.data());
  EXPECT_GE(h.ec, 0);
  EXPECT_GE(h.ed, 0);
  t.host->pin_page(h.ec);
  t.host->pin_page(h.ed);
  return h;
}

// An admitted host hit's allocation evicts a page whose write-ahead is still in flight (what
// reuses the page follows it through the admission's loads, "Copies" 6, 7), then a page the
// write-ahead missed, whose write-back takes that same host entry (the LRU's only one: the hit's
// entries are pinned). The write-back (kOut) must start after the write-ahead (kAhead) still
// writing the entry: the entry ends with the second page's bytes under its key. (The first
// eviction used to forget the entry's write-ahead, whose wait the admission defers until after
// its write-backs are enqueued, so the two copies raced: a hazard here, and the entry kept the
// first page's bytes under the second page's key.)
TEST(HostTierStreams, AnAdmissionsWriteBackFollowsTheWriteAheadItsEvictionFound) {
  DeferredCopyBackend* copies = nullptr;
  Tier t = make_deferred_tier(3, copies);
  const uint64_t root = PrefixIndex::root_key();
  const Key a = key_of(10), b = key_of(20), c = key_of(30), d = key_of(40);
  const PinnedHit hit = store_and_pin_hit(t, c, d);
  const int32_t ec = hit.ec, ed = hit.ed;
  fill_page(t, 0, 1);
  const std::vector<unsigned char> bytes_b = fill_page(t, 1, 2);
  ASSERT_EQ(t.host->store_pages_ahead({ahead_page(0, a)}, {}), 1);
  const int32_t ea = t.host->find_page(root, a.key, a.tokens.data());
  ASSERT_GE(ea, 0);
  t.host->begin_admission();
  t.host->store_page(0, root, a.key, a.tokens.data());  // stored ahead, still in flight
  t.host->store_page(1, root, b.key, b.tokens.data());  // takes a's entry
  EXPECT_EQ(t.host->find_page(root, b.key, b.tokens.data()), ea);
  t.host->order_loads_after_admission();
  const CopyEvent load = t.host->load_pages({ec, ed}, {0, 1});
  t.host->end_admission(/*own_load_pending=*/true);
  t.host->unpin_page(ec);
  t.host->unpin_page(ed);
  EXPECT_EQ(copies->num_hazards(), 0u) << "the write-back raced the entry's write-ahead";
  t.cpu->wait_copy(load);
  EXPECT_EQ(read_page(t, 0), hit.bytes_c);
  EXPECT_EQ(read_page(t, 1), hit.bytes_d);
  const int32_t eb = t.host->find_page(root, b.key, b.tokens.data());
  ASSERT_GE(eb, 0);
  t.cpu->wait_copy(t.host->load_pages({eb}, {5}));
  EXPECT_EQ(read_page(t, 5), bytes_b);
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
}

// An admitted host hit loads (its own load pending, so only its load waits for the admission's
// write-back batch, "Copies" 6) and its allocation evicted a page into the tier's last free entry.
// The write-ahead between the steps has no other entry to take (the hit's are read by the load in
// flight) and takes that one while the write-back may still be writing it: the write-ahead
// (kAhead) must start after that batch (kOut), or two writers of one host entry race. The entry
// ends with the bytes of the page written ahead. (The write-ahead used to be ordered only after
// the compute stream, which does not wait for that batch: a hazard here, and once the write-ahead
// landed first, the entry held the evicted page's bytes under the page written ahead's key.)
TEST(HostTierStreams, AWriteAheadFollowsAnAdmissionsWriteBackItsLoadWaitsFor) {
  DeferredCopyBackend* copies = nullptr;
  Tier t = make_deferred_tier(3, copies);
  const uint64_t root = PrefixIndex::root_key();
  const Key a = key_of(10), b = key_of(20), c = key_of(30), d = key_of(40);
  const PinnedHit hit = store_and_pin_hit(t, c, d);
  const int32_t ec = hit.ec, ed = hit.ed;
  const std::vector<unsigned char> bytes_a = fill_page(t, 0, 1), bytes_b = fill_page(t, 6, 2);
  t.host->begin_admission();
  t.host->store_page(0, root, a.key, a.tokens.data());  // its allocation evicts page 0
  const int32_t ea = t.host->find_page(root, a.key, a.tokens.data());
  ASSERT_GE(ea, 0);
  t.host->order_loads_after_admission();
  const CopyEvent load = t.host->load_pages({ec, ed}, {0, 1});  // page 0 reused by the load
  const LoadTicket ticket = t.host->loads().add(load, {0, 1}, -1, {ec, ed});
  t.host->end_admission(/*own_load_pending=*/true);
  t.host->unpin_page(ec);
  t.host->unpin_page(ed);
  EXPECT_EQ(copies->num_pending(CopyDir::kOut), 1)
      << "the write-back is in flight: only the load waits for it";
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
  // Between the steps: page 6 written ahead, into the only entry no load reads.
  ASSERT_EQ(t.host->store_pages_ahead({ahead_page(6, b)}, {}), 1);
  EXPECT_EQ(t.host->find_page(root, b.key, b.tokens.data()), ea);
  EXPECT_EQ(t.host->find_page(root, a.key, a.tokens.data()), -1);
  EXPECT_EQ(copies->num_hazards(), 0u) << "the write-ahead raced the admission's write-back";
  // Page 6 is evicted (its write-ahead lands first), then the load settles.
  t.host->store_page(6, root, b.key, b.tokens.data());
  EXPECT_EQ(t.host->counters().stores_present, 1u);
  while (!t.host->loads().settled(ticket)) t.host->loads().poll();
  EXPECT_EQ(read_page(t, 0), hit.bytes_c);
  EXPECT_EQ(read_page(t, 1), hit.bytes_d);
  t.cpu->wait_copy(t.host->load_pages({ea}, {5}));
  EXPECT_EQ(read_page(t, 5), bytes_b) << "the entry holds another page's bytes under b's key";
  EXPECT_NE(read_page(t, 5), bytes_a);
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
}

// A write-ahead of 12 pages goes as two batches (the first kFirstAheadBatch pages, then the
// rest): evicting the first page orders the compute stream after the first batch only, the
// second staying in flight; evicting a page of the second orders it after that one. (As one
// batch, the first eviction after a long write-ahead waited for all of it: a 512-page write-ahead
// before a decode step.) Every page comes back whole.
TEST(HostTierStreams, AnEvictionWaitsForItsOwnWriteAheadBatchOnly) {
  static_assert(HostTier::kFirstAheadBatch == 8);
  DeferredCopyBackend* copies = nullptr;
  Tier t = make_deferred_tier(16, copies, 16);
  std::vector<Key> keys;
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<HostTier::AheadPage> pages;
  keys.reserve(12);
  for (int32_t p = 0; p < 12; ++p) {
    keys.push_back(key_of(100 + 10 * p));
    bytes.push_back(fill_page(t, p, p + 1));
    pages.push_back(ahead_page(p, keys.back()));
  }
  ASSERT_EQ(t.host->store_pages_ahead(pages, {}), 12);
  EXPECT_EQ(copies->num_pending(CopyDir::kAhead), 2);
  auto evict = [&](int32_t p) {
    const Key& k = keys[static_cast<size_t>(p)];
    t.host->store_page(p, PrefixIndex::root_key(), k.key, k.tokens.data());
  };
  evict(0);
  EXPECT_EQ(copies->num_pending(CopyDir::kAhead), 1)
      << "the first page's eviction waited for the second batch too";
  EXPECT_EQ(t.host->counters().stores_present, 1u);
  evict(11);
  EXPECT_EQ(copies->num_pending(CopyDir::kAhead), 0);
  std::vector<int32_t> entries, dst;
  for (int32_t p = 0; p < 12; ++p) {
    const Key& k = keys[static_cast<size_t>(p)];
    entries.push_back(t.host->find_page(PrefixIndex::root_key(), k.key, k.tokens.data()));
    ASSERT_GE(entries.back(), 0) << "page " << p;
  }
  for (int32_t round = 0; round < 3; ++round) {  // 4 pages a load into pages 12-15
    dst = {12, 13, 14, 15};
    std::vector<int32_t> some(entries.begin() + 4 * round, entries.begin() + 4 * round + 4);
    t.cpu->wait_copy(t.host->load_pages(some, dst));
    for (int32_t i = 0; i < 4; ++i)
      EXPECT_EQ(read_page(t, 12 + i), bytes[static_cast<size_t>(4 * round + i)])
          << "page " << 4 * round + i;
  }
  EXPECT_EQ(copies->num_hazards(), 0u);
  EXPECT_EQ(t.host->check_integrity(), "");
}

}  // namespace
}  // namespace syv::testing
