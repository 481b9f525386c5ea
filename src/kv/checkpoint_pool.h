// Recurrent-state bookkeeping for hybrid models (Qwen3.5, Qwen3-Next): live state slots, stored
// state checkpoints for prefix reuse, where checkpoints are taken and which ones outlive a request.
// The cache store holds the bytes (kv/cache_store.h: reset_slot, save_checkpoint,
// load_checkpoint); this file only hands out ids. Design and formulas: docs/hybrid-cache.md.
//
// Slots: one per running sequence (a waiting or preempted sequence holds none).
//
// Checkpoints: a snapshot of every recurrent layer's state after the first `length` tokens of a
// prefix, `length` a multiple of the page size, keyed by the prefix-chain key of the page that ends
// at `length` (PrefixIndex::page_key chain), so the pages and the checkpoint of one prefix share a
// key. Every entry is in exactly one of three states:
//   free     on the free list, holds nothing
//   held     refcount > 0: claimed by live sequences (the ones that saved it, or would have);
//            never evicted, so a preempted sequence can resume from its own checkpoints
//   cached   refcount 0 and `retained` (a finished request's retention policy kept it): on the LRU,
//            reusable by a prefix hit, evicted oldest-first when acquire() finds no free entry
// An entry whose last hold goes with keep = false (and that no earlier hold kept) is freed at once.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/id_list.h"

namespace syv {

// A live sequence's claim on a checkpoint taken after `length` tokens.
struct CheckpointHold {
  int32_t length = 0;
  int32_t id = -1;
};

// Which of a finished request's checkpoints stay in the pool (--prefix-retention).
struct RetentionPolicy {
  enum class Kind : uint8_t {
    kDense,       // every checkpoint the request saved
    kBoundaries,  // only the prompt's replay boundaries (resend + extension)
    kEvery,       // the replay boundaries and every multiple of `every` tokens
  };
  Kind kind = Kind::kDense;
  int32_t every = 0;  // kEvery: a positive multiple of the checkpoint interval

  // "dense" | "boundaries" | a positive token count N. The message names the value and the forms.
  static Result<RetentionPolicy> parse(const std::string& text);
  std::string to_string() const;
};

// Where a sequence takes checkpoints, for page size P and checkpoint interval C (a multiple of P).
// For a prompt of N tokens:
//   resend boundary     R = floor((N - 1) / P) * P  the longest page-aligned prefix shorter than N:
//                           an identical resend hits exactly R tokens (the last token is always
//                           recomputed for its logits)
//   extension boundary  E = floor(N / P) * P         the whole prompt's full pages: a longer prompt
//                           that starts with this one (the next chat turn) can hit E tokens
// (E == R unless N is a multiple of P, then E == N.) Checkpoint boundaries of a sequence: every
// positive multiple of C (prompt, recompute or decode) plus R and E of its prompt.
class CheckpointGeometry {
 public:
  CheckpointGeometry(int32_t page_size, int32_t interval);

  int32_t page_size() const { return page_size_; }
  int32_t interval() const { return interval_; }
  int32_t resend_boundary(int32_t prompt_len) const;
  int32_t extension_boundary(int32_t prompt_len) const;
  bool is_boundary(int32_t length, int32_t prompt_len) const;
  // End of a chunk that feeds tokens [begin, end): R or E when strictly inside, else the last
  // checkpoint boundary in (begin, end], or `end` when there is none. Verify steps stop their
  // drafts there (HybridState::snap_chunk); prefill chunks are not cut, their boundaries are saved
  // by the forward pass (HybridState::plan_saves).
  int32_t snap_chunk_end(int32_t begin, int32_t end, int32_t prompt_len) const;
  // Whether the policy keeps the checkpoint at `length` when its request ends.
  bool keep(const RetentionPolicy& policy, int32_t length, int32_t prompt_len) const;

 private:
  int32_t page_size_;
  int32_t interval_;
};

class CheckpointPool {
 public:
  CheckpointPool(int32_t num_slots, int32_t num_checkpoints);
  CheckpointPool(const CheckpointPool&) = delete;
  CheckpointPool& operator=(const CheckpointPool&) = delete;

  // Live state slots --------------------------------------------------------------------------
  int32_t num_slots() const { return static_cast<int32_t>(slot_used_.size()); }
  int32_t num_free_slots() const { return static_cast<int32_t>(free_slots_.size()); }
  int32_t allocate_slot();  // lowest free slot id, or -1 when all are in use
  void free_slot(int32_t slot);
  bool slot_in_use(int32_t slot) const { return slot_used_[static_cast<size_t>(slot)]; }

  // Checkpoints -------------------------------------------------------------------------------
  int32_t num_checkpoints() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_cached() const { return num_cached_; }
  int32_t num_held() const { return num_checkpoints() - num_free() - num_cached(); }
  uint64_t evictions() const { return evictions_; }
  // Called with a cached checkpoint's id, key and length just before acquire() reuses its entry
  // (the host tier writes it back; kv/host_tier.h).
  void set_evict_callback(std::function<void(int32_t id, uint64_t key, int32_t length)> callback) {
    on_evict_ = std::move(callback);
  }

  // The checkpoint stored for the prefix chain `key` of `length` tokens, or -1.
  int32_t find(uint64_t key, int32_t length) const;
  // A prefix hit used checkpoint `id`: it becomes the most recently used of the cached ones.
  void touch(int32_t id);
  // Takes a hold on the checkpoint for (key, length). If one exists it is held again and *fresh is
  // false (its content is already there). Otherwise a free entry, or else the least recently used
  // cached one (evicted), is registered and held with *fresh = true: the caller must fill it now
  // (CacheStore::save_checkpoint). Returns -1 when every entry is held (the checkpoint is skipped).
  int32_t acquire(uint64_t key, int32_t length, bool* fresh);
  // Drops one hold. keep = the retention policy wants this checkpoint to outlive the request. At
  // refcount 0 the entry is cached if any hold kept it, else freed.
  void release(int32_t id, bool keep);

  int32_t refcount(int32_t id) const { return refcount_[static_cast<size_t>(id)]; }
  bool retained(int32_t id) const { return retained_[static_cast<size_t>(id)]; }
  int32_t length_of(int32_t id) const { return length_[static_cast<size_t>(id)]; }

  // Counts, list membership and links, the key map, slot flags. "" when sound.
  std::string check_integrity() const;

 private:
  void unregister(int32_t id);

  // Slots.
  std::vector<bool> slot_used_;
  std::vector<int32_t> free_slots_;  // stack; lowest id on top
  // Checkpoints.
  std::vector<int32_t> refcount_;
  std::vector<bool> retained_, registered_, on_free_list_;
  std::vector<uint64_t> key_;
  std::vector<int32_t> length_;
  std::vector<int32_t> free_list_;
  IdList lru_;  // cached checkpoints (retained, unheld), least recently released first
  int32_t num_cached_ = 0;
  std::unordered_map<uint64_t, int32_t> by_key_;
  uint64_t evictions_ = 0;
  std::function<void(int32_t, uint64_t, int32_t)> on_evict_;
};

}  // namespace syv
