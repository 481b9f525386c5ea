// The host tier's engine scenarios (kv/host_tier.h), shared by the CPU test
// (tests/unit/host_tier_engine_test.cpp, where the tier is a second budget of host memory and
// copies are synchronous) and the CUDA one (tests/gpu/host_tier_engine_gpu_test.cpp: pinned
// pieces, write-backs and loads on two copy streams, events ordering the compute stream after
// write-backs and polled for loads): prefixes whose pages and
// checkpoints the device pools evicted are served back from the host tier, giving exactly the
// tokens (and, in batch-invariant mode, the logprobs bit for bit) of a recompute; eviction storms
// with random cancels keep every invariant of both tiers and leak nothing. Loads are not waited
// for (kv/inflight_loads.h): the sequence they serve is loading while the others keep stepping,
// and write-backs during a load neither wait for it nor overwrite what it reads; on the CPU those
// scenarios run on a DeferredCopyBackend, whose two copy streams land late and independently.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "backend/backend.h"
#include "core/log.h"
#include "engine/engine_core.h"
#include "engine/host_tier_setup.h"
#include "model/model.h"
#include "unit/deferred_copy_backend.h"
#include "unit/engine_harness.h"

namespace syv::testing {

inline constexpr int32_t kPage = 16;

// Loads tests/fixtures/<dir> on the backend the scenarios run on: the CPU here
// (load_cpu_fixture), CUDA in tests/gpu/host_tier_engine_gpu_test.cpp.
using FixtureLoader = LoadedModel (*)(const std::string& dir);
inline FixtureLoader& fixture_loader() {
  static FixtureLoader loader = &load_cpu_fixture;
  return loader;
}

inline std::map<std::pair<std::string, int>, LoadedModel>& loaded_models() {
  static std::map<std::pair<std::string, int>, LoadedModel> models;
  return models;
}
// Frees every loaded model (a GPU test calls it before the CUDA runtime goes at exit).
inline void release_models() {
  loaded_models().clear();
}

// One model per fixture folder and instance (two live engines need two instances: solo runs use
// instance 1), loaded by `loader` (null: fixture_loader()). Batch-invariant kernels, so a hit and a
// recompute can be compared bit for bit.
inline Model& model(const std::string& dir, int instance = 0, FixtureLoader loader = nullptr) {
  auto& models = loaded_models();
  auto it = models.find({dir, instance});
  if (it == models.end()) {
    set_log_level(LogLevel::WARN);
    LoadedModel l = (loader != nullptr ? loader : fixture_loader())(dir);
    SYV_CHECK(l.model != nullptr) << dir;
    l.backend->set_batch_invariant(true);
    it = models.emplace(std::make_pair(dir, instance), std::move(l)).first;
  }
  return *it->second.model;
}

// tests/fixtures/<dir> on a new CPU backend of type B (a DeferredCopyBackend, or one deriving
// from it).
template <typename B>
LoadedModel load_cpu_fixture_on(const std::string& dir) {
  LoadedModel l;
  l.backend = std::make_unique<B>();
  auto loaded = load_model(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + dir, *l.backend);
  EXPECT_TRUE(loaded.ok()) << dir << ": " << loaded.message();
  if (loaded.ok()) l.model = std::move(loaded.value());
  return l;
}
inline LoadedModel load_deferred_cpu_fixture(const std::string& dir) {
  return load_cpu_fixture_on<DeferredCopyBackend>(dir);
}

// The model of the loading scenarios: on the CPU one on a DeferredCopyBackend (instance 2), whose
// loads land `polls_to_land` polls late; elsewhere the fixture loader's, whose copies are
// asynchronous already.
inline Model& loading_model(const std::string& dir, int32_t polls_to_land = 3) {
  if (fixture_loader() != &load_cpu_fixture) return model(dir);
  Model& m = model(dir, 2, &load_deferred_cpu_fixture);
  static_cast<DeferredCopyBackend&>(m.backend()).set_polls_to_land(polls_to_land);
  return m;
}
// The deferred copy stream under `m` (null: a real one, whose timing the scenario cannot set).
inline DeferredCopyBackend* deferred_copies(Model& m) {
  return dynamic_cast<DeferredCopyBackend*>(&m.backend());
}

inline bool is_hybrid(const std::string& dir) {
  return dir.rfind("hybrid/", 0) == 0;
}

// EngineOptions::admit_loads_after_launch of the scenarios' engines (opts()): -1, the backend's
// default (off on the CPU, on with CUDA); tests set 1 to run the CPU scenarios with host-tier hits
// admitted after the launch (AdmitAfterLaunch below restores the default).
inline int32_t& admit_after_launch_mode() {
  static int32_t mode = -1;
  return mode;
}
struct AdmitAfterLaunch {
  explicit AdmitAfterLaunch(int32_t mode) { admit_after_launch_mode() = mode; }
  ~AdmitAfterLaunch() { admit_after_launch_mode() = -1; }
  AdmitAfterLaunch(const AdmitAfterLaunch&) = delete;
  AdmitAfterLaunch& operator=(const AdmitAfterLaunch&) = delete;
};

// Device pool of `pages` pages (page 16) and `checkpoints` checkpoints (interval 32), host tier of
// `host_pages` pages and `host_checkpoints` checkpoints (hybrids only).
inline EngineOptions opts(const std::string& dir, int32_t pages, int32_t checkpoints,
                          int32_t host_pages, int32_t host_checkpoints, int32_t budget = 2048,
                          int32_t chunk = 0, int32_t max_seqs = 4) {
  EngineOptions o;
  o.page_size = kPage;
  o.num_pages = pages;
  o.max_num_batched_tokens = budget;
  o.max_prefill_chunk = chunk;
  o.max_num_seqs = max_seqs;
  o.checkpoint_interval = 2 * kPage;
  o.num_checkpoints = checkpoints;
  o.host_num_pages = host_pages;
  o.host_num_checkpoints = is_hybrid(dir) ? host_checkpoints : 0;
  o.host_fault_in_background = false;  // pieces faulted in between steps: deterministic
  // Write-back at eviction: the scenarios count and time it. Those named for the write-ahead turn
  // it on (kv/host_tier.h "Write-ahead").
  o.host_write_ahead = false;
  o.admit_loads_after_launch = admit_after_launch_mode();
  return o;
}

inline std::unique_ptr<EngineCore> make_core(Model& m, const EngineOptions& o) {
  auto core = EngineCore::create(m, nullptr, o);
  EXPECT_TRUE(core.ok()) << core.message();
  return std::move(core).value();
}

inline std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 300u);
  return t;
}

inline Request request(std::vector<int32_t> prompt, int32_t max_tokens, bool logprobs = false) {
  Request r = greedy_request(std::move(prompt), max_tokens);
  r.params.ignore_eos = true;
  r.params.logprobs = logprobs;
  return r;
}

