// Shared pieces of the prefill attention kernels (attention_prefill*.cu): mma.sync / ldmatrix /
// cp.async wrappers and the launchers of the kernel families in the other files.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace prefill {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
// c += a b (m16n8k16, bf16 in, fp32 accumulation).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 16 bytes global -> shared, asynchronously; zero-filled when !valid (nothing is read then).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(n));
}
__device__ __forceinline__ void cp_async16_s(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// 2^x on the special-function unit (ex2(-inf) = 0).
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// A K/V row of one head: element offset of key `key` of kv head `kh` in a paged cache.
__device__ __forceinline__ int64_t kv_row(const int32_t* pt, int key, int page_size, int hk, int kh,
                                          int d) {
  const int page = pt[key / page_size];
  return ((static_cast<int64_t>(page) * page_size + key % page_size) * hk + kh) * d;
}

// Launchers (each returns false for a head_dim it does not support). `tiles` holds
// kPrefillTileRows-row query tiles.
// 128-row query tiles on mma.sync: 8 warps x 16 rows (warps = 8) or 4 warps x 32 rows (warps = 4).
bool launch_mma128(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, int warps,
                   cudaStream_t s);
// 128-row query tiles on Hopper warpgroup MMA (two warpgroups of 64 rows); returns false (launching
// nothing) when the device is not compute capability 9.0.
enum class WgmmaKind {
  kBn64,                 // 64-key K/V tiles, S / softmax / P V in turn, 2 stages
  kBn128,                // 128-key K/V tiles, in turn, 2 stages
  kBn128Pipelined,       // 128-key tiles, softmax of tile j overlapping P V of tile j - 1, 3 stages
  kWarpSpecialized,      // producer warpgroup + mbarrier ring (3 stages), consumers ping-pong
  kWarpSpecializedFree,  // the same without the ping-pong (the warpgroups drift freely)
  kWarpSpecializedOverlap  // ping-pong + softmax under the warpgroup's own P V (unmasked tiles)
};
bool launch_wgmma(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, WgmmaKind kind,
                  cudaStream_t s);

}  // namespace prefill
}  // namespace syv::cuda
