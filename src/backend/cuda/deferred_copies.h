// The CUDA backend's deferred copy calls (Backend::defer_copies()): while deferring, each
// copy_async() / copy_batch_async() is kept as a command with the event it returned (created,
// not recorded yet) and a mark event recorded on the compute stream at the call, and each
// order_copies_after_copy() as a wait command; issue_all() replays them in call order. Why: a
// host hit of 32K tokens at the Qwen3-8B shape is ~512 page copies, 2.2-2.9 ms of cudaMemcpy2DAsync
// calls in the admission step's schedule phase, before its forward was launched; issued after the
// launch they overlap the GPU's work (docs/cuda-backend.md "Host tier copies").
//
// What keeps it exact (the caller's part): every stream that waits for a command's event waits
// after the command was issued: a copy stream's wait is itself a command (replayed after the
// copy it waits for), and the compute stream's and the host's waits (order_after_copy,
// wait_copy, copy_done) call issue_all() first when holds() the event. A stream waiting on an
// event never recorded would not wait at all.
//
// Not thread-safe: the backend's thread only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace syv::cuda {

class DeferredCopies {
 public:
  struct Command {
    CopyDir dir = CopyDir::kIn;
    cudaEvent_t mark = nullptr;  // copy: the compute stream at its call; nullptr: a wait
    std::vector<CopyOp> ops;     // copy: its ops
    CopyEvent event;  // copy: its event (recorded when issued); wait: the event waited for
  };

  DeferredCopies() = default;
  ~DeferredCopies();  // destroys the marks (issue_all() first: the commands must not be lost)
  DeferredCopies(const DeferredCopies&) = delete;
  DeferredCopies& operator=(const DeferredCopies&) = delete;

  bool empty() const { return commands_.empty(); }
  size_t size() const { return commands_.size(); }
  // Whether `event` is that of a copy not issued yet.
  bool holds(const CopyEvent& event) const;
  // A copy of `ops` on `dir`'s stream: records a mark on `compute` now; `event` is the copy's
  // (created by the caller, recorded at issue).
  void add_copy(CopyDir dir, const std::vector<CopyOp>& ops, CopyEvent event, cudaStream_t compute);
  // `dir`'s stream waits for `event` (a copy of another stream, issued or held).
  void add_wait(CopyDir dir, CopyEvent event);
  // Replays every command in order, then forgets them (the marks are reused): issue(command) must
  // make the command's stream wait for command.mark, enqueue its ops and record command.event on
  // it (a copy), or make the stream wait for command.event (a wait, mark == nullptr).
  template <typename Issue>
  void issue_all(const Issue& issue) {
    // A command's issue may end in a CUDA check that aborts: nothing to unwind.
    for (const Command& c : commands_) issue(c);
    commands_.clear();
    marks_used_ = 0;
  }

 private:
  std::vector<Command> commands_;
  std::vector<cudaEvent_t> marks_;  // created on demand, reused after each issue_all()
  size_t marks_used_ = 0;
};

}  // namespace syv::cuda