// Every page free or cached, no slot or checkpoint hold left, no host entry pinned; on a deferred
// copy stream (deferred_copy_backend.h), no copy ever raced with one of the other stream.
inline void expect_no_leaks(Harness& h) {
  if (auto* d = dynamic_cast<DeferredCopyBackend*>(&h.core().store().backend())) {
    EXPECT_EQ(d->num_hazards(), 0u) << "copies of the two streams touched the same bytes unordered";
  }
  h.expect_no_leaks();
  if (const HybridState* hy = h.core().hybrid()) {
    EXPECT_EQ(hy->pool().num_free_slots(), hy->pool().num_slots()) << "state slots leaked";
    EXPECT_EQ(hy->pool().num_held(), 0) << "checkpoint holds leaked";
  }
  if (const HostTier* host = h.core().host_tier()) {
    EXPECT_EQ(host->check_integrity(), "");
  }
}

// Greedy tokens of one request alone: roomy pool, no prefix cache, no host tier, K/V in kv_dtype
// (memoised).
inline std::vector<int32_t> run_alone(const std::string& dir, const Request& r,
                                      std::optional<DType> kv_dtype = std::nullopt) {
  static std::map<std::tuple<std::string, std::vector<int32_t>, int32_t, std::optional<DType>>,
                  std::vector<int32_t>>
      memo;
  auto key = std::make_tuple(dir, r.prompt_ids, r.params.max_tokens, kv_dtype);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  EngineOptions o = opts(dir, 64, 0, 0, 0, 1 << 16);
  o.enable_prefix_caching = false;
  o.kv_dtype = kv_dtype;
  Harness h(make_core(model(dir, 1), o));
  Request solo = r;
  solo.params.n = 1;
  const uint64_t id = h.submit(solo);
  h.run();
  expect_no_leaks(h);
  return memo[key] = h.output(id).samples.at(0).tokens;
}

inline const char* const kDirs[] = {"qwen3/tied_gqa2", "qwen3/untied_gqa4_hd24",
                                    "hybrid/q35_r1_lllf", "hybrid/qnext_top1_r2"};

// A prompt whose pages (and checkpoints) a second prompt pushed out of a tiny device pool comes
// back from the host tier on resend: the resend boundary is reused (96 of 100 tokens), the tokens
// and the logprobs equal the cold run's bit for bit, and the counters say it came from the host.
inline void evicted_prefix_served_from_host(const std::string& dir, std::optional<DType> kv) {
  std::mt19937 rng(7);
  // 10 pages = 160 tokens; A (100 + 8) leaves 6 full pages, B (140 + 8) needs all 10. Hybrids:
  // one device checkpoint: A leaves one at its resend boundary 96, B's at 128 pushes it out.
  EngineOptions o = opts(dir, 10, 1, 64, 16);
  o.kv_dtype = kv;
  Harness h(make_core(model(dir), o));
  const Request a = request(random_tokens(rng, 100), 8, /*logprobs=*/true);
  const Request b = request(random_tokens(rng, 140), 8);
  const uint64_t cold = h.submit(a);
  h.run();
  ASSERT_NE(h.core().host_tier(), nullptr) << dir;
  // Pinned between steps, ahead of any eviction (kv/host_tier.h "Memory"): the tier is smaller
  // than one piece of each kind, so it is all pinned.
  EXPECT_EQ(h.core().host_tier()->pinned_bytes(), h.core().host_tier()->total_bytes()) << dir;
  EXPECT_EQ(h.core().stats().host_pages_stored, 0u) << dir;
  h.submit(b);
  h.run();
  EXPECT_EQ(h.core().stats().host_stores_short, 0u) << dir;
  const EngineStats before = h.core().stats();
  EXPECT_GE(before.host_pages_stored, 6u) << dir;
  const uint64_t warm = h.submit(a);
  h.run();
  const SampleOutput& c = h.output(cold).samples.at(0);
  const SampleOutput& w = h.output(warm).samples.at(0);
  EXPECT_EQ(c.cached_tokens, 0) << dir;
  EXPECT_EQ(w.cached_tokens, 96) << dir;
  EXPECT_EQ(w.tokens, c.tokens) << dir;
  EXPECT_EQ(w.tokens, run_alone(dir, a, kv)) << dir;
  ASSERT_EQ(w.logprobs.size(), c.logprobs.size()) << dir;
  for (size_t i = 0; i < c.logprobs.size(); ++i)
    EXPECT_EQ(w.logprobs[i], c.logprobs[i]) << dir << " token " << i;  // bit for bit
  const EngineStats& s = h.core().stats();
  EXPECT_EQ(s.prefix_host_hit_tokens - before.prefix_host_hit_tokens, 96u) << dir;
  EXPECT_EQ(s.host_page_hits - before.host_page_hits, 6u) << dir;
  EXPECT_EQ(
      s.host_bytes_from_host - before.host_bytes_from_host,
      6u * static_cast<uint64_t>(h.core().store().external_page_bytes()) +
          (is_hybrid(dir) ? static_cast<uint64_t>(h.core().store().external_slot_bytes()) : 0u))
      << dir;
  if (is_hybrid(dir)) {
    EXPECT_GE(before.host_checkpoints_stored, 1u) << dir;
    EXPECT_EQ(s.host_checkpoint_hits - before.host_checkpoint_hits, 1u) << dir;
  }
  expect_no_leaks(h);
}

// Float KV, and fp8 / int4 KV (the host copies carry each page's scales; int4 where head_dim is
// a multiple of 32).
inline void evicted_prefixes_served_from_host() {
  for (const char* dir : kDirs) {
    for (std::optional<DType> kv :
         {std::optional<DType>(), std::optional(DType::F8E4M3), std::optional(DType::U4X2)}) {
      if (kv == DType::U4X2 && model(dir).config().head_dim % 32 != 0) continue;
      if (kv && !model(dir).backend().supports_kv_head_dim(*kv, model(dir).config().head_dim))
        continue;  // CUDA's quantized-KV kernels: head_dim 64, 128, 256
      SCOPED_TRACE(kv ? std::string(dtype_name(*kv)) : std::string("float KV"));
      evicted_prefix_served_from_host(dir, kv);
    }
  }
}

// Steps until idle the way Engine's loop does, checking that no step pins host memory (pins happen
// only between steps: kv/host_tier.h "Memory"); returns the pieces pinned between steps.
inline uint64_t run_checking_pins(Harness& h) {
  const HostTier& tier = *h.core().host_tier();
  uint64_t between = 0;
  while (h.core().has_work()) {
    const int64_t pinned = tier.pinned_bytes();
    const uint64_t pieces = tier.counters().pieces_pinned;
    h.core().step();
    EXPECT_EQ(tier.pinned_bytes(), pinned) << "a step pinned host memory";
    EXPECT_EQ(tier.counters().pieces_pinned, pieces) << "a step pinned host memory";
    EXPECT_EQ(h.core().check_integrity(), "");
    h.drain();
    h.core().between_steps(/*idle=*/!h.core().has_work());
    between += tier.counters().pieces_pinned - pieces;
  }
  // Idle: the loop keeps pinning, a piece per call, until the reserve (by default the whole tier)
  // is full.
  for (bool more = true; more;) {
    const uint64_t pieces = tier.counters().pieces_pinned;
    more = h.core().between_steps(/*idle=*/true);
    if (more) {
      EXPECT_EQ(tier.counters().pieces_pinned, pieces + 1);
    }
    between += tier.counters().pieces_pinned - pieces;
  }
  return between;
}

