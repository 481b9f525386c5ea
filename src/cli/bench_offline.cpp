// `syv bench offline`: throughput of the engine on N random prompts submitted at once
// (input-len prompt tokens, output-len generated tokens each, EOS ignored), like vLLM's
// benchmark_throughput. Prints one summary line, or JSON with --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/bench.h"
#include "cli/engine_args.h"
#include "cli/kv_pool_plan.h"
#include "cli/model_session.h"
#include "cli/tensor_parallel_cli.h"

namespace syv::cli {
namespace {

struct Options {
  ModelArgs model;
  EngineArgs engine;
  int32_t num_prompts = 64;
  int32_t input_len = 128;
  int32_t output_len = 128;
  uint64_t seed = 0;
  bool json = false;
  // On a GPU the pool is sized like `syv serve`'s (cli/kv_pool_plan.h) unless --kv-cache-mb or
  // --num-pages is given: the CPU default of 1 GiB would hold a few thousand tokens of an 8B
  // model and turn a throughput run into a preemption storm.
  double gpu_memory_utilization = 0.90;
  double gpu_memory_gib = 0.0;  // 0: the device's total
  bool pool_flag_given = false;
  bool budget_given = false;  // --max-batched-tokens given
  bool utilization_given = false;
};

int run(const Options& o) {
  if (o.num_prompts < 1)
    return fail("--num-prompts: expected >= 1, found " + std::to_string(o.num_prompts));
  if (o.input_len < 1)
    return fail("--input-len: expected >= 1, found " + std::to_string(o.input_len));
  if (o.output_len < 1)
    return fail("--output-len: expected >= 1, found " + std::to_string(o.output_len));
  ModelArgs load_args = o.model;
  load_args.mtp = o.engine.wants_mtp();
  auto loaded = load_cli_model(load_args);
  if (!loaded.ok()) return fail(loaded.message(), model_load_hint(loaded.message()));
  Model& model = *loaded->model;
  const int64_t vocab = model.config().vocab_size;

  std::mt19937_64 rng(o.seed);
  std::vector<Request> requests(static_cast<size_t>(o.num_prompts));
  for (Request& r : requests) {
    r.prompt_ids.resize(static_cast<size_t>(o.input_len));
    for (int32_t& t : r.prompt_ids) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    r.params.temperature = 0.0f;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
  }

  EngineOptions options = o.engine.resolved();
  auto kv_dtype = resolve_kv_cache_dtype(o.engine.kv_cache_dtype, model.backend(), model.config());
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  options.kv_dtype = *kv_dtype;
  std::unique_ptr<Model> draft;  // --speculative-method draft
  if (std::string e = o.engine.draft_model_error(); !e.empty()) return fail(e);
  if (o.engine.wants_draft_model()) {
    auto d = load_draft_model(o.engine.draft_model_dir, model.backend());
    if (!d.ok()) return fail(d.message());
    draft = std::move(d.value());
    options.draft_model = draft.get();
  }
  choose_step_budget(model.backend(), model.config(), o.model.tensor_parallel_size, o.budget_given,
                     &options);
  auto planned = size_kv_pool(model.backend(), model, &options, o.pool_flag_given,
                              {o.gpu_memory_utilization, o.gpu_memory_gib, o.utilization_given});
  if (!planned.ok()) return fail(planned.message());
  Engine engine(model, nullptr, options);
  if (Status s = engine.start(); !s.ok()) return fail(s.message());
  const int64_t kv_per_token = engine.cache_spec().kv_bytes_per_token;  // as the pool holds it
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto handle = engine.submit(requests[i]);
    if (!handle.ok()) {
      engine.stop(false);
      return fail("request " + std::to_string(i) + ": " + handle.message(),
                  "lower --input-len/--output-len or raise --num-pages / --kv-cache-mb");
    }
    handles.push_back(*handle);
  }
  double first_token_s = 0;
  int64_t generated = 0;
  for (auto& handle : handles) {
    Event e;
    while (handle->next(e, std::chrono::hours(24)) == NextStatus::kEvent) {
      if (e.token_id >= 0) ++generated;
      if (first_token_s == 0)
        first_token_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  engine.stop();
  const EngineStats s = engine.stats();
  const double prompt_tokens = static_cast<double>(o.num_prompts) * o.input_len;
  nlohmann::json j = {
      {"backend", model.backend().name()},
      {"num_prompts", o.num_prompts},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"seconds", seconds},
      {"requests_per_s", o.num_prompts / seconds},
      {"generated_tokens", generated},
      {"output_tokens_per_s", static_cast<double>(generated) / seconds},
      {"total_tokens_per_s", (prompt_tokens + static_cast<double>(generated)) / seconds},
      {"first_token_s", first_token_s},
      {"steps", s.steps},
      {"preemptions", s.preemptions},
      {"pages_total", s.pages_total},
      {"draft_tokens", s.draft_tokens},
      {"accepted_tokens", s.accepted_tokens},
      {"draft_skipped", s.draft_skipped},
      {"spec_steps_dropped", s.spec_steps_dropped},
      {"graph_steps", s.graph_steps},
      {"graph_verify_steps", s.graph_verify_steps},
      {"verify_padded_steps", s.verify_padded_steps},
      {"verify_padding_tokens", s.verify_padding_tokens},
      {"verify_padding_refused", s.verify_padding_refused},
      {"verify_padding_skipped", s.verify_padding_skipped},
      {"schedule_seconds", s.schedule_seconds},
      {"forward_seconds", s.forward_seconds},
      {"output_seconds", s.output_seconds},
      {"decode_steps", s.decode_steps},
      {"decode_rows", s.decode_rows},
      {"decode_context_tokens", s.decode_context_tokens},
      {"decode_forward_seconds", s.decode_forward_seconds},
      {"other_steps", s.other_steps},
      {"other_tokens", s.other_tokens},
      {"other_forward_seconds", s.other_forward_seconds},
      {"kv_bytes_per_token", kv_per_token}};
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%d prompts x (%d in + %d out) on %s: %.2f s, %.2f req/s, %.1f output tokens/s, %.1f total "
        "tokens/s (%llu steps, %llu preemptions)\n",
        o.num_prompts, o.input_len, o.output_len, model.backend().name().c_str(), seconds,
        o.num_prompts / seconds, static_cast<double>(generated) / seconds,
        (prompt_tokens + static_cast<double>(generated)) / seconds,
        static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(s.preemptions));
    // The engine thread's time in its steps: only the forward share keeps the GPU busy (steps
    // are not overlapped), so schedule + output is the GPU's idle gap between steps.
    const double in_steps = s.schedule_seconds + s.forward_seconds + s.output_seconds;
    if (s.steps > 0 && in_steps > 0)
      std::printf(
          "engine thread, per step: %.3f ms schedule + build, %.3f ms forward + sampling, %.3f ms "
          "output (GPU idle between steps: %.1f%% of the steps' time)\n",
          1e3 * s.schedule_seconds / static_cast<double>(s.steps),
          1e3 * s.forward_seconds / static_cast<double>(s.steps),
          1e3 * s.output_seconds / static_cast<double>(s.steps),
          100.0 * (s.schedule_seconds + s.output_seconds) / in_steps);
    // Plain decode steps apart from the rest: their mean batch and context say what a decode
    // step reads (the weights once, plus kv_bytes_per_token per context position and row).
    if (s.decode_steps > 0) {
      const double n = static_cast<double>(s.decode_steps);
      const double rows = static_cast<double>(s.decode_rows) / n;
      const double ctx = static_cast<double>(s.decode_context_tokens) /
                         static_cast<double>(std::max<uint64_t>(s.decode_rows, 1));
      const double kv_gb = static_cast<double>(s.decode_context_tokens) / n *
                           static_cast<double>(kv_per_token) / 1e9;
      std::printf(
          "decode steps: %llu, %.1f sequences at a mean context of %.0f, %.3f ms each (%.2f GB "
          "of K/V read per step besides the weights)\n",
          static_cast<unsigned long long>(s.decode_steps), rows, ctx,
          1e3 * s.decode_forward_seconds / n, kv_gb);
    }
    if (s.other_steps > 0)
      std::printf("other steps (prefill chunks, mixed, verify): %llu, %.0f tokens, %.3f ms each\n",
                  static_cast<unsigned long long>(s.other_steps),
                  static_cast<double>(s.other_tokens) / static_cast<double>(s.other_steps),
                  1e3 * s.other_forward_seconds / static_cast<double>(s.other_steps));
    if (options.num_speculative_tokens > 0)
      std::printf(
          "speculation: %llu drafts, %llu accepted, %llu sequence-steps skipped, %llu steps' "
          "drafts dropped; verify steps as "
          "graphs: %llu (%llu padded to one draft count with %llu filler positions; not padded: "
          "%llu for want of free pages, %llu as the filler would cost more than a replay saves)\n",
          static_cast<unsigned long long>(s.draft_tokens),
          static_cast<unsigned long long>(s.accepted_tokens),
          static_cast<unsigned long long>(s.draft_skipped),
          static_cast<unsigned long long>(s.spec_steps_dropped),
          static_cast<unsigned long long>(s.graph_verify_steps),
          static_cast<unsigned long long>(s.verify_padded_steps),
          static_cast<unsigned long long>(s.verify_padding_tokens),
          static_cast<unsigned long long>(s.verify_padding_refused),
          static_cast<unsigned long long>(s.verify_padding_skipped));
  }
  return 0;
}

