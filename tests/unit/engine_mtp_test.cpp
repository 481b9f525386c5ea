// MTP speculative decoding (engine/mtp_drafter.h) on Qwen3.5 and Qwen3-Next fixtures with a random
// MTP head (unit/mtp_fixture.h): greedy output equals plain decoding token for token, alone and
// batched with sequences that do not speculate, across chunked prefill, prefix hits and
// preemption; the head's drafts for a given token prefix are the same whatever the batching,
// chunking, prefix reuse or preemption (its K/V in the pages is valid wherever it is reused); the
// refusals. With random weights almost every draft is rejected: acceptance is not tested here.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/mtp_drafter.h"
#include "engine/sequence.h"
#include "unit/engine_harness.h"
#include "unit/mtp_fixture.h"
#include "unit/verify_harness.h"

namespace syv::testing {
namespace {

using DraftLog = std::map<std::vector<int32_t>, std::vector<int32_t>>;  // tokens -> drafts

// The engine's MtpDrafter, silent for the prompts in `silent` (sequences that do not speculate in
// the same steps), recording every proposal by the sequence's tokens.
class RecordingDrafter : public Drafter {
 public:
  RecordingDrafter(std::unique_ptr<MtpDrafter> inner, std::set<std::vector<int32_t>> silent,
                   DraftLog* log)
      : inner_(std::move(inner)), silent_(std::move(silent)), log_(log) {}
  void observe(const SchedulerOutput& step, const Batch& batch,
               const Model::Outputs& outputs) override {
    inner_->observe(step, batch, outputs);
  }
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override {
    const std::vector<int32_t> prompt(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_len());
    if (silent_.count(prompt)) return;
    inner_->propose(seq, max_tokens, out);
    if (log_ != nullptr && !out.empty()) (*log_)[seq.tokens] = out;
  }