// Pieces of one host page each: with a reserve of 8 pages, pinned between steps, the 6 pages
// that B evicts from A are all written back without a step pinning anything, and A comes back
// from the host; with the smallest reserve (one piece), the evictions beyond the free pinned page
// are not written back (counted as short), no step waits for a pin, and the resend is still exact
// (recomputing what the host tier lacks).
inline void pins_only_between_steps_ahead_of_evictions() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    for (bool reserve_suffices : {true, false}) {
      SCOPED_TRACE(std::string(dir) + (reserve_suffices ? ", reserve of 8 pages" : ", 1 page"));
      std::mt19937 rng(7);
      EngineOptions o = opts(dir, 10, 1, 64, 16);
      o.host_pin_piece_bytes = 1;  // one entry per piece
      o.host_pin_reserve_bytes = 0;
      o.host_pin_all_while_idle = false;  // the reserve alone, idle or not
      if (reserve_suffices) {
        const int64_t page_bytes = make_core(model(dir), o)->store().page_bytes();
        const int64_t slot_bytes = make_core(model(dir), o)->store().slot_bytes();
        // Split like the tier: 8 pages' and (hybrids) 2 checkpoints' worth.
        o.host_pin_reserve_bytes = 8 * page_bytes + (is_hybrid(dir) ? 2 * slot_bytes : 0);
      }
      Harness h(make_core(model(dir), o));
      const HostTier& tier = *h.core().host_tier();
      EXPECT_EQ(tier.pinned_bytes(), 0);  // nothing pinned at creation
      const Request a = request(random_tokens(rng, 100), 8);
      const Request b = request(random_tokens(rng, 140), 8);
      const uint64_t cold = h.submit(a);
      EXPECT_GT(run_checking_pins(h), 0u);
      EXPECT_EQ(tier.num_pages_used(), 0);  // nothing evicted yet, the reserve pinned ahead
      EXPECT_GE(tier.pinned_bytes(), (reserve_suffices ? 8 : 1) * h.core().store().page_bytes());
      h.submit(b);
      run_checking_pins(h);
      const EngineStats mid = h.core().stats();
      EXPECT_GE(mid.host_pages_stored, reserve_suffices ? 6u : 1u);
      if (reserve_suffices) {
        EXPECT_EQ(mid.host_stores_short, 0u);
      } else {
        EXPECT_GT(mid.host_stores_short, 0u);
      }
      EXPECT_EQ(mid.host_pieces_pinned, tier.counters().pieces_pinned);
      EXPECT_EQ(mid.host_pinned_bytes, tier.pinned_bytes());
      const uint64_t warm = h.submit(a);
      run_checking_pins(h);
      const SampleOutput& w = h.output(warm).samples.at(0);
      EXPECT_EQ(w.tokens, h.output(cold).samples.at(0).tokens);
      EXPECT_EQ(w.tokens, run_alone(dir, a));
      const uint64_t from_host = h.core().stats().prefix_host_hit_tokens;
      if (reserve_suffices) {
        EXPECT_EQ(w.cached_tokens, 96);
        EXPECT_EQ(from_host, 96u);
      } else {
        EXPECT_LT(from_host, 96u);
      }
      expect_no_leaks(h);
    }
  }
}

// By default the engine pins the whole tier while idle (kv/host_tier.h "Memory"): after the
// first request the tier is all pinned, so with the smallest reserve (one piece of one entry) the
// next request's evictions are all written back, no busy gap pins, and the prefix comes back
// from the host whole, exactly.
inline void idle_pins_the_whole_tier() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    std::mt19937 rng(7);
    EngineOptions o = opts(dir, 10, 1, 64, 16);
    o.host_pin_piece_bytes = 1;  // one entry per piece
    o.host_pin_reserve_bytes = 0;
    Harness h(make_core(model(dir), o));
    const HostTier& tier = *h.core().host_tier();
    const Request a = request(random_tokens(rng, 100), 8);
    const uint64_t cold = h.submit(a);
    run_checking_pins(h);
    EXPECT_EQ(tier.pinned_bytes(), tier.total_bytes());
    EXPECT_FALSE(h.core().between_steps(/*idle=*/true));  // nothing left to pin
    const uint64_t pieces = tier.counters().pieces_pinned;
    h.submit(request(random_tokens(rng, 140), 8));
    EXPECT_EQ(run_checking_pins(h), 0u);
    EXPECT_EQ(tier.counters().pieces_pinned, pieces);
    EXPECT_GE(h.core().stats().host_pages_stored + h.core().stats().host_pages_written_ahead, 6u);
    EXPECT_EQ(h.core().stats().host_stores_short, 0u);
    const uint64_t warm = h.submit(a);
    run_checking_pins(h);
    const SampleOutput& w = h.output(warm).samples.at(0);
    EXPECT_EQ(w.tokens, h.output(cold).samples.at(0).tokens);
    EXPECT_EQ(w.cached_tokens, 96);
    EXPECT_EQ(h.core().stats().prefix_host_hit_tokens, 96u);
    expect_no_leaks(h);
  }
}

// A hybrid chat whose every turn is followed by a long unrelated request (which pushes the turn's
// pages and checkpoints out of the device pools) resumes each turn exactly where it would have
// with a roomy device pool (docs/hybrid-cache.md: dense retention reuses 0, 96, 128 tokens);
// without the host tier the same run reuses less.
inline void hybrid_multi_turn_resumes_from_host_checkpoints() {
  for (const char* dir : {"hybrid/q35_r1_lllf", "hybrid/qnext_top1_r2"}) {
    std::map<bool, std::vector<int32_t>> reuse;
    for (bool host : {true, false}) {
      std::mt19937 rng(3);
      // 13 pages (208 tokens) fit a turn (at most 190) or the filler (188); chunks of 32 tokens
      // leave a checkpoint at every multiple of 32, so the filler wants 6 against the device's 4
      // (a turn holds at most 3) and pushes every cached one out.
      Harness h(make_core(model(dir), opts(dir, 13, 4, host ? 64 : 0, host ? 32 : 0, 2048, 32)));
      std::vector<int32_t> prompt = random_tokens(rng, 70);
      for (int turn = 0; turn < 3; ++turn) {
        const Request r = request(prompt, 30);
        const uint64_t id = h.submit(r);
        h.run();
        const SampleOutput& out = h.output(id).samples.at(0);
        reuse[host].push_back(out.cached_tokens);
        EXPECT_EQ(out.tokens, run_alone(dir, r)) << dir << " turn " << turn;
        h.submit(request(random_tokens(rng, 180), 8));  // the filler
        h.run();
        prompt.insert(prompt.end(), out.tokens.begin(), out.tokens.end());
        auto user = random_tokens(rng, 15);
        prompt.insert(prompt.end(), user.begin(), user.end());
      }
      if (host) {
        EXPECT_GT(h.core().stats().host_checkpoint_hits, 0u) << dir;
        EXPECT_GT(h.core().stats().prefix_host_hit_tokens, 0u) << dir;
      }
      expect_no_leaks(h);
    }
    EXPECT_EQ(reuse[true], (std::vector<int32_t>{0, 96, 128})) << dir;
    EXPECT_LT(reuse[false][1] + reuse[false][2], 96 + 128) << dir;
  }
}

