// One attention layer's paged KV cache as the attention ops take it (Backend::kv_write,
// paged_attention, qkv_norm_rope_write): the K and V page tensors, their dtype, and the scales of
// a quantized KV dtype. Built by the CacheStore (kv/cache_store.h: kv_view()).
//
// Float KV (f32 on the CPU, bf16 on CUDA; no scales):
//   k, v      [num_pages, page_size, Hk, D] in `dtype`
// fp8 KV (dtype F8E4M3, `--kv-cache-dtype fp8`):
//   k, v      [num_pages, page_size, Hk, D] e4m3 bytes
//   k_scales  f32 [num_pages, page_size, Hk, 1]: one scale per (token, kv head)
// 4-bit KV (dtype U4X2, `--kv-cache-dtype int4`):
//   k, v      [num_pages, page_size, Hk, D / 2] bytes; element d of a row is the low nibble of
//             byte d / 2 when d is even, the high nibble when odd (core/dtype.h u4_pack)
//   k_scales  f16 [num_pages, page_size, Hk, D / kKvInt4Group]: one IEEE half scale per group
//             of kKvInt4Group consecutive elements of a (token, kv head) row (f16, not f32: a
//             row is D / 2 + D / 16 bytes, so the pool holds ~3.56x bf16's tokens, not 3.2x)
// In both quantized modes v_scales has k_scales' shape, and a stored element q means
// q * scale (fp8: q is the e4m3 value; int4: q is the nibble minus 8, in [-8, 7]). The writer
// picks each scale from the amax of what it covers (backend/kv_quant.h holds the reference
// quantizers every backend must match bit for bit). Each token's scales are written with its
// values, so a page carries everything needed to read it: prefix hits, copies and the host tier
// move scales with pages.
//
// A view is non-owning and cheap to copy; the store keeps the buffers.
#pragma once

#include "backend/tensor.h"

namespace syv {

// Elements per int4 KV scale group (head_dim must be a multiple).
inline constexpr int64_t kKvInt4Group = 32;

// The dtype of a quantized KV dtype's scales: f16 for int4 (u4x2), f32 for fp8. fp8 keeps f32:
// one scale per row of D >= 64 bytes, so f16 would add under 1.6% to the pool (D = 128: 130 vs
// 132 bytes a row) for a narrower range and a second scale path.
constexpr DType kv_scale_dtype(DType kv_dtype) {
  return kv_dtype == DType::U4X2 ? DType::F16 : DType::F32;
}

struct KvCacheView {
  Tensor k, v;                // see above
  DType dtype = DType::F32;   // == k.dtype == v.dtype
  Tensor k_scales, v_scales;  // kv_scale_dtype(dtype) [num_pages, page_size, Hk, groups] or
                              // empty (float KV)

  int64_t num_pages() const { return k.dim(0); }
  int64_t page_size() const { return k.dim(1); }
  int64_t num_kv_heads() const { return k.dim(2); }
  // Elements per (token, kv head) row: k.dim(3), or twice that for packed int4.
  int64_t head_dim() const { return dtype == DType::U4X2 ? 2 * k.dim(3) : k.dim(3); }
  bool scaled() const { return !k_scales.empty(); }
};

}  // namespace syv
