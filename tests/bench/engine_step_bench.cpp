// The engine's own cost per step, without a model: Scheduler::schedule + Runner::build +
// Scheduler::commit (+ appending one token per sequence, as sampling would) for N running decode
// sequences. Target: < 200 us per step at 256 sequences.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/runner.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kv/prefix_cache.h"

namespace syv {
namespace {

void BM_EngineStep(benchmark::State& state) {
  const int32_t num_seqs = static_cast<int32_t>(state.range(0));
  const int32_t context = static_cast<int32_t>(state.range(1));
  const int32_t page_size = 64;
  const int32_t steps_per_round = 512;
  const int32_t pages_per_seq = (context + steps_per_round) / page_size + 2;
  PrefixCache cache(num_seqs * pages_per_seq + 16, page_size, /*enabled=*/true);
  Scheduler scheduler(cache, SchedulerConfig{num_seqs, 8192, 0});
  Runner runner;
  SchedulerOutput out;
  SamplingParams params;
  std::vector<std::unique_ptr<Sequence>> seqs;

  auto start_round = [&] {
    for (auto& seq : seqs) scheduler.finish(seq.get());
    seqs.clear();
    for (int32_t i = 0; i < num_seqs; ++i) {
      std::vector<int32_t> prompt(static_cast<size_t>(context));
      for (int32_t t = 0; t < context; ++t) prompt[t] = (i * 7919 + t * 31) % 150000;
      seqs.push_back(std::make_unique<Sequence>(static_cast<uint64_t>(i), prompt, &params, 0,
                                                nullptr, nullptr));
      scheduler.add(seqs.back().get());
    }
    // Prefill everything so every sequence decodes from here on.
    while (scheduler.num_waiting() > 0 || (!seqs.empty() && seqs.back()->num_pending() > 1)) {
      scheduler.schedule(out);
      scheduler.commit(out);
      for (const ScheduledSeq& s : out.seqs)
        if (s.wants_logits) s.seq->tokens.push_back(1);
    }
  };

  start_round();
  int32_t step = 0;
  int64_t tokens = 0;
  for (auto _ : state) {
    scheduler.schedule(out);
    const Batch& batch = runner.build(out);
    benchmark::DoNotOptimize(batch.token_ids.data());
    scheduler.commit(out);
    for (const ScheduledSeq& s : out.seqs)
      if (s.wants_logits) s.seq->tokens.push_back(static_cast<int32_t>(s.seq->length() % 1000));
    tokens += out.num_tokens;
    if (++step == steps_per_round) {
      state.PauseTiming();
      start_round();
      step = 0;
      state.ResumeTiming();
    }
  }
  state.counters["seqs"] = num_seqs;
  state.counters["tokens/step"] =
      benchmark::Counter(static_cast<double>(tokens) / static_cast<double>(state.iterations()));
}

BENCHMARK(BM_EngineStep)
    ->Args({256, 512})
    ->Args({256, 4096})
    ->Args({64, 512})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace syv

BENCHMARK_MAIN();