inline bool is_loading(const Sequence* seq) {
  return seq != nullptr && seq->state == SequenceState::kLoading;
}

// Arrivals, identical resends, cancellations, n = 2, a device pool small enough to preempt and
// evict, a tiny host tier that evicts too; check_integrity() (both tiers, no pin left, loads in
// flight held by loading sequences, the host entries they read in use) after every step and
// cancel; every completed sample equals its solo run; nothing leaks, and no copy raced with one of
// the other stream (expect_no_leaks). `loading`: on loading_model() (the CPU's loads land `polls`
// polls late, so cancels, preemptions and write-backs meet loads in flight; with polls >= 4 some
// write-backs must have been enqueued while a load was in flight, on the CPU).
inline void eviction_storm_with_cancels_keeps_invariants(bool loading = false, int32_t polls = 2,
                                                         bool write_ahead = false,
                                                         size_t first_ahead_batch = 0) {
  uint64_t out_during_in = 0;
  for (const std::string dir : {"qwen3/tied_gqa2", "hybrid/q35_r2_flfl_tied"}) {
    Model& m = loading ? loading_model(dir, polls) : model(dir);
    const uint64_t out_during_in_before =
        deferred_copies(m) != nullptr ? deferred_copies(m)->num_out_during_in() : 0;
    for (uint32_t seed = 0; seed < 4; ++seed) {
      std::mt19937 rng(500 + seed);
      const int32_t max_total = 80;
      const int32_t pages = (max_total + kPage - 1) / kPage + 1 + static_cast<int32_t>(rng() % 6);
      EngineOptions o = opts(
          dir, pages, 1 + static_cast<int32_t>(rng() % 6), 2 + static_cast<int32_t>(rng() % 12),
          1 + static_cast<int32_t>(rng() % 6), 8 + static_cast<int32_t>(rng() % 80),
          static_cast<int32_t>(rng() % 20), 1 + static_cast<int32_t>(rng() % 4));
      o.host_write_ahead = write_ahead;
      if (seed % 2 == 1) {  // one entry per piece, the smallest reserve: the tier grows slowly
        o.host_pin_piece_bytes = 1;
        o.host_pin_reserve_bytes = 0;
        o.host_fault_in_background = seed == 3;  // and the faulting thread (timing-dependent)
      }
      Harness h(make_core(m, o));
      if (first_ahead_batch > 0 && h.core().cache().host_tier() != nullptr)
        h.core().cache().host_tier()->set_first_ahead_batch(first_ahead_batch);
      std::vector<std::pair<uint64_t, Request>> submitted;
      std::vector<bool> cancelled;
      std::vector<std::vector<int32_t>> prefixes = {random_tokens(rng, 48)};
      int steps = 0, loading_steps = 0;
      while (steps < 400 && (submitted.size() < 28 || h.core().has_work())) {
        if (submitted.size() < 28 && rng() % 3 == 0) {
          std::vector<int32_t> prompt;
          if (!submitted.empty() && rng() % 3 == 0) {  // an identical resend
            prompt = submitted[rng() % submitted.size()].second.prompt_ids;
          } else {
            if (rng() % 2) prompt = prefixes[rng() % prefixes.size()];
            if (prompt.size() > 56) prompt.resize(rng() % 56);
            auto tail = random_tokens(rng, 1 + static_cast<int32_t>(rng() % 20));
            prompt.insert(prompt.end(), tail.begin(), tail.end());
            prefixes.push_back(prompt);
          }
          Request r = request(
              prompt,
              1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(max_total - prompt.size())));
          if (rng() % 5 == 0) r.params.n = 2;
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
        const auto& running = h.core().scheduler().running();
        loading_steps += std::any_of(running.begin(), running.end(), is_loading);
      }
      h.run();
      int compared = 0;
      for (size_t i = 0; i < submitted.size(); ++i) {
        EXPECT_TRUE(h.ended(submitted[i].first));
        for (const auto& s : h.output(submitted[i].first).samples) {
          if (s.finish_reason == "abort") {
            EXPECT_TRUE(cancelled[i]);
            continue;
          }
          EXPECT_EQ(s.tokens, run_alone(dir, submitted[i].second))
              << dir << " seed " << seed << " request " << i;
          ++compared;
        }
      }
      EXPECT_GT(compared, 8);
      expect_no_leaks(h);
      const EngineStats& s = h.core().stats();
      // Seed 3's pieces arrive from the faulting thread whenever it gets there: whether any
      // eviction finds one pinned depends on thread timing, so only the others must store.
      if (seed != 3) {
        EXPECT_GT(s.host_pages_stored + s.host_pages_written_ahead, 0u) << dir << " seed " << seed;
      }
      if (write_ahead && seed != 3) {
        EXPECT_GT(s.host_pages_written_ahead, 0u) << dir << " seed " << seed;
      }
      if (loading && deferred_copies(m) != nullptr) {
        EXPECT_GT(loading_steps, 0) << dir << " seed " << seed;
      }
      if (h.core().host_tier() != nullptr) {
        EXPECT_EQ(h.core().host_tier()->loads().num_unsettled(), 0);
      }
      std::printf(
          "  %s seed %u: %d compared, %d steps with a loading sequence, %llu preemptions, %llu hit "
          "tokens (%llu from host), "
          "%llu pages (+ %llu written ahead) / %llu checkpoints stored (%llu short of pinned "
          "entries), %llu / %llu loaded\n",
          dir.c_str(), seed, compared, loading_steps,
          static_cast<unsigned long long>(s.preemptions),
          static_cast<unsigned long long>(s.prefix_hit_tokens),
          static_cast<unsigned long long>(s.prefix_host_hit_tokens),
          static_cast<unsigned long long>(s.host_pages_stored),
          static_cast<unsigned long long>(s.host_pages_written_ahead),
          static_cast<unsigned long long>(s.host_checkpoints_stored),
          static_cast<unsigned long long>(s.host_stores_short),
          static_cast<unsigned long long>(s.host_page_hits),
          static_cast<unsigned long long>(s.host_checkpoint_hits));
    }
    if (deferred_copies(m) != nullptr) {
      const uint64_t n = deferred_copies(m)->num_out_during_in() - out_during_in_before;
      std::printf("  %s: %llu write-backs enqueued while a load was in flight\n", dir.c_str(),
                  static_cast<unsigned long long>(n));
      out_during_in += n;
    }
  }
  if (loading && polls >= 4 && fixture_loader() == &load_cpu_fixture) {
    EXPECT_GT(out_during_in, 0u) << "no write-back met a load in flight: the storm tests nothing";
  }
}

