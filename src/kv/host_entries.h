// The bookkeeping of one kind of host-tier entry (pages or checkpoints, kv/host_tier.h): ids
// [0, size()), each either free or holding one 64-bit key, an LRU over the used ones, and pins.
//
// Every entry is in exactly one of three states:
//   closed not open yet: [num_open(), size()); its memory is not pinned yet (kv/host_tier.h
//          "Memory"), open() opens it
//   free   open, on the free list, holds nothing
//   used   open, registered under its key and on the LRU (head = least recently used)
// A used entry may also be pinned (pins > 0): take() never evicts it. Pins only protect an entry
// while an admission is between its lookup and its copy back; from then until the copy back
// settles the entry is *busy* (read by a load in flight, kv/inflight_loads.h), which the caller
// tells take() (kv/host_tier.h "Copies" says why both are needed and why that is all).
// A used entry may be *kept* (keeps > 0: a preempted sequence will want it back, kv/host_tier.h
// "Kept for preempted sequences"): it leaves the LRU until its last keep is dropped, so take()
// never evicts it and never walks past it.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace syv {

class HostEntries {
 public:
  // `size` entries, the first `open` of them open (0 <= open <= size).
  HostEntries(int32_t size, int32_t open);
  explicit HostEntries(int32_t size) : HostEntries(size, size) {}

  int32_t size() const { return static_cast<int32_t>(key_.size()); }
  int32_t num_open() const { return open_; }
  int32_t num_used() const { return static_cast<int32_t>(by_key_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // Opens the entries [num_open(), n) (num_open() <= n <= size()): they become free.
  void open(int32_t n);

  // The used entry registered under `key`, or -1.
  int32_t find(uint64_t key) const;
  // Registers `key` (not registered yet) in a free entry, or else in the least recently used one
  // that is neither pinned nor busy (busy(id) true; null: none is), whose key is forgotten
  // (*evicted = true). The entry becomes the most recently used. Returns -1 (and registers
  // nothing) when every open entry is pinned or busy, or none is open.
  int32_t take(uint64_t key, bool* evicted, const std::function<bool(int32_t)>& busy = nullptr);
  // A hit used entry `id`: it becomes the most recently used.
  void touch(int32_t id);
  void pin(int32_t id);
  void unpin(int32_t id);  // pins must be > 0
  int32_t pins(int32_t id) const { return pins_[static_cast<size_t>(id)]; }
  // Keeps used entry `id` off the LRU (see above); unkeep() (keeps must be > 0) puts it back, as
  // the most recently used, with its last keep.
  void keep(int32_t id);
  void unkeep(int32_t id);
  int32_t keeps(int32_t id) const { return keeps_[static_cast<size_t>(id)]; }
  int32_t num_kept() const { return num_kept_; }
  uint64_t key(int32_t id) const { return key_[static_cast<size_t>(id)]; }
  bool used(int32_t id) const { return used_[static_cast<size_t>(id)]; }
  int32_t num_pinned() const;
  // Drops the entries [n, size()) (0 <= n <= size(); none of them pinned): used ones are
  // forgotten, and size() becomes n (num_open() at most n). For a tier that cannot get the memory
  // of those entries.
  void shrink(int32_t n);

  // Free list, LRU and key map agree; each open entry is free or used, each used entry is mapped by
  // its key, no closed one is either. "" when sound.
  std::string check_integrity() const;

 private:
  void check_used(int32_t id) const;

  int32_t open_ = 0;
  std::vector<uint64_t> key_;
  std::vector<int32_t> pins_;
  std::vector<int32_t> keeps_;  // > 0: off the LRU
  int32_t num_kept_ = 0;        // entries with keeps > 0
  std::vector<int32_t> free_;   // stack; lowest id on top
  std::list<int32_t> lru_;      // used entries not kept, least recently used first
  std::vector<std::list<int32_t>::iterator> pos_;
  std::vector<bool> used_;  // on the LRU (registered under key_)
  std::unordered_map<uint64_t, int32_t> by_key_;
};

}  // namespace syv
