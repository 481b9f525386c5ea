#include "kv/host_tier.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/check.h"
#include "kv/cache_store.h"
#include "kv/prefix_index.h"

namespace syv {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<HostTier>> HostTier::create(CacheStore& store, int32_t key_tokens,
                                                   int32_t num_pages, int32_t num_checkpoints) {
  if (num_pages < 0 || num_checkpoints < 0 || key_tokens <= 0) {
    return Status::Error("host tier: expected >= 0 pages and checkpoints, found " +
                         std::to_string(num_pages) + " and " + std::to_string(num_checkpoints));
  }
  if (num_checkpoints > 0 && store.slot_bytes() <= 0) {
    return Status::Error("host tier: checkpoints asked for a model without recurrent state");
  }
  std::unique_ptr<HostTier> tier(new HostTier(store, key_tokens, num_pages, num_checkpoints));
  SYV_ASSIGN_OR_RETURN(tier->page_bytes_, store.backend().allocate_pinned(
                                              static_cast<size_t>(store.page_bytes() * num_pages)));
  SYV_ASSIGN_OR_RETURN(
      tier->checkpoint_bytes_,
      store.backend().allocate_pinned(static_cast<size_t>(store.slot_bytes() * num_checkpoints)));
  return tier;
}

HostTier::HostTier(CacheStore& store, int32_t key_tokens, int32_t num_pages,
                   int32_t num_checkpoints)
    : store_(store),
      key_tokens_(key_tokens),
      pages_(num_pages),
      checkpoints_(num_checkpoints),
      page_parent_(static_cast<size_t>(num_pages), 0),
      page_tokens_(static_cast<size_t>(num_pages) * static_cast<size_t>(key_tokens), 0),
      ckpt_length_(static_cast<size_t>(num_checkpoints), 0) {}

HostTier::~HostTier() {
  // Every copy was ordered before a later compute op (finish_copy), so the compute stream being
  // idle means no copy still reads or writes this memory.
  store_.backend().synchronize();
}

int64_t HostTier::total_bytes() const {
  return static_cast<int64_t>(page_bytes_.bytes() + checkpoint_bytes_.bytes());
}

char* HostTier::page_data(int32_t entry) const {
  return static_cast<char*>(page_bytes_.data()) + entry * store_.page_bytes();
}

char* HostTier::checkpoint_data(int32_t entry) const {
  return static_cast<char*>(checkpoint_bytes_.data()) + entry * store_.slot_bytes();
}

void HostTier::finish_copy(const CopyEvent& event, int64_t start_ns) {
  store_.backend().order_after_copy(event);
  counters_.copy_seconds += static_cast<double>(now_ns() - start_ns) * 1e-9;
}

int32_t HostTier::find_page(uint64_t parent, uint64_t key, const int32_t* tokens) const {
  const int32_t entry = pages_.find(key);
  if (entry < 0 || page_parent_[static_cast<size_t>(entry)] != parent) return -1;
  const int32_t* stored = &page_tokens_[static_cast<size_t>(entry) * key_tokens_];
  return std::equal(stored, stored + key_tokens_, tokens) ? entry : -1;
}

void HostTier::store_page(int32_t device_page, uint64_t parent, uint64_t key,
                          const int32_t* tokens) {
  if (const int32_t held = pages_.find(key); held >= 0) {
    if (find_page(parent, key, tokens) == held) {
      pages_.touch(held);
      ++counters_.stores_present;
    } else {
      ++counters_.stores_dropped;  // another prefix under a colliding key: keep the older one
    }
    return;
  }
  bool evicted = false;
  const int32_t entry = pages_.take(key, &evicted);
  if (entry < 0) {
    ++counters_.stores_dropped;
    return;
  }
  counters_.pages_evicted += evicted;
  const size_t i = static_cast<size_t>(entry);
  page_parent_[i] = parent;
  std::copy(tokens, tokens + key_tokens_, &page_tokens_[i * key_tokens_]);
  const int64_t start = now_ns();
  finish_copy(store_.copy_page_out(device_page, page_data(entry)), start);
  ++counters_.pages_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.page_bytes());
}

void HostTier::load_page(int32_t entry, int32_t device_page) {
  SYV_CHECK(pages_.used(entry)) << "load of empty host page " << entry;
  const int64_t start = now_ns();
  finish_copy(store_.copy_page_in(page_data(entry), device_page), start);
  pages_.touch(entry);
  ++counters_.page_hits;
  counters_.bytes_from_host += static_cast<uint64_t>(store_.page_bytes());
}

int32_t HostTier::find_checkpoint(uint64_t key, int32_t length) const {
  const int32_t entry = checkpoints_.find(key);
  return entry >= 0 && ckpt_length_[static_cast<size_t>(entry)] == length ? entry : -1;
}

void HostTier::store_checkpoint(int32_t device_checkpoint, uint64_t key, int32_t length) {
  if (const int32_t held = checkpoints_.find(key); held >= 0) {
    if (ckpt_length_[static_cast<size_t>(held)] == length) {
      checkpoints_.touch(held);
      ++counters_.stores_present;
    } else {
      ++counters_.stores_dropped;
    }
    return;
  }
  bool evicted = false;
  const int32_t entry = checkpoints_.take(key, &evicted);
  if (entry < 0) {
    ++counters_.stores_dropped;
    return;
  }
  counters_.checkpoints_evicted += evicted;
  ckpt_length_[static_cast<size_t>(entry)] = length;
  const int64_t start = now_ns();
  finish_copy(store_.copy_checkpoint_out(device_checkpoint, checkpoint_data(entry)), start);
  ++counters_.checkpoints_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.slot_bytes());
}

void HostTier::load_checkpoint(int32_t entry, int32_t state_slot) {
  SYV_CHECK(checkpoints_.used(entry)) << "load of empty host checkpoint " << entry;
  const int64_t start = now_ns();
  finish_copy(store_.copy_slot_in(checkpoint_data(entry), state_slot), start);
  checkpoints_.touch(entry);
  ++counters_.checkpoint_hits;
  counters_.bytes_from_host += static_cast<uint64_t>(store_.slot_bytes());
}

std::string HostTier::check_integrity() const {
  std::string err = pages_.check_integrity();
  if (!err.empty()) return "host pages: " + err;
  err = checkpoints_.check_integrity();
  if (!err.empty()) return "host checkpoints: " + err;
  std::ostringstream out;
  for (int32_t e = 0; e < pages_.size(); ++e) {
    if (!pages_.used(e)) continue;
    const size_t i = static_cast<size_t>(e);
    if (PrefixIndex::page_key(page_parent_[i], &page_tokens_[i * key_tokens_], key_tokens_) !=
        pages_.key(e)) {
      out << "host page " << e << " key does not match its tokens; ";
      break;
    }
  }
  if (pages_.num_pinned() + checkpoints_.num_pinned() > 0)
    out << pages_.num_pinned() << " host pages and " << checkpoints_.num_pinned()
        << " host checkpoints pinned between steps; ";
  return out.str();
}

std::string HostTier::describe() const {
  std::ostringstream line;
  line << "host tier: " << num_pages() << " pages ("
       << int64_t{num_pages()} * store_.config().page_size << " tokens, " << store_.page_bytes()
       << " bytes/page)";
  if (num_checkpoints() > 0)
    line << " + " << num_checkpoints() << " checkpoints (" << store_.slot_bytes() << " bytes each)";
  line << ", " << (total_bytes() >> 20) << " MiB of host memory from " << store_.backend().name()
       << " (pinned where the backend pins), write-back at device eviction";
  return line.str();
}

}  // namespace syv
