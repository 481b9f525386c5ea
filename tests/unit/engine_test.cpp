// Engine exactness and bookkeeping on a deterministic fake model (fake_model.h): greedy output of
// every sequence must not depend on batching, chunk size, prefix hits or preemption, and no page
// may leak. The same scenarios run on the real tiny Qwen3 fixtures in engine_qwen3_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "core/log.h"
#include "engine/engine.h"
#include "unit/engine_harness.h"
#include "unit/fake_model.h"

namespace syv::testing {
namespace {

EngineOptions opts(int32_t page_size, int32_t num_pages, int32_t budget = 2048, int32_t chunk = 0,
                   bool prefix = true, int32_t max_seqs = 256) {
  EngineOptions o;
  o.page_size = page_size;
  o.num_pages = num_pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.enable_prefix_caching = prefix;
  o.max_num_seqs = max_seqs;
  return o;
}

std::unique_ptr<EngineCore> make_core(Model& model, const EngineOptions& o) {
  set_log_level(LogLevel::WARN);
  auto core = EngineCore::create(model, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  return std::move(core).value();
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n, int32_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// Greedy tokens of one request run alone (big pool, no prefix cache, no chunk limit).
// Memoised: the randomised test asks for many.
std::vector<int32_t> run_alone(const Request& request) {
  static std::map<std::pair<std::vector<int32_t>, int32_t>, std::vector<int32_t>> memo;
  auto key = std::make_pair(request.prompt_ids, request.params.max_tokens);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  FakeModel model;
  Harness h(make_core(model, opts(16, 512, 1 << 16, 0, false)));
  Request solo = request;
  solo.params.n = 1;
  const uint64_t id = h.submit(solo);
  h.run();
  h.expect_no_leaks();
  return memo[key] = h.output(id).samples.at(0).tokens;
}

struct Workload {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> expected;
};

// Prompts that share prefixes (a common system prompt, repeats) so the prefix cache has work.
Workload make_workload(uint32_t seed, int32_t count, int32_t max_prompt, int32_t max_out) {
  std::mt19937 rng(seed);
  Workload w;
  const std::vector<int32_t> system = random_tokens(rng, 40, 97);
  for (int32_t i = 0; i < count; ++i) {
    std::vector<int32_t> prompt;
    if (i % 3 == 0) prompt = system;
    if (i % 5 == 4 && !w.requests.empty())
      prompt = w.requests[rng() % w.requests.size()].prompt_ids;
    auto tail =
        random_tokens(rng, 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_prompt)), 97);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    w.requests.push_back(
        greedy_request(prompt, 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_out))));
  }
  for (const Request& r : w.requests) w.expected.push_back(run_alone(r));
  return w;
}

void expect_workload(const Workload& w, const EngineOptions& o, int64_t* preemptions = nullptr,
                     uint64_t* hit_tokens = nullptr) {
  FakeModel model;
  Harness h(make_core(model, o));
  std::vector<uint64_t> ids;
  for (const Request& r : w.requests) ids.push_back(h.submit(r));
  h.run();
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestOutput& out = h.output(ids[i]);
    ASSERT_EQ(out.samples.size(), 1u);
    EXPECT_EQ(out.samples[0].tokens, w.expected[i])
        << "request " << i << " (page " << o.page_size << ", pages " << o.num_pages << ", budget "
        << o.max_num_batched_tokens << ", chunk " << o.max_prefill_chunk << ")";
    EXPECT_EQ(out.samples[0].finish_reason, "length");
    EXPECT_TRUE(h.ended(ids[i]));
  }
  h.expect_no_leaks();
  if (preemptions) *preemptions = static_cast<int64_t>(h.core().stats().preemptions);
  if (hit_tokens) *hit_tokens = h.core().stats().prefix_hit_tokens;
  EXPECT_EQ(h.core().stats().prompt_tokens, h.core().stats().prefix_query_tokens);
}

TEST(Engine, BatchedEqualsAlone) {
  const Workload w = make_workload(1, 24, 150, 30);
  expect_workload(w, opts(16, 4096, 4096, 0, false));
}

TEST(Engine, ChunkedAtAnyChunkSizeEqualsAlone) {
  const Workload w = make_workload(2, 10, 120, 12);
  for (int32_t chunk : {1, 2, 3, 7, 16, 17, 64})
    expect_workload(w, opts(16, 600, 4096, chunk, false));
  for (int32_t budget : {1, 5, 33}) expect_workload(w, opts(8, 1200, budget, 0, false));
}

