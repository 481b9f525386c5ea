// `syv generate --prompts-file`: see generate_batch.h and docs/engine.md.
#include "cli/generate_batch.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/tensor_parallel_cli.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace syv::cli {
namespace {

using nlohmann::json;

// One input line -> a Request. Messages name the file, the line and the field.
Result<Request> parse_line(const json& j, const std::string& where, const Tokenizer* tokenizer,
                           int64_t max_tokens, double temperature, uint64_t seed) {
  if (!j.is_object()) return Status::Error(where + ": expected a JSON object");
  Request r;
  SamplingParams& p = r.params;
  p.max_tokens = static_cast<int32_t>(max_tokens);
  p.temperature = static_cast<float>(temperature);
  p.seed = seed;
  try {
    if (j.contains("prompt") == j.contains("tokens"))
      return Status::Error(where +
                           ": expected exactly one of \"prompt\" (text) and \"tokens\" (ids)");
    if (j.contains("prompt")) {
      if (tokenizer == nullptr)
        return Status::Error(where + ": \"prompt\" needs the model's tokenizer (tokenizer.json)");
      r.prompt_ids = tokenizer->encode(j.at("prompt").get<std::string>());
    } else {
      r.prompt_ids = j.at("tokens").get<std::vector<int32_t>>();
    }
    auto get = [&](const char* key, auto& field) {
      if (j.contains(key)) field = j.at(key).get<std::decay_t<decltype(field)>>();
    };
    get("max_tokens", p.max_tokens);
    get("temperature", p.temperature);
    get("top_k", p.top_k);
    get("top_p", p.top_p);
    get("min_p", p.min_p);
    get("repetition_penalty", p.repetition_penalty);
    get("presence_penalty", p.presence_penalty);
    get("frequency_penalty", p.frequency_penalty);
    get("stop_token_ids", p.stop_token_ids);
    get("ignore_eos", p.ignore_eos);
    get("logprobs", p.logprobs);
    get("top_logprobs", p.top_logprobs);
    get("n", p.n);
    if (j.contains("seed")) p.seed = j.at("seed").get<uint64_t>();
    if (j.contains("stop")) {
      if (j.at("stop").is_string())
        p.stop = {j.at("stop").get<std::string>()};
      else
        p.stop = j.at("stop").get<std::vector<std::string>>();
    }
  } catch (const json::exception& e) {
    return Status::Error(where + ": " + e.what());
  }
  return r;
}

struct Output {
  std::vector<json> samples;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
};

// Reads every event of one request into `out`.
void collect(RequestHandle& handle, Output& out) {
  Event e;
  while (handle.next(e, std::chrono::hours(24)) == NextStatus::kEvent) {
    if (static_cast<size_t>(e.sample_index) >= out.samples.size())
      out.samples.resize(e.sample_index + 1);
    json& s = out.samples[e.sample_index];
    if (s.is_null()) s = json{{"tokens", json::array()}, {"text", ""}};
    if (e.token_id >= 0) s["tokens"].push_back(e.token_id);
    s["text"] = s["text"].get<std::string>() + e.text;
    if (e.logprob) s["logprobs"].push_back(e.logprob->logprob);
    if (e.finished()) s["finish_reason"] = e.finish_reason;
    out.prompt_tokens = e.prompt_tokens;
    out.cached_tokens = e.cached_tokens;
  }
}

}  // namespace

void add_batch_args(CLI::App& app, BatchArgs& args) {
  CLI::Option* prompts = app.add_option(
      "--prompts-file", args.prompts_file,
      "JSONL, one request per line: {\"prompt\": text} or {\"tokens\": [ids]}, optional\n"
      "max_tokens, temperature, top_k, top_p, min_p, seed, stop, stop_token_ids, n,\n"
      "ignore_eos, logprobs, *_penalty. Runs them through the engine concurrently and\n"
      "prints one JSON result per line, in input order.");
  app.add_flag("--one-by-one", args.one_by_one,
               "With --prompts-file: run each prompt alone, after the previous one (for comparing\n"
               "with the batched output).")
      ->needs(prompts);
  // The engine flags only act on --prompts-file runs: without it they are refused, not ignored.
  const size_t before = app.get_options().size();
  add_engine_args(app, args.engine);
  std::vector<CLI::Option*> options = app.get_options();
  // --kv-cache-dtype also sets the single-prompt run's cache (generate.cpp).
  for (size_t i = before; i < options.size(); ++i) {
    if (options[i]->get_name() != "--kv-cache-dtype") options[i]->needs(prompts);
  }
}

