// The hybrid golden fixtures (tests/fixtures/hybrid/*, made by tools/fixtures/
// make_hybrid_fixtures.py from transformers) and the batches the hybrid golden tests build from
// them, shared by the CPU test (golden/hybrid_test.cpp) and the GPU one
// (gpu/hybrid_golden_gpu_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/cache_store.h"
#include "model/model.h"

namespace syv::hybrid_fixture {

constexpr int32_t kPageSize = 16;
constexpr int32_t kPagesPerSeq = 8;  // 128 positions per sequence

struct Fixture {
  std::string name;
  std::string dir;
  std::vector<int32_t> tokens, greedy;
  int64_t vocab = 0;
  std::vector<float> logits;         // [T, vocab]
  std::vector<float> greedy_logits;  // [12, vocab]
};

inline std::vector<float> read_f32(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 4));
  EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(n * 4)) << path << " is too short";
  return v;
}

inline Fixture read_fixture(const std::string& name) {
  Fixture f;
  f.name = name;
  // SYV_SOURCE_DIR in the environment wins: a build carried to another machine finds the fixtures
  // in that machine's checkout.
  const char* root = std::getenv("SYV_SOURCE_DIR");
  f.dir = std::string(root ? root : SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/" + name;
  std::ifstream in(f.dir + "/meta.json");
  EXPECT_TRUE(in.good()) << f.dir << "/meta.json";
  nlohmann::json j = nlohmann::json::parse(in);
  f.tokens = j["tokens"].get<std::vector<int32_t>>();
  f.greedy = j["greedy_tokens"].get<std::vector<int32_t>>();
  f.vocab = j["vocab_size"].get<int64_t>();
  f.logits = read_f32(f.dir + "/logits.bin", f.tokens.size() * static_cast<size_t>(f.vocab));
  f.greedy_logits =
      read_f32(f.dir + "/greedy_logits.bin", f.greedy.size() * static_cast<size_t>(f.vocab));
  return f;
}

inline double row_rel(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::abs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::abs(static_cast<double>(want[i])));
  }
  return num / std::max(den, 1e-30);
}

// One sequence's part of a batch: tokens [begin, end) of `tokens` at those positions.
struct SeqPart {
  const std::vector<int32_t>* tokens;
  int32_t begin, end;
  int32_t seq;   // pages [seq * kPagesPerSeq, ...) unless `pages` is given
  int32_t slot;  // recurrent-state slot
  std::vector<int32_t> pages = {};
};

inline Batch make_batch(const std::vector<SeqPart>& parts) {
  Batch b;
  b.max_pages_per_seq = kPagesPerSeq;
  b.seq_starts.push_back(0);
  for (const SeqPart& p : parts) {
    for (int32_t i = p.begin; i < p.end; ++i) {
      b.logit_rows.push_back(b.num_tokens());
      b.token_ids.push_back((*p.tokens)[i]);
      b.positions.push_back(i);
    }
    b.seq_starts.push_back(b.num_tokens());
    b.context_lens.push_back(p.end);
    for (int32_t j = 0; j < kPagesPerSeq; ++j) {
      b.page_table.push_back(j < static_cast<int32_t>(p.pages.size()) ? p.pages[j]
                                                                      : p.seq * kPagesPerSeq + j);
    }
    b.state_slots.push_back(p.slot);
  }
  return b;
}

inline std::vector<float> run(Model& model, const Batch& batch) {
  Tensor logits = model.forward(batch);
  std::vector<float> host(static_cast<size_t>(logits.numel()));
  model.backend().download(host.data(), logits.data, host.size() * 4);
  return host;
}

// The scenarios both golden tests run (each checks the rows its own way): logits rows `got`, one
// per token of `parts` in order, under the name `what`.
struct Rows {
  std::string what;
  std::vector<float> got;
  std::vector<SeqPart> parts;
};

