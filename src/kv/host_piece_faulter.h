// Faults in the host tier's next piece of memory (backend/host_pages.h) ahead of its pinning, on a
// background thread, so that the engine thread, between steps, only has to page-lock memory that
// is already there (kv/host_tier.h "Memory"). One piece at a time, for one of two kinds (the
// tier's pages and checkpoints); a finished piece waits, per kind, until taken.
//
// Thread-safe; the thread is started on the first start() and joined by the destructor.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <thread>

#include "backend/host_pages.h"
#include "core/status.h"

namespace syv {

class HostPieceFaulter {
 public:
  // background = false: start() faults the piece on the calling thread (deterministic tests).
  // touch = false: pieces are only mapped, not faulted in (a backend that does not pin).
  HostPieceFaulter(bool background, bool touch) : background_(background), touch_(touch) {}
  ~HostPieceFaulter();  // waits for the piece in progress
  HostPieceFaulter(const HostPieceFaulter&) = delete;
  HostPieceFaulter& operator=(const HostPieceFaulter&) = delete;

  bool background() const { return background_; }
  // Whether a piece of `kind` (0 or 1) is in progress or waiting to be taken.
  bool has(int kind) const;
  // Whether a piece (of either kind) is in progress.
  bool busy() const;
  // Starts faulting in `bytes` for `kind`: nothing may be in progress, nor a piece of `kind`
  // waiting.
  void start(int kind, size_t bytes);
  // The finished piece of `kind` (an error when its memory could not be had), handed over; nullopt
  // while it is in progress or when there is none. Never blocks on the faulting.
  std::optional<Result<HostPages>> take(int kind);

 private:
  void run();

  const bool background_;
  const bool touch_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  int job_kind_ = -1;  // in progress (-1: none)
  size_t job_bytes_ = 0;
  std::optional<Result<HostPages>> done_[2];
};

}  // namespace syv
