// The host tier under the device cache: pinned host memory holding the KV pages and the hybrid
// recurrent-state checkpoints that the device pools evicted, found again by the same keys
// (docs/hybrid-cache.md "Host tier").
//
// Write-back: a page or checkpoint is copied to the host when the device LRU evicts it (the
// eviction callbacks of PagePool and CheckpointPool), or, for pages, shortly before: between steps
// the write-ahead ("Write-ahead" below) stores the pages the next step could evict. Either way the
// host tier costs no bandwidth until the device pool is full, and a page written once is stored
// once.
//
// Keys: a page entry carries the device prefix index's chain key (PrefixIndex::page_key) with the
// parent key and the key's tokens, compared on every lookup (a hash collision is a miss, as on the
// device). A checkpoint entry carries the chain key of the page ending at its boundary and its
// length (kv/checkpoint_pool.h), compared too.
//
// Copies go through the cache store's asynchronous copies (CacheStore::copy_*_out/in/ahead) on
// the backend's three copy streams (backend.h CopyDir): write-backs at eviction (store_*) on the
// kOut stream, write-aheads (store_pages_ahead) on the kAhead one, loads (load_*) on the kIn one.
// The host never waits for any:
//  * store_*: the device page / checkpoint is copied out, then the compute stream is ordered
//    after the copy (Backend::order_after_copy), so whatever the next op writes into the device
//    entry cannot overtake the copy that reads it;
//  * load_*: the host entry is copied into a device page / state slot and the event is returned,
//    nothing ordered: the caller records the load in loads() (kv/inflight_loads.h), and its
//    sequence is not scheduled (nor is any other sequence that matched those pages) until the load
//    settled, so the sequences already running keep stepping while it runs.
// Why two streams: on one in-order stream a write-back enqueued while a load was in flight (a
// decoding sequence crossing into a new page when the device pool is full) queued behind the
// load, and so did the step ordered after it: the step waited for the whole load (~75 ms for a
// 32K-token prompt on an H200; the others' decode over the loading steps fell to 0.15 of its
// speed, docs/performance.md). On its own stream the write-back starts at once. Why a third for
// the write-ahead: its batches are hundreds of pages (a sequence's, ~88 ms for 4.8 GB at the
// pinned rate), and a checkpoint write-back or a page the write-ahead missed, which the step
// waits for, queued behind the batch in flight on a shared stream (the suspected cause of the
// 9B-class hybrid's others' decode at 0.35 while a host hit loaded, docs/hybrid-cache.md).
// Ordering, stream against stream (every copy starts after what the compute stream was given
// before it, its waits on copies included: backend.h CopyDir):
//  1. a write-back starts after the ops that wrote the evicted page or checkpoint (they were
//     enqueued on the compute stream before it);
//  2. what reuses the evicted device page or checkpoint (a forward, a reset, or a load into the
//     page, on the kIn stream) starts after the write-back: finish_store() orders the compute
//     stream after it, and every later load starts after the compute stream's wait;
//  3. a load that reads a host entry whose write-back may still be in flight starts after that
//     write-back, by the same wait (2): a device-side wait, the host does not block;
//  4. a host entry that is the source of a load in flight is not the destination of a
//     write-back until that load settled: from the admission's lookup to the load it is pinned
//     (HostEntries::pin: an allocation in between may evict into this tier and would take it),
//     from the load until it settles it is busy (loads().reads_host_*(), which store_* pass to
//     HostEntries::take as entries it may not evict), so write-backs stay fast (no wait on the
//     load) and a store that finds every entry pinned or busy is dropped (stores_dropped). A load
//     settles when it landed or when the compute stream was ordered after it (a cancel, an abort,
//     a preemption: kv/inflight_loads.h), after which every write-back starts after it (2);
//  5. loads among themselves stay in order on their stream (one load settling settles every
//     earlier one); write-backs among themselves too, and write-aheads among themselves;
//  6. except while a sequence is admitted (begin_admission() .. end_admission()): the pages its
//     own allocation evicts go to it alone, and when it loads (its own load pending) nothing
//     writes them before its load settles; so instead of the compute stream, its loads wait for
//     those page write-backs (order_loads_after_admission(): the load stream waits for their
//     events, Backend::order_copies_after_copy), and everything after its load waits for them
//     through it (the tail pages it prefills later too: its sequence leaves the loading state,
//     or is cancelled or preempted, only after the compute stream was ordered after its load).
//     The step that admits a host hit thus does not wait for its own write-backs (a 32K-token
//     resend evicting ~100 64-token pages of a 0.6B model: ~14 ms on an H200). When the
//     sequence loads nothing, the compute stream waits for them at end_admission(), as for any
//     other store. Checkpoint write-backs are never deferred. Nothing else waits for such a
//     batch before the load settles, but a write-ahead (7) between the steps may take one of its
//     host entries meanwhile (once the older ones are taken, kept or busy, the hit's among them:
//     a small tier, or a long write-ahead): that write-ahead starts after the batch (the
//     write-ahead stream waits for it, take_page_entry(): two writers of one host entry on two
//     streams; a write-back that takes it follows the batch on its own stream).
//  7. a write-ahead (below) is a write-back that nothing waits for when it is enqueued, on a
//     stream of its own (kAhead) so that the write-backs a step waits for (pages the write-ahead
//     missed, checkpoints) never queue behind a write-ahead batch: the entry keeps its event, and
//     when the device page is evicted later (store_page finds the key), the compute stream is
//     ordered after it if it has not landed yet (inside an admission: the admission's loads and,
//     without a load, the compute stream, as in 6); a load of an entry whose write-ahead may be in
//     flight starts after it (the load stream waits for it); a write-back into an entry whose
//     write-ahead may be in flight (the host LRU took it) starts after it (the write-back stream
//     waits for it: two writers of one host entry on two streams), also when an eviction of the
//     same admission found that write-ahead in flight (its wait, deferred to the admission's
//     loads or end_admission(), comes after the admission's write-backs). An eviction that stores
//     nothing (dropped, short) is ordered after the latest write-ahead if it has not landed: the
//     page's own write-ahead may be, its entry taken by a later one since.
// No pin outlives an admission, which check_integrity() asserts, with every busy entry in use. On
// the CPU backend the copies are synchronous (empty events: nothing is ever in flight or busy)
// and the tier is a second budget of plain host memory.
//
// Memory: pinned in pieces of whole entries (HostPinOptions::piece_bytes, kHostPieceBytes by
// default), never inside a step. A pinned reserve stays ahead of use: between steps
// (between_steps(), called by the engine loop after each step and while it is idle) the tier pins
// at most one piece when its free pinned entries of a kind fall below the reserve
// (HostPinOptions::reserve_bytes, split between the kinds like the tier); while the engine is
// idle it pins one piece per call until the whole tier is pinned (pin_all_while_idle, the
// default; else only the reserve), so a server pins its tier in its first idle seconds and its
// busy steps later pin nothing (each 128 MiB registration holds its gap ~3.5 ms on an H200
// machine, and registering on the faulter's thread stalled the step running meanwhile as long:
// docs/performance.md, 2026-12-03 21:5x). The piece's memory was
// faulted in beforehand by a background thread that makes no CUDA call (HostPieceFaulter,
// backend/host_pages.h), so the engine thread only page-locks it (Backend::pin_host_pages). On
// a backend that does not pin (CPU) the pieces are only mapped, so the same bookkeeping runs
// (and is what the CPU tests check) without committing the reserve's memory early. A
// store that finds no free pinned entry while the tier is still growing (the reserve ran dry) is
// skipped and counted (HostTierCounters::stores_short): the page is forgotten, as without a tier,
// rather than the step waiting for a pin; once every piece is pinned, stores evict the host LRU
// as before. Why: pinning tens of GB up front took 21-23 s at start-up; on a background thread,
// cudaHostAlloc stalled every eager step of the first ~15 s ~10x on an H200 (2026-12-01: 20 MTP
// generate requests took 11.8 s instead of 0.95 s with the tier off); pinning a piece when a
// store first needed it put ~15 pins of ~0.17 s inside the prefill step that brought a 32K prefix
// back (serve ratio 5.35 instead of 0.648; docs/hybrid-cache.md). When a piece cannot be had, the
// tier keeps the pieces it has (HostEntries::shrink), stops growing and says so once.
//
// Write-ahead: between steps the prefix cache copies the device pages that the next allocations
// would evict to this tier before they are evicted (PrefixCache::write_ahead, store_pages_ahead(),
// sized by the engine: EngineCore::between_steps, the next step's pages or, with a host tier of
// at least two max_model_len sequences, one such sequence's, which a host hit that long
// allocates in its admission step; under pressure also registered pages still in use, so that a
// sequence ending then releases pages stored already), so the step that evicts them finds them
// stored and waits for no copy; at eviction only pages the write-ahead missed are written back (and
// waited for) as above. Outside pressure it copies nothing a plain write-back would not (the same
// pages, only earlier; a page revived by a prefix hit meanwhile keeps its host copy, which stays
// valid: a registered page is never written again; under pressure a page in use may end up never
// evicted, its copy spent), and it skips growing the pinned memory for itself.
// Why: a step that evicted waited for its write-backs (they read pages the step reuses), which
// kept the decode of other sequences under 95% of its speed while a host hit loaded
// (docs/performance.md). EngineOptions::host_write_ahead (--host-write-ahead) turns it off.
//
// LRU: pages and checkpoints each have an LRU (kv/host_entries.h): a stored entry is the most
// recently used, a hit refreshes it, and storing a key the tier already holds (an entry loaded
// back and evicted again) copies nothing.
//
// Kept for preempted sequences: a preempted sequence resumes from its registered pages (a prefix
// hit) or computes them again. While it waits (want_pages() at its preemption, unwant_pages() at
// its admission or abort), the entry holding each of its page keys, whether stored already or
// once its device page is evicted, is kept off the LRU (HostEntries::keep): no later store evicts
// it. Why: under a pool too small for its running sequences (issue 19's 512 x 1k/1k in bf16, 131
// preemptions), the LRU let the write-ahead of the running sequences' pages and the finished
// requests' pages push the victims' pages out before they resumed: 15.5% of the tokens were
// computed twice with the run's 3,541-page tier (`syv bench schedule`, docs/performance.md). When
// every entry is kept, pinned or busy, a store is dropped (stores_dropped), as before.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/cache_store.h"
#include "kv/host_entries.h"
#include "kv/host_piece_faulter.h"
#include "kv/inflight_loads.h"

