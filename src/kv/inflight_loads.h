// Host-tier loads still in flight on the backend's load stream (CopyDir::kIn): which device pages
// and state slots each one is writing, so that nothing reads them before they land, and which host
// entries it is reading, so that no write-back overwrites them before then (docs/hybrid-cache.md
// "Host tier", "Loading").
//
// A load (the host pages of one prefix hit, or its host checkpoint) is enqueued at admission and
// is not waited for: the compute stream is not ordered after it (kv/host_tier.h). Its sequence is
// *loading* (engine/sequence.h) and is not scheduled until its load is settled:
//  * landed: poll() found its event complete (Backend::copy_done, once per step, non-blocking);
//  * or ordered: order_after() made the compute stream wait for it (a loading sequence cancelled
//    or preempted, whose pages and slot go back to their pools while the copy may still write
//    them: every op enqueued afterwards, whoever's, sees the copy landed).
// Every load runs on the one load stream, in order (write-backs have a stream of their own,
// CopyDir::kOut, and never go between loads), so a load settles every earlier one too: a ticket
// is a position on the load stream, and settled(t) is t <= the newest settled ticket.
//
// The host entries a load reads (host pages, a host checkpoint) are *being read* until it
// settles: the host tier does not reuse them for a write-back before then (kv/host_tier.h
// "Copies"; a write-back runs on the other stream and could overtake the load). A settled load
// that has not landed (ordered, above) is harmless there: every write-back enqueued afterwards
// starts after the compute stream's wait for it.
//
// A device page a load writes is registered in the prefix index when the load is enqueued, so a
// second sequence can match it before it lands: newest_into(its hit's device pages) is the load it
// must wait for too.
//
// Not thread-safe: owned by the engine thread (HostTier::loads()).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace syv {

// A load's position on the load stream (id 0: nothing to wait for) and its event.
struct LoadTicket {
  uint64_t id = 0;
  CopyEvent event;
  bool pending() const { return id != 0; }
};

class InflightLoads {
 public:
  explicit InflightLoads(Backend& backend) : backend_(backend) {}
  InflightLoads(const InflightLoads&) = delete;
  InflightLoads& operator=(const InflightLoads&) = delete;

  // A load into device pages `pages` and/or state slot `slot` (-1: none), from host page entries
  // `host_pages` and/or host checkpoint entry `host_checkpoint` (-1: none), was enqueued on the
  // load stream; `event` completes when it (and every earlier load) landed. An empty event (a
  // backend whose copies are synchronous) is already settled: returns the empty ticket and records
  // nothing. Otherwise the ticket is newer than every earlier one.
  LoadTicket add(CopyEvent event, const std::vector<int32_t>& pages, int32_t slot,
                 const std::vector<int32_t>& host_pages = {}, int32_t host_checkpoint = -1);
  // The newest unsettled load into any of `pages` (the empty ticket when none).
  LoadTicket newest_into(const std::vector<int32_t>& pages) const;
  // The newer of two tickets.
  static const LoadTicket& newer(const LoadTicket& a, const LoadTicket& b) {
    return a.id >= b.id ? a : b;
  }

  // Polls the unsettled loads (Backend::copy_done, non-blocking): the newest, and when it is not
  // done the older ones oldest first up to the first one not done (later ones cannot be done);
  // forgets the landed ones. Once per step.
  void poll();
  bool settled(const LoadTicket& t) const { return t.id <= settled_; }
  // Makes the compute stream wait for `t`'s load (Backend::order_after_copy; the host does not
  // wait) and settles it: ops enqueued from now on see it landed. Call it before a loading
  // sequence's pages or slot go back to their pools, and when it leaves the loading state.
  void order_after(const LoadTicket& t);
  // Blocks until every load landed (teardown of the memory they write or read).
  void wait_all();

  int32_t num_unsettled() const { return static_cast<int32_t>(loads_.size()); }
  // Device page / state slot -> the newest unsettled load writing it.
  const std::unordered_map<int32_t, uint64_t>& page_loads() const { return page_load_; }
  const std::unordered_map<int32_t, uint64_t>& slot_loads() const { return slot_load_; }
  // Host page / checkpoint entry -> the newest unsettled load reading it.
  const std::unordered_map<int32_t, uint64_t>& host_page_reads() const { return host_page_read_; }
  const std::unordered_map<int32_t, uint64_t>& host_checkpoint_reads() const {
    return host_ckpt_read_;
  }
  bool reads_host_page(int32_t entry) const { return host_page_read_.count(entry) > 0; }
  bool reads_host_checkpoint(int32_t entry) const { return host_ckpt_read_.count(entry) > 0; }
  // Each unsettled load has an event and a ticket above the settled one, in increasing order;
  // every page, slot and host entry in flight names an unsettled load that lists it. "" when
  // sound.
  std::string check_integrity() const;

 private:
  struct Load {
    uint64_t id = 0;
    CopyEvent event;
    std::vector<int32_t> pages;
    int32_t slot = -1;
    std::vector<int32_t> host_pages;  // host entries it reads
    int32_t host_checkpoint = -1;
  };
  void settle_through(uint64_t id);  // forgets the loads up to `id`

  Backend& backend_;
  std::deque<Load> loads_;                                // unsettled, oldest first
  std::unordered_map<int32_t, uint64_t> page_load_;       // device page -> newest unsettled load
  std::unordered_map<int32_t, uint64_t> slot_load_;       // state slot -> newest unsettled load
  std::unordered_map<int32_t, uint64_t> host_page_read_;  // host page -> newest load reading it
  std::unordered_map<int32_t, uint64_t> host_ckpt_read_;  // host checkpoint -> the same
  uint64_t next_id_ = 1;
  uint64_t settled_ = 0;  // every load with id <= this is settled
};

}  // namespace syv
