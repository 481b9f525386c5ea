// The loop of CPU paged attention, shared by float KV (cpu_attention.cpp) and quantized KV
// (cpu_kv_quantized.cpp): the two differ only in how one key or value row is read. Internal to the
// CPU backend.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"
#include "core/thread_pool.h"

namespace syv::cpu {

// For each new token t (of sequence s, at position p) and query head h: softmax over the keys at
// positions [0, p] of sequence s, read through its page table; kv head = h / (Hq / Hk).
// q, out f32 [T, Hq, D]. row(which, slot, kv_head, buf) returns the D floats of the key
// (which == 0) or value (which == 1) row at cache slot `slot` (page * page_size + offset): a
// pointer into the cache, or `buf` (D floats, the caller's scratch) filled with the row.
template <typename RowFn>
void paged_attention_rows(const Tensor& q, int64_t page_size, int64_t Hk, int64_t D, float scale,
                          const BatchMeta& meta, Tensor& out, const RowFn& row) {
  const int64_t T = meta.positions.numel();
  const int64_t Hq = T ? q.numel() / (T * D) : 0;
  SYV_CHECK(q.numel() == T * Hq * D && out.numel() == q.numel())
      << "paged_attention: q/out not [T, Hq, D]";
  SYV_CHECK(Hk > 0 && Hq % Hk == 0)
      << "paged_attention: " << Hq << " query heads, " << Hk << " kv heads";
  SYV_CHECK_EQ(page_size, meta.page_size) << "paged_attention: cache page size vs batch";
  const int64_t group = Hq / Hk;
  const int64_t max_pages = meta.page_table.dim(1);
  const int32_t* positions = meta.positions.as<const int32_t>();
  const int32_t* token_seq = meta.token_seq.as<const int32_t>();
  const int32_t* page_table = meta.page_table.as<const int32_t>();

  ThreadPool::global().parallel_for(T * Hq, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, buf(static_cast<size_t>(D));
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
        const float* kj = row(0, slot, kv_head, buf.data());
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
        const float* vj = row(1, slot, kv_head, buf.data());
        const float p = scores[j] / denom;
        for (int64_t d = 0; d < D; ++d) oh[d] += p * vj[d];
      }
    }
  });
}

}  // namespace syv::cpu
