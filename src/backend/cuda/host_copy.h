// A batch of (src, dst, bytes) copies in one kernel launch, or of strided copies as one
// cudaMemcpy3DBatchAsync (host_copy.cu), for the host tier's pages: a page of a 28-layer model is
// 56 segments of ~128 KiB, which as cudaMemcpyAsync calls moved at ~12 GB/s against ~55 GB/s of
// pinned-copy bandwidth on the H200 machine. The kernel reads and writes through unified
// addressing: pinned host memory that is mapped into the device's address space (cudaHostAlloc, or
// cudaHostRegister where the device can use the host pointer) is read and written directly, like
// device memory, 16 bytes per load.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace syv::cuda {

struct CopySegment {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

// Segments the kernel takes: both pointers and the size multiples of 16 bytes, and at most
// kGatherMaxSegmentBytes (larger ones are better as one cudaMemcpyAsync).
inline constexpr size_t kGatherMaxSegmentBytes = size_t{16} << 20;
inline bool gather_copy_fits(const CopySegment& s) {
  return ((reinterpret_cast<uintptr_t>(s.dst) | reinterpret_cast<uintptr_t>(s.src) | s.bytes) &
          15u) == 0 &&
         s.bytes <= kGatherMaxSegmentBytes;
}

// Copies every segment (each gather_copy_fits, none overlapping another's destination or its own
// source; both sides device-accessible) on `stream`, in launches of up to 128 segments. The
// launches follow earlier work on `stream` in order (no programmatic dependent launch).
void launch_gather_copy(const CopySegment* segments, size_t count, cudaStream_t stream);

// A copy of `rows` rows of `width` bytes, row i from src + i * src_pitch to dst + i * dst_pitch
// (a cache store page: one row per layer and K / V).
struct StridedCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t width = 0, rows = 1, dst_pitch = 0, src_pitch = 0;
};

// A batch of strided copies as one cudaMemcpy3DBatchAsync (CUDA 12.8+): the copy engines move
// them, no SM takes part, so the compute stream's kernels keep every SM while a host hit loads;
// and the host pays per copy (~2 us on an H200), not per row, so a page of 72 rows costs what one
// row did. Sources are read in stream order (the copy starts after the
// stream's earlier work, as the kernel does). False where the runtime or the driver refuses the
// call (`error` names why); the caller then copies the whole batch with the kernel (any part the
// call did enqueue gets the same bytes again, in stream order).
bool memcpy_strided_batch_async(const StridedCopy* copies, size_t count, cudaStream_t stream,
                                const char** error);

}  // namespace syv::cuda