namespace syv {

// Host tier memory is pinned in pieces of about this many bytes (whole entries; at least one),
// one per gap between steps.
inline constexpr int64_t kHostPieceBytes = int64_t{128} << 20;
// The pinned reserve kept ahead of use by default (at most the tier; the engine raises it to one
// max_model_len sequence's pages when that is larger).
inline constexpr int64_t kHostPinReserveBytes = int64_t{4} << 30;

struct HostPinOptions {
  int64_t reserve_bytes = kHostPinReserveBytes;  // >= 0; at least one piece of each kind is kept
  int64_t piece_bytes = kHostPieceBytes;         // > 0
  // Fault pieces in on a background thread (false: on the engine thread, between steps, which
  // makes the tests deterministic).
  bool fault_in_background = true;
  // While the engine is idle, pin the whole tier (false: only up to the reserve, as in busy gaps).
  bool pin_all_while_idle = true;
};

struct HostTierCounters {
  uint64_t page_hits = 0;            // host pages loaded back into the device pool
  uint64_t checkpoint_hits = 0;      // host checkpoints loaded into a state slot
  uint64_t pages_stored = 0;         // device pages copied to the host at eviction
  uint64_t pages_written_ahead = 0;  // device pages copied to the host before their eviction
  uint64_t checkpoints_stored = 0;   // device checkpoints copied to the host at eviction
  uint64_t stores_present = 0;       // evictions the host already held (nothing copied)
  // Evictions whose device page's reuse had to follow a write-ahead batch still in flight (the
  // compute stream, or an admission's loads, ordered after it).
  uint64_t write_ahead_waits = 0;
  // Evictions not stored: every entry pinned or busy (read by a load in flight), or a colliding
  // key.
  uint64_t stores_dropped = 0;
  uint64_t stores_short = 0;   // evictions not stored: no free pinned entry while the tier grew
  uint64_t pages_evicted = 0;  // host pages dropped for newer ones
  uint64_t checkpoints_evicted = 0;  // host checkpoints dropped for newer ones
  uint64_t bytes_to_host = 0;
  uint64_t bytes_from_host = 0;
  // Host time spent issuing copies (wall clock). On the CPU backend the copies run there, so this
  // is the copy time; on CUDA it is only the enqueue time (the copies run on the copy streams).
  double copy_seconds = 0;
  uint64_t pieces_pinned = 0;  // pieces of memory pinned (all between steps)
  double pin_seconds = 0;      // engine-thread time pinning them (faulting in is not counted)
};

class HostTier {
 public:
  // num_pages host pages of store.external_page_bytes() and num_checkpoints host checkpoints of
  // store.external_slot_bytes() (both >= 0), pinned piece by piece between steps (see "Memory"
  // above; nothing is pinned yet). key_tokens: the tokens a page key covers
  // (PrefixIndex::key_tokens()). `store` must outlive the tier.
  static Result<std::unique_ptr<HostTier>> create(CacheStore& store, int32_t key_tokens,
                                                  int32_t num_pages, int32_t num_checkpoints,
                                                  const HostPinOptions& pin = {});
  ~HostTier();  // waits for the copies that use its memory (the loads in flight, then
                // Backend::synchronize)
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

