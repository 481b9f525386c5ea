#include "kv/host_tier.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <sstream>

#include "backend/available_memory.h"
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
                                                   int32_t num_pages, int32_t num_checkpoints,
                                                   const HostPinOptions& pin) {
  if (num_pages < 0 || num_checkpoints < 0 || key_tokens <= 0) {
    return Status::Error("host tier: expected >= 0 pages and checkpoints, found " +
                         std::to_string(num_pages) + " and " + std::to_string(num_checkpoints));
  }
  if (pin.reserve_bytes < 0 || pin.piece_bytes <= 0) {
    return Status::Error("host tier: expected a pinned reserve >= 0 and pieces > 0 bytes, found " +
                         std::to_string(pin.reserve_bytes) + " and " +
                         std::to_string(pin.piece_bytes));
  }
  if (num_checkpoints > 0 && store.external_slot_bytes() <= 0) {
    return Status::Error("host tier: checkpoints asked for a model without recurrent state");
  }
  return std::unique_ptr<HostTier>(
      new HostTier(store, key_tokens, num_pages, num_checkpoints, pin));
}

HostTier::HostTier(CacheStore& store, int32_t key_tokens, int32_t num_pages,
                   int32_t num_checkpoints, const HostPinOptions& pin)
    : store_(store),
      key_tokens_(key_tokens),
      pages_(num_pages, 0),
      checkpoints_(num_checkpoints, 0),
      faulter_(pin.fault_in_background, store.backend().pins_host_memory()),
      pin_all_while_idle_(pin.pin_all_while_idle),
      page_parent_(static_cast<size_t>(num_pages), 0),
      page_tokens_(static_cast<size_t>(num_pages) * static_cast<size_t>(key_tokens), 0),
      ckpt_length_(static_cast<size_t>(num_checkpoints), 0),
      loads_(store.backend()),
      page_write_(static_cast<size_t>(num_pages)),
      page_back_(static_cast<size_t>(num_pages)) {
  // The reserve is split between the kinds like the tier; each keeps at least one piece.
  const double total = static_cast<double>(std::max<int64_t>(total_bytes(), 1));
  auto shape = [&](Pieces& p, int64_t entry_bytes, int32_t size) {
    p.entry_bytes = entry_bytes;
    p.per_piece = static_cast<int32_t>(
        std::clamp<int64_t>(entry_bytes > 0 ? pin.piece_bytes / entry_bytes : 1, 1, 1 << 20));
    const double share = static_cast<double>(entry_bytes) * size / total;
    const int64_t want =
        entry_bytes > 0
            ? static_cast<int64_t>(static_cast<double>(pin.reserve_bytes) * share) / entry_bytes
            : 0;
    p.reserve = static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(want, p.per_piece), size));
  };
  shape(page_pieces_, store.external_page_bytes(), num_pages);
  shape(checkpoint_pieces_, store.external_slot_bytes(), num_checkpoints);
}

HostTier::~HostTier() {
  // Every store was ordered before a later compute op (finish_store) and the loads still in flight
  // are waited for, so the compute stream being idle means no copy of either stream still reads
  // or writes this memory.
  loads_.wait_all();
  store_.backend().wait_copy(last_ahead_);  // nothing else waits for the write-aheads
  store_.backend().synchronize();
}

