// Shared pieces of the prefill attention kernels (attention_prefill*.cu): softmax helpers and the
// launchers of the kernel families in the other files (the PTX wrappers are in mma_ptx.cuh).
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/prefill_attention.h"

namespace syv::cuda {
namespace prefill {

constexpr float kLog2e = 1.4426950408889634f;

// The PTX wrappers (mma_ptx.cuh), also as prefill:: names for the kernel files that import them.
using cuda::cp_async16;
using cuda::cp_async16_s;
using cuda::cp_commit;
using cuda::cp_wait;
using cuda::ldsm_x4;
using cuda::ldsm_x4_t;
using cuda::mma;
using cuda::smem_u32;

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

// The row of key `key` of kv head `kh` in a paged cache [pages, page_size, hk, ...] (pt: the
// sequence's page table). Page sizes are powers of two in practice (64 by default): a shift and a
// mask then, not the ~20 instructions of an integer division by a run-time value, which tile loads
// pay per key and chunk (fp8 decode attention, H200, 8B shape, b = 64, ctx 8192: 20.2 -> 18.6 ms a
// step when the MMA decode kernel stopped dividing; measured with the shift computed once per
// block, which this per-call form compiles to as well: the same PTX size).
__device__ __forceinline__ int64_t paged_row(const int32_t* pt, int key, int page_size, int hk,
                                             int kh) {
  int index, in_page;
  if ((page_size & (page_size - 1)) == 0) {
    index = key >> (__ffs(page_size) - 1);
    in_page = key & (page_size - 1);
  } else {
    index = key / page_size;
    in_page = key - index * page_size;
  }
  return (static_cast<int64_t>(pt[index]) * page_size + in_page) * hk + kh;
}
// A K/V row of one head: element offset of key `key` of kv head `kh` in a paged cache.
__device__ __forceinline__ int64_t kv_row(const int32_t* pt, int key, int page_size, int hk, int kh,
                                          int d) {
  return paged_row(pt, key, page_size, hk, kh) * d;
}

// Launchers (each returns false, launching nothing, for a head_dim it does not support). `tiles`
// holds kPrefillTileRows-row query tiles.
// 128-row query tiles on mma.sync, 8 warps x 16 rows, 64-key K/V tiles.
bool launch_mma128(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s);
// 128-row query tiles on Hopper warpgroup MMA (two warpgroups of 64 rows), 128-key K/V tiles
// (64 at head_dim 256, unless set_wgmma_head_dim_256(false)), S / softmax / P V in turn, 2
// stages; returns false (launching nothing) when the device is not compute capability 9.0 or at
// head_dim 256 when that is off.
// (The warp-specialised forms, a producer warpgroup feeding two consumer warpgroups, measured
// 15-19% slower and were removed; cuda-backend-notes.md run 11 keeps the numbers. So were the
// 64-key-tile and the pipelined (softmax under P V) forms; see the notes of 2026-12-01.)
bool launch_wgmma(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s);
// Whether launch_wgmma() takes head_dim 256 (prefill_attention.h set_prefill_wgmma_head_dim_256).
void set_wgmma_head_dim_256(bool on);
// Whether launch_wgmma() loads K/V tiles by TMA (prefill_attention.h set_prefill_wgmma_tma).
void set_wgmma_tma(bool on);
// Whether launch_wgmma() takes the overlapped kernel (prefill_attention.h
// set_prefill_wgmma_overlap).
void set_wgmma_overlap(bool on);
// Records the form a launch ran (prefill_attention.h last_prefill_form()).
void note_form(PrefillForm form);
// Compute capability 9.0 (launch_wgmma() launches nothing elsewhere).
bool wgmma_available();

}  // namespace prefill
}  // namespace syv::cuda