// ---- loading: host-tier loads are not waited for (kv/inflight_loads.h) -----------------------

// The sequence of `h`'s running ones whose prompt is `prompt` (null: none).
inline const Sequence* running_with(Harness& h, const std::vector<int32_t>& prompt) {
  for (const Sequence* seq : h.core().scheduler().running())
    if (seq->num_computed > 0 && seq->prompt_len() == static_cast<int32_t>(prompt.size()) &&
        seq->tokens.size() >= prompt.size() &&
        std::equal(prompt.begin(), prompt.end(), seq->tokens.begin()))
      return seq;
  return nullptr;
}

// A: 100 tokens (+8) whose pages and checkpoint the 140-token B pushed out of a 10-page device
// pool into the host tier (as in evicted_prefix_served_from_host). Then B2 (140 tokens) pushes B
// out too and B comes back: the device pool holds B's pages, each of which the host tier holds
// already, so allocations while A loads evict without a write-back
// (write_backs_during_a_load_do_not_wait_for_it has them).
struct EvictedPrefix {
  Request a;
  std::vector<int32_t> cold_tokens;
  std::vector<float> cold_logprobs;
};
inline EvictedPrefix evict_a_prefix(Harness& h, std::mt19937& rng) {
  EvictedPrefix e{request(random_tokens(rng, 100), 8, /*logprobs=*/true), {}, {}};
  const Request b = request(random_tokens(rng, 140), 8);
  const uint64_t cold = h.submit(e.a);
  h.run();
  for (const Request& r : {b, request(random_tokens(rng, 140), 8), b}) {
    h.submit(r);
    h.run();
  }
  // Written back at eviction, or ahead of it where the scenario turns the write-ahead on.
  EXPECT_GE(h.core().stats().host_pages_stored + h.core().stats().host_pages_written_ahead,
            6u + 9u + 9u);
  e.cold_tokens = h.output(cold).samples.at(0).tokens;
  e.cold_logprobs = h.output(cold).samples.at(0).logprobs;
  return e;
}

// After evict_a_prefix (with the write-ahead on): D, 6 full pages the host does not hold, runs
// and is written ahead; then C (10 tokens, 30 out) is admitted and steps once.
struct WrittenAhead {
  EvictedPrefix e;
  Request c;
  uint64_t c_id = 0;
  EngineStats before;           // the counters then
  uint64_t present_before = 0;  // HostTierCounters::stores_present then
};
inline WrittenAhead evict_a_prefix_then_write_ahead_d(Harness& h, std::mt19937& rng) {
  WrittenAhead w{evict_a_prefix(h, rng), {}, 0, {}, 0};
  const uint64_t ahead_before_d = h.core().stats().host_pages_written_ahead;
  h.submit(request(random_tokens(rng, 100), 8));  // D
  h.run();
  EXPECT_GE(h.core().stats().host_pages_written_ahead - ahead_before_d, 6u)
      << "D's pages were not written ahead";
  w.c = request(random_tokens(rng, 10), 30);
  w.c_id = h.submit(w.c);
  h.step();
  w.before = h.core().stats();
  w.present_before = h.core().host_tier()->counters().stores_present;
  return w;
}

// After A's host hit loaded and everything ran: A gave the cold run's tokens (its logprobs bit for
// bit) from 96 cached tokens, 6 pages of them copied back, and C its solo tokens.
inline void expect_a_and_c_exact(Harness& h, const char* dir, const EvictedPrefix& e, uint64_t a_id,
                                 uint64_t c_id, const Request& c, uint64_t page_hits_before) {
  h.run();
  const SampleOutput& w = h.output(a_id).samples.at(0);
  EXPECT_EQ(w.cached_tokens, 96);
  EXPECT_EQ(w.tokens, e.cold_tokens);
  EXPECT_EQ(w.logprobs, e.cold_logprobs);  // bit for bit
  EXPECT_EQ(h.output(c_id).samples.at(0).tokens, run_alone(dir, c));
  EXPECT_EQ(h.core().stats().host_page_hits - page_hits_before, 6u);
}

