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

}  // namespace syv::hybrid_fixture
