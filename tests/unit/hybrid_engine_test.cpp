// The engine on real hybrid models (tiny Qwen3.5 / Qwen3-Next fixtures, CPU backend): state slots,
// checkpoints and retention. Greedy output must not depend on batching, chunk size, prefix hits,
// preemption or checkpoint eviction; reuse figures must equal the formulas of docs/hybrid-cache.md;
// nothing may leak (pages, state slots, checkpoint holds).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "backend/backend.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "unit/engine_harness.h"

namespace syv::testing {
namespace {

constexpr int32_t kPage = 16;
constexpr int32_t kInterval = 32;  // C = 2 pages

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

// One model per fixture and instance for the whole binary (each EngineCore re-allocates its
// cache, so two live cores need two instances: run_alone uses instance 1).
Model& fixture(const std::string& name, int instance = 0) {
  static std::map<std::pair<std::string, int>, Loaded> models;
  auto it = models.find({name, instance});
  if (it == models.end()) {
    set_log_level(LogLevel::WARN);
    Loaded l;
    l.backend = make_cpu_backend();
    auto m = load_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/" + name, *l.backend);
    SYV_CHECK(m.ok()) << m.message();
    l.model = std::move(m).value();
    it = models.emplace(std::make_pair(name, instance), std::move(l)).first;
  }
  return *it->second.model;
}

EngineOptions opts(int32_t num_pages = 256, int32_t budget = 2048, int32_t chunk = 0,
                   const std::string& retention = "dense", int32_t num_checkpoints = 64,
                   int32_t max_seqs = 16, bool prefix = true) {
  EngineOptions o;
  o.page_size = kPage;
  o.num_pages = num_pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.max_num_seqs = max_seqs;
  o.enable_prefix_caching = prefix;
  o.checkpoint_interval = kInterval;
  o.num_checkpoints = num_checkpoints;
  o.prefix_retention = retention;
  return o;
}

std::unique_ptr<EngineCore> make_core(Model& model, const EngineOptions& o) {
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  return std::move(core).value();
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n, int32_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

Request request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r = greedy_request(std::move(prompt), max_tokens);
  r.params.ignore_eos = true;
  return r;
}

// Every page free or cached, every slot free, no checkpoint held.
void expect_no_leaks(Harness& h) {
  h.expect_no_leaks();
  const HybridState* hy = h.core().hybrid();
  ASSERT_NE(hy, nullptr);
  EXPECT_EQ(hy->pool().num_free_slots(), hy->pool().num_slots()) << "state slots leaked";
  EXPECT_EQ(hy->pool().num_held(), 0) << "checkpoint holds leaked";
}

// Greedy tokens of one request alone: no prefix cache, no chunk limit (model instance 1).
std::vector<int32_t> solo_run(const std::string& name, const Request& r) {
  Harness h(make_core(fixture(name, 1), opts(256, 1 << 16, 0, "dense", 0, 4, false)));
  Request solo = r;
  solo.params.n = 1;
  const uint64_t id = h.submit(solo);
  h.run();
  expect_no_leaks(h);
  return h.output(id).samples.at(0).tokens;
}

// solo_run, memoised.
std::vector<int32_t> run_alone(const std::string& name, const Request& r) {
  static std::map<std::tuple<std::string, std::vector<int32_t>, int32_t>, std::vector<int32_t>>
      memo;
  auto key = std::make_tuple(name, r.prompt_ids, r.params.max_tokens);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  return memo[key] = solo_run(name, r);
}

const char* const kFixtures[] = {"q35_r1_lllf", "qnext_top1_r2"};

TEST(HybridEngine, OptionsAreValidatedAndLogged) {
  Model& m = fixture("q35_r1_lllf");
  EngineOptions o = opts();
  o.checkpoint_interval = 24;  // not a multiple of 16
  auto bad = EngineCore::create(m, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("checkpoint_interval: expected a positive multiple of the page size "
                               "16, found 24"),
            std::string::npos)
      << bad.message();
  o = opts(256, 2048, 0, "sometimes");
  bad = EngineCore::create(m, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("found 'sometimes'"), std::string::npos) << bad.message();
  o = opts(256, 2048, 0, "48");
  bad = EngineCore::create(m, nullptr, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("multiple of the checkpoint interval 32"), std::string::npos);
  // Derived: interval 4 pages, pool from the byte budget, capped at 8 per sequence.
  o = opts();
  o.checkpoint_interval = 0;
  o.num_checkpoints = 0;
  auto core = make_core(m, o);
  EXPECT_EQ(core->options().checkpoint_interval, 64);
  EXPECT_EQ(core->options().num_checkpoints, 8 * 16);
  EXPECT_EQ(core->hybrid()->pool().num_slots(), 16);
  // The stats (exported on /metrics) give the pool's size in slots, checkpoints and bytes.
  EXPECT_EQ(core->stats().state_slots_total, 16);
  EXPECT_EQ(core->stats().checkpoints_total, 8 * 16);
  EXPECT_GT(m.cache_spec().state_bytes_per_seq, 0);
  EXPECT_EQ(core->stats().checkpoint_bytes, m.cache_spec().state_bytes_per_seq * 8 * 16);
  // Prefix caching off: no checkpoints at all.
  core = make_core(m, opts(256, 2048, 0, "dense", 0, 16, false));
  EXPECT_EQ(core->hybrid()->pool().num_checkpoints(), 0);
}

// An identical resend of an N-token prompt reuses exactly R = floor((N - 1) / P) * P tokens under
// every policy (>= N - P, better than the N - C - 1 the issue asks), at every chunk size.
TEST(HybridEngine, ResendReusesTheResendBoundary) {
  std::mt19937 rng(1);
  for (const char* name : kFixtures) {
    for (int32_t n : {100, 96, 17, 16, 9}) {
      const std::pair<const char*, int32_t> runs[] = {
          {"dense", 0}, {"boundaries", 0}, {"64", 0}, {"dense", 7}, {"boundaries", 32}};
      for (const auto& [policy, chunk] : runs) {
        {
          const Request r = request(random_tokens(rng, n, 300), 5);
          Harness h(make_core(fixture(name), opts(256, 2048, chunk, policy)));
          const uint64_t a = h.submit(r);
          h.run();
          const uint64_t b = h.submit(r);
          h.run();
          const int32_t resend = (n - 1) / kPage * kPage;
          EXPECT_EQ(h.output(a).samples[0].cached_tokens, 0);
          EXPECT_EQ(h.output(b).samples[0].cached_tokens, resend)
              << name << " N " << n << " " << policy << " chunk " << chunk;
          EXPECT_GE(resend, n - kInterval - 1);
          EXPECT_EQ(h.core().stats().checkpoints_loaded, resend > 0 ? 1u : 0u);
          const std::vector<int32_t> alone = run_alone(name, r);
          EXPECT_EQ(h.output(a).samples[0].tokens, alone) << name << " N " << n;
          EXPECT_EQ(h.output(b).samples[0].tokens, alone) << name << " N " << n << " (hit)";
          expect_no_leaks(h);
        }
      }
    }
  }
}

// Prompts sharing prefixes, all at once (batched) and one after another (prefix hits), at every
// chunk size: greedy tokens equal each prompt's solo run.
TEST(HybridEngine, BatchedChunkedAndHitEqualAlone) {
  for (const char* name : kFixtures) {
    std::mt19937 rng(7);
    const std::vector<int32_t> system = random_tokens(rng, 45, 300);
    std::vector<Request> reqs;
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> p = i % 2 == 0 ? system : std::vector<int32_t>{};
      if (i == 5) p = reqs[0].prompt_ids;
      auto tail = random_tokens(rng, 5 + static_cast<int32_t>(rng() % 50), 300);
      p.insert(p.end(), tail.begin(), tail.end());
      reqs.push_back(request(p, 3 + static_cast<int32_t>(rng() % 8)));
    }
    for (int32_t chunk : {0, 1, 5, 16, 33}) {
      for (bool batched : {true, false}) {
        Harness h(make_core(fixture(name), opts(256, batched ? 64 : 2048, chunk)));
        std::vector<uint64_t> ids;
        for (const Request& r : reqs) {
          ids.push_back(h.submit(r));
          if (!batched) h.run();
        }
        h.run();
        if (::testing::Test::HasFatalFailure()) return;
        for (size_t i = 0; i < ids.size(); ++i) {
          EXPECT_EQ(h.output(ids[i]).samples[0].tokens, run_alone(name, reqs[i]))
              << name << " request " << i << " chunk " << chunk << " batched " << batched;
        }
        if (!batched) {
          // Sequential. Request 2 shares the 45-token system prompt with request 0: 2 pages, and
          // a checkpoint at 32 exists only if request 0's prefill was chunked (a whole-prompt chunk
          // stops at R alone). Request 5 extends request 0's prompt: it hits E(N0).
          EXPECT_EQ(h.output(ids[2]).samples[0].cached_tokens, chunk == 0 ? 0 : 32)
              << name << " chunk " << chunk;
          const int32_t n0 = static_cast<int32_t>(reqs[0].prompt_ids.size());
          EXPECT_EQ(h.output(ids[5]).samples[0].cached_tokens, n0 / kPage * kPage)
              << name << " chunk " << chunk;
          // Request 2 found the system prompt's pages without a checkpoint and left one where
          // the pages ended (its shared boundary, 32): the next such prompt hits it.
          std::vector<int32_t> p = system;
          for (int32_t t : {7, 8, 9, 10, 11}) p.push_back(t);
          const Request r6 = request(p, 4);
          const uint64_t id6 = h.submit(r6);
          h.run();
          EXPECT_EQ(h.output(id6).samples[0].cached_tokens, 32) << name << " chunk " << chunk;
          EXPECT_EQ(h.output(id6).samples[0].tokens, run_alone(name, r6)) << name;
        }
        EXPECT_GT(h.core().stats().checkpoints_saved, 0u);
        expect_no_leaks(h);
      }
    }
  }
}

// Multi-turn chat: turn k+1 = turn k's prompt + its reply + a new message. dense reuses into the
// previous reply (the last multiple of C the reply's decode crossed), boundaries only up to the
// previous prompt's extension boundary E = floor(P / page) * page.
TEST(HybridEngine, MultiTurnDenseReusesIntoTheReplyBoundariesStopsAtThePrompt) {
  for (const char* name : kFixtures) {
    std::map<std::string, std::vector<int32_t>> reuse, tokens;
    for (const char* policy : {"dense", "boundaries", "64"}) {
      std::mt19937 rng(3);
      Harness h(make_core(fixture(name), opts(256, 2048, 0, policy)));
      std::vector<int32_t> prompt = random_tokens(rng, 70, 300);
      for (int turn = 0; turn < 3; ++turn) {
        const Request r = request(prompt, 30);
        const uint64_t id = h.submit(r);
        h.run();
        const SampleOutput& out = h.output(id).samples[0];
        reuse[policy].push_back(out.cached_tokens);
        EXPECT_EQ(out.tokens, run_alone(name, r)) << name << " " << policy << " turn " << turn;
        tokens[policy].insert(tokens[policy].end(), out.tokens.begin(), out.tokens.end());
        prompt.insert(prompt.end(), out.tokens.begin(), out.tokens.end());
        auto user = random_tokens(rng, 15, 300);
        prompt.insert(prompt.end(), user.begin(), user.end());
      }
      expect_no_leaks(h);
    }
    // Prompts: 70, 115, 160 tokens; each turn computes prompt + 29 reply tokens (99, 144, 189).
    // dense:      turn 2 = last multiple of 32 <= 99 = 96;  turn 3 = last multiple <= 144 = 128
    // boundaries: turn 2 = E(70) = 64;                       turn 3 = E(115) = 112
    // every 64:   turn 2 = max(E(70), 64) = 64;              turn 3 = max(E(115), 128) = 128
    EXPECT_EQ(reuse["dense"], (std::vector<int32_t>{0, 96, 128})) << name;
    EXPECT_EQ(reuse["boundaries"], (std::vector<int32_t>{0, 64, 112})) << name;
    EXPECT_EQ(reuse["64"], (std::vector<int32_t>{0, 64, 128})) << name;
    EXPECT_EQ(tokens["dense"], tokens["boundaries"]) << name;
    EXPECT_EQ(tokens["dense"], tokens["64"]) << name;
  }
}

// The threaded Engine on a hybrid: concurrent submits, events read from other threads.
TEST(HybridEngine, ThreadedEngineServesAHybrid) {
  const std::string name = "qnext_top1_r2";
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = random_tokens(rng, 60, 300);
  std::vector<Request> reqs = {request(prompt, 6), request(prompt, 6),
                               request(random_tokens(rng, 33, 300), 9)};
  reqs[1].params.n = 2;
  fixture(name, 1);  // the references' model instance, loaded now: only forwards overlap below
  Engine engine(fixture(name), nullptr, opts(256, 64, 0, "boundaries"));
  ASSERT_TRUE(engine.start().ok());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const Request& r : reqs) {
    auto h = engine.submit(r);
    ASSERT_TRUE(h.ok()) << h.message();
    handles.push_back(h.value());
  }
  // The solo references run here (not memoised) while the engine thread serves the requests: two
  // forwards at once share the global CPU thread pool and BLAS, and must not change a token.
  const uint64_t steps_before = engine.stats().steps;
  std::vector<std::vector<int32_t>> expected;
  for (const Request& r : reqs) expected.push_back(solo_run(name, r));
  const EngineStats after = engine.stats();
  std::printf(
      "  references ran during engine steps %llu..%llu (%llu of 3 requests finished by then)\n",
      static_cast<unsigned long long>(steps_before), static_cast<unsigned long long>(after.steps),
      static_cast<unsigned long long>(after.requests_finished));
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(reqs[i].params.n));
    int finished = 0;
    Event e;
    while (finished < reqs[i].params.n &&
           handles[i]->next(e, std::chrono::seconds(60)) == NextStatus::kEvent) {
      if (e.token_id >= 0) tokens[static_cast<size_t>(e.sample_index)].push_back(e.token_id);
      finished += e.finished();
    }
    for (const auto& t : tokens) EXPECT_EQ(t, expected[i]) << "request " << i;
  }
  engine.stop();
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.checkpoints_saved, 0u);
  EXPECT_EQ(stats.checkpoints_held, 0);
  EXPECT_EQ(stats.state_slots_used, 0);
  EXPECT_EQ(stats.pages_used, 0);
}