// While A's resend loads its 96-token prefix from the host tier, C (already decoding) gets a token
// every step; A is not scheduled until its load landed, then gives the cold run's tokens and
// logprobs bit for bit (dense: pages; hybrids: pages and the checkpoint in its slot). On the CPU
// the load lands at the third poll: A is loading for exactly 3 steps (admission, 2 polls), and a
// step that read A's pages or slot before would read NaN.
inline void other_sequences_step_while_host_hit_loads() {
  for (const char* dir : kDirs) {
    SCOPED_TRACE(dir);
    Model& m = loading_model(dir, 3);
    DeferredCopyBackend* deferred = deferred_copies(m);
    std::mt19937 rng(7);
    Harness h(make_core(m, opts(dir, 10, 1, 64, 16)));
    const EvictedPrefix e = evict_a_prefix(h, rng);
    const uint64_t hits_before = h.core().stats().host_page_hits;
    const Request c = request(random_tokens(rng, 10), 40);
    const uint64_t c_id = h.submit(c);
    // C decodes until its next page is 15 steps away (no allocation while A loads: the loading
    // steps here are plain decode steps; write_backs_during_a_load_do_not_wait_for_it has
    // evictions).
    while (running_with(h, c.prompt_ids) == nullptr ||
           running_with(h, c.prompt_ids)->num_computed % kPage != 1) {
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    const uint64_t a_id = h.submit(e.a);
    int loading_steps = 0;
    for (;;) {
      // C's tokens as the engine has them (its client may see one a step later:
      // EngineOptions::emit_after_launch).
      const Sequence* c_seq = running_with(h, c.prompt_ids);
      ASSERT_NE(c_seq, nullptr) << "C is not running";
      const int32_t c_before = c_seq->length();
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      if (!is_loading(running_with(h, e.a.prompt_ids))) break;
      ++loading_steps;
      c_seq = running_with(h, c.prompt_ids);
      ASSERT_NE(c_seq, nullptr) << "C ended while A loads";
      EXPECT_EQ(c_seq->length(), c_before + 1)
          << "C got no token in loading step " << loading_steps;
      EXPECT_TRUE(h.output(a_id).samples.empty()) << "A produced a token while loading";
      if (deferred != nullptr) {
        EXPECT_GT(deferred->num_pending(), 0);
      }
    }
    if (deferred != nullptr) {
      EXPECT_EQ(loading_steps, 3);
    }
    expect_a_and_c_exact(h, dir, e, a_id, c_id, c, hits_before);
    EXPECT_EQ(h.output(a_id).samples.at(0).tokens, run_alone(dir, e.a));
    expect_no_leaks(h);
  }
}

// As other_sequences_step_while_host_hit_loads, but the device pool's cached pages are D's, which
// the host tier does not hold, so that every eviction writes back: A's admission, and C crossing
// into new pages while A loads (20 polls on the CPU). The write-backs go on their own stream: C
// still gets a token in every loading step, A loads for exactly its 20 polls (a write-back
// waiting for A's load, as on one in-order stream, would land it early on the CPU's deferred
// streams), the admission step does not order the compute stream after A's own write-backs (A's
// loads wait for them), and A and C then give the cold / solo tokens, A's logprobs bit for bit.
inline void write_backs_during_a_load_do_not_wait_for_it() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    constexpr int32_t kPolls = 20;
    Model& m = loading_model(dir, kPolls);
    DeferredCopyBackend* deferred = deferred_copies(m);
    std::mt19937 rng(7);
    Harness h(make_core(m, opts(dir, 10, 1, 64, 16)));
    const EvictedPrefix e = evict_a_prefix(h, rng);
    h.submit(request(random_tokens(rng, 100), 8));  // D: 6 full pages the host does not hold
    h.run();
    // C: 10 + 30 tokens, 3 pages; it crosses into its second page while A loads. With A's 7 pages
    // the pool's 10 hold both.
    const Request c = request(random_tokens(rng, 10), 30);
    const uint64_t c_id = h.submit(c);
    h.step();
    if (::testing::Test::HasFatalFailure()) return;
    const EngineStats before = h.core().stats();
    const uint64_t out_during_in = deferred != nullptr ? deferred->num_out_during_in() : 0;
    const uint64_t a_id = h.submit(e.a);
    int loading_steps = 0, loading_steps_storing = 0;
    for (;;) {
      // C's tokens as the engine has them (its client may see one a step later:
      // EngineOptions::emit_after_launch).
      const Sequence* c_seq = running_with(h, c.prompt_ids);
      ASSERT_NE(c_seq, nullptr) << "C is not running";
      const int32_t c_before = c_seq->length();
      const uint64_t stored =
          h.core().stats().host_pages_stored + h.core().stats().host_checkpoints_stored;
      const uint64_t waits = deferred != nullptr ? deferred->num_compute_waits(CopyDir::kOut) : 0;
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      if (!is_loading(running_with(h, e.a.prompt_ids))) break;
      if (loading_steps == 0 && deferred != nullptr) {
        // A's admission wrote D's pages back; its loads wait for them, the step does not
        // (kv/host_tier.h "Copies" 6).
        EXPECT_GT(h.core().stats().host_pages_stored, before.host_pages_stored);
        EXPECT_EQ(deferred->num_compute_waits(CopyDir::kOut), waits)
            << "the admission step waited for its own write-backs";
      }
      ++loading_steps;
      loading_steps_storing +=
          h.core().stats().host_pages_stored + h.core().stats().host_checkpoints_stored > stored;
      c_seq = running_with(h, c.prompt_ids);
      ASSERT_NE(c_seq, nullptr) << "C ended while A loads";
      EXPECT_EQ(c_seq->length(), c_before + 1)
          << "C got no token in loading step " << loading_steps;
      EXPECT_TRUE(h.output(a_id).samples.empty()) << "A produced a token while loading";
    }
    if (deferred != nullptr) {
      EXPECT_EQ(loading_steps, kPolls) << "a write-back landed A's load early";
      EXPECT_GE(loading_steps_storing, 2) << "the admission and C's new page write back";
      EXPECT_GT(deferred->num_out_during_in(), out_during_in);
    }
    expect_a_and_c_exact(h, dir, e, a_id, c_id, c, before.host_page_hits);
    EXPECT_GT(h.core().stats().host_pages_stored, before.host_pages_stored);
    expect_no_leaks(h);
  }
}

// write_backs_during_a_load_do_not_wait_for_it with the write-ahead on (kv/host_tier.h
// "Write-ahead"): D's cached pages are copied to the host tier between steps, before anything
// evicts them, so neither A's admission nor C's crossing into a new page writes anything back at
// eviction (each finds its page stored already); A and C give the cold / solo tokens, A's
// logprobs bit for bit, and no write-ahead raced with a load (expect_no_leaks: A's loads go into
// D's evicted pages, which the write-ahead read).
inline void write_ahead_leaves_evictions_nothing_to_write_back() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    Model& m = loading_model(dir, 3);
    std::mt19937 rng(7);
    EngineOptions o = opts(dir, 10, 1, 64, 16);
    o.host_write_ahead = true;
    Harness h(make_core(m, o));
    const WrittenAhead w = evict_a_prefix_then_write_ahead_d(h, rng);
    if (::testing::Test::HasFatalFailure()) return;
    const EvictedPrefix& e = w.e;
    const uint64_t a_id = h.submit(e.a);
    int loading_steps = 0;
    for (;;) {
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      if (!is_loading(running_with(h, e.a.prompt_ids))) break;
      ++loading_steps;
      ASSERT_EQ(h.core().check_integrity(), "");
    }
    EXPECT_GT(loading_steps, 0);
    EXPECT_EQ(h.core().stats().host_pages_stored, w.before.host_pages_stored)
        << "an eviction wrote back what the write-ahead should have stored";
    EXPECT_GT(h.core().host_tier()->counters().stores_present, w.present_before)
        << "no eviction found its page written ahead: the scenario tests nothing";
    expect_a_and_c_exact(h, dir, e, a_id, w.c_id, w.c, w.before.host_page_hits);
    expect_no_leaks(h);
  }
}

// A 10-page pool with the write-ahead's long window (EngineCore::between_steps): a token budget
// and prefill chunk of 2 pages, max_model_len 160 (10 pages) and a host tier of 64 pages (at least
// two such sequences; 16 checkpoints for hybrids).
inline EngineOptions long_window_opts(const std::string& dir) {
  EngineOptions o = opts(dir, 10, 1, 64, 16, /*budget=*/32, /*chunk=*/32);
  o.max_model_len = 160;
  o.host_write_ahead = true;
  return o;
}

