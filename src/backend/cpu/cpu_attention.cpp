// CPU backend: writing K/V into pages, and causal paged attention with GQA.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_paged_attention.h"
#include "core/thread_pool.h"

namespace syv {

void CpuBackend::kv_write(const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                          const BatchMeta& meta) {
  cpu::check_f32(k, "kv_write", "k");
  cpu::check_f32(v, "kv_write", "v");
  cpu::check_f32(k_cache, "kv_write", "k_cache");
  cpu::check_f32(v_cache, "kv_write", "v_cache");
  const int64_t T = meta.slot_mapping.numel();
  const int64_t row = k_cache.dim(2) * k_cache.dim(3);  // Hk * D floats per token
  const int64_t num_slots = k_cache.dim(0) * k_cache.dim(1);
  SYV_CHECK(k.numel() == T * row && v.numel() == T * row) << "kv_write: k/v not [T, Hk, D]";
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = meta.slot_mapping.as<const int32_t>()[t];
    SYV_CHECK(slot >= 0 && slot < num_slots) << "kv_write: slot " << slot << " of " << num_slots;
    std::memcpy(k_cache.as<float>() + slot * row, k.as<const float>() + t * row,
                row * sizeof(float));
    std::memcpy(v_cache.as<float>() + slot * row, v.as<const float>() + t * row,
                row * sizeof(float));
  }
}

// The loop is cpu::paged_attention_rows (cpu_paged_attention.h); the rows are read in place.
void CpuBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 float scale, const BatchMeta& meta, Tensor& out) {
  cpu::check_f32(q, "paged_attention", "q");
  cpu::check_f32(out, "paged_attention", "out");
  cpu::check_f32(k_cache, "paged_attention", "k_cache");
  cpu::check_f32(v_cache, "paged_attention", "v_cache");
  const int64_t Hk = k_cache.dim(2);
  const int64_t D = k_cache.dim(3);
  const float* kc = k_cache.as<const float>();
  const float* vc = v_cache.as<const float>();
  cpu::paged_attention_rows(q, k_cache.dim(1), Hk, D, scale, meta, out,
                            [&](int which, int64_t slot, int64_t kv_head, float*) {
                              return (which == 0 ? kc : vc) + (slot * Hk + kv_head) * D;
                            });
}

}  // namespace syv