  int32_t num_pages() const { return pages_.size(); }
  int32_t num_pages_used() const { return pages_.num_used(); }
  int32_t num_checkpoints() const { return checkpoints_.size(); }
  int32_t num_checkpoints_used() const { return checkpoints_.num_used(); }
  int64_t total_bytes() const;   // the capacity's bytes (pages and checkpoints; shrinks with it)
  int64_t pinned_bytes() const;  // of which pinned so far
  const HostTierCounters& counters() const { return counters_; }

  // Between steps (never inside one): pins at most one piece when a kind's free pinned entries
  // are below its reserve and the kind is still growing (idle, with pin_all_while_idle: while it
  // is still growing), then starts faulting in the next piece. It never waits for a piece being
  // faulted in (idle or not: a request arriving while the engine is idle would wait with it),
  // which a later call pins; until the device pools first evict into the tier nothing is pinned
  // between busy steps (only while idle: nothing else to do). Returns whether it wants to pin more
  // (the engine loop then calls again after a short sleep on its inbox when idle).
  bool between_steps(bool idle);
  // Whether a kind still growing has fewer free pinned entries than its reserve.
  bool reserve_short() const { return short_kind() >= 0; }
  // Whether the engine would pin more while idle (the reserve is short, or with
  // pin_all_while_idle the tier is not all pinned yet).
  bool idle_pinning() const { return kind_to_pin(/*idle=*/true) >= 0; }