int64_t HostTier::total_bytes() const {
  return store_.external_page_bytes() * pages_.size() +
         store_.external_slot_bytes() * checkpoints_.size();
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

bool HostTier::growing(int kind) const {
  const HostEntries& e = entries(kind);
  return e.num_open() < e.size();
}

int HostTier::short_kind() const {
  for (int kind = 0; kind < 2; ++kind)
    if (growing(kind) && entries(kind).num_free() < pieces(kind).reserve) return kind;
  return -1;
}

int HostTier::kind_to_pin(bool idle) const {
  const int kind = short_kind();
  if (kind >= 0 || !idle || !pin_all_while_idle_) return kind;
  return growing(0) ? 0 : growing(1) ? 1 : -1;
}

size_t HostTier::next_piece_bytes(int kind) {
  const HostEntries& e = entries(kind);
  const Pieces& p = pieces(kind);
  const int64_t count = std::min<int64_t>(p.per_piece, e.size() - e.num_open());
  return static_cast<size_t>(count * p.entry_bytes);
}

void HostTier::pin_piece(int kind, Result<HostPages> pages) {
  HostEntries& e = entries(kind);
  Pieces& p = pieces(kind);
  const int64_t start = now_ns();
  Result<PinnedBuffer> buffer = pages.ok() ? store_.backend().pin_host_pages(std::move(*pages))
                                           : Result<PinnedBuffer>(pages.status());
  if (!buffer.ok()) {
    if (!warned_) {
      SYV_LOG(WARN) << "host tier: keeps " << e.num_open() << " "
                    << (kind == 0 ? "pages" : "checkpoints") << " of " << e.size() << ": "
                    << buffer.message();
      warned_ = true;
    }
    e.shrink(e.num_open());
    return;
  }
  const int32_t count = static_cast<int32_t>(static_cast<int64_t>(buffer->bytes()) / p.entry_bytes);
  p.buffers.push_back(std::move(*buffer));
  e.open(e.num_open() + count);
  ++counters_.pieces_pinned;
  counters_.pin_seconds += static_cast<double>(now_ns() - start) * 1e-9;
}

bool HostTier::between_steps(bool idle) {
  const int kind = kind_to_pin(idle);
  if (kind < 0) return false;
  // Before the device pools first evict, the reserve is pinned only while idle: a busy server
  // whose device pools still have room pays no pin between its steps.
  const HostTierCounters& c = counters_;
  const bool evicted =
      c.pages_stored + c.checkpoints_stored + c.stores_present + c.stores_short + c.stores_dropped >
      0;
  const bool pin_now = idle || evicted;
  // Never waits for the faulter, idle or not: a request arriving meanwhile would wait with it
  // (the engine loop sleeps on its inbox between idle calls instead).
  if (!faulter_.has(kind)) {
    if (faulter_.busy()) return true;  // the other kind's piece, faulted ahead: a later call
    // (Faulting in on the background thread costs the steps nothing, so it starts anyway.)
    if (pin_now || faulter_.background()) faulter_.start(kind, next_piece_bytes(kind));
  }
  if (!pin_now) return true;
  std::optional<Result<HostPages>> piece = faulter_.take(kind);
  if (!piece.has_value()) return true;  // still being faulted in: a later call pins it
  pin_piece(kind, std::move(*piece));
  // Fault the next piece in ahead (the kind short now, else one still growing), so that the next
  // gap that needs it only pins.
  int next = short_kind();
  if (next < 0) next = growing(0) ? 0 : growing(1) ? 1 : -1;
  if (next >= 0 && faulter_.background() && !faulter_.busy() && !faulter_.has(next))
    faulter_.start(next, next_piece_bytes(next));
  return kind_to_pin(idle) >= 0;
}

bool HostTier::has_room(int kind) {
  if (!growing(kind) || entries(kind).num_free() > 0) return true;
  ++counters_.stores_short;
  return false;
}

void HostTier::finish_store(const CopyEvent& event, int64_t start_ns) {
  store_.backend().order_after_copy(event);
  count_copy_time(start_ns);
}

void HostTier::order_after_write_ahead(int32_t entry, bool load) {
  CopyEvent& w = page_write_[static_cast<size_t>(entry)];
  if (w.empty()) return;
  Backend& backend = store_.backend();
  if (!backend.copy_done(w)) {
    if (load) {
      backend.order_copies_after_copy(w, CopyDir::kIn);
      return;  // kept: the eviction of the device page may still need it
    }
    order_reuse_after(w);
    // Inside an admission nothing waits for w yet (the admission's loads or the compute stream
    // will, from order_loads_after_admission() or end_admission() on), so it is kept: a write-back
    // listed by the same admission that takes this entry must follow it (take_page_entry), as its
    // batch is enqueued before those waits.
    if (admitting_) return;
  }
  w = CopyEvent();  // landed, or the compute stream waits for it: every later copy follows it
}

void HostTier::order_reuse_after(const CopyEvent& ahead) {
  ++counters_.write_ahead_waits;
  if (admitting_) {
    admission_after_ahead_ = true;  // last_ahead_ is at or after `ahead`: an in-order stream
  } else {
    store_.backend().order_after_copy(ahead);
  }
}

void HostTier::order_unstored_after_write_ahead() {
  if (!last_ahead_.empty() && !store_.backend().copy_done(last_ahead_))
    order_reuse_after(last_ahead_);
}

int32_t HostTier::store_pages_ahead(const std::vector<AheadPage>& pages,
                                    const std::vector<int32_t>& keep) {
  SYV_CHECK(!admitting_) << "host tier: write-ahead inside an admission";
  ahead_listed_.clear();
  ahead_entries_.clear();
  for (const AheadPage& p : pages) {
    if (pages_.find(p.key) >= 0) continue;  // held (or a colliding key: left to the eviction)
    if (growing(0) && pages_.num_free() == 0) break;  // the free pinned entries are for evictions
    const int32_t entry =
        take_page_entry(p.parent, p.key, p.tokens, ahead_entries_, &keep, CopyDir::kAhead);
    if (entry < 0) break;
    ahead_listed_.push_back({p.device_page, page_pieces_.at(entry)});
    ahead_entries_.push_back(entry);
  }
  if (ahead_listed_.empty()) return 0;
  // In the order given (the next evictions first), in batches of first_ahead_batch_ pages, then
  // twice as many each: a page's reuse follows its own batch (page_write_), so the step that
  // evicts the first pages waits for a few pages' copy, not for all of a long write-ahead.
  const int64_t start = now_ns();
  const size_t total = ahead_listed_.size();
  size_t batch = first_ahead_batch_;
  for (size_t begin = 0; begin < total; begin += batch, batch *= 2) {
    const size_t end = std::min(total, begin + batch);
    last_ahead_ = store_.copy_pages_ahead(
        std::span<const CacheStore::PageCopy>(ahead_listed_).subspan(begin, end - begin));
    for (size_t i = begin; i < end; ++i)
      page_write_[static_cast<size_t>(ahead_entries_[i])] = last_ahead_;
  }
  count_copy_time(start);
  const int32_t n = static_cast<int32_t>(total);
  counters_.pages_written_ahead += static_cast<uint64_t>(n);
  counters_.bytes_to_host += static_cast<uint64_t>(n * store_.external_page_bytes());
  return n;
}

void HostTier::set_first_ahead_batch(size_t pages) {
  SYV_CHECK(pages >= 1) << "host tier: a first write-ahead batch of " << pages << " pages";
  first_ahead_batch_ = pages;
}

void HostTier::begin_admission() {
  SYV_CHECK(!admitting_ && admission_wb_.empty() && !admission_after_ahead_ &&
            !admission_loads_after_ahead_)
      << "host tier: admission already open";
  admitting_ = true;
}

void HostTier::order_loads_after_admission() {
  SYV_CHECK(admitting_) << "host tier: no admission open";
  if (!admission_listed_.empty()) {  // the listed write-backs, as one batch
    const int64_t start = now_ns();
    admission_wb_ = store_.copy_pages_out(admission_listed_);
    count_copy_time(start);
    admission_listed_.clear();  // admission_entries_ stay listed until end_admission()
  }
  Backend& backend = store_.backend();
  if (!admission_wb_.empty()) backend.order_copies_after_copy(admission_wb_, CopyDir::kIn);
  // The write-aheads have a stream of their own: the loads wait for the latest one too.
  if (admission_after_ahead_) backend.order_copies_after_copy(last_ahead_, CopyDir::kIn);
  admission_loads_after_ahead_ = admission_after_ahead_;
  admission_after_ahead_ = false;
}

void HostTier::end_admission(bool own_load_pending) {
  SYV_CHECK(admitting_ && admission_listed_.empty())
      << "host tier: end_admission() without an admission open or before "
         "order_loads_after_admission()";
  if (!admission_wb_.empty()) {
    if (own_load_pending) {
      // Only the loads wait for the batch: a write-ahead that takes one of its entries before it
      // landed must follow it (take_page_entry).
      for (int32_t entry : admission_entries_)
        page_back_[static_cast<size_t>(entry)] = admission_wb_;
    } else {
      store_.backend().order_after_copy(admission_wb_);
    }
  }
  admission_entries_.clear();
  // Without its own load the compute stream follows the write-ahead its loads would have; an
  // eviction after order_loads_after_admission() is followed as any store.
  if ((!own_load_pending && admission_loads_after_ahead_) || admission_after_ahead_)
    store_.backend().order_after_copy(last_ahead_);
  admission_after_ahead_ = false;
  admission_loads_after_ahead_ = false;
  admission_wb_ = CopyEvent();
  admitting_ = false;
}

void HostTier::count_copy_time(int64_t start_ns) {
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
      order_after_write_ahead(held, /*load=*/false);  // the device page is reused next
      ++counters_.stores_present;
    } else {
      ++counters_.stores_dropped;  // another prefix under a colliding key: keep the older one
      order_unstored_after_write_ahead();
    }
    return;
  }
  if (!has_room(0)) {
    order_unstored_after_write_ahead();
    return;
  }
  const int32_t entry =
      take_page_entry(parent, key, tokens, admission_entries_, nullptr, CopyDir::kOut);
  if (entry < 0) {
    ++counters_.stores_dropped;
    order_unstored_after_write_ahead();
    return;
  }
  if (admitting_) {
    admission_listed_.push_back({device_page, page_pieces_.at(entry)});
    admission_entries_.push_back(entry);
  } else {
    const int64_t start = now_ns();
    finish_store(store_.copy_page_out(device_page, page_pieces_.at(entry)), start);
  }
  ++counters_.pages_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.external_page_bytes());
}