TEST(Engine, PrefixHitsEqualAloneAndAreCounted) {
  const Workload w = make_workload(3, 20, 100, 20);
  uint64_t hits = 0;
  expect_workload(w, opts(8, 4096, 4096, 0, true), nullptr,
                  &hits);  // all admitted at once: few hits
  // Two at a time: later requests find the earlier ones' pages registered (and some in the LRU).
  expect_workload(w, opts(8, 4096, 64, 0, true, 2), nullptr, &hits);
  EXPECT_GT(hits, 0u);
}

TEST(Engine, PreemptedAndResumedEqualsAlone) {
  const Workload w = make_workload(4, 16, 60, 40);
  int64_t preemptions = 0;
  // 14 pages of 8 tokens: the longest request (~100+40 tokens) fits alone, the batch does not.
  expect_workload(w, opts(8, 20, 4096, 0, true), &preemptions);
  EXPECT_GT(preemptions, 0);
  expect_workload(w, opts(8, 20, 4096, 0, false), &preemptions);
  EXPECT_GT(preemptions, 0);
  expect_workload(w, opts(4, 40, 13, 5, true), &preemptions);
}

TEST(Engine, ResendHitsCachedPagesAndReportsCachedTokens) {
  FakeModel model;
  Harness h(make_core(model, opts(16, 256)));
  std::mt19937 rng(7);
  const Request r = greedy_request(random_tokens(rng, 100, 97), 10);
  const uint64_t a = h.submit(r);
  h.run();
  const uint64_t b = h.submit(r);
  h.run();
  EXPECT_EQ(h.output(a).samples[0].tokens, h.output(b).samples[0].tokens);
  EXPECT_EQ(h.output(a).samples[0].cached_tokens, 0);
  EXPECT_EQ(h.output(b).samples[0].cached_tokens, 96);  // floor((100 - 1) / 16) * 16
  EXPECT_EQ(h.output(b).samples[0].prompt_tokens, 100);
  EXPECT_EQ(h.core().stats().prefix_hit_tokens, 96u);
  EXPECT_EQ(h.core().stats().prefix_query_tokens, 200u);
  EXPECT_GT(h.core().stats().pages_cached, 0);
  h.expect_no_leaks();
}

TEST(Engine, CachedPagesAreEvictedWhenThePoolNeedsThem) {
  FakeModel model;
  Harness h(make_core(model, opts(8, 12)));
  std::mt19937 rng(8);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(greedy_request(random_tokens(rng, 60, 97), 20));
  std::vector<uint64_t> ids;
  for (const auto& r : requests) {
    ids.push_back(h.submit(r));
    h.run();  // one at a time: each must evict the previous one's cached pages
  }
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(h.output(ids[i]).samples[0].tokens, run_alone(requests[i]));
  h.expect_no_leaks();
}

TEST(Engine, SamplesShareThePromptPages) {
  FakeModel model;
  Harness h(make_core(model, opts(8, 256, 4096, 0, /*prefix=*/false)));
  std::mt19937 rng(9);
  Request r = greedy_request(random_tokens(rng, 50, 97), 12);
  r.params.n = 3;
  const std::vector<int32_t> expected = run_alone(greedy_request(r.prompt_ids, 12));
  const uint64_t id = h.submit(r);
  bool shared = false;
  while (h.core().has_work()) {
    h.step();
    const auto& running = h.core().scheduler().running();
    if (running.size() == 3 && running[1]->parent() == running[0] &&
        running[1]->pages[0] == running[0]->pages[0] &&
        running[2]->pages[5] == running[0]->pages[5]) {
      shared = true;
    }
  }
  h.drain();
  EXPECT_TRUE(shared) << "samples 1 and 2 never mapped sample 0's prompt pages";
  ASSERT_EQ(h.output(id).samples.size(), 3u);
  for (const auto& s : h.output(id).samples) {
    EXPECT_EQ(s.tokens, expected);
    EXPECT_EQ(s.finish_reason, "length");
  }
  EXPECT_TRUE(h.ended(id));
  h.expect_no_leaks();
}

TEST(Engine, SeededSamplesAreReproducibleAndDiffer) {
  std::mt19937 rng(10);
  Request r;
  r.prompt_ids = random_tokens(rng, 30, 97);
  r.params.temperature = 1.0f;
  r.params.max_tokens = 20;
  r.params.seed = 1234;
  r.params.n = 4;
  std::vector<std::vector<int32_t>> first;
  for (int run = 0; run < 2; ++run) {
    FakeModel model;
    Harness h(make_core(model, opts(8, 256)));
    // Run with unrelated traffic the second time: seeds are per request, not per batch.
    if (run == 1) h.submit(greedy_request(random_tokens(rng, 77, 97), 9));
    const uint64_t id = h.submit(r);
    h.run();
    std::vector<std::vector<int32_t>> got;
    for (const auto& s : h.output(id).samples) got.push_back(s.tokens);
    if (run == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first);
    }
    h.expect_no_leaks();
  }
  EXPECT_NE(first[0], first[1]) << "samples of one request should use different streams";
}

