// PTX wrappers of the Hopper warpgroup-MMA kernels (prefill attention, the fp8 GEMM at decode
// batch sizes): shared-memory matrix descriptors of the 128-byte swizzle, wgmma's fence, commit
// and wait, the generic-to-async proxy fence after cp.async, and register fences around
// asynchronous wgmmas. The wgmma instructions themselves live with their kernels. sm_90a.
#pragma once

#include <cstdint>

namespace syv::cuda {

// Byte offset of 16-byte chunk c of row r in an R-row buffer stored as [panels][R rows][128
// bytes] (chunk c in panel c / 8), 16-byte chunks XOR-swizzled by (row % 8): the canonical
// 128B-swizzle layout of wgmma operands (K-major, or MN-major as prefill attention's V).
template <int R>
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4),
// 128-byte swizzle (layout type 1 in bits 62-63). Buffers are 1024-byte aligned (base offset 0).
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFFu) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared memory written through the generic proxy (cp.async) and read next by the tensor cores.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accesses of these registers across an asynchronous wgmma (the
// hardware reads A fragments and writes accumulators until wgmma.wait_group returns).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

}  // namespace syv::cuda