int32_t HostTier::take_page_entry(uint64_t parent, uint64_t key, const int32_t* tokens,
                                  const std::vector<int32_t>& listed,
                                  const std::vector<int32_t>* keep, CopyDir writer) {
  auto in = [](const std::vector<int32_t>& v, int32_t e) {
    return std::find(v.begin(), v.end(), e) != v.end();
  };
  // Not an entry a load in flight reads: a write-back or write-ahead runs on another stream
  // ("Copies" 4); nor one a copy of the same batch targets (a batch's copies run in no order); nor
  // one to keep.
  bool evicted = false;
  const int32_t entry = pages_.take(key, &evicted, [&](int32_t e) {
    return loads_.reads_host_page(e) || in(listed, e) || (keep != nullptr && in(*keep, e));
  });
  if (entry < 0) return -1;
  if (wanted_.count(key) > 0) pages_.keep(entry);  // a waiting sequence's page, stored now
  counters_.pages_evicted += evicted;
  const size_t i = static_cast<size_t>(entry);
  page_parent_[i] = parent;
  std::copy(tokens, tokens + key_tokens_, &page_tokens_[i * key_tokens_]);
  // A write-back into an entry whose write-ahead may be in flight follows it ("Copies" 7; a
  // write-ahead follows it on its own stream).
  CopyEvent& ahead = page_write_[i];
  if (writer != CopyDir::kAhead && !ahead.empty() && !store_.backend().copy_done(ahead))
    store_.backend().order_copies_after_copy(ahead, writer);
  ahead = CopyEvent();  // the caller's copy is the entry's write now ("Copies" 2, 6, 7)
  // A write-ahead into an entry whose admission write-back may be in flight, which only that
  // admission's loads wait for, follows it too ("Copies" 6; a write-back follows it on its stream).
  CopyEvent& back = page_back_[i];
  if (writer != CopyDir::kOut && !back.empty() && !store_.backend().copy_done(back))
    store_.backend().order_copies_after_copy(back, writer);
  back = CopyEvent();
  return entry;
}