TEST(Engine, StopTokenEndsTheSample) {
  std::mt19937 rng(11);
  const Request probe = greedy_request(random_tokens(rng, 20, 97), 30);
  const std::vector<int32_t> expected = run_alone(probe);
  const int32_t stop = expected[5];
  const size_t first =
      static_cast<size_t>(std::find(expected.begin(), expected.end(), stop) - expected.begin());
  for (bool as_eos : {true, false}) {
    FakeModel model(97, as_eos ? std::vector<int32_t>{stop} : std::vector<int32_t>{});
    Harness h(make_core(model, opts(8, 256)));
    Request r = probe;
    if (!as_eos) r.params.stop_token_ids = {stop};
    const uint64_t id = h.submit(r);
    Request ignoring = probe;
    ignoring.params.ignore_eos = true;
    const uint64_t id2 = h.submit(ignoring);
    h.run();
    const SampleOutput& s = h.output(id).samples[0];
    EXPECT_EQ(s.finish_reason, "stop");
    EXPECT_EQ(s.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + first + 1));
    const SampleOutput& s2 = h.output(id2).samples[0];
    if (as_eos) {
      EXPECT_EQ(s2.tokens, expected);
      EXPECT_EQ(s2.finish_reason, "length");
    }
    h.expect_no_leaks();
  }
}

TEST(Engine, CancelAtAnyPointReturnsEveryPage) {
  std::mt19937 rng(12);
  for (int when = 0; when < 12; ++when) {
    FakeModel model;
    Harness h(make_core(model, opts(8, 64, 32, 0, true)));
    std::vector<uint64_t> ids;
    for (int i = 0; i < 4; ++i) {
      Request r = greedy_request(random_tokens(rng, 40 + 7 * i, 97), 20);
      r.params.n = 1 + i % 2;
      ids.push_back(h.submit(r));
    }
    for (int s = 0; s < when && h.core().has_work(); ++s) h.step();
    h.cancel(ids[1]);
    h.cancel(ids[2]);
    h.cancel(ids[2]);  // twice: no-op
    ASSERT_EQ(h.core().check_integrity(), "");
    h.run();
    h.drain();
    for (uint64_t id : {ids[1], ids[2]}) {
      for (const auto& s : h.output(id).samples)
        EXPECT_TRUE(s.finish_reason == "abort" || s.finish_reason == "length") << s.finish_reason;
      EXPECT_TRUE(h.ended(id));
    }
    EXPECT_EQ(h.output(ids[0]).samples[0].finish_reason, "length");
    h.expect_no_leaks();
  }
}

// Arrivals, cancellations and random lengths on a pool small enough to force preemption, with
// check_integrity() after every step; every request that completes must equal its solo run.
TEST(Engine, RandomisedSchedulerKeepsInvariants) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    std::mt19937 rng(100 + seed);
    const int32_t page = 1 + static_cast<int32_t>(rng() % 9);
    const int32_t max_total = 90;
    const int32_t pages = (max_total + page - 1) / page + 2 + static_cast<int32_t>(rng() % 10);
    const EngineOptions o =
        opts(page, pages, 1 + static_cast<int32_t>(rng() % 80), static_cast<int32_t>(rng() % 20),
             rng() % 2 == 0, 1 + static_cast<int32_t>(rng() % 12));
    FakeModel model;
    Harness h(make_core(model, o));
    std::vector<std::pair<uint64_t, Request>> submitted;
    std::vector<bool> cancelled;
    std::vector<std::vector<int32_t>> prefixes = {random_tokens(rng, 30, 97)};
    int steps = 0;
    while (steps < 400 && (submitted.size() < 40 || h.core().has_work())) {
      if (submitted.size() < 40 && rng() % 3 == 0) {
        std::vector<int32_t> prompt;
        if (rng() % 2) prompt = prefixes[rng() % prefixes.size()];
        if (prompt.size() > 50) prompt.resize(rng() % 50);
        auto tail = random_tokens(rng, 1 + static_cast<int32_t>(rng() % 30), 97);
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        prefixes.push_back(prompt);
        Request r = greedy_request(
            prompt,
            1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_total - prompt.size())));
        if (rng() % 4 == 0) r.params.n = 2;
        submitted.push_back({h.submit(r), r});
        cancelled.push_back(false);
      }
      if (!submitted.empty() && rng() % 10 == 0) {
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
      const std::vector<int32_t> expected = run_alone(submitted[i].second);
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
    EXPECT_GT(compared, 10);
    h.expect_no_leaks();
  }
}