// The write-ahead's long window (EngineCore::between_steps): with a token budget of 2 pages the
// next step could take 3 (C's new page and the budget), but A's resend allocates 7 pages in its
// admission step. With max_model_len 160 (10 pages) and a host tier of 64 pages (at least two such
// sequences) the write-ahead keeps the 10 oldest pages of the pool stored, so A's admission
// evicts D's pages (the host did not hold them before D ran) without writing any back; A and C
// stay exact. Dense only: the write-ahead is the pages' alone, the same for every family (a
// hybrid's A, prefilled in 32-token chunks with one device checkpoint, comes back from 32 tokens
// only, which this scenario does not need).
inline void write_ahead_covers_a_long_host_hits_admission() {
  for (const char* dir : {"qwen3/tied_gqa2"}) {
    SCOPED_TRACE(dir);
    Model& m = loading_model(dir, 3);
    std::mt19937 rng(7);
    Harness h(make_core(m, long_window_opts(dir)));
    const WrittenAhead w = evict_a_prefix_then_write_ahead_d(h, rng);
    if (::testing::Test::HasFatalFailure()) return;
    const EvictedPrefix& e = w.e;
    const uint64_t a_id = h.submit(e.a);
    h.step();  // A's admission
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(is_loading(running_with(h, e.a.prompt_ids)));
    EXPECT_EQ(h.core().stats().host_pages_stored, w.before.host_pages_stored)
        << "A's admission wrote back pages the write-ahead should have stored";
    EXPECT_GE(h.core().host_tier()->counters().stores_present - w.present_before, 4u)
        << "A's admission evicted fewer pages than the scenario needs";
    while (is_loading(running_with(h, e.a.prompt_ids))) {
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    expect_a_and_c_exact(h, dir, e, a_id, w.c_id, w.c, w.before.host_page_hits);
    expect_no_leaks(h);
  }
}

// The write-ahead of running sequences' pages (PrefixCache::write_ahead, "under pressure"): with
// the long window of write_ahead_covers_a_long_host_hits_admission (10 pages) and a 10-page pool,
// D (100 tokens + 8: 6 full pages the host does not hold) keeps the pool under pressure (free +
// evictable pages fewer than the window) while it runs, so each of its pages is copied to the
// host tier in a gap soon after it was registered, at most the next step's pages (D's new page
// and the 2-page token budget) a gap. When D ends its pages enter the LRU stored already: the gap
// after its last step copies none (before, all 6 went then as one batch, which on a GPU the
// admission evicting them waited for: docs/performance.md), and no later eviction (A's admission
// and prefill evict D's pages) writes one back. A and D give their cold / solo tokens, A's
// logprobs bit for bit; dense: A comes back from 96 tokens, 4 or more of D's pages evicted in its
// admission step (a hybrid's A comes back from 32 tokens: its admission evicts other pages).
inline void write_ahead_covers_a_running_sequences_pages() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    Model& m = loading_model(dir, 3);
    std::mt19937 rng(7);
    Harness h(make_core(m, long_window_opts(dir)));
    const EvictedPrefix e = evict_a_prefix(h, rng);
    if (::testing::Test::HasFatalFailure()) return;
    const HostTierCounters& c = h.core().host_tier()->counters();
    const Request d = request(random_tokens(rng, 100), 8);
    const uint64_t d_id = h.submit(d);
    const uint64_t ahead_before_d = c.pages_written_ahead;
    uint64_t ahead_while_d = 0, ahead_after_d = 0;
    while (h.core().has_work()) {
      const uint64_t ahead = c.pages_written_ahead;
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_LE(c.pages_written_ahead - ahead, 3u) << "a gap copied more than a step's pages";
      if (h.core().has_work()) {
        ahead_while_d = c.pages_written_ahead - ahead_before_d;
      } else {
        ahead_after_d = c.pages_written_ahead - ahead;
      }
    }
    EXPECT_GE(ahead_while_d, 6u) << "D's pages were not written ahead while it ran";
    EXPECT_EQ(ahead_after_d, 0u) << "D's pages were written ahead after it ended, as one batch";
    EXPECT_EQ(h.output(d_id).samples.at(0).tokens, run_alone(dir, d));
    const uint64_t stored = c.pages_stored, present = c.stores_present, hits = c.page_hits;
    const uint64_t a_id = h.submit(e.a);
    h.step();  // A's admission
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(is_loading(running_with(h, e.a.prompt_ids)));
    if (!is_hybrid(dir)) {
      EXPECT_GE(c.stores_present - present, 4u)
          << "A's admission evicted fewer of D's pages than the scenario needs";
    }
    h.run();
    EXPECT_EQ(c.pages_stored, stored) << "an eviction wrote back a page of D";
    EXPECT_GT(c.stores_present, present);
    const SampleOutput& a = h.output(a_id).samples.at(0);
    EXPECT_EQ(a.tokens, e.cold_tokens);
    EXPECT_EQ(a.logprobs, e.cold_logprobs);  // bit for bit
    if (!is_hybrid(dir)) {
      EXPECT_EQ(a.cached_tokens, 96);
      EXPECT_EQ(c.page_hits - hits, 6u);
    }
    expect_no_leaks(h);
  }
}

// A host tier of exactly A's 6 pages (and 1 checkpoint): A's resend loads all of them (20 polls
// on the CPU; hybrids: the pages' load is polled twice a step, by the poll of the checkpoint's
// load after it too, so it lands after 10) while C, admitted in the same step after A, and C's
// second page evict device pages whose write-backs want a host entry. Every host entry is A's and
// read by A's load in flight (busy: kv/host_tier.h "Copies" 4), so they are dropped, not written
// over what A's load reads (on the CPU's deferred streams that would be a hazard and A's pages NaN:
// other tokens); once A's load landed, write-backs take A's entries again. A and C give the cold /
// solo tokens, A's logprobs bit for bit.
inline void write_backs_never_overwrite_a_host_entry_being_loaded() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    constexpr int32_t kPolls = 20;
    Model& m = loading_model(dir, kPolls);
    DeferredCopyBackend* deferred = deferred_copies(m);
    std::mt19937 rng(7);
    Harness h(make_core(m, opts(dir, 10, 1, 6, 1)));
    const Request a = request(random_tokens(rng, 100), 8, /*logprobs=*/true);
    const uint64_t cold = h.submit(a);
    h.run();
    h.submit(request(random_tokens(rng, 140), 8));  // B pushes A's 6 pages into the host tier
    h.run();
    const HostTier& tier = *h.core().host_tier();
    ASSERT_EQ(tier.num_pages_used(), 6);
    const EngineStats before = h.core().stats();
    const uint64_t a_id = h.submit(a);
    // C: 2 pages; it crosses into the second at its 8th step, while A loads.
    const Request c = request(random_tokens(rng, 10), 20);
    const uint64_t c_id = h.submit(c);
    int loading_steps = 0;
    uint64_t dropped_after_admission = 0;
    for (;;) {
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      if (!is_loading(running_with(h, a.prompt_ids))) break;
      if (loading_steps++ == 0) {  // the admission step: every host entry is read by A's load
        dropped_after_admission = tier.counters().stores_dropped;
        for (int32_t entry = 0; entry < tier.num_pages(); ++entry)
          EXPECT_TRUE(tier.loads().reads_host_page(entry)) << "host page " << entry;
        if (is_hybrid(dir)) {
          EXPECT_TRUE(tier.loads().reads_host_checkpoint(0));
        }
      }
    }
    if (deferred != nullptr) {
      EXPECT_EQ(loading_steps, kPolls);
      // The admission step drops A's own evictions (its entries pinned) and C's (busy); after it
      // nothing is pinned, so C's second page is dropped for A's busy entries alone.
      EXPECT_GT(tier.counters().stores_dropped, dropped_after_admission)
          << "no write-back met A's busy entries: the scenario tests nothing";
      EXPECT_EQ(h.core().stats().host_pages_stored, before.host_pages_stored);
    }
    h.run();
    const SampleOutput& w = h.output(a_id).samples.at(0);
    EXPECT_EQ(w.cached_tokens, 96);
    EXPECT_EQ(h.core().stats().host_page_hits - before.host_page_hits, 6u);
    EXPECT_EQ(w.tokens, h.output(cold).samples.at(0).tokens);
    EXPECT_EQ(w.logprobs, h.output(cold).samples.at(0).logprobs);  // bit for bit
    EXPECT_EQ(w.tokens, run_alone(dir, a));
    EXPECT_EQ(h.output(c_id).samples.at(0).tokens, run_alone(dir, c));
    expect_no_leaks(h);
  }
}