CopyEvent HostTier::load_pages(const std::vector<int32_t>& entries,
                               const std::vector<int32_t>& device_pages) {
  SYV_CHECK_EQ(entries.size(), device_pages.size()) << "host pages loaded into device pages";
  std::vector<CacheStore::PageCopy> copies;
  copies.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    SYV_CHECK(pages_.used(entries[i])) << "load of empty host page " << entries[i];
    order_after_write_ahead(entries[i], /*load=*/true);
    copies.push_back({device_pages[i], page_pieces_.at(entries[i])});
    pages_.touch(entries[i]);
  }
  const int64_t start = now_ns();
  CopyEvent event = store_.copy_pages_in(copies);
  count_copy_time(start);
  counters_.page_hits += entries.size();
  counters_.bytes_from_host +=
      static_cast<uint64_t>(store_.external_page_bytes()) * static_cast<uint64_t>(entries.size());
  return event;
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
  if (!has_room(1)) return;
  bool evicted = false;
  const int32_t entry = checkpoints_.take(
      key, &evicted, [this](int32_t e) { return loads_.reads_host_checkpoint(e); });
  if (entry < 0) {
    ++counters_.stores_dropped;
    return;
  }
  counters_.checkpoints_evicted += evicted;
  ckpt_length_[static_cast<size_t>(entry)] = length;
  const int64_t start = now_ns();
  finish_store(store_.copy_checkpoint_out(device_checkpoint, checkpoint_pieces_.at(entry)), start);
  ++counters_.checkpoints_stored;
  counters_.bytes_to_host += static_cast<uint64_t>(store_.external_slot_bytes());
}