  // ---- pages --------------------------------------------------------------------------------
  // The entry holding the page keyed `key` after `parent` with these key_tokens tokens, or -1.
  int32_t find_page(uint64_t parent, uint64_t key, const int32_t* tokens) const;
  // Device page `device_page` (a registered, fully written page being evicted) holds `tokens`
  // after `parent` under `key`: copies it into a host entry (or refreshes the one holding it).
  // Inside an admission the copy is only listed, and enqueued with the admission's other page
  // write-backs as one batch by order_loads_after_admission() (nothing writes the page before).
  void store_page(int32_t device_page, uint64_t parent, uint64_t key, const int32_t* tokens);
  // Enqueues the copy of entries[i] into device page device_pages[i] (allocated; not read or
  // written by anything until the returned event settles, see loads()), all as one batch, and
  // refreshes the entries.
  CopyEvent load_pages(const std::vector<int32_t>& entries,
                       const std::vector<int32_t>& device_pages);
  // A registered device page to store ahead of its eviction ("Write-ahead").
  struct AheadPage {
    int32_t device_page = -1;
    uint64_t parent = 0, key = 0;
    const int32_t* tokens = nullptr;  // key_tokens tokens
  };
  // Between steps (no admission open): copies each page whose key the tier does not hold into a
  // host entry, on the write-ahead stream (CopyDir::kAhead) that nothing is ordered after
  // ("Copies" 7), in `pages`' order (the next evictions first) and in batches of
  // kFirstAheadBatch pages, then twice as many each: the reuse of an evicted page follows its own
  // batch, so a step that evicts a few pages waits for the first batch, not the whole write-ahead.
  // It takes no entry in `keep` (the entries of other pages about to be evicted: a tier smaller
  // than the window would otherwise trade them back and forth step after step). Stops at the first
  // page without an entry to take, or without a pinned entry free while the tier still grows.
  // Returns the pages copied.
  int32_t store_pages_ahead(const std::vector<AheadPage>& pages, const std::vector<int32_t>& keep);
  static constexpr size_t kFirstAheadBatch = 8;
  // The first batch's pages (>= 1; kFirstAheadBatch by default): tests split every write-ahead.
  void set_first_ahead_batch(size_t pages);
  void pin_page(int32_t entry) { pages_.pin(entry); }
  // Makes entry the most recently used page (its device page is about to be evicted: a
  // write-ahead found it stored).
  void touch_page(int32_t entry) { pages_.touch(entry); }
  // Whether page entry `entry` holds a page under `key` (a hint checked in O(1); find_page() also
  // compares the parent and tokens).
  bool holds_page(int32_t entry, uint64_t key) const {
    return pages_.used(entry) && pages_.key(entry) == key;
  }
  void unpin_page(int32_t entry) { pages_.unpin(entry); }

