// The host tier's gather copy (host_copy.h): one launch per up to kMaxSegments segments, grid
// (chunks, segments): block (x, s) copies every gridDim.x-th run of kThreads x 16 bytes of segment
// s, kUnroll loads in flight per thread before their stores, so enough reads are outstanding to
// cover the PCIe round trip when one side is pinned host memory. SGLang's HiCache transfer
// kernels work the same way (warps copying items of a page through mapped host memory); this one
// takes arbitrary segments, which is what the cache store's per-layer page parts are.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/host_copy.h"

#include <vector>

namespace syv::cuda {

namespace {

constexpr int kMaxSegments = 128;  // kernel parameters: 128 x 20 bytes + 4 < 4 KiB
constexpr int kThreads = 256;
constexpr int kUnroll = 4;
// Blocks per launch, at most. 8 blocks keep 128 KiB of 16-byte loads in flight, which already
// moves 49.4 GB/s host -> device and 51.1 device -> host on an H200 (as 264 did), while the SMs
// they sit on are few: a block waiting on PCIe reads starves the compute stream's kernels on its SM
// of memory requests. With 264 blocks (two per SM) the decode steps of 8 other sequences of a
// 0.6B-shape model ran at 0.2 of their speed while a 32K host hit loaded; with 32 blocks at 0.85,
// with 8 at 0.93 (syv bench host-tier, steps that wrote no eviction back; 2026-12-02,
// docs/performance.md).
constexpr int kMaxBlocks = 8;

struct GatherArgs {
  const void* src[kMaxSegments];
  void* dst[kMaxSegments];
  uint32_t vectors[kMaxSegments];  // 16-byte vectors per segment
  int count;
};

__global__ void __launch_bounds__(kThreads) gather_copy_kernel(const GatherArgs args) {
  for (int s = static_cast<int>(blockIdx.y); s < args.count; s += static_cast<int>(gridDim.y)) {
    const uint4* __restrict__ src = static_cast<const uint4*>(args.src[s]);
    uint4* __restrict__ dst = static_cast<uint4*>(args.dst[s]);
    const uint32_t n = args.vectors[s];
    const uint32_t stride = gridDim.x * kThreads;
    uint32_t i = blockIdx.x * kThreads + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
    }
    for (; i < n; i += stride) dst[i] = src[i];
  }
}

}  // namespace

void launch_gather_copy(const CopySegment* segments, size_t count, cudaStream_t stream) {
  for (size_t first = 0; first < count; first += kMaxSegments) {
    GatherArgs args;
    args.count = static_cast<int>(count - first < kMaxSegments ? count - first : kMaxSegments);
    uint32_t most = 0;
    for (int s = 0; s < args.count; ++s) {
      const CopySegment& seg = segments[first + static_cast<size_t>(s)];
      args.src[s] = seg.src;
      args.dst[s] = seg.dst;
      args.vectors[s] = static_cast<uint32_t>(seg.bytes / 16);
      most = args.vectors[s] > most ? args.vectors[s] : most;
    }
    if (most == 0) continue;
    const uint32_t per_block = kThreads * kUnroll;  // vectors one block moves per iteration
    uint32_t chunks = (most + per_block - 1) / per_block;
    // Blocks walk the segments of their grid row (several each when there are more than
    // kMaxBlocks) and split each segment's vectors across the row.
    const uint32_t rows = static_cast<uint32_t>(args.count < kMaxBlocks ? args.count : kMaxBlocks);
    const uint32_t cap = kMaxBlocks / rows > 0 ? kMaxBlocks / rows : 1;
    chunks = chunks < cap ? chunks : cap;
    const dim3 grid(chunks, rows);
    gather_copy_kernel<<<grid, kThreads, 0, stream>>>(args);
    SYV_CUDA_LAUNCH_CHECK();
  }
}

bool memcpy_strided_batch_async(const StridedCopy* copies, size_t count, cudaStream_t stream,
                                const char** error) {
#if CUDART_VERSION >= 12080
  thread_local std::vector<cudaMemcpy3DBatchOp> ops;
  ops.clear();
  for (size_t i = 0; i < count; ++i) {
    const StridedCopy& c = copies[i];
    if (c.width == 0 || c.rows == 0) continue;
    cudaMemcpy3DBatchOp op{};
    op.src.type = cudaMemcpyOperandTypePointer;
    op.src.op.ptr.ptr = const_cast<void*>(c.src);
    op.src.op.ptr.rowLength = c.rows > 1 ? c.src_pitch : 0;  // bytes: pointer copies count bytes
    op.dst.type = cudaMemcpyOperandTypePointer;
    op.dst.op.ptr.ptr = c.dst;
    op.dst.op.ptr.rowLength = c.rows > 1 ? c.dst_pitch : 0;
    op.extent = make_cudaExtent(c.width, c.rows, 1);
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // after the stream's earlier work
    op.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    ops.push_back(op);
  }
  if (ops.empty()) return true;
#if CUDART_VERSION >= 13000
  const cudaError_t err = cudaMemcpy3DBatchAsync(ops.size(), ops.data(), 0, stream);
#else
  size_t fail = 0;
  const cudaError_t err = cudaMemcpy3DBatchAsync(ops.size(), ops.data(), &fail, 0, stream);
#endif
  if (err == cudaSuccess) return true;
  cudaGetLastError();  // not sticky: clear it, the caller falls back to the kernel
  *error = cudaGetErrorString(err);
  return false;
#else
  (void)copies;
  (void)count;
  (void)stream;
  *error = "built with a CUDA runtime older than 12.8 (no cudaMemcpy3DBatchAsync)";
  return false;
#endif
}

}  // namespace syv::cuda
