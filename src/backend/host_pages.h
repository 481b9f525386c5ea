// Host memory faulted in ahead of pinning (kv/host_tier.h "Memory"): anonymous pages, transparent
// huge pages asked for (madvise), every page touched so the kernel has backed and zeroed it. No
// backend call: a background thread can make these while the engine thread runs steps, and
// Backend::pin_host_pages() then only has to page-lock memory that is already there (a
// cudaHostAlloc of 256 MiB took ~0.17 s on the H200 machine, page faulting included).
#pragma once

#include <cstddef>

#include "core/status.h"

namespace syv {

// Move-only owner of `bytes()` bytes of faulted-in host memory (munmap on destruction).
class HostPages {
 public:
  HostPages() = default;
  ~HostPages();
  HostPages(HostPages&& other) noexcept;
  HostPages& operator=(HostPages&& other) noexcept;
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Gives up ownership: the caller frees the memory with free_host_pages(data, bytes).
  void* release();

 private:
  friend Result<HostPages> fault_in_host_pages(size_t bytes, bool touch);
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// `bytes` (> 0) of anonymous host memory, every page touched (touch = false: only mapped, for a
// backend that does not pin; the kernel then backs pages on first write, as with malloc).
// Thread-safe. Fails with a message naming the size when the memory cannot be mapped.
Result<HostPages> fault_in_host_pages(size_t bytes, bool touch = true);
// Frees memory released from a HostPages of `bytes` bytes.
void free_host_pages(void* data, size_t bytes);

}  // namespace syv
