// What the two decode attention kernels share (attention_decode.cu: CUDA-core lanes;
// attention_decode_mma.cu: tensor cores): the split layout, derived per token on the device, and
// the partial-state layout the combine kernel merges.
//
// Split layout: the grid has `splits` split blocks per (token, head group); split s of a token
// with n keys holds keys [s * kps, min(n, (s + 1) * kps)), kps = split_keys(). Splits past the
// context (s >= used_splits()) do nothing and are never read.
// Partial state of (row = token * hq + head, split): floats [D] = the split's unnormalised output
// sum_k exp2(s_k - m) v_k, [D] = m (the split's maximum of s = q.k * scale * log2(e)), [D + 1] =
// sum_k exp2(s_k - m); at partial + (row * splits + split) * (D + 2).
#pragma once

#include "backend/cuda/kernels.h"

namespace syv::cuda::decode {

constexpr float kLog2e = 1.4426950408889634f;

// Keys per split for a token with n_keys keys: `fixed` when > 0 (batch-invariant mode: boundaries
// at multiples of a fixed count from key 0), else ceil(n_keys / splits) rounded up to a multiple
// of `align`. The same on the host and the device.
__host__ __device__ __forceinline__ int split_keys(int n_keys, int splits, int fixed, int align) {
  if (fixed > 0) return fixed;
  const int per = (n_keys + splits - 1) / splits;
  return (per + align - 1) / align * align;
}
// Splits that hold at least one key (1..splits): splits past them are never written nor read.
__host__ __device__ __forceinline__ int used_splits(int n_keys, int splits, int kps) {
  const int n = (n_keys + kps - 1) / kps;
  return n < splits ? n : splits;
}

// Query heads one tensor-core block takes (the rows of its 16-row MMA tile): the whole group when
// it has at most 16 heads, else 16 when the group is a multiple of 16; 0 when the tensor-core
// kernel does not take the shape (group 1, another head_dim than 64 / 128 / 256, a group over 16
// that is not a multiple of 16).
int mma_heads_per_block(int64_t hq, int64_t hk, int64_t head_dim);
// Blocks of the tensor-core decode kernel one SM holds at once (its key-rows instance for the
// head_dim and cache dtype: registers and shared memory; H200: 3-4 up to head_dim 128, at 256 1
// for a bf16 cache and 2 for fp8; int4: as the runtime says), asked of the CUDA runtime once per
// instance.
int mma_resident_blocks(int64_t head_dim, DType cache_t);

// The tensor-core decode kernel (attention_decode_mma.cu): one block of 4 warps per (token, block
// of heads_per_block query heads of one KV head, split); writes the output directly for tokens
// whose context one split holds, else the partial states (the caller launches the combine).
void launch_decode_mma(const AttentionArgs& a, int32_t heads_per_block, int32_t splits,
                       int32_t fixed_keys_per_split, int32_t align, float* partial, cudaStream_t s);

}  // namespace syv::cuda::decode
