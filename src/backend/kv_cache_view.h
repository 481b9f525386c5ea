// One attention layer's paged KV cache as the attention ops take it (Backend::kv_write,
// paged_attention, qkv_norm_rope_write): the K and V page tensors, their dtype, and the scales a
// quantized KV dtype would need. Built by the CacheStore (kv/cache_store.h: kv_view()).
//
//   k, v      [num_pages, page_size, Hk, D] in `dtype`
//   k_scales  f32 [num_pages, page_size, Hk]: one scale per (token, kv head), for fp8 KV
//   v_scales  (dequantized value = stored * scale); empty for float KV (f32, f16, bf16)
//
// Only the backend's activation dtype has kernels today (f32 on the CPU, bf16 on CUDA); the
// Backend ops refuse any other dtype by name ("backend cpu kv_write: KV cache dtype f8e4m3 is not
// supported yet"), and the CacheStore refuses to build one in the first place. A view is
// non-owning and cheap to copy; the store keeps the buffers.
#pragma once

#include "backend/tensor.h"

namespace syv {

struct KvCacheView {
  Tensor k, v;                // [num_pages, page_size, Hk, D]
  DType dtype = DType::F32;   // == k.dtype == v.dtype
  Tensor k_scales, v_scales;  // f32 [num_pages, page_size, Hk] or empty (float KV)

  int64_t num_pages() const { return k.dim(0); }
  int64_t page_size() const { return k.dim(1); }
  int64_t num_kv_heads() const { return k.dim(2); }
  int64_t head_dim() const { return k.dim(3); }
  bool scaled() const { return !k_scales.empty(); }
};

}  // namespace syv