BenchRegistration reg{
    "offline", "Engine throughput on N random prompts submitted at once", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      add_model_args(app, o->model);
      add_device_arg(app, o->model.device);
      add_tensor_parallel_arg(app, o->model.tensor_parallel_size);
      add_engine_args(app, o->engine);
      app.add_option("--num-prompts", o->num_prompts, "Prompts (default 64).");
      app.add_option("--input-len", o->input_len, "Prompt tokens each (default 128).");
      app.add_option("--output-len", o->output_len, "Generated tokens each (default 128).");
      app.add_option("--seed", o->seed, "Seed of the random prompts (default 0).");
      app.add_flag("--json", o->json, "Print the summary as one JSON object.");
      CLI::Option* utilization =
          app.add_option(
                 "--gpu-memory-utilization", o->gpu_memory_utilization,
                 "On a GPU, the share of device memory for weights, activations and the KV "
                 "pool, as `syv serve` (default 0.90; --kv-cache-mb or --num-pages override "
                 "it)")
              ->check(CLI::Range(0.05, 1.0));
      CLI::Option* memory_gib =
          app.add_option("--gpu-memory-gib", o->gpu_memory_gib,
                         "On a GPU, plan as if the device had this many GiB (at most its own), "
                         "as `syv serve`")
              ->check(CLI::PositiveNumber);
      CLI::Option* kv_cache_mb = app.get_option("--kv-cache-mb");
      CLI::Option* budget = app.get_option("--max-batched-tokens");
      return [o, kv_cache_mb, budget, utilization, memory_gib]() -> int {
        o->pool_flag_given = kv_cache_mb->count() > 0;
        o->budget_given = budget->count() > 0;
        o->utilization_given = utilization->count() > 0 || memory_gib->count() > 0;
        return run(*o);
      };
    }};

}  // namespace
}  // namespace syv::cli
