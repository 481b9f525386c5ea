// The CPU backend with three copy streams that land late, for the host tier's loading state
// (kv/inflight_loads.h) and its write-backs (kv/host_tier.h "Copies"): the CPU backend's copies are
// synchronous, so without this every load would have landed before anything could read too early,
// and no write-back could overtake a load.
//
// copy_async / copy_batch_async enqueue on the stream of their CopyDir (backend.h); a copy's
// destination is filled with 0xFF bytes at once (NaN in every float KV / state dtype: what a
// forward or a load reads there before the copy lands is garbage, so an engine that did so would
// give other tokens), and its bytes land, in enqueue order within its stream, when
//  * wait_copy or order_after_copy is called with its event or a later one of its stream, or
//  * copy_done has been polled `polls_to_land` times with its event or a later one of its stream.
// The streams (kIn, kOut, kAhead) are independent: landing one lands nothing of the others but the
// copies it is ordered after (below), so a write-back (kOut) ordered after at once lands before a
// load (kIn) or a write-ahead (kAhead) enqueued earlier, as on CUDA. The compute stream is the host
// here and order_after_copy lands at once, so a copy enqueued afterwards, on any stream, is after
// it, as backend.h promises. After order_copies_after_copy(e, dir), every copy enqueued on `dir` is
// ordered after e: e stays pending as long as nothing lands it, and landing such a copy lands e's
// stream through e first (a device's schedule: the ordered-before copies finish before it starts).
// So a copy is ordered after every earlier copy of its stream and, through the waits of its stream
// and of those copies, after some of the others' ("ordered after" below), and nothing else.
// The 0xFF fill is skipped where an earlier pending copy of the same stream still reads the
// destination (an in-order stream would not overwrite it before then), and put off until they
// landed where pending copies of other streams it is ordered after read it (a load into the device
// page that a write-back it waits for reads). A pending copy it is not ordered after gets no such
// grace: nothing orders the streams but the compute stream and those waits, so a copy enqueued
// while such a copy is pending and touches the same bytes (writes what it reads or writes, or reads
// what it writes) races with it on a real device. Those are counted (num_hazards(); the tests
// expect 0) and the fill happens anyway, so that a load whose source a write-back overwrote lands
// NaN. Sources are read when the copy lands, as a real copy reads them when it runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>
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
  int64_t num_pending() const {
    return num_pending(CopyDir::kIn) + num_pending(CopyDir::kOut) + num_pending(CopyDir::kAhead);
  }
  int64_t num_pending(CopyDir dir) const {
    return static_cast<int64_t>(stream(dir).pending.size());
  }
  uint64_t num_landed() const { return landed_batches_; }  // batches landed so far, all streams
  // Copies enqueued while a pending copy of another stream touched the same bytes (see above).
  uint64_t num_hazards() const { return hazards_; }
  // Write-back or write-ahead batches (kOut, kAhead) enqueued while a load (kIn) was pending:
  // those that one in-order stream would have queued behind a load.
  uint64_t num_out_during_in() const { return out_during_in_; }
  // Write-back batches (kOut) enqueued while a write-ahead (kAhead) was pending: those that a
  // stream shared with the write-ahead would have queued behind it.
  uint64_t num_out_during_ahead() const { return out_during_ahead_; }
  // order_after_copy() calls with an event of stream `dir` (the compute stream waiting for it).
  uint64_t num_compute_waits(CopyDir dir) const { return stream(dir).compute_waits; }

  CopyEvent copy_async(void* dst, const void* src, size_t bytes, CopyDir dir) override {
    return copy_batch_async({CopyOp{dst, src, bytes}}, dir);
  }
  CopyEvent copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir) override {
    const size_t self = index(dir);
    Batch b{enqueued_ + 1, ops, 0, {}, {}};
    std::copy(std::begin(stream(dir).after), std::end(stream(dir).after), std::begin(b.after));
    uint64_t before[kStreams];
    ordered_before(self, b.after, enqueued_, before);
    for (const CopyOp& op : ops) {
      for (size_t r = 0; r < op.rows; ++r) {
        bool fill = true, later = false;
        for (size_t o = 0; o < kStreams; ++o) {
          const Stream& s = streams_[o];
          if (o != self &&
              (touches(s, before[o], /*ordered=*/false, op.row_dst(r), op.bytes, true, true) ||
               touches(s, before[o], /*ordered=*/false, op.row_src(r), op.bytes, false, true)))
            ++hazards_;
          if (touches(s, before[o], /*ordered=*/true, op.row_dst(r), op.bytes, true, false)) {
            if (o == self)
              fill = false;  // its stream reads it first
            else
              later = true;  // filled once the stream it waits for read it
          }
        }
        if (fill && later) b.unfilled.push_back({static_cast<char*>(op.row_dst(r)), op.bytes});
        if (fill && !later) std::memset(op.row_dst(r), 0xFF, op.bytes);
      }
    }
    if (dir != CopyDir::kIn && !stream(CopyDir::kIn).pending.empty()) ++out_during_in_;
    if (dir == CopyDir::kOut && !stream(CopyDir::kAhead).pending.empty()) ++out_during_ahead_;
    ++enqueued_;
    stream(dir).pending.push_back(std::move(b));
    return CopyEvent(std::make_shared<Point>(Point{dir, enqueued_}));
  }
  bool copy_done(const CopyEvent& event) override {
    if (event.empty()) return true;
    const Point p = point_of(event);
    Stream& s = stream(p.dir);
    uint64_t land = 0;
    for (Batch& b : s.pending)
      if (b.id <= p.id && ++b.polls >= polls_to_land_) land = b.id;
    land_through(s, land);
    return p.id <= s.landed;
  }
  void wait_copy(const CopyEvent& event) override { land(event); }
  void order_after_copy(const CopyEvent& event) override {
    if (!event.empty()) ++stream(point_of(event).dir).compute_waits;
    land(event);
  }
  void order_copies_after_copy(const CopyEvent& event, CopyDir dir) override {
    if (event.empty()) return;
    const Point p = point_of(event);
    SYV_CHECK(p.dir != dir) << "order_copies_after_copy within one stream";
    uint64_t& after = stream(dir).after[index(p.dir)];
    after = std::max(after, p.id);
  }

 private:
  static constexpr size_t kStreams = 3;  // [CopyDir]: kIn, kOut, kAhead
  struct Point {                         // a CopyEvent's handle: a batch of one stream
    CopyDir dir;
    uint64_t id;
  };
  struct Batch {
    uint64_t id = 0;  // ids increase across the streams (one counter), so within each too
    std::vector<CopyOp> ops;
    int32_t polls = 0;
    uint64_t after[kStreams] =
        {};  // it starts after stream [i]'s batches up to this (its stream's waits)
    // Destination rows to fill with 0xFF once the copies of other streams it is ordered after
    // that read them have landed.
    std::vector<std::pair<char*, size_t>> unfilled;
  };
  struct Stream {
    std::deque<Batch> pending;      // enqueued, not landed, oldest first
    uint64_t landed = 0;            // every batch of this stream with id <= this has landed
    uint64_t after[kStreams] = {};  // its next copies start after stream [i]'s batches up to this
    uint64_t compute_waits = 0;
  };
  static Point point_of(const CopyEvent& event) {
    return *static_cast<const Point*>(event.handle());
  }
  static size_t index(CopyDir dir) { return static_cast<size_t>(dir); }
  Stream& stream(CopyDir dir) { return streams_[index(dir)]; }
  const Stream& stream(CopyDir dir) const { return streams_[index(dir)]; }
  // Whether a pending copy of `s` that is (`ordered`) or is not ordered before a new copy (its id
  // <= `before`, or not) reads (`reads`) or writes (`writes`) any of [p, p + bytes).
  static bool touches(const Stream& s, uint64_t before, bool ordered, const void* p, size_t bytes,
                      bool reads, bool writes) {
    const char* a = static_cast<const char*>(p);
    auto overlaps = [&](const void* q, size_t n) {
      const char* b = static_cast<const char*>(q);
      return a < b + n && b < a + bytes;
    };
    for (const Batch& b : s.pending) {
      if ((b.id <= before) != ordered) continue;
      for (const CopyOp& op : b.ops)
        for (size_t r = 0; r < op.rows; ++r)
          if ((reads && overlaps(op.row_src(r), op.bytes)) ||
              (writes && overlaps(op.row_dst(r), op.bytes)))
            return true;
    }
    return false;
  }
  // before[o]: a copy of stream `self` after its stream's batches up to id `own` and waiting for
  // `after` (its stream's waits) is ordered after stream o's batches up to this id: those, and
  // what those wait for.
  void ordered_before(size_t self, const uint64_t (&after)[kStreams], uint64_t own,
                      uint64_t (&before)[kStreams]) const {
    std::copy(std::begin(after), std::end(after), before);
    before[self] = own;
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t o = 0; o < kStreams; ++o)
        for (const Batch& b : streams_[o].pending) {
          if (b.id > before[o]) break;
          for (size_t x = 0; x < kStreams; ++x)
            if (b.after[x] > before[x]) before[x] = b.after[x], grew = true;
        }
    }
  }
  void land(const CopyEvent& event) {
    if (event.empty()) return;
    const Point p = point_of(event);
    land_through(stream(p.dir), p.id);
  }
  // Lands `s`'s batches up to `id`, each after the batches of other streams it is ordered after.
  void land_through(Stream& s, uint64_t id) {
    while (!s.pending.empty() && s.pending.front().id <= id) {
      uint64_t after[kStreams];
      std::copy(std::begin(s.pending.front().after), std::end(s.pending.front().after), after);
      for (size_t o = 0; o < kStreams; ++o)
        if (&streams_[o] != &s) land_through(streams_[o], after[o]);
      for (const CopyOp& op : s.pending.front().ops)
        for (size_t r = 0; r < op.rows && op.bytes > 0; ++r)
          std::memcpy(op.row_dst(r), op.row_src(r), op.bytes);
      s.pending.pop_front();
      ++landed_batches_;
      fill_unblocked();
    }
    s.landed = std::max(s.landed, std::min(id, enqueued_));
  }
  // Fills the pending batches' unfilled rows that no pending copy of another stream they are
  // ordered after reads any more.
  void fill_unblocked() {
    for (size_t o = 0; o < kStreams; ++o)
      for (Batch& b : streams_[o].pending) {
        if (b.unfilled.empty()) continue;
        uint64_t before[kStreams];
        ordered_before(o, b.after, b.id - 1, before);
        std::erase_if(b.unfilled, [&](const std::pair<char*, size_t>& row) {
          for (size_t x = 0; x < kStreams; ++x)
            if (x != o && touches(streams_[x], before[x], /*ordered=*/true, row.first, row.second,
                                  /*reads=*/true, /*writes=*/false))
              return false;
          std::memset(row.first, 0xFF, row.second);
          return true;
        });
      }
  }

  int32_t polls_to_land_ = 3;
  Stream streams_[kStreams];  // [CopyDir]: kIn, kOut, kAhead
  uint64_t enqueued_ = 0;     // ids of batches enqueued so far: 1 .. enqueued_
  uint64_t landed_batches_ = 0;
  uint64_t hazards_ = 0;
  uint64_t out_during_in_ = 0;
  uint64_t out_during_ahead_ = 0;
};

}  // namespace syv::testing
