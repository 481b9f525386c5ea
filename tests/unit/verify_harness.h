// Verify-step scenarios shared by the CPU and GPU tests (tests/unit/engine_verify_test.cpp,
// tests/gpu/engine_verify_gpu_test.cpp): an oracle drafter that proposes plain decoding's own
// continuation, right, wrong or right then wrong, and the check that every k and kind of draft
// gives plain decoding's tokens.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/log.h"
#include "engine/drafter.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {

enum class Drafts { kRight, kWrong, kPartial };

inline const char* name_of(Drafts d) {
  return d == Drafts::kRight ? "right" : d == Drafts::kWrong ? "wrong" : "partial";
}

// Proposes the continuation plain decoding produced for the sequence's prompt (looked up by
// prompt and sample index), right, wrong (each token + 1) or right for the first
// (length mod (k + 1)) drafts and wrong after. Prompts it does not know get no drafts.
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(Drafts mode, int32_t vocab) : mode_(mode), vocab_(vocab) {}
  void expect(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output) {
    std::vector<int32_t> full = prompt;
    full.insert(full.end(), output.begin(), output.end());
    full_[prompt] = std::move(full);
  }
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override {
    EXPECT_GE(max_tokens, 1);
    const std::vector<int32_t> prompt(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_len());
    auto it = full_.find(prompt);
    if (it == full_.end()) return;
    const std::vector<int32_t>& full = it->second;
    // The sequence so far must be plain decoding's (or the oracle is no oracle).
    EXPECT_TRUE(std::equal(seq.tokens.begin(), seq.tokens.end(), full.begin()))
        << "seq " << seq.id() << " left plain decoding's path at length " << seq.length();
    const int32_t right = mode_ == Drafts::kRight   ? max_tokens
                          : mode_ == Drafts::kWrong ? 0
                                                    : seq.length() % (max_tokens + 1);
    for (int32_t i = 0; i < max_tokens; ++i) {
      const size_t at = static_cast<size_t>(seq.length() + i);
      if (at >= full.size()) break;
      out.push_back(i < right ? full[at] : (full[at] + 1) % vocab_);
    }
  }

 private:
  Drafts mode_;
  int32_t vocab_;
  std::map<std::vector<int32_t>, std::vector<int32_t>> full_;
};

// The oracle's drafts cut to an uneven count: (length + sequence id) mod (max_tokens + 1), 0 to
// max_tokens, so a step's sequences carry different draft counts (verify padding,
// engine/verify_padding.h).
class UnevenDrafter : public Drafter {
 public:
  explicit UnevenDrafter(std::unique_ptr<OracleDrafter> oracle) : oracle_(std::move(oracle)) {}
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override {
    const size_t before = out.size();
    oracle_->propose(seq, max_tokens, out);
    const uint64_t keep =
        (static_cast<uint64_t>(seq.length()) + seq.id()) % (static_cast<uint64_t>(max_tokens) + 1);
    out.resize(std::min(out.size(), before + keep));
  }

 private:
  std::unique_ptr<OracleDrafter> oracle_;
};

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;  // per request, sample 0
  EngineStats stats;
};

// Runs `requests` together on `core` to completion (integrity checked every step); no page, state
// slot or checkpoint hold may leak. `inspect` sees the engine at the end, before it is destroyed.
inline RunResult run_core(std::unique_ptr<EngineCore> core, const std::vector<Request>& requests,
                          const std::function<void(const EngineCore&)>& inspect = {}) {
  Harness h(std::move(core));
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(h.submit(r));
  h.run();
  h.expect_no_leaks();
  if (const HybridState* hy = h.core().hybrid()) {
    EXPECT_EQ(hy->pool().num_free_slots(), hy->pool().num_slots()) << "state slots leaked";
    EXPECT_EQ(hy->pool().num_held(), 0) << "checkpoint holds leaked";
  }
  RunResult out;
  out.stats = h.core().stats();
  for (uint64_t id : ids) out.tokens.push_back(h.output(id).samples.at(0).tokens);
  if (inspect) inspect(h.core());
  return out;
}

// Runs `requests` together; requests[i] gets drafts when drafted[i] (and a drafter is given).
inline RunResult run(Model& model, EngineOptions o, const std::vector<Request>& requests,
                     std::unique_ptr<Drafter> drafter = nullptr) {
  set_log_level(LogLevel::WARN);
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  if (drafter) core.value()->set_drafter(std::move(drafter));
  return run_core(std::move(core).value(), requests);
}

// Appends each prompt's first `phrase_len` tokens to it `times` times, so prompt lookup (n-gram
// drafting) finds earlier n-grams.
inline void repeat_prompt_phrase(std::vector<Request>& requests, size_t phrase_len, int times) {
  for (Request& r : requests) {
    const std::vector<int32_t> phrase(r.prompt_ids.begin(),
                                      r.prompt_ids.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                 phrase_len, r.prompt_ids.size())));
    for (int rep = 0; rep < times; ++rep)
      r.prompt_ids.insert(r.prompt_ids.end(), phrase.begin(), phrase.end());
  }
}