int run_prompts_file(const ModelArgs& model_args, const BatchArgs& args, int64_t max_tokens,
                     double temperature, uint64_t seed) {
  std::ifstream in(args.prompts_file);
  if (!in) return fail("--prompts-file: cannot open \"" + args.prompts_file + "\"");
  ModelArgs load_args = model_args;
  load_args.mtp = args.engine.wants_mtp();
  auto loaded = load_cli_model(load_args);
  if (!loaded.ok()) return fail(loaded.message(), model_load_hint(loaded.message()));
  auto tokenizer = Tokenizer::load(model_args.model_dir);
  const Tokenizer* tok = tokenizer.ok() ? tokenizer->get() : nullptr;

  std::vector<Request> requests;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = args.prompts_file + ":" + std::to_string(line_no);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return fail(where + ": not valid JSON");
    auto request = parse_line(j, where, tok, max_tokens, temperature, seed);
    if (!request.ok()) return fail(request.message());
    requests.push_back(std::move(request.value()));
  }
  if (requests.empty())
    return fail("--prompts-file: \"" + args.prompts_file + "\" holds no requests");

  EngineOptions options = args.engine.resolved();
  auto kv_dtype =
      resolve_kv_cache_dtype(args.engine.kv_cache_dtype, *loaded->backend, loaded->model->config());
  if (!kv_dtype.ok()) return fail(kv_dtype.message());
  options.kv_dtype = *kv_dtype;
  std::unique_ptr<Model> draft;
  if (std::string e = args.engine.draft_model_error(); !e.empty()) return fail(e);
  if (args.engine.wants_draft_model()) {
    auto d = load_draft_model(args.engine.draft_model_dir, *loaded->backend);
    if (!d.ok()) return fail(d.message());
    draft = std::move(d.value());
    options.draft_model = draft.get();
  }
  Engine engine(*loaded->model, tok, options);
  if (Status s = engine.start(); !s.ok()) return fail(s.message());
  std::vector<Output> outputs(requests.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto handle = engine.submit(requests[i]);
    if (!handle.ok()) {
      engine.stop(false);
      return fail(args.prompts_file + ": request " + std::to_string(i + 1) + ": " +
                  handle.message());
    }
    handles.push_back(*handle);
    if (args.one_by_one) collect(*handles.back(), outputs[i]);
  }
  if (!args.one_by_one)
    for (size_t i = 0; i < handles.size(); ++i) collect(*handles[i], outputs[i]);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  engine.stop();

  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    json j;
    j["index"] = i;
    if (o.samples.size() == 1) {
      j.update(o.samples[0]);
    } else {
      j["samples"] = o.samples;
    }
    j["prompt_tokens"] = o.prompt_tokens;
    j["cached_tokens"] = o.cached_tokens;
    if (tok == nullptr) j.erase("text");
    std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  }
  const EngineStats s = engine.stats();
  std::fprintf(
      stderr,
      "%zu requests (%s) in %.2f s: %llu prompt + %llu generated tokens, %.1f generated tokens/s, "
      "%llu steps, prefix cache hit %llu of %llu prompt tokens, %llu preemptions\n",
      requests.size(), args.one_by_one ? "one by one" : "concurrently", seconds,
      static_cast<unsigned long long>(s.prompt_tokens),
      static_cast<unsigned long long>(s.generated_tokens),
      static_cast<double>(s.generated_tokens) / seconds, static_cast<unsigned long long>(s.steps),
      static_cast<unsigned long long>(s.prefix_hit_tokens),
      static_cast<unsigned long long>(s.prefix_query_tokens),
      static_cast<unsigned long long>(s.preemptions));
  return 0;
}

}  // namespace syv::cli