// A's resend and an identical second resend A2 are admitted in one step (with host-tier hits
// admitted after the launch, A2 a step later): A loads the prefix from the host tier, A2's device
// hit is A's pages, registered but still in flight, so A2 is loading too (hybrids: it also loads
// the host checkpoint into its own slot). Cancelling either, both or neither while they load keeps
// every invariant; whoever is left gives the recompute's tokens; nothing leaks.
inline void hit_on_pages_in_flight_waits_and_cancels_keep_invariants() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    for (int cancel = 0; cancel < 4; ++cancel) {  // bit 0: cancel A, bit 1: cancel A2
      SCOPED_TRACE(std::string(dir) + " cancel " + std::to_string(cancel));
      Model& m = loading_model(dir, 3);
      std::mt19937 rng(7);
      EngineOptions o = opts(dir, 10, 1, 64, 16);
      // A2 must be admitted while A's load is in flight: in A's admission step when hits are
      // admitted before the launch; after it (the CPU's HostTierAdmitAfterLaunch run), a step
      // later, which only the deferred copies' late landing guarantees (a real device's copies of
      // these few pages land within a step: measured on an H100, 2026-12-07).
      if (deferred_copies(m) == nullptr) o.admit_loads_after_launch = 0;
      Harness h(make_core(m, o));
      const EvictedPrefix e = evict_a_prefix(h, rng);
      const uint64_t a = h.submit(e.a);
      const uint64_t a2 = h.submit(e.a);
      h.step();
      // Host-tier hits admitted after the launch (the default with CUDA): A2, a device hit, is
      // admitted a step after A.
      if (h.core().scheduler().config().admit_loads_after_launch) h.step();
      if (::testing::Test::HasFatalFailure()) return;
      int loading = 0;
      for (const Sequence* seq : h.core().scheduler().running()) loading += is_loading(seq);
      EXPECT_EQ(loading, 2) << "both resends wait for the load";
      EXPECT_GT(h.core().host_tier()->loads().num_unsettled(), 0);
      if (cancel & 1) h.cancel(a);
      ASSERT_EQ(h.core().check_integrity(), "");
      if (cancel & 2) h.cancel(a2);
      ASSERT_EQ(h.core().check_integrity(), "");
      h.run();
      for (uint64_t id : {a, a2}) {
        const SampleOutput& out = h.output(id).samples.at(0);
        if ((id == a && (cancel & 1)) || (id == a2 && (cancel & 2))) {
          EXPECT_EQ(out.finish_reason, "abort");
        } else {
          EXPECT_EQ(out.tokens, e.cold_tokens) << "request " << id;
          EXPECT_EQ(out.cached_tokens, 96);
        }
      }
      EXPECT_EQ(h.core().host_tier()->loads().num_unsettled(), 0);
      expect_no_leaks(h);
    }
  }
}

// A running sequence C needs a page while A's resend is loading and the 10-page pool is full: A,
// the youngest, is preempted in the loading state (on the CPU certainly: its load lands at the
// third poll, C asks at the second). Its pages go back only after the compute stream is ordered
// after its load; it comes back once C finished (its pages still cached) and both give the
// recompute's tokens; every invariant holds after every step; nothing leaks.
inline void preempting_a_loading_sequence_keeps_invariants() {
  for (const char* dir : {"qwen3/tied_gqa2", "hybrid/q35_r1_lllf"}) {
    SCOPED_TRACE(dir);
    Model& m = loading_model(dir, 3);
    std::mt19937 rng(7);
    Harness h(make_core(m, opts(dir, 10, 1, 64, 16)));
    const EvictedPrefix e = evict_a_prefix(h, rng);
    // C: 40 tokens (3 pages) + 24; it needs its 4th page at 48 computed tokens.
    const Request c = request(random_tokens(rng, 40), 24);
    const uint64_t c_id = h.submit(c);
    while (running_with(h, c.prompt_ids) == nullptr ||
           running_with(h, c.prompt_ids)->num_computed != 46) {
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    const uint64_t a_id = h.submit(e.a);  // admitted as C reaches 47: 7 pages, the pool is full
    const uint64_t preempted_before = h.core().stats().preemptions;
    bool preempted_loading = false, first_preemption_seen = false;
    while (h.core().has_work()) {
      const bool was_loading = is_loading(running_with(h, e.a.prompt_ids));
      h.step();
      if (::testing::Test::HasFatalFailure()) return;
      // The first preemption only: on a GPU A's load may land before it (A then preempted while
      // prefilling), and a later one may take C while A runs.
      if (h.core().stats().preemptions > preempted_before && !first_preemption_seen) {
        first_preemption_seen = true;
        preempted_loading = was_loading;
        EXPECT_EQ(running_with(h, e.a.prompt_ids), nullptr) << "A was not the one preempted";
        EXPECT_EQ(h.core().host_tier()->loads().num_unsettled(), 0);
      }
    }
    EXPECT_GT(h.core().stats().preemptions, preempted_before);
    if (deferred_copies(m) != nullptr) {
      EXPECT_TRUE(preempted_loading);
    }
    EXPECT_EQ(h.output(a_id).samples.at(0).tokens, e.cold_tokens);
    EXPECT_EQ(h.output(c_id).samples.at(0).tokens, run_alone(dir, c));
    expect_no_leaks(h);
  }
}

}  // namespace syv::testing
