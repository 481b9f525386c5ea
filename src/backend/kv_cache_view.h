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
//   k_scales  f32 [num_pages, page_size, Hk, D / kKvInt4Group]: one scale per group of
//             kKvInt4Group consecutive elements of a (token, kv head) row
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

struct KvCacheView {
  Tensor k, v;                // see above
  DType dtype = DType::F32;   // == k.dtype == v.dtype
  Tensor k_scales, v_scales;  // f32 [num_pages, page_size, Hk, groups] or empty (float KV)

  int64_t num_pages() const { return k.dim(0); }
  int64_t page_size() const { return k.dim(1); }
  int64_t num_kv_heads() const { return k.dim(2); }
  // Elements per (token, kv head) row: k.dim(3), or twice that for packed int4.
  int64_t head_dim() const { return dtype == DType::U4X2 ? 2 * k.dim(3) : k.dim(3); }
  bool scaled() const { return !k_scales.empty(); }
};

}  // namespace syv
