#include "backend/cuda/deferred_copies.h"

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace syv::cuda {

DeferredCopies::~DeferredCopies() {
  SYV_CHECK(commands_.empty()) << "deferred copies destroyed with " << commands_.size()
                               << " calls never issued";
  for (cudaEvent_t mark : marks_) cudaEventDestroy(mark);
}

bool DeferredCopies::holds(const CopyEvent& event) const {
  if (event.empty()) return false;
  for (const Command& c : commands_)
    if (c.mark != nullptr && c.event.handle() == event.handle()) return true;
  return false;
}

void DeferredCopies::add_copy(CopyDir dir, const std::vector<CopyOp>& ops, CopyEvent event,
                              cudaStream_t compute) {
  if (marks_used_ == marks_.size()) {
    cudaEvent_t mark = nullptr;
    SYV_CUDA_CHECK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
    marks_.push_back(mark);
  }
  // Reused only after issue_all(): every wait on its earlier record was enqueued by then.
  cudaEvent_t mark = marks_[marks_used_++];
  SYV_CUDA_CHECK(cudaEventRecord(mark, compute));
  commands_.push_back(Command{dir, mark, ops, std::move(event)});
}

void DeferredCopies::add_wait(CopyDir dir, CopyEvent event) {
  commands_.push_back(Command{dir, nullptr, {}, std::move(event)});
}

}  // namespace syv::cuda