inline std::vector<Request> make_requests(int32_t vocab, uint32_t seed, int count,
                                          float temperature) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(21);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  std::vector<Request> requests;
  for (int i = 0; i < count; ++i) {
    Request r;
    if (i % 3 == 0) r.prompt_ids = shared;  // prefix hits mixed in
    const int32_t tail = 1 + static_cast<int32_t>(rng() % 30);
    for (int32_t k = 0; k < tail; ++k)
      r.prompt_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
    r.params.temperature = temperature;
    if (temperature > 0) {
      r.params.seed = 1000 + i;
      r.params.top_p = 0.9f;
      r.params.repetition_penalty = i % 2 == 0 ? 1.3f : 1.0f;
      r.params.presence_penalty = i % 4 == 1 ? 0.5f : 0.0f;
    }
    r.params.max_tokens = 6 + static_cast<int32_t>(rng() % 24);
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  return requests;
}

// Every request is run plainly, then with k = 1..4 drafts of each kind for two requests in three
// (the third decodes plainly in the same steps); tokens must match plain decoding exactly.
inline void expect_verify_equals_plain(Model& model, const EngineOptions& base,
                                       const std::vector<Request>& requests,
                                       const std::string& what) {
  const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);
  const RunResult plain = run(model, base, requests);
  ASSERT_EQ(plain.tokens.size(), requests.size());
  EXPECT_EQ(plain.stats.draft_tokens, 0u);
  uint64_t padded_steps = 0;
  for (int32_t k = 1; k <= 4; ++k) {
    for (Drafts mode : {Drafts::kRight, Drafts::kWrong, Drafts::kPartial}) {
      SCOPED_TRACE(what + " k " + std::to_string(k) + " drafts " + name_of(mode));
      auto drafter = std::make_unique<OracleDrafter>(mode, vocab);
      for (size_t i = 0; i < requests.size(); ++i)
        if (i % 3 != 2) drafter->expect(requests[i].prompt_ids, plain.tokens[i]);
      EngineOptions o = base;
      o.num_speculative_tokens = k;
      const RunResult spec = run(model, o, requests, std::move(drafter));
      if (::testing::Test::HasFatalFailure()) return;
      for (size_t i = 0; i < requests.size(); ++i)
        EXPECT_EQ(spec.tokens[i], plain.tokens[i]) << "request " << i;
      padded_steps += spec.stats.verify_padded_steps;
      // Filler positions are counted apart: the tokens fed otherwise are those of no padding.
      if (spec.stats.verify_padded_steps == 0) {
        EXPECT_EQ(spec.stats.verify_padding_tokens, 0u);
      }
      EXPECT_GT(spec.stats.draft_tokens, 0u);
      if (mode == Drafts::kRight) {
        EXPECT_EQ(spec.stats.accepted_tokens, spec.stats.draft_tokens);
      } else if (mode == Drafts::kWrong) {
        EXPECT_EQ(spec.stats.accepted_tokens, 0u);
      } else {
        EXPECT_GT(spec.stats.accepted_tokens, 0u);
        EXPECT_LT(spec.stats.accepted_tokens, spec.stats.draft_tokens);
      }
      EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens);
      // The by-position and per-step counters add up to the totals.
      uint64_t drafted = 0, kept = 0, verifies = 0, produced = 0;
      for (size_t i = 0; i < spec.stats.drafts_at.size(); ++i) {
        drafted += spec.stats.drafts_at[i];
        kept += spec.stats.accepted_at[i];
        EXPECT_LE(spec.stats.accepted_at[i], spec.stats.drafts_at[i]);
        if (i >= static_cast<size_t>(k)) {
          EXPECT_EQ(spec.stats.drafts_at[i], 0u);
        }
      }
      for (size_t n = 0; n < spec.stats.tokens_per_verify.size(); ++n) {
        verifies += spec.stats.tokens_per_verify[n];
        produced += n * spec.stats.tokens_per_verify[n];
      }
      EXPECT_EQ(drafted, spec.stats.draft_tokens);
      EXPECT_EQ(kept, spec.stats.accepted_tokens);
      EXPECT_EQ(produced, kept + verifies);
      if (mode == Drafts::kWrong) {
        EXPECT_EQ(spec.stats.tokens_per_verify[1], verifies);
      }
      if (mode == Drafts::kRight) {
        EXPECT_EQ(spec.stats.accepted_at[0], spec.stats.drafts_at[0]);
      }
    }
  }
  // The sequences without drafts make uneven verify steps: padded when the options force it.
  if (base.force_verify_padding) {
    EXPECT_GT(padded_steps, 0u) << what;
  } else if (base.cuda_graphs == "off") {
    EXPECT_EQ(padded_steps, 0u) << what;
  }
}

}  // namespace syv::testing