  // ---- checkpoints --------------------------------------------------------------------------
  // The entry holding the checkpoint keyed `key` of `length` tokens, or -1.
  int32_t find_checkpoint(uint64_t key, int32_t length) const;
  // Device checkpoint `device_checkpoint` (being evicted) holds the state after `length` tokens
  // of the prefix keyed `key`: copies it into a host entry (or refreshes the one holding it).
  void store_checkpoint(int32_t device_checkpoint, uint64_t key, int32_t length);
  // Enqueues the copy of entry `entry` into live state slot `state_slot` (not read or written
  // until the returned event settles) and refreshes the entry.
  CopyEvent load_checkpoint(int32_t entry, int32_t state_slot);
  void pin_checkpoint(int32_t entry) { checkpoints_.pin(entry); }

  // ---- kept for preempted sequences ("Kept for preempted sequences" above) -------------------
  // A waiting sequence wants the pages of these chain keys back; each want_pages() is undone by
  // one unwant_pages() of the same keys.
  void want_pages(const std::vector<uint64_t>& keys);
  void unwant_pages(const std::vector<uint64_t>& keys);
  int32_t num_pages_kept() const { return pages_.num_kept(); }
  void unpin_checkpoint(int32_t entry) { checkpoints_.unpin(entry); }

  // ---- one admission (Scheduler; "Copies" 6) ------------------------------------------------
  // Before the admitted sequence's pages are allocated: page write-backs from now on are listed,
  // not enqueued, and do not order the compute stream (they are kept for the two calls below).
  void begin_admission();
  // After the allocation, before the sequence's loads: enqueues the listed write-backs as one
  // batch, and the load stream waits for them.
  void order_loads_after_admission();
  // After order_loads_after_admission() and the loads: `own_load_pending` (the sequence's own load,
  // enqueued after order_loads_after_admission(), is pending and the sequence waits for it):
  // nothing more; otherwise the compute stream waits for the write-backs. Stores order the compute
  // stream again from now on.
  void end_admission(bool own_load_pending);

  // The loads enqueued by load_pages() / load_checkpoint() that have not settled yet, recorded by
  // their callers (PrefixCache, HybridState), polled and settled by the Scheduler.
  InflightLoads& loads() { return loads_; }
  const InflightLoads& loads() const { return loads_; }

  // Both entry pools sound, every page entry's key equals the hash of its parent and tokens,
  // nothing pinned and no admission open (call between steps), the loads in flight sound and
  // every entry they read in use. "" when sound.
  std::string check_integrity() const;
  // One start-up line: capacity in pages (tokens) and checkpoints, bytes, pinned or not.
  std::string describe() const;

