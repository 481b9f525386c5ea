// CPU backend: writing K/V into pages, and causal paged attention with GQA.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
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

// For each new token t (of sequence s, at position p) and query head h: softmax over the keys at
// positions [0, p] of sequence s, read through its page table; kv head = h / (Hq / Hk).
void CpuBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 float scale, const BatchMeta& meta, Tensor& out) {
  cpu::check_f32(q, "paged_attention", "q");
  cpu::check_f32(out, "paged_attention", "out");
  cpu::check_f32(k_cache, "paged_attention", "k_cache");
  const int64_t T = meta.positions.numel();
  const int64_t page_size = k_cache.dim(1);
  const int64_t Hk = k_cache.dim(2);
  const int64_t D = k_cache.dim(3);
  const int64_t Hq = q.numel() / (T * D);
  SYV_CHECK(q.numel() == T * Hq * D && out.numel() == q.numel())
      << "paged_attention: q/out not [T, Hq, D]";
  SYV_CHECK(Hq % Hk == 0) << "paged_attention: " << Hq << " query heads, " << Hk << " kv heads";
  SYV_CHECK_EQ(page_size, meta.page_size) << "paged_attention: cache page size vs batch";
  const int64_t group = Hq / Hk;
  const int64_t max_pages = meta.page_table.dim(1);
  const int32_t* positions = meta.positions.as<const int32_t>();
  const int32_t* token_seq = meta.token_seq.as<const int32_t>();
  const int32_t* page_table = meta.page_table.as<const int32_t>();
  const float* kc = k_cache.as<const float>();
  const float* vc = v_cache.as<const float>();

  ThreadPool::global().parallel_for(T * Hq, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / Hq;
      const int64_t h = task % Hq;
      const int64_t kv_head = h / group;
      const int32_t* pages = page_table + token_seq[t] * max_pages;
      const int64_t num_keys = positions[t] + 1;  // causal: keys at positions [0, p]
      const float* qh = q.as<const float>() + (t * Hq + h) * D;
      scores.resize(static_cast<size_t>(num_keys));
      float max_score = -INFINITY;
      for (int64_t j = 0; j < num_keys; ++j) {
        const int64_t slot = static_cast<int64_t>(pages[j / page_size]) * page_size + j % page_size;
        const float* kj = kc + (slot * Hk + kv_head) * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qh[d] * kj[d];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      float denom = 0.0f;
      for (int64_t j = 0; j < num_keys; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        denom += scores[j];
      }
      float* oh = out.as<float>() + (t * Hq + h) * D;
      std::fill(oh, oh + D, 0.0f);
      for (int64_t j = 0; j < num_keys; ++j) {
        const int64_t slot = static_cast<int64_t>(pages[j / page_size]) * page_size + j % page_size;
        const float* vj = vc + (slot * Hk + kv_head) * D;
        const float p = scores[j] / denom;
        for (int64_t d = 0; d < D; ++d) oh[d] += p * vj[d];
      }
    }
  });
}

}  // namespace syv
