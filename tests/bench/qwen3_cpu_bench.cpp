// Qwen3-0.6B shapes (tools/bench/configs/qwen3-0.6b, random weights) on the CPU backend:
// prefill of 128 tokens, and one decode step at context 128. Counters: tokens/s.
//   build/x/qwen3_cpu_bench --benchmark_min_time=1x
#include <benchmark/benchmark.h>

#include <memory>

#include "backend/backend.h"
#include "model/model.h"

namespace syv {
namespace {

constexpr int32_t kPrompt = 128;
constexpr int32_t kPageSize = 64;

struct Loaded {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<Model> model;
  std::unique_ptr<CacheStore> cache_store;  // bound to model
  Loaded() {
    LoadOptions options;
    options.random_weights = true;
    auto m = load_model(std::string(SYV_SOURCE_DIR) + "/tools/bench/configs/qwen3-0.6b", *backend,
                        options);
    if (!m.ok()) throw std::runtime_error(m.message());
    model = std::move(m.value());
    CacheConfig cache;
    cache.page_size = kPageSize;
    cache.num_pages = 4;
    auto store = make_cache_store(*model, cache);
    if (!store.ok()) throw std::runtime_error("make_cache_store");
    cache_store = std::move(store.value());
  }
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

Batch make_batch(int32_t first, int32_t count) {
  Batch b;
  for (int32_t i = 0; i < count; ++i) {
    b.token_ids.push_back((first + i) * 7919 % 151936);
    b.positions.push_back(first + i);
  }
  b.seq_starts = {0, count};
  b.context_lens = {first + count};
  b.page_table = {0, 1, 2, 3};
  b.max_pages_per_seq = 4;
  b.logit_rows = {count - 1};
  return b;
}

void BM_Prefill128(benchmark::State& state) {
  Model& model = *loaded().model;
  Batch b = make_batch(0, kPrompt);
  for (auto _ : state) {
    Tensor logits = model.forward(b);
    model.backend().synchronize();
    benchmark::DoNotOptimize(logits.data);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(kPrompt, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Prefill128)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeAtContext128(benchmark::State& state) {
  Model& model = *loaded().model;
  model.forward(make_batch(0, kPrompt));
  Batch b = make_batch(kPrompt, 1);
  for (auto _ : state) {
    Tensor logits = model.forward(b);  // rewrites position 128 each time
    model.backend().synchronize();
    benchmark::DoNotOptimize(logits.data);
  }
  state.counters["tokens/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeAtContext128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace syv

BENCHMARK_MAIN();