// Arrivals, cancellations, n = 2, random lengths, a page pool small enough to preempt and a tiny
// checkpoint pool that must evict, with check_integrity() (pages, slots, checkpoint holds) after
// every step; every completed sample equals its solo run.
TEST(HybridEngine, RandomisedSchedulerKeepsInvariants) {
  const std::string name = "q35_r2_flfl_tied";  // the smallest fixture
  for (uint32_t seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(200 + seed);
    const int32_t max_total = 80;
    // Seed 4: a roomy page pool (many hits, checkpoint evictions); the others preempt.
    const int32_t pages =
        seed == 4 ? 64 : (max_total + kPage - 1) / kPage + 2 + static_cast<int32_t>(rng() % 8);
    const char* policies[] = {"dense", "boundaries", "64"};
    const EngineOptions o =
        opts(pages, 8 + static_cast<int32_t>(rng() % 80), static_cast<int32_t>(rng() % 20),
             policies[seed % 3], 1 + static_cast<int32_t>(rng() % 16),
             1 + static_cast<int32_t>(rng() % 6), seed != 3);
    Harness h(make_core(fixture(name), o));
    std::vector<std::pair<uint64_t, Request>> submitted;
    std::vector<bool> cancelled;
    std::vector<std::vector<int32_t>> prefixes = {random_tokens(rng, 40, 300)};
    int steps = 0;
    while (steps < 300 && (submitted.size() < 24 || h.core().has_work())) {
      if (submitted.size() < 24 && rng() % 3 == 0) {
        std::vector<int32_t> prompt;
        if (!submitted.empty() && rng() % 4 == 0) {  // an identical resend
          prompt = submitted[rng() % submitted.size()].second.prompt_ids;
        } else {
          if (rng() % 2) prompt = prefixes[rng() % prefixes.size()];
          if (prompt.size() > 50) prompt.resize(rng() % 50);
          auto tail = random_tokens(rng, 1 + static_cast<int32_t>(rng() % 25), 300);
          prompt.insert(prompt.end(), tail.begin(), tail.end());
          prefixes.push_back(prompt);
        }
        Request r = request(
            prompt,
            1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_total - prompt.size())));
        if (rng() % 4 == 0) r.params.n = 2;
        submitted.push_back({h.submit(r), r});
        cancelled.push_back(false);
      }
      if (!submitted.empty() && rng() % 12 == 0) {
        const size_t victim = rng() % submitted.size();
        h.cancel(submitted[victim].first);
        cancelled[victim] = true;
        ASSERT_EQ(h.core().check_integrity(), "");
      }
      if (h.core().has_work()) h.step();
      if (::testing::Test::HasFatalFailure()) return;
      ++steps;
    }
    h.run();
    h.drain();
    int compared = 0;
    for (size_t i = 0; i < submitted.size(); ++i) {
      const RequestOutput& out = h.output(submitted[i].first);
      EXPECT_TRUE(h.ended(submitted[i].first));
      const std::vector<int32_t> expected = run_alone(name, submitted[i].second);
      for (const auto& s : out.samples) {
        if (s.finish_reason == "abort") {
          EXPECT_TRUE(cancelled[i]);
          continue;
        }
        EXPECT_EQ(s.finish_reason, "length");
        EXPECT_EQ(s.tokens, expected) << "seed " << seed << " request " << i;
        ++compared;
      }
    }
    EXPECT_GT(compared, 8);
    expect_no_leaks(h);
    std::printf(
        "  seed %u: %d compared, %llu preemptions, %llu prefix-hit tokens, %llu saved, "
        "%llu checkpoint evictions\n",
        seed, compared, static_cast<unsigned long long>(h.core().stats().preemptions),
        static_cast<unsigned long long>(h.core().stats().prefix_hit_tokens),
        static_cast<unsigned long long>(h.core().stats().checkpoints_saved),
        static_cast<unsigned long long>(h.core().hybrid()->pool().evictions()));
  }
}

}  // namespace
}  // namespace syv::testing