 private:
  std::unique_ptr<MtpDrafter> inner_;
  std::set<std::vector<int32_t>> silent_;
  DraftLog* log_;
};

struct MtpRun {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
  DraftLog drafts;
};

// k = 0: plain decoding. Requests i with i % 3 == 2 do not speculate when `mixed`.
// decode_shaped: the head's batches in the layout its CUDA graphs replay (MtpDrafter::
// set_decode_shaped): every row its own one-token sequence and a logits row.
MtpRun run_mtp(Model& model, EngineOptions o, int32_t k, const std::vector<Request>& requests,
               bool mixed, bool decode_shaped = false) {
  set_log_level(LogLevel::WARN);
  o.num_speculative_tokens = k;
  o.speculative_method = k > 0 ? "mtp" : "";
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  if (!core.ok()) return {};
  MtpRun out;
  if (k > 0) {
    std::set<std::vector<int32_t>> silent;
    for (size_t i = 0; mixed && i < requests.size(); ++i)
      if (i % 3 == 2) silent.insert(requests[i].prompt_ids);
    EngineCore& c = *core.value();
    auto mtp = std::make_unique<MtpDrafter>(model, c.cache().pool(), o.page_size, k,
                                            c.options().max_model_len);
    mtp->set_decode_shaped(decode_shaped);
    c.set_drafter(std::make_unique<RecordingDrafter>(std::move(mtp), silent, &out.drafts));
  }
  const RunResult r = run_core(std::move(core).value(), requests);
  out.tokens = r.tokens;
  out.stats = r.stats;
  return out;
}

// Every proposal of `got` for a token prefix `reference` also saw is the same (one may be cut
// shorter where the pool had no free page for the chain).
void expect_same_drafts(const DraftLog& reference, const DraftLog& got, const std::string& what) {
  int compared = 0;
  for (const auto& [tokens, drafts] : got) {
    auto it = reference.find(tokens);
    if (it == reference.end()) continue;
    ++compared;
    const size_t n = std::min(drafts.size(), it->second.size());
    EXPECT_TRUE(std::equal(drafts.begin(), drafts.begin() + n, it->second.begin()))
        << what << ": drafts differ after " << tokens.size() << " tokens";
  }
  EXPECT_GT(compared, 0) << what << ": no proposal to compare";
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded load_mtp(const std::string& name) {
  Loaded l;
  l.backend = make_cpu_backend();
  // Bit-identical rows however a step is batched or chunked: drafts can be compared exactly.
  l.backend->set_batch_invariant(true);
  LoadOptions lo;
  lo.mtp = true;
  auto model = load_model(make_mtp_fixture(name, 3), *l.backend, lo);
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) l.model = std::move(model.value());
  return l;
}

EngineOptions hybrid_options(int32_t pages, int32_t budget, int32_t chunk, int32_t max_seqs) {
  EngineOptions o = scenario_options(16, pages, budget, chunk, true, max_seqs);
  o.checkpoint_interval = 16;  // hits at every page boundary; drafts stop at each
  o.num_checkpoints = 64;
  return o;
}

TEST(EngineMtp, GreedyEqualsPlainDecodingAndDraftsDoNotDependOnTheSchedule) {
  for (const char* name : {"q35_r1_lllf", "qnext_top2_r1"}) {
    SCOPED_TRACE(name);
    Loaded l = load_mtp(name);
    ASSERT_TRUE(l.model);
    Model& m = *l.model;
    const int32_t vocab = std::min<int32_t>(300, static_cast<int32_t>(m.config().vocab_size));
    std::vector<Request> requests = make_requests(vocab, 5, 6, 0.0f);
    // Resends of two prompts at the end: with few sequences at a time they hit the first ones'
    // pages (and checkpoints) once those finished.
    requests.push_back(requests[0]);
    requests.push_back(requests[3]);
    // The first page of request 0, then another token: the head's K/V at position 15 in request
    // 0's cached page was computed from request 0's token 16, so this one must not reuse it.
    Request other = requests[0];
    other.prompt_ids[16] = (other.prompt_ids[16] + 1) % vocab;
    requests.push_back(other);
    const MtpRun plain = run_mtp(m, hybrid_options(128, 4096, 0, 8), 0, requests, false);
    ASSERT_EQ(plain.tokens.size(), requests.size());
    for (int32_t k : {1, 2, 4}) {
      SCOPED_TRACE("k " + std::to_string(k));
      // Each request alone, no prefix cache: the reference drafts.
      MtpRun alone;
      for (const Request& r : requests) {
        MtpRun one = run_mtp(m, hybrid_options(128, 4096, 0, 8), k, {r}, false);
        ASSERT_EQ(one.tokens.size(), 1u);
        alone.tokens.push_back(one.tokens[0]);
        alone.drafts.insert(one.drafts.begin(), one.drafts.end());
        alone.stats.draft_tokens += one.stats.draft_tokens;
      }
      EXPECT_EQ(alone.tokens, plain.tokens) << "alone";
      EXPECT_GT(alone.stats.draft_tokens, 0u);
      struct Scenario {
        const char* what;
        EngineOptions o;
        bool mixed;
        bool decode_shaped = false;
      };
      // Uneven verify steps padded to one draft count, as graphs would pad them
      // (engine/verify_padding.h): the head reads the target's hidden rows past the filler.
      EngineOptions padded = hybrid_options(128, 4096, 0, 8);
      padded.force_verify_padding = true;
      const Scenario scenarios[] = {
          {"batched, some not speculating", hybrid_options(128, 4096, 0, 8), true},
          {"chunked prefill", hybrid_options(128, 24, 7, 8), true},
          {"prefix hits", hybrid_options(128, 4096, 0, 2), false},
          {"preemption", hybrid_options(9, 64, 0, 8), true},
          {"decode-shaped head batches (its graphs' layout)", hybrid_options(128, 24, 7, 8), true,
           true},
          {"uneven verify steps padded", padded, true, true},
      };
      for (const Scenario& s : scenarios) {
        SCOPED_TRACE(s.what);
        const MtpRun spec = run_mtp(m, s.o, k, requests, s.mixed, s.decode_shaped);
        if (::testing::Test::HasFatalFailure()) return;
        EXPECT_EQ(spec.tokens, plain.tokens);
        EXPECT_GT(spec.stats.draft_tokens, 0u);
        expect_same_drafts(alone.drafts, spec.drafts, s.what);
        if (std::string(s.what) == "prefix hits") {
          EXPECT_GT(spec.stats.prefix_hit_tokens, 0u);
        }
        if (std::string(s.what) == "preemption") {
          EXPECT_GT(spec.stats.preemptions, 0u);
        }
        if (std::string(s.what) == "uneven verify steps padded") {
          EXPECT_GT(spec.stats.verify_padded_steps, 0u);
        } else {
          EXPECT_EQ(spec.stats.verify_padded_steps, 0u);
        }
      }
    }
  }
}

// fp8 / int4 KV: the head's K/V lives in the same quantized pages; speculation (batched, with
// prefix hits) still gives plain decoding's tokens in the same KV dtype.
TEST(EngineMtp, QuantizedKvKeepsPlainDecodingsTokens) {
  Loaded l = load_mtp("q35_r1_lllf");
  ASSERT_TRUE(l.model);
  Model& m = *l.model;
  const int32_t vocab = std::min<int32_t>(300, static_cast<int32_t>(m.config().vocab_size));
  std::vector<Request> requests = make_requests(vocab, 5, 6, 0.0f);
  requests.push_back(requests[0]);  // a resend: a prefix hit once the first one finished
  for (DType kv : {DType::F8E4M3, DType::U4X2}) {
    SCOPED_TRACE(std::string(dtype_name(kv)));
    EngineOptions o = hybrid_options(128, 4096, 0, 2);
    o.kv_dtype = kv;
    const MtpRun plain = run_mtp(m, o, 0, requests, false);
    const MtpRun spec = run_mtp(m, o, 2, requests, true);
    ASSERT_EQ(plain.tokens.size(), requests.size());
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_GT(spec.stats.draft_tokens, 0u);
    EXPECT_GT(spec.stats.prefix_hit_tokens, 0u);
  }
}

TEST(EngineMtp, RefusesWhatCannotDraft) {
  set_log_level(LogLevel::WARN);
  auto backend = make_cpu_backend();
  // A model loaded without its head.
  auto plain = load_model(make_mtp_fixture("q35_r1_lllf", 3), *backend);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EngineOptions o = hybrid_options(64, 256, 0, 4);
  o.speculative_method = "mtp";
  o.num_speculative_tokens = 2;
  auto core = EngineCore::create(**plain, nullptr, o);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.message().find("loaded without an MTP head"), std::string::npos) << core.message();
  // k out of range.
  Loaded l = load_mtp("q35_r1_lllf");
  ASSERT_TRUE(l.model);
  for (int32_t k : {0, kMaxSpeculativeTokens + 1}) {
    o.num_speculative_tokens = k;
    auto bad = EngineCore::create(*l.model, nullptr, o);
    ASSERT_FALSE(bad.ok()) << "k " << k;
    EXPECT_NE(bad.message().find("num_speculative_tokens"), std::string::npos) << bad.message();
  }
}

}  // namespace
}  // namespace syv::testing