 private:
  // Entries of `entry_bytes` in pieces of `per_piece` entries, pinned between steps; the pinned
  // pieces' entries are the open ones of the kind's HostEntries.
  struct Pieces {
    int64_t entry_bytes = 0;
    int32_t per_piece = 1;
    int32_t reserve = 0;  // free pinned entries wanted ahead of use
    std::vector<PinnedBuffer> buffers;
    char* at(int32_t entry) const;  // the entry's piece must be pinned
    int64_t bytes() const;
  };
  HostTier(CacheStore& store, int32_t key_tokens, int32_t num_pages, int32_t num_checkpoints,
           const HostPinOptions& pin);
  // Kind 0 (pages) or 1 (checkpoints).
  Pieces& pieces(int kind) { return kind == 0 ? page_pieces_ : checkpoint_pieces_; }
  const Pieces& pieces(int kind) const { return kind == 0 ? page_pieces_ : checkpoint_pieces_; }
  HostEntries& entries(int kind) { return kind == 0 ? pages_ : checkpoints_; }
  const HostEntries& entries(int kind) const { return kind == 0 ? pages_ : checkpoints_; }
  bool growing(int kind) const;  // some of its entries not pinned yet
  // The kind to pin next between steps: one whose free pinned entries are below its reserve
  // (pages first), or (idle, with pin_all_while_idle_) one still growing; -1 when none.
  int kind_to_pin(bool idle) const;
  // The kind whose free pinned entries are below its reserve (pages first), or -1.
  int short_kind() const;
  // Bytes of the next piece of `kind` (growing).
  size_t next_piece_bytes(int kind);
  // Pins `pages` as the next piece of `kind`; on failure the kind stops growing (shrinks to its
  // pinned entries) and a warning is logged once.
  void pin_piece(int kind, Result<HostPages> pages);
  // False (and a short store counted) when a store of `kind` would need a pin: the kind is still
  // growing and has no free pinned entry.
  bool has_room(int kind);
  // A store outside an admission: orders the compute stream after `event` and adds the issue
  // time since `start_ns`.
  void finish_store(const CopyEvent& event, int64_t start_ns);
  // A host page entry for the page keyed `key` after `parent` holding `tokens` (its key and
  // metadata set, no write-ahead pending), taken from the free or least recently used entries but
  // none a load in flight reads, none in `listed` (the batch being built) and none in `keep`
  // (may be null); -1 when there is none. `writer`: the stream that will write it (kOut: ordered
  // after the entry's earlier write-ahead if that may be in flight).
  int32_t take_page_entry(uint64_t parent, uint64_t key, const int32_t* tokens,
                          const std::vector<int32_t>& listed, const std::vector<int32_t>* keep,
                          CopyDir writer);
  // The device page whose copy host page entry `entry` holds is being evicted (or the entry
  // loaded): what reuses the page (or reads the entry) must follow the entry's write-ahead, if it
  // is still in flight ("Copies" 7). `load`: order the load stream, else the compute stream (or,
  // inside an admission, the admission's loads).
  void order_after_write_ahead(int32_t entry, bool load);
  // What reuses an evicted device page follows the write-ahead `ahead`: the compute stream waits
  // for it, or inside an admission the admission's loads (and without a load the compute stream)
  // wait for last_ahead_ ("Copies" 6, 7).
  void order_reuse_after(const CopyEvent& ahead);
  // An evicted page not stored (dropped, or short of a pinned entry): a write-ahead that read it
  // may still be in flight with its host entry taken by a later write-ahead since (page_write_ no
  // longer names it; a page in use is written ahead long before its eviction), so what reuses the
  // page follows the latest write-ahead if that has not landed.
  void order_unstored_after_write_ahead();
  void count_copy_time(int64_t start_ns);

  CacheStore& store_;
  int32_t key_tokens_;
  HostEntries pages_, checkpoints_;
  Pieces page_pieces_, checkpoint_pieces_;
  HostPieceFaulter faulter_;
  bool pin_all_while_idle_;
  bool warned_ = false;
  std::vector<uint64_t> page_parent_;  // [num_pages]
  std::vector<int32_t> page_tokens_;   // [num_pages * key_tokens]
  std::vector<int32_t> ckpt_length_;   // [num_checkpoints]
  // Page keys waiting sequences want (want_pages), with how many want each; the entry holding
  // one is kept (HostEntries::keep) once.
  std::unordered_map<uint64_t, int32_t> wanted_;
  HostTierCounters counters_;
  InflightLoads loads_;
  bool admitting_ = false;  // between begin_admission() and end_admission()
  std::vector<CacheStore::PageCopy> admission_listed_;  // its page write-backs, not enqueued yet
  std::vector<int32_t> admission_entries_;  // ... and their host entries, until end_admission()
  CopyEvent admission_wb_;  // their batch once enqueued, until end_admission() orders it
  // The admission evicted a page whose write-ahead was in flight: its loads (or the compute
  // stream) wait for last_ahead_ too (no write-ahead is enqueued during an admission, so
  // last_ahead_ stays that one); admission_loads_after_ahead_: order_loads_after_admission() made
  // them wait, until end_admission().
  bool admission_after_ahead_ = false;
  bool admission_loads_after_ahead_ = false;
  // Per host page entry: the write-ahead that filled it, while it may be in flight and a copy
  // enqueued later could overtake it (else empty: it landed, or the compute stream waits for it).
  std::vector<CopyEvent> page_write_;
  // Per host page entry: the admission write-back batch that wrote it, when only that
  // admission's loads wait for it (end_admission() with its load pending): a write-ahead that
  // takes the entry while the batch may be in flight follows it ("Copies" 6). Empty once a copy
  // that took the entry since follows it (else it may have landed: copy_done() tells).
  std::vector<CopyEvent> page_back_;
  CopyEvent last_ahead_;  // the latest write-ahead batch (the write-ahead stream is in order)
  std::vector<CacheStore::PageCopy> ahead_listed_;  // store_pages_ahead()'s pages, reused
  size_t first_ahead_batch_ = kFirstAheadBatch;
  std::vector<int32_t> ahead_entries_;
};

}  // namespace syv
