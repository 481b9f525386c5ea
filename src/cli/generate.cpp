// `syv generate`: one sequence through Model::forward (SingleSequence), greedy or sampled with the
// engine's sampler, so `--seed S` gives the tokens the server gives a request with "seed": S
// (same logits, same SamplerState seeding, same host/device choice as EngineCore::step()).
// --prompts-file runs many prompts through the engine itself (cli/generate_batch.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/generate_batch.h"
#include "cli/model_session.h"
#include "cli/tensor_parallel_cli.h"
#include "core/log.h"
#include "engine/device_sampling.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

struct Options {
  ModelArgs model;
  std::string tokens;
  std::string prompt;
  int64_t max_tokens = 32;
  double temperature = 0.0;
  uint64_t seed = 0;
  bool json = false;
  BatchArgs batch;  // --prompts-file and the engine flags (see cli/generate_batch.h)
};

// The next token from `logits` [1, vocab] (device memory) the way EngineCore::step() samples a
// row: on the device when the backend supports_sampling() and the parameters need no host row
// (logprobs), else on the host with the engine's Sampler; either way state.rng makes the draw and
// the token is recorded in `state` (penalties).
int32_t sample_next(Backend& backend, const Tensor& logits, const SamplingParams& params,
                    SamplerState& state, Sampler& sampler, std::vector<float>& host) {
  if (backend.supports_sampling() && !needs_host_sampling(params)) {
    std::vector<SamplePenalty> penalties;
    const std::vector<SampleRow> rows = {make_sample_row(params, state, penalties)};
    int32_t id = -1;
    backend.sample(logits, rows, penalties, &id);
    state.add_output(id);
    return id;
  }
  host.resize(static_cast<size_t>(logits.numel()));
  backend.download(host.data(), logits.data, host.size() * sizeof(float));
  return sampler.sample(host.data(), static_cast<int32_t>(logits.dim(1)), params, state).token_id;
}

