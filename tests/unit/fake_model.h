// A small deterministic Model for engine tests. Its "KV" is one 64-bit value per token
// (mix(token, position, value at position - 1), so it depends on the whole history) written into
// the pages the batch maps; the logits of a row are a hash of every value the row reads back
// through its page table, positions 0..pos. So a wrong page table, a wrong position, a page reused
// while still needed, or a stale prefix hit changes the output, while the output never depends on
// how sequences were batched or chunked.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"
#include "model/model.h"

namespace syv::testing {

class FakeModel : public Model {
 public:
  explicit FakeModel(int64_t vocab = 97, std::vector<int32_t> eos = {})
      : backend_(make_cpu_backend()) {
    config_.model_type = "fake";
    config_.vocab_size = vocab;
    config_.max_position_embeddings = 1 << 20;
    config_.eos_token_ids = std::move(eos);
  }

  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override {
    CacheSpec spec;
    spec.add_kv_layer({1, 1, DType::F32});  // K and V: 8 bytes per token, sizeof(uint64_t)
    return spec;
  }
  Backend& backend() override { return *backend_; }
  // The fake keeps its 64-bit values in its own array, sized like the store's pages.
  void bind_cache(CacheStore& store) override {
    cache_ = store.config();
    kv_.assign(static_cast<size_t>(cache_.num_pages) * cache_.page_size, kPoison);
  }
  const CacheConfig& cache_config() const { return cache_; }

  using Model::forward;
  void forward(const Batch& batch, Outputs& out) override {
    ++forward_calls;
    max_tokens_seen = std::max<int64_t>(max_tokens_seen, batch.num_tokens());
    const int32_t S = batch.num_seqs();
    SYV_CHECK_EQ(static_cast<int32_t>(batch.context_lens.size()), S);
    SYV_CHECK_EQ(static_cast<int32_t>(batch.page_table.size()), S * batch.max_pages_per_seq);
    // Write every new token's value first (rows of one sequence may read each other).
    for (int32_t s = 0; s < S; ++s) {
      const int32_t len = batch.seq_len(s);
      for (int32_t i = 0; i < len; ++i) {
        const int32_t row = batch.seq_starts[s] + i;
        const int32_t pos = batch.positions[row];
        SYV_CHECK_EQ(pos, batch.context_lens[s] - len + i) << "positions must be the context tail";
        // Like real K/V, the value depends on the whole history (the previous position's value).
        const uint64_t prev = pos == 0 ? 0 : kv_[slot(batch, s, pos - 1)];
        SYV_CHECK(prev != kPoison) << "position " << pos - 1 << " read before it was written";
        kv_[slot(batch, s, pos)] =
            mix(mix(static_cast<uint64_t>(batch.token_ids[row]), static_cast<uint64_t>(pos)), prev);
      }
    }
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    std::vector<float> host(static_cast<size_t>(R * config_.vocab_size));
    for (int64_t r = 0; r < R; ++r) {
      const int32_t row = batch.logit_rows[r];
      int32_t s = 0;
      while (batch.seq_starts[s + 1] <= row) ++s;
      const int32_t pos = batch.positions[row];
      uint64_t h = 0x12345;
      for (int32_t p = 0; p <= pos; ++p) {
        const uint64_t value = kv_[slot(batch, s, p)];
        SYV_CHECK(value != kPoison) << "position " << p << " read before it was written";
        h = mix(h, value);
      }
      for (int64_t v = 0; v < config_.vocab_size; ++v) {
        host[r * config_.vocab_size + v] =
            static_cast<float>(mix(h, static_cast<uint64_t>(v)) >> 40) * (8.0f / 16777216.0f);
      }
    }
    logits_ = backend_->allocate(std::max<size_t>(host.size() * sizeof(float), 4));
    backend_->upload(logits_.data(), host.data(), host.size() * sizeof(float));
    out.logits = Tensor(logits_.data(), DType::F32, {R, config_.vocab_size});
    out.hidden = Tensor();  // no hidden state to speak of
  }

  static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  int64_t forward_calls = 0;
  int64_t max_tokens_seen = 0;

 private:
  static constexpr uint64_t kPoison = 0xdeadbeefdeadbeefull;
  size_t slot(const Batch& batch, int32_t s, int32_t pos) const {
    const int32_t P = cache_.page_size;
    SYV_CHECK(pos / P < batch.max_pages_per_seq) << "position " << pos << " beyond the page table";
    const int32_t page =
        batch.page_table[static_cast<size_t>(s) * batch.max_pages_per_seq + pos / P];
    SYV_CHECK(page >= 0 && page < cache_.num_pages) << "unmapped page for position " << pos;
    return static_cast<size_t>(page) * P + pos % P;
  }

  std::unique_ptr<Backend> backend_;
  ModelConfig config_;
  CacheConfig cache_;
  std::vector<uint64_t> kv_;
  DeviceBuffer logits_;
};

}  // namespace syv::testing