// The whole prompt in one prefill (slot 0).
inline Rows whole_prefill(Model& model, const Fixture& f) {
  const int32_t T = static_cast<int32_t>(f.tokens.size());
  std::vector<SeqPart> parts = {{&f.tokens, 0, T, 0, 0}};
  return {"whole prefill", run(model, make_batch(parts)), parts};
}

// The prompt one token per forward (slot 2, sequence 1's pages): the decode kernels.
inline Rows token_by_token(Model& model, const Fixture& f) {
  const int32_t T = static_cast<int32_t>(f.tokens.size());
  Rows r{"token-by-token decode", {}, {{&f.tokens, 0, T, 1, 2}}};
  for (int32_t t = 0; t < T; ++t) {
    std::vector<float> row = run(model, make_batch({{&f.tokens, t, t + 1, 1, 2}}));
    r.got.insert(r.got.end(), row.begin(), row.end());
  }
  return r;
}

// Step 1: sequence A's first 40 tokens and sequence B's first 23, packed. Step 2: the rest of
// both, packed (B first this time, in other slots than A, so slots are not confused).
inline std::vector<Rows> packed_chunks(Model& model, const Fixture& f) {
  const int32_t T = static_cast<int32_t>(f.tokens.size());
  const int32_t a1 = std::min(40, T - 1), b1 = 23;
  std::vector<SeqPart> step1 = {{&f.tokens, 0, a1, 0, 3}, {&f.tokens, 0, b1, 1, 1}};
  std::vector<SeqPart> step2 = {{&f.tokens, b1, T, 1, 1}, {&f.tokens, a1, T, 0, 3}};
  std::vector<Rows> out;
  out.push_back({"packed chunk 1", run(model, make_batch(step1)), step1});
  out.push_back({"packed chunk 2", run(model, make_batch(step2)), step2});
  return out;
}

// Prefill 48 tokens (3 full pages) in slot 0, checkpoint it, then continue from the checkpoint
// in slot 2 as a second sequence sharing the first 3 pages; slot 0 continues too. `store` is the
// one `model` is bound to (4 slots, 2 checkpoints).
inline Rows from_checkpoint(Model& model, CacheStore& store, const Fixture& f) {
  const int32_t T = static_cast<int32_t>(f.tokens.size()), cut = 3 * kPageSize;
  run(model, make_batch({{&f.tokens, 0, cut, 0, 0}}));
  store.save_checkpoint(0, 1);
  store.reset_slot(2);
  store.load_checkpoint(1, 2);
  std::vector<int32_t> shared = {0, 1, 2};
  for (int32_t j = 3; j < kPagesPerSeq; ++j) shared.push_back(2 * kPagesPerSeq + j);
  std::vector<SeqPart> rest = {{&f.tokens, cut, T, 2, 2, shared}, {&f.tokens, cut, T, 0, 0}};
  return {"from checkpoint + original", run(model, make_batch(rest)), rest};
}

// Greedy decoding of f.greedy.size() tokens after the prompt (slot 1): the tokens, and each step's
// logits row in *step_rows when given.
inline std::vector<int32_t> greedy_tokens(Model& model, const Fixture& f,
                                          std::vector<std::vector<float>>* step_rows = nullptr) {
  std::vector<int32_t> seq = f.tokens;
  const int32_t T = static_cast<int32_t>(f.tokens.size());
  std::vector<float> logits = run(model, make_batch({{&seq, 0, T, 0, 1}}));
  std::vector<int32_t> got;
  for (size_t i = 0; i < f.greedy.size(); ++i) {
    std::vector<float> row(logits.end() - f.vocab, logits.end());
    const int32_t next =
        static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    got.push_back(next);
    seq.push_back(next);
    if (step_rows) step_rows->push_back(std::move(row));
    if (i + 1 < f.greedy.size()) {
      const int32_t pos = static_cast<int32_t>(seq.size()) - 1;
      logits = run(model, make_batch({{&seq, pos, pos + 1, 0, 1}}));
    }
  }
  return got;
}

}  // namespace syv::hybrid_fixture
