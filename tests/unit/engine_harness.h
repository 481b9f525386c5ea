// Drives an EngineCore synchronously for tests: submit requests, step until idle (checking
// integrity after every step), collect each sample's tokens, text and finish reason.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/log.h"
#include "engine/engine_core.h"
#include "model/model.h"

namespace syv::testing {

struct SampleOutput {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;
  int32_t cached_tokens = 0;
  int32_t prompt_tokens = 0;
  std::vector<float> logprobs;
  std::vector<PromptLogprob> prompt_logprobs;  // SamplingParams::prompt_logprobs (sample 0)
  int events = 0;
};

struct RequestOutput {
  std::vector<SampleOutput> samples;
};

inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

class Harness {
 public:
  explicit Harness(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
  EngineCore& core() { return *core_; }

  uint64_t submit(Request request) {
    EXPECT_TRUE(core_->validate(request).ok()) << core_->validate(request).message();
    const uint64_t id = next_id_++;
    auto handle = std::make_shared<RequestHandle>(id, request.params.n);
    handles_[id] = handle;
    core_->add_request(id, std::move(request), handle);
    return id;
  }
  void cancel(uint64_t id) { core_->abort_request(id); }

  // One step + integrity check + drain of every channel, then the gap between steps as Engine's
  // loop has it (the host tier's pinning: one piece in a busy gap, until its reserve is full when
  // idle).
  void step() {
    core_->step();
    const std::string err = core_->check_integrity();
    ASSERT_EQ(err, "") << "after step " << core_->stats().steps;
    drain();
    if (core_->has_work()) {
      core_->between_steps(/*idle=*/false);
    } else {
      while (core_->between_steps(/*idle=*/true)) {
      }
    }
  }
  void run() {
    int guard = 0;
    while (core_->has_work()) {
      step();
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_LT(++guard, 1000000) << "engine does not finish";
    }
    drain();
  }
  void drain() {
    for (auto& [id, handle] : handles_) {
      Event e;
      while (handle->try_next(e) == NextStatus::kEvent) {
        auto& out = outputs_[id];
        if (static_cast<int32_t>(out.samples.size()) <= e.sample_index)
          out.samples.resize(e.sample_index + 1);
        SampleOutput& s = out.samples[e.sample_index];
        if (e.token_id >= 0) s.tokens.push_back(e.token_id);
        s.text += e.text;
        if (e.logprob) s.logprobs.push_back(e.logprob->logprob);
        ++s.events;
        if (!e.prompt_logprobs.empty()) {
          EXPECT_TRUE(s.prompt_logprobs.empty()) << "prompt logprobs sent twice";
          s.prompt_logprobs = std::move(e.prompt_logprobs);
        }
        EXPECT_TRUE(s.finish_reason.empty()) << "event after the finishing event";
        s.finish_reason = e.finish_reason;
        s.cached_tokens = e.cached_tokens;
        s.prompt_tokens = e.prompt_tokens;
      }
    }
  }
  const RequestOutput& output(uint64_t id) { return outputs_[id]; }
  bool ended(uint64_t id) {
    Event e;
    return handles_[id]->try_next(e) == NextStatus::kEnd;
  }

  // Every page free or cached: nothing leaked.
  void expect_no_leaks() {
    const PagePool& pool = core_->cache().pool();
    EXPECT_EQ(pool.num_used(), 0) << "pages still referenced";
    EXPECT_EQ(pool.num_available(), pool.num_pages());
    EXPECT_EQ(core_->check_integrity(), "");
  }

 private:
  std::unique_ptr<EngineCore> core_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<RequestHandle>> handles_;
  std::map<uint64_t, RequestOutput> outputs_;
};

// A model of tests/fixtures/<dir> (e.g. "qwen3/tied_gqa2") on a CPU backend of its own; `model`
// is null (and the test has failed) when it does not load.
struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};
// load_cpu_model: any folder, relative to the repository (e.g. "models/tiny-dense").
inline LoadedModel load_cpu_model(const std::string& repo_dir) {
  LoadedModel l;
  l.backend = make_cpu_backend();
  auto model = load_model(std::string(SYV_SOURCE_DIR) + "/" + repo_dir, *l.backend);
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) l.model = std::move(model.value());
  return l;
}
inline LoadedModel load_cpu_fixture(const std::string& dir) {
  return load_cpu_model("tests/fixtures/" + dir);
}

// The Qwen3 golden fixtures (tests/fixtures/qwen3/<name>) the engine exactness tests run on.
inline const char* const kQwen3Fixtures[] = {"tied_gqa2", "tied_gqa4_kv1_hd64", "untied_gqa4_hd24",
                                             "untied_mha_hd32"};

// Engine options of the exactness scenarios: page size, pool, step budget, prefill chunk (0: no
// limit), prefix caching, concurrent sequences.
inline EngineOptions scenario_options(int32_t page, int32_t pages, int32_t budget, int32_t chunk,
                                      bool prefix, int32_t max_seqs = 256) {
  EngineOptions o;
  o.page_size = page;
  o.num_pages = pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.enable_prefix_caching = prefix;
  o.max_num_seqs = max_seqs;
  return o;
}

// `count` greedy requests (ignore_eos) over token ids [0, vocab): the even ones start with the same
// `shared_len` tokens (prefix hits), then each has 1..max_tail random tokens and max_tokens in
// [4, 4 + max_extra). Drawn from mt19937(seed): the shared tokens, then per request its tail
// length, tail and max_tokens.
inline std::vector<Request> shared_prefix_requests(int32_t vocab, uint32_t seed, int count,
                                                   int32_t shared_len, int32_t max_tail,
                                                   int32_t max_extra) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(static_cast<size_t>(shared_len));
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<Request> requests;
  for (int i = 0; i < count; ++i) {
    Request r;
    if (i % 2 == 0) r.prompt_ids = shared;
    const int32_t tail = 1 + static_cast<int32_t>(rng() % max_tail);
    for (int32_t k = 0; k < tail; ++k) r.prompt_ids.push_back(static_cast<int32_t>(rng() % vocab));
    r.params.temperature = 0.0f;
    r.params.max_tokens = 4 + static_cast<int32_t>(rng() % max_extra);
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  return requests;
}

// Runs `requests` (submitted together) to completion on a fresh EngineCore over `model`, checking
// integrity after every step and that no page leaked; the outputs in request order.
inline std::vector<RequestOutput> run_requests(Model& model, const EngineOptions& o,
                                               const std::vector<Request>& requests,
                                               EngineStats* stats = nullptr) {
  set_log_level(LogLevel::WARN);
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  Harness h(std::move(core).value());
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  if (stats) *stats = h.core().stats();
  std::vector<RequestOutput> out;
  for (uint64_t id : ids) out.push_back(h.output(id));
  return out;
}

}  // namespace syv::testing
