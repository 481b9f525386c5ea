// The trained tiny models (models/tiny-{draft,dense,hybrid}) and their transformers fixtures
// (tests/fixtures/tiny/<model>/, written by tools/train/eval.py from the folders as committed:
// bf16 weights reloaded in fp32, eager attention, TF32 off), and the batches the tiny-model golden
// tests build from them (golden/tiny_models_test.cpp; a GPU test can share them).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "golden/hybrid_fixture.h"  // read_f32, row_rel
#include "model/model.h"

namespace syv::tiny_fixture {

using hybrid_fixture::read_f32;
using hybrid_fixture::row_rel;

// SYV_SOURCE_DIR in the environment wins (a build carried to another machine).
inline std::string source_dir() {
  const char* root = std::getenv("SYV_SOURCE_DIR");
  return root ? root : SYV_SOURCE_DIR;
}
inline std::string model_dir(const std::string& name) {
  return source_dir() + "/models/" + name;
}
inline std::string fixture_dir() {
  return source_dir() + "/tests/fixtures/tiny";
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

// meta.json + logits.bin: two held-out windows and transformers' logits at some of their
// positions.
struct Logits {
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> sequences;    // [2][96]
  std::vector<std::pair<int32_t, int32_t>> rows;  // (sequence, position) of each logits.bin row
  std::vector<float> logits;                      // [rows, vocab]
};

inline Logits read_logits(const std::string& name) {
  const std::string dir = fixture_dir() + "/" + name;
  const nlohmann::json j = read_json(dir + "/meta.json");
  Logits f;
  f.vocab = j.at("vocab_size").get<int64_t>();
  f.sequences = j.at("sequences").get<std::vector<std::vector<int32_t>>>();
  for (const auto& r : j.at("rows")) f.rows.emplace_back(r[0].get<int32_t>(), r[1].get<int32_t>());
  f.logits = read_f32(dir + "/logits.bin", f.rows.size() * static_cast<size_t>(f.vocab));
  return f;
}

// greedy256.json: held-out prompts and transformers' greedy continuations (recomputed without a
// cache), with the smallest top-1 - top-2 logit gap met along each.
struct Greedy {
  std::vector<std::vector<int32_t>> prompts, tokens;
  std::vector<double> min_margins;
};

inline Greedy read_greedy(const std::string& name) {
  const nlohmann::json j = read_json(fixture_dir() + "/" + name + "/greedy256.json");
  Greedy g;
  g.prompts = j.at("prompts").get<std::vector<std::vector<int32_t>>>();
  g.tokens = j.at("tokens").get<std::vector<std::vector<int32_t>>>();
  g.min_margins = j.at("min_margins").get<std::vector<double>>();
  return g;
}

// Sequences that each own pages_per_seq pages and (hybrids) state slot s, batched together.
struct Lanes {
  int32_t pages_per_seq;
  bool recurrent;

  // One step: `news[s]` are the next tokens of sequence s, which already holds `lens[s]`
  // positions; `all_rows` asks for the logits of every new token, else of each sequence's last.
  Batch batch(const std::vector<std::vector<int32_t>>& news, const std::vector<int32_t>& lens,
              bool all_rows) const {
    Batch b;
    b.max_pages_per_seq = pages_per_seq;
    b.seq_starts.push_back(0);
    for (size_t s = 0; s < news.size(); ++s) {
      for (size_t i = 0; i < news[s].size(); ++i) {
        if (all_rows) b.logit_rows.push_back(b.num_tokens());
        b.token_ids.push_back(news[s][i]);
        b.positions.push_back(lens[s] + static_cast<int32_t>(i));
      }
      if (!all_rows) b.logit_rows.push_back(b.num_tokens() - 1);
      b.seq_starts.push_back(b.num_tokens());
      b.context_lens.push_back(lens[s] + static_cast<int32_t>(news[s].size()));
      for (int32_t j = 0; j < pages_per_seq; ++j)
        b.page_table.push_back(static_cast<int32_t>(s) * pages_per_seq + j);
      if (recurrent) b.state_slots.push_back(static_cast<int32_t>(s));
    }
    return b;
  }
};

inline std::vector<float> download(Model& model, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  model.backend().download(host.data(), t.data, host.size() * sizeof(float));
  return host;
}

inline int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Greedy decoding of `steps` tokens after every prompt, all prompts in one batch per step (the
// prompts prefilled together, then one token of each per step). The model must be bound to a
// store with prompts.size() * lanes.pages_per_seq pages of `page_size` covering prompt + steps
// positions, and (hybrids) prompts.size() zeroed state slots.
inline std::vector<std::vector<int32_t>> greedy_batched(
    Model& model, const Lanes& lanes, const std::vector<std::vector<int32_t>>& prompts,
    int32_t steps) {
  const int64_t vocab = model.config().vocab_size;
  const size_t n = prompts.size();
  std::vector<std::vector<int32_t>> out(n), news = prompts;
  std::vector<int32_t> lens(n, 0);
  for (int32_t step = 0; step < steps; ++step) {
    const std::vector<float> logits =
        download(model, model.forward(lanes.batch(news, lens, /*all_rows=*/false)));
    for (size_t s = 0; s < n; ++s) {
      lens[s] += static_cast<int32_t>(news[s].size());
      const int32_t next = argmax(&logits[s * vocab], vocab);
      out[s].push_back(next);
      news[s] = {next};
    }
  }
  return out;
}

}  // namespace syv::tiny_fixture
