// The CPU backend with a copy stream that lands late, for the host tier's loading state
// (kv/inflight_loads.h): the CPU backend's copies are synchronous, so without this every load
// would have landed before anything could read too early.
//
// copy_async / copy_batch_async enqueue; a copy's destination is filled with 0xFF bytes at once
// (NaN in every float KV / state dtype: what a forward reads there before the copy lands is
// garbage, so an engine that did so would give other tokens), and its bytes land, in enqueue order
// (the stream is in order), when
//  * wait_copy or order_after_copy is called with its event or a later one, or
//  * copy_done has been polled `polls_to_land` times with its event or a later one.
// The 0xFF fill is skipped where an earlier pending copy still reads the destination (a real copy
// stream would not overwrite it before then). Sources are read when the copy lands, as a real copy
// reads them when it runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/check.h"

namespace syv::testing {

class DeferredCopyBackend : public CpuBackend {
 public:
  // polls_to_land >= 1: copy_done() answers true at the polls_to_land-th poll of a copy.
  void set_polls_to_land(int32_t polls) {
    SYV_CHECK_GE(polls, 1) << "polls_to_land";
    polls_to_land_ = polls;
  }
  int32_t polls_to_land() const { return polls_to_land_; }
  int64_t num_pending() const { return static_cast<int64_t>(pending_.size()); }
  uint64_t num_landed() const { return landed_; }  // batches landed so far

  CopyEvent copy_async(void* dst, const void* src, size_t bytes) override {
    return copy_batch_async({CopyOp{dst, src, bytes}});
  }
  CopyEvent copy_batch_async(const std::vector<CopyOp>& ops) override {
    for (const CopyOp& op : ops)
      if (!read_by_pending(op.dst, op.bytes)) std::memset(op.dst, 0xFF, op.bytes);
    pending_.push_back({++enqueued_, ops, 0});
    return CopyEvent(std::make_shared<uint64_t>(enqueued_));
  }
  bool copy_done(const CopyEvent& event) override {
    const uint64_t id = id_of(event);
    uint64_t land = 0;
    for (Batch& b : pending_)
      if (b.id <= id && ++b.polls >= polls_to_land_) land = b.id;
    land_through(land);
    return id <= landed_;
  }
  void wait_copy(const CopyEvent& event) override { land_through(id_of(event)); }
  void order_after_copy(const CopyEvent& event) override { land_through(id_of(event)); }

 private:
  struct Batch {
    uint64_t id = 0;
    std::vector<CopyOp> ops;
    int32_t polls = 0;
  };
  static uint64_t id_of(const CopyEvent& event) {
    return event.empty() ? 0 : *static_cast<const uint64_t*>(event.handle());
  }
  bool read_by_pending(const void* dst, size_t bytes) const {
    const char* d = static_cast<const char*>(dst);
    for (const Batch& b : pending_)
      for (const CopyOp& op : b.ops) {
        const char* s = static_cast<const char*>(op.src);
        if (d < s + op.bytes && s < d + bytes) return true;
      }
    return false;
  }
  void land_through(uint64_t id) {
    while (!pending_.empty() && pending_.front().id <= id) {
      for (const CopyOp& op : pending_.front().ops)
        if (op.bytes > 0) std::memcpy(op.dst, op.src, op.bytes);
      pending_.pop_front();
    }
    landed_ = std::max(landed_, std::min(id, enqueued_));
  }

  int32_t polls_to_land_ = 3;
  std::deque<Batch> pending_;  // enqueued, not landed, oldest first
  uint64_t enqueued_ = 0;      // ids of batches enqueued so far: 1 .. enqueued_
  uint64_t landed_ = 0;        // every batch with id <= this has landed
};

}  // namespace syv::testing