CopyEvent HostTier::load_checkpoint(int32_t entry, int32_t state_slot) {
  SYV_CHECK(checkpoints_.used(entry)) << "load of empty host checkpoint " << entry;
  const int64_t start = now_ns();
  CopyEvent event = store_.copy_slot_in(checkpoint_pieces_.at(entry), state_slot);
  count_copy_time(start);
  checkpoints_.touch(entry);
  ++counters_.checkpoint_hits;
  counters_.bytes_from_host += static_cast<uint64_t>(store_.external_slot_bytes());
  return event;
}

void HostTier::want_pages(const std::vector<uint64_t>& keys) {
  for (uint64_t key : keys) {
    if (wanted_[key]++ > 0) continue;
    if (const int32_t entry = pages_.find(key); entry >= 0) pages_.keep(entry);
  }
}

void HostTier::unwant_pages(const std::vector<uint64_t>& keys) {
  for (uint64_t key : keys) {
    auto it = wanted_.find(key);
    SYV_CHECK(it != wanted_.end()) << "host tier: unwant of page key " << key << " not wanted";
    if (--it->second > 0) continue;
    wanted_.erase(it);
    if (const int32_t entry = pages_.find(key); entry >= 0) pages_.unkeep(entry);
  }
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
  for (int32_t e = 0; e < pages_.size(); ++e)
    if (!page_write_[static_cast<size_t>(e)].empty() && !pages_.used(e)) {
      out << "host page " << e << " has a write-ahead in flight but is not in use; ";
      break;
    }
  if (admitting_ || !admission_wb_.empty() || !admission_listed_.empty() ||
      admission_after_ahead_ || admission_loads_after_ahead_)
    out << "an admission open between steps (" << admission_listed_.size()
        << " write-backs listed); ";
  if (pages_.num_pinned() + checkpoints_.num_pinned() > 0)
    out << pages_.num_pinned() << " host pages and " << checkpoints_.num_pinned()
        << " host checkpoints pinned between steps; ";
  int32_t kept = 0;
  for (const auto& [key, wanting] : wanted_) {
    const int32_t entry = pages_.find(key);
    if (wanting <= 0 || (entry >= 0 && pages_.keeps(entry) != 1)) {
      out << "wanted page key " << key << " (" << wanting << " waiting) held by entry " << entry
          << " with " << (entry >= 0 ? pages_.keeps(entry) : 0) << " keeps; ";
      break;
    }
    kept += entry >= 0;
  }
  if (kept != pages_.num_kept())
    out << pages_.num_kept() << " host pages kept for " << kept << " wanted keys held; ";
  err = loads_.check_integrity();
  if (!err.empty()) out << "host loads in flight: " << err;
  for (const auto& [entry, load] : loads_.host_page_reads())
    if (entry < 0 || entry >= pages_.size() || !pages_.used(entry))
      out << "host page " << entry << " read by load " << load << " is not in use; ";
  for (const auto& [entry, load] : loads_.host_checkpoint_reads())
    if (entry < 0 || entry >= checkpoints_.size() || !checkpoints_.used(entry))
      out << "host checkpoint " << entry << " read by load " << load << " is not in use; ";
  return out.str();
}

std::string HostTier::describe() const {
  std::ostringstream line;
  line << "host tier: " << num_pages() << " pages ("
       << int64_t{num_pages()} * store_.config().page_size << " tokens, "
       << store_.external_page_bytes() << " bytes/page)";
  if (num_checkpoints() > 0)
    line << " + " << num_checkpoints() << " checkpoints (" << store_.external_slot_bytes()
         << " bytes each)";
  line << ", " << (total_bytes() >> 20) << " MiB of host memory from " << store_.backend().name()
       << " (pinned where the backend pins, between steps, in pieces of up to "
       << format_bytes(std::min(page_pieces_.per_piece, num_pages()) * store_.external_page_bytes())
       << ", keeping " << page_pieces_.reserve << " pages";
  if (num_checkpoints() > 0) line << " and " << checkpoint_pieces_.reserve << " checkpoints";
  line << " free ahead of evictions; while idle "
       << (pin_all_while_idle_ ? "the whole tier" : "only that reserve")
       << "), write-back at device eviction";
  return line.str();
}

}  // namespace syv