TEST(Engine, ValidationNamesTheProblem) {
  FakeModel model;
  EngineOptions o = opts(8, 4);
  o.max_model_len = 1000;
  auto core = make_core(model, o);
  Request r = greedy_request({1, 2, 3}, 40);
  EXPECT_NE(core->validate(r).message().find("KV pool of 32 tokens"), std::string::npos)
      << core->validate(r).message();
  r = greedy_request({1, 2, 3}, 1000);
  EXPECT_NE(core->validate(r).message().find("maximum context length 1000"), std::string::npos);
  r = greedy_request({1, 200}, 1);
  EXPECT_NE(core->validate(r).message().find("found 200"), std::string::npos);
  r = greedy_request({}, 1);
  EXPECT_FALSE(core->validate(r).ok());
  r = greedy_request({1}, 1);
  r.params.top_p = 0;
  EXPECT_NE(core->validate(r).message().find("top_p"), std::string::npos);
  r.params.top_p = 1;
  r.params.stop = {"x"};
  EXPECT_NE(core->validate(r).message().find("tokenizer"), std::string::npos);
}

TEST(Engine, ThreadedSubmitReadCancel) {
  const Workload w = make_workload(13, 12, 80, 25);
  FakeModel model;
  Engine engine(model, nullptr, opts(8, 128, 64));
  ASSERT_TRUE(engine.start().ok());
  std::vector<std::vector<int32_t>> got(w.requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    clients.emplace_back([&, i] {
      auto handle = engine.submit(w.requests[i]);
      ASSERT_TRUE(handle.ok()) << handle.message();
      Event e;
      NextStatus st;
      while ((st = (*handle)->next(e, std::chrono::seconds(60))) == NextStatus::kEvent)
        got[i].push_back(e.token_id);
      EXPECT_EQ(st, NextStatus::kEnd);
    });
  }
  // A client that goes away mid-stream.
  std::thread quitter([&] {
    Request r = greedy_request(w.requests[0].prompt_ids, 60);
    auto handle = engine.submit(r);
    ASSERT_TRUE(handle.ok());
    Event e;
    ASSERT_EQ((*handle)->next(e, std::chrono::seconds(60)), NextStatus::kEvent);
    engine.cancel(**handle);
    std::string last;
    while ((*handle)->next(e, std::chrono::seconds(60)) == NextStatus::kEvent)
      last = e.finish_reason;
    EXPECT_TRUE(last == "abort" || last == "length") << last;
  });
  for (auto& t : clients) t.join();
  quitter.join();
  for (size_t i = 0; i < w.requests.size(); ++i) EXPECT_EQ(got[i], w.expected[i]) << i;
  engine.stop();
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.pages_used, 0);
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_EQ(stats.requests_finished + stats.requests_aborted, w.requests.size() + 1);
  EXPECT_FALSE(engine.submit(w.requests[0]).ok());
}

// The server maps the code to HTTP: a refused request is the client's fault (400), an engine that
// is not running is not (503).
TEST(Engine, SubmitToAStoppedEngineIsUnavailableNotInvalid) {
  FakeModel model;
  Engine engine(model, nullptr, opts(8, 128, 16));
  auto before = engine.submit(greedy_request({1, 2, 3}, 4));
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.code(), StatusCode::kUnavailable) << before.message();
  ASSERT_TRUE(engine.start().ok());
  auto bad = engine.submit(greedy_request({1, 200}, 4));  // token outside the vocabulary
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.message();
  engine.stop();
  auto after = engine.submit(greedy_request({1, 2, 3}, 4));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), StatusCode::kUnavailable) << after.message();
  EXPECT_NE(after.message().find("not accepting requests"), std::string::npos) << after.message();
}

TEST(Engine, StopWithoutDrainAbortsEverything) {
  FakeModel model;
  Engine engine(model, nullptr, opts(8, 128, 16));
  ASSERT_TRUE(engine.start().ok());
  auto handle = engine.submit(greedy_request(std::vector<int32_t>(200, 3), 400));
  ASSERT_TRUE(handle.ok());
  engine.stop(/*drain=*/false);
  Event e;
  std::string last;
  while ((*handle)->next(e, std::chrono::seconds(10)) == NextStatus::kEvent) last = e.finish_reason;
  EXPECT_EQ(last, "abort");
  EXPECT_EQ(engine.stats().pages_used, 0);
}

}  // namespace
}  // namespace syv::testing
