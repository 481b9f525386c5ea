// PTX wrappers of the Hopper bulk-copy engine (the single-token GEMV's ring, the fp8 GEMM's TMA
// weight loads): mbarriers with transaction counts (shared::cta addresses), the 1-D bulk copy and
// the 2-D tensor-map load (also multicast to a cluster's blocks), and the cluster helpers that go
// with it (rank, cluster barrier, arrivals on another block's mbarrier). Before sm_90 they compile
// to nothing (mbar_init traps): their kernels are never launched there.
#pragma once

#include <cstdint>

namespace syv::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
// Before Hopper (their kernels are never launched there): no mbarrier transactions.
__device__ __forceinline__ void mbar_init(uint32_t, uint32_t) {
  __trap();
}
__device__ __forceinline__ void mbar_init_fence() {}
__device__ __forceinline__ void mbar_arrive(uint32_t) {}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t, uint32_t) {}
template <bool kCluster = false>
__device__ __forceinline__ void mbar_wait(uint32_t, uint32_t) {}
__device__ __forceinline__ void bulk_copy(uint32_t, const void*, uint32_t, uint32_t) {}
__device__ __forceinline__ void tma_load_2d(uint32_t, const void*, int, int, uint32_t) {}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  return 0;
}
__device__ __forceinline__ void cluster_sync() {}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t, uint32_t) {}
__device__ __forceinline__ void mbar_wait_cluster(uint32_t, uint32_t) {}
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t, const void*, int, int, uint32_t,
                                                      uint16_t) {}
#else
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed (a fresh barrier counts its
// phase of parity 1 as completed); kCluster: with acquire at cluster scope (a barrier other blocks
// of the cluster arrive on: mbar_wait_cluster).
template <bool kCluster = false>
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    if constexpr (kCluster) {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], "
          "%2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    } else {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    }
  } while (!done);
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global `src` to shared `dst`,
// completing that many transaction bytes on `bar`.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// Box (x, y) of 2-D tensor map `map` (a __grid_constant__ kernel parameter) from global memory
// to shared `dst` (laid out and swizzled as the map says), completing its bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int x, int y,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
// ---- thread block clusters --------------------------------------------------------------------
// This block's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster (release / acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
// Arrives (release, cluster scope) on the barrier at shared offset `bar` of cluster block `cta`.
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
// mbar_wait with acquire at cluster scope.
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  mbar_wait<true>(bar, parity);
}
// tma_load_2d into shared offset `dst` of every cluster block in `cta_mask`, completing the box's
// bytes on the barrier at offset `bar` in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* map, int x, int y,
                                                      uint32_t bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "h"(cta_mask)
      : "memory");
}
#endif

}  // namespace syv::cuda
