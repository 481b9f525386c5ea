#include "kv/host_tier.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/check.h"
#include "core/log.h"
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
  return std::unique_ptr<HostTier>(new HostTier(store, key_tokens, num_pages, num_checkpoints));
}

HostTier::HostTier(CacheStore& store, int32_t key_tokens, int32_t num_pages,
                   int32_t num_checkpoints)
    : store_(store),
      key_tokens_(key_tokens),
      pages_(num_pages),
      checkpoints_(num_checkpoints),
      page_parent_(static_cast<size_t>(num_pages), 0),
      page_tokens_(static_cast<size_t>(num_pages) * static_cast<size_t>(key_tokens), 0),
      ckpt_length_(static_cast<size_t>(num_checkpoints), 0) {
  auto shape = [](Pieces& p, int64_t entry_bytes) {
    p.entry_bytes = entry_bytes;
    p.per_piece = static_cast<int32_t>(
        std::clamp<int64_t>(entry_bytes > 0 ? kHostPieceBytes / entry_bytes : 1, 1, 1 << 20));
  };
  shape(page_pieces_, store.page_bytes());
  shape(checkpoint_pieces_, store.slot_bytes());
}

HostTier::~HostTier() {
  // Every copy was ordered before a later compute op (finish_copy), so the compute stream being
  // idle means no copy still reads or writes this memory.
  store_.backend().synchronize();
}

int64_t HostTier::total_bytes() const {
  return store_.page_bytes() * pages_.size() + store_.slot_bytes() * checkpoints_.size();
}

int64_t HostTier::pinned_bytes() const {
  return page_pieces_.bytes() + checkpoint_pieces_.bytes();
}

char* HostTier::Pieces::at(int32_t entry) const {
  const size_t piece = static_cast<size_t>(entry / per_piece);
  SYV_CHECK_LT(piece, buffers.size()) << "host entry " << entry << " in an unallocated piece";
  return static_cast<char*>(buffers[piece].data()) + (entry % per_piece) * entry_bytes;
}

int64_t HostTier::Pieces::bytes() const {
  int64_t n = 0;
  for (const PinnedBuffer& b : buffers) n += static_cast<int64_t>(b.bytes());
  return n;
}

bool HostTier::ensure(Pieces& pieces, HostEntries& entries, int32_t entry, const char* what) {
  while (static_cast<int64_t>(pieces.buffers.size()) * pieces.per_piece <= entry) {
    const int64_t first = static_cast<int64_t>(pieces.buffers.size()) * pieces.per_piece;
    const int64_t count = std::min<int64_t>(pieces.per_piece, entries.size() - first);
    Result<PinnedBuffer> buffer =
        store_.backend().allocate_pinned(static_cast<size_t>(count * pieces.entry_bytes));
    if (!buffer.ok()) {
      if (!warned_) {
        SYV_LOG(WARN) << "host tier: keeps " << first << " " << what << " of " << entries.size()
                      << ": " << buffer.message();
        warned_ = true;
      }
      entries.shrink(static_cast<int32_t>(first));
      return false;
    }
    pieces.buffers.push_back(std::move(*buffer));
  }
  return true;
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
  if (!ensure(page_pieces_, pages_, entry, "pages")) {
    ++counters_.stores_dropped;
    return;
  }
  counters_.pages_evicted += evicted;
  const size_t i = static_cast<size_t>(entry);
  page_parent_[i] = parent;
  std::copy(tokens, tokens + key_tokens_, &page_tokens_[i * key_tokens_]);
  const int64_t start = now_ns();
  finish_copy(store_.copy_page_out(device_page, page_pieces_.at(entry)), start);
  ++counters_.pages_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.page_bytes());
}

void HostTier::load_page(int32_t entry, int32_t device_page) {
  SYV_CHECK(pages_.used(entry)) << "load of empty host page " << entry;
  const int64_t start = now_ns();
  finish_copy(store_.copy_page_in(page_pieces_.at(entry), device_page), start);
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
  if (!ensure(checkpoint_pieces_, checkpoints_, entry, "checkpoints")) {
    ++counters_.stores_dropped;
    return;
  }
  counters_.checkpoints_evicted += evicted;
  ckpt_length_[static_cast<size_t>(entry)] = length;
  const int64_t start = now_ns();
  finish_copy(store_.copy_checkpoint_out(device_checkpoint, checkpoint_pieces_.at(entry)), start);
  ++counters_.checkpoints_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.slot_bytes());
}

void HostTier::load_checkpoint(int32_t entry, int32_t state_slot) {
  SYV_CHECK(checkpoints_.used(entry)) << "load of empty host checkpoint " << entry;
  const int64_t start = now_ns();
  finish_copy(store_.copy_slot_in(checkpoint_pieces_.at(entry), state_slot), start);
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
       << " (pinned where the backend pins, in pieces of " << (kHostPieceBytes >> 20)
       << " MiB as evictions fill it), write-back at device eviction";
  return line.str();
}

}  // namespace syv