int run(const Options& o) {
  if (!o.batch.prompts_file.empty()) {
    if (!o.tokens.empty() || !o.prompt.empty())
      return fail("--prompts-file excludes --tokens and --prompt");
    return run_prompts_file(o.model, o.batch, o.max_tokens, o.temperature, o.seed);
  }
  if (o.tokens.empty() == o.prompt.empty())
    return fail("give exactly one of --tokens and --prompt");
  if (o.max_tokens < 0)
    return fail("--max-tokens: expected >= 0, found " + std::to_string(o.max_tokens));
  if (!(o.temperature >= 0))
    return fail("--temperature: expected >= 0, found " + std::to_string(o.temperature));

  const char* hint = "--model takes a Hugging Face model folder (config.json + *.safetensors)";
  auto config_read = read_cli_config(o.model);
  if (!config_read.ok()) return fail(config_read.message(), hint);
  const ModelConfig& config = *config_read;

  // The tokenizer is optional with --tokens (no text in the output), required with --prompt.
  auto tokenizer = Tokenizer::load(o.model.model_dir);
  std::vector<int32_t> prompt;
  if (!o.prompt.empty()) {
    if (!tokenizer.ok())
      return fail("--prompt needs the model's tokenizer: " + tokenizer.message(),
                  "or pass token ids with --tokens");
    prompt = (*tokenizer)->encode(o.prompt);
    if (prompt.empty()) return fail("--prompt: the text encodes to no tokens");
    for (int32_t id : prompt) {
      if (id >= config.vocab_size)
        return fail("--prompt: token " + std::to_string(id) +
                    " is outside the model's vocabulary [0, " + std::to_string(config.vocab_size) +
                    ") (tokenizer and model disagree)");
    }
  } else {
    auto ids = parse_token_list(o.tokens, config.vocab_size);
    if (!ids.ok()) return fail(ids.message());
    prompt = std::move(ids.value());
  }
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (config.max_position_embeddings > 0 && total > config.max_position_embeddings) {
    return fail("--max-tokens: prompt (" + std::to_string(prompt.size()) + ") + max tokens (" +
                std::to_string(o.max_tokens) + ") exceeds max_position_embeddings " +
                std::to_string(config.max_position_embeddings));
  }
  auto loaded = load_cli_model(o.model);
  if (!loaded.ok()) return fail(loaded.message(), model_load_hint(loaded.message()));
  Model& model = *loaded->model;
  std::vector<int32_t> eos = config.eos_token_ids;
  if (tokenizer.ok() && (*tokenizer)->eos_token_id()) eos.push_back(*(*tokenizer)->eos_token_id());

  auto kv_dtype = resolve_kv_cache_dtype(o.batch.engine.kv_cache_dtype, model.backend(), config);
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  auto seq = SingleSequence::create(model, total, *kv_dtype);
  if (!seq.ok()) return fail(seq.message());
  // The request the server would build for {"temperature": T, "seed": S}: the engine seeds sample
  // 0 of a request with sample_seed(S, 0) (EngineCore::add_request).
  SamplingParams params;
  params.temperature = static_cast<float>(o.temperature);
  params.seed = o.seed;
  SamplerState state(sample_seed(o.seed, /*sample_index=*/0));
  Sampler sampler;
  std::vector<float> host;
  std::vector<int32_t> generated;
  const auto t0 = std::chrono::steady_clock::now();
  auto t_first = t0;
  if (o.max_tokens > 0) {
    Tensor logits = seq->forward(prompt, /*all_rows=*/false);
    t_first = std::chrono::steady_clock::now();
    while (static_cast<int64_t>(generated.size()) < o.max_tokens) {
      const int32_t next = sample_next(model.backend(), logits, params, state, sampler, host);
      generated.push_back(next);
      if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
      if (static_cast<int64_t>(generated.size()) == o.max_tokens) break;
      logits = seq->forward({next}, false);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t1 - t_first).count();

  const bool have_text = tokenizer.ok();
  std::string text = have_text ? (*tokenizer)->decode(generated, /*skip_special_tokens=*/true) : "";
  if (o.json) {
    nlohmann::json j;
    j["tokens"] = generated;
    if (have_text) j["text"] = text;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (have_text) {
    std::printf("%s\n", text.c_str());
  } else {
    for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? "," : "", generated[i]);
    std::printf("\n");
  }
  std::fprintf(
      stderr,
      "prompt %zu tokens in %.1f ms; generated %zu tokens in %.1f ms (%.1f tokens/s) on %s\n",
      prompt.size(), prefill_s * 1e3, generated.size(), decode_s * 1e3,
      generated.size() > 1 ? (generated.size() - 1) / decode_s : 0.0,
      model.backend().name().c_str());
  return 0;
}

CommandRegistration reg{
    "generate", "Generate tokens for one prompt (greedy or sampled), as the server would",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.footer(
          "Prefills the prompt, then decodes one token at a time until --max-tokens or an end-of-\n"
          "sequence id (generation_config.json eos_token_id, and the tokenizer's eos_token).\n"
          "Temperature 0 is greedy (argmax); T > 0 samples from softmax(logits / T) with the\n"
          "engine's sampler: --seed S gives the tokens `syv serve` gives a request with\n"
          "\"seed\": S and the same temperature (bit for bit on the CPU backend).\n"
          "The prompt is raw text (no chat template applied); see `syv chat-template` for that.\n\n"
          "Examples:\n"
          "  syv generate --model ~/models/Qwen3-0.6B --prompt 'The capital of France is' "
          "--max-tokens 8\n"
          "  syv generate --model DIR --tokens 9707,11 --max-tokens 4 --json   # "
          "{\"tokens\":[...],\"text\":...}\n");
      add_model_args(app, o->model);
      add_device_arg(app, o->model.device);
      add_tensor_parallel_arg(app, o->model.tensor_parallel_size);
      auto* tokens =
          app.add_option("--tokens", o->tokens, "Prompt as comma-separated token ids, e.g. 1,2,3.");
      auto* prompt = app.add_option("--prompt", o->prompt,
                                    "Prompt text (needs tokenizer.json in the model folder).");
      tokens->excludes(prompt);
      app.add_option("--max-tokens", o->max_tokens, "Most tokens to generate (default 32).");
      app.add_option("--temperature", o->temperature, "0 = greedy (default); > 0 samples.");
      app.add_option(
          "--seed", o->seed,
          "Sampling seed (default 0); same seed, same tokens (as the server's \"seed\").");
      app.add_flag("--json", o->json,
                   "Print {\"tokens\":[...],\"text\":\"...\"} (text when a tokenizer is present).");
      add_batch_args(app, o->batch);
      app.add_flag("--batch-invariant", o->model.batch_invariant,
                   "Bit-identical logits for a prompt whatever else is batched with it and however "
                   "it is chunked (--prompts-file); slower (docs/configuration.md).");
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
