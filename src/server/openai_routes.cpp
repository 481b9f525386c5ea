#include "server/openai_routes.h"

#include <chrono>
#include <ctime>
#include <optional>
#include <random>

#include "server/completion_stream.h"
#include "server/generator.h"
#include "server/reasoning_parser.h"
#include "server/sse.h"
#include "server/structured_output.h"

namespace syv::server {

using nlohmann::json;

namespace {

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id.push_back(hex[rng() & 15]);
  return id;
}

void write_json(HttpResponse& res, const json& body) {
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

// Checks prompt + max_tokens against the context; fills `max_tokens` when unset.
std::optional<ApiError> check_length(int prompt_len, std::optional<int> requested,
                                     int max_model_len, const char* prompt_param, int& max_tokens) {
  if (prompt_len == 0) {
    return ApiError::bad_param(prompt_param,
                               std::string(prompt_param) + ": the prompt is empty (0 tokens)");
  }
  if (prompt_len >= max_model_len) {
    ApiError e = ApiError::bad_param(
        prompt_param, "This model's maximum context length is " + std::to_string(max_model_len) +
                          " tokens, but the prompt is " + std::to_string(prompt_len) +
                          " tokens (it must leave room for at least one generated token)");
    e.code = "context_length_exceeded";
    return e;
  }
  // In 64 bits: max_tokens may be anything up to INT32_MAX, and int32 prompt + max_tokens wraps.
  const int64_t total = static_cast<int64_t>(prompt_len) + requested.value_or(0);
  if (requested.has_value() && total > max_model_len) {
    ApiError e = ApiError::bad_param(
        "max_tokens", "This model's maximum context length is " + std::to_string(max_model_len) +
                          " tokens, but the prompt is " + std::to_string(prompt_len) +
                          " tokens and max_tokens asks for " + std::to_string(*requested) +
                          " more (" + std::to_string(total) + " in total)");
    e.code = "context_length_exceeded";
    return e;
  }
  max_tokens = requested.value_or(max_model_len - prompt_len);
  return std::nullopt;
}

syv::SamplingParams to_engine_params(const server::SamplingParams& s, int max_tokens) {
  syv::SamplingParams p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.min_p = s.min_p;
  p.repetition_penalty = s.repetition_penalty;
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.seed = s.seed;
  p.max_tokens = max_tokens;
  p.stop = s.stop;
  p.stop_token_ids = s.stop_token_ids;
  p.ignore_eos = s.ignore_eos;
  p.logprobs = s.logprobs;
  p.top_logprobs = s.top_logprobs;
  p.n = s.n;
  p.skip_special_tokens = s.skip_special_tokens;
  p.logit_bias = s.logit_bias;
  p.min_tokens = s.min_tokens;
  p.include_stop_str_in_output = s.include_stop_str_in_output;
  p.grammar = s.grammar;
  return p;
}

}  // namespace

RequestTokens& current_request_tokens() {
  thread_local RequestTokens tokens;
  return tokens;
}

namespace {

void record_tokens(const CompletionStream& stream) {
  const json usage = stream.usage();
  current_request_tokens() = {usage["prompt_tokens"].get<int64_t>(),
                              usage["completion_tokens"].get<int64_t>()};
}

}  // namespace

void write_error(HttpResponse& res, const ApiError& error, int retry_after_seconds) {
  res.status = error.status;
  if (error.status == 429 || error.status == 503) {
    res.set_header("Retry-After", std::to_string(retry_after_seconds));
  }
  res.set_content(error.body(), "application/json");
}

// Counts a generation request in flight for as long as it lives.
struct OpenAiRoutes::Admission {
  explicit Admission(std::atomic<int>& counter) : counter_(counter) {}
  ~Admission() { counter_.fetch_sub(1); }
  std::atomic<int>& counter_;
};

OpenAiRoutes::OpenAiRoutes(Metrics& metrics, RouteOptions options)
    : metrics_(metrics), options_(std::move(options)), created_(std::time(nullptr)) {}

void OpenAiRoutes::set_model(ModelContext model) {
  model_ = std::move(model);
  options_.limits.served_model_name = model_.model_name;
  options_.limits.vocab_size = model_.tokenizer->vocab_size();
  gauge_source_.store(model_.generator);
}

EngineGauges OpenAiRoutes::engine_gauges() const {
  Generator* generator = gauge_source_.load();
  if (generator == nullptr) return EngineGauges{};
  return EngineGauges::from(generator->stats());
}

void OpenAiRoutes::health(const HttpRequest&, HttpResponse& res) {
  write_json(res, {{"status", "ok"}});
}

void OpenAiRoutes::metrics(const HttpRequest&, HttpResponse& res) {
  res.status = 200;
  res.set_content(metrics_.render(engine_gauges()), "text/plain; version=0.0.4; charset=utf-8");
}

json OpenAiRoutes::model_card() const {
  return {{"id", model_.model_name},
          {"object", "model"},
          {"created", created_},
          {"owned_by", "syv"},
          {"max_model_len", model_.generator->max_model_len()}};
}

void OpenAiRoutes::models(const HttpRequest&, HttpResponse& res) {
  write_json(res, {{"object", "list"}, {"data", json::array({model_card()})}});
}

void OpenAiRoutes::model(const HttpRequest& req, HttpResponse& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1] : "";
  if (id != model_.model_name) {
    ApiError e =
        ApiError::not_found("The model `" + (id.size() <= 80 ? id : id.substr(0, 77) + "...") +
                                "` does not exist; this server serves `" + model_.model_name + "`",
                            "model_not_found");
    e.param = "model";
    return write_error(res, e);
  }
  write_json(res, model_card());
}

void OpenAiRoutes::embeddings(const HttpRequest&, HttpResponse& res) {
  write_error(res, ApiError{501,
                            "/v1/embeddings is not served: syv serves generation models (use "
                            "/v1/chat/completions or /v1/completions)",
                            "invalid_request_error", "", "unsupported_endpoint"});
}

void OpenAiRoutes::tokenize(const HttpRequest& req, HttpResponse& res) {
  ApiResult<json> body = parse_json_body(req.body);
  if (!body.ok()) return write_error(res, body.error());
  ApiResult<TokenizeRequest> parsed = parse_tokenize_request(body.value(), options_.limits);
  if (!parsed.ok()) return write_error(res, parsed.error());
  std::vector<int32_t> ids;
  if (parsed->prompt.has_value()) {
    ids = model_.tokenizer->encode(*parsed->prompt, parsed->add_special_tokens);
  } else {
    if (model_.chat_template == nullptr) {
      return write_error(res, ApiError::bad_param("messages",
                                                  "messages: this model has no chat "
                                                  "template; send prompt instead"));
    }
    Result<std::string> text = model_.chat_template->render(
        parsed->messages, parsed->tools, parsed->add_generation_prompt,
        parsed->chat_template_kwargs, model_.tokenizer->bos_token(), model_.tokenizer->eos_token());
    if (!text.ok()) return write_error(res, ApiError::bad_param("messages", text.message()));
    ids = model_.tokenizer->encode(*text, /*add_special_tokens=*/false);
  }
  write_json(res, {{"count", ids.size()},
                   {"max_model_len", model_.generator->max_model_len()},
                   {"tokens", ids}});
}

void OpenAiRoutes::detokenize(const HttpRequest& req, HttpResponse& res) {
  ApiResult<json> body = parse_json_body(req.body);
  if (!body.ok()) return write_error(res, body.error());
  ApiResult<DetokenizeRequest> parsed = parse_detokenize_request(body.value(), options_.limits);
  if (!parsed.ok()) return write_error(res, parsed.error());
  write_json(res, {{"prompt", model_.tokenizer->decode(parsed->tokens, false)}});
}

void OpenAiRoutes::chat_completions(const HttpRequest& req, HttpResponse& res) {
  generate(req, res, /*chat=*/true);
}

void OpenAiRoutes::completions(const HttpRequest& req, HttpResponse& res) {
  generate(req, res, /*chat=*/false);
}

void OpenAiRoutes::generate(const HttpRequest& req, HttpResponse& res, bool chat) {
  const auto arrival = std::chrono::steady_clock::now();
  ApiResult<json> body = parse_json_body(req.body);
  if (!body.ok()) return write_error(res, body.error());
  // A JSON Schema's properties keep their order in the output: read it from the raw body (already
  // checked for depth and syntax by parse_json_body).
  std::optional<nlohmann::ordered_json> ordered;
  if (has_structured_output_field(body.value())) ordered = nlohmann::ordered_json::parse(req.body);
  const nlohmann::ordered_json* ordered_body = ordered ? &*ordered : nullptr;

  // Validate, then build the prompts.
  CommonRequest common;
  StreamSetup setup;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> extra_stops;
  const Tokenizer& tok = *model_.tokenizer;
  if (chat) {
    ApiResult<ChatRequest> parsed = parse_chat_request(body.value(), options_.limits, ordered_body);
    if (!parsed.ok()) return write_error(res, parsed.error());
    if (model_.chat_template == nullptr) {
      return write_error(res, ApiError::bad_param("messages",
                                                  "messages: this model has no chat template "
                                                  "(tokenizer_config.json); use /v1/completions"));
    }
    Result<std::string> text = model_.chat_template->render(
        parsed->messages, parsed->tools, parsed->add_generation_prompt,
        parsed->chat_template_kwargs, tok.bos_token(), tok.eos_token());
    if (!text.ok()) return write_error(res, ApiError::bad_param("messages", text.message()));
    prompts.push_back(tok.encode(*text, /*add_special_tokens=*/false));
    // A constrained output is the answer itself, even after a template that opened <think>.
    setup.start_in_reasoning = prompt_opens_reasoning(*text) && parsed->sampling.grammar == nullptr;
    setup.parse_tool_calls = parsed->parse_tool_calls;
    if (!parsed->sampling.ignore_eos) extra_stops = model_.chat_stop_token_ids;
    common = std::move(parsed.value());
  } else {
    ApiResult<CompletionRequest> parsed =
        parse_completion_request(body.value(), options_.limits, ordered_body);
    if (!parsed.ok()) return write_error(res, parsed.error());
    for (const PromptInput& p : parsed->prompts) {
      prompts.push_back(p.text.has_value() ? tok.encode(*p.text, true) : p.ids);
      if (parsed->echo) setup.echo.push_back(p.text.has_value() ? *p.text : tok.decode(p.ids));
    }
    common = std::move(parsed.value());
  }

  // Context length.
  const int max_model_len = model_.generator->max_model_len();
  std::vector<int> max_tokens(prompts.size(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string param =
        chat ? "messages" : (prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt");
    if (auto err = check_length(static_cast<int>(prompts[i].size()), common.sampling.max_tokens,
                                max_model_len, param.c_str(), max_tokens[i])) {
      return write_error(res, *err);
    }
    if (common.sampling.min_tokens > max_tokens[i]) {
      return write_error(
          res,
          ApiError::bad_param("min_tokens",
                              "min_tokens: expected at most the " + std::to_string(max_tokens[i]) +
                                  " tokens left in the context after " + param + ", found " +
                                  std::to_string(common.sampling.min_tokens)));
    }
  }

  // Admission: 429 when too many requests are in flight.
  if (active_.fetch_add(1) >= options_.max_pending) {
    active_.fetch_sub(1);
    ApiError e{429,
               "too many requests in flight (" + std::to_string(options_.max_pending) +
                   "); retry after " + std::to_string(options_.retry_after_seconds) + " s",
               "rate_limit_error", "", "rate_limit_exceeded"};
    return write_error(res, e, options_.retry_after_seconds);
  }
  auto admission = std::make_shared<Admission>(active_);

  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request request;
    request.prompt_ids = prompts[i];
    request.params = to_engine_params(common.sampling, max_tokens[i]);
    for (int32_t id : extra_stops) request.params.stop_token_ids.push_back(id);
    setup.prompt_lengths.push_back(static_cast<int>(prompts[i].size()));
    Result<std::shared_ptr<RequestHandle>> handle = model_.generator->submit(std::move(request));
    if (!handle.ok()) {
      for (auto& h : handles) model_.generator->cancel(*h);
      // 400 for a request the engine refuses, 503 when the engine has stopped (by the code).
      return write_error(res, ApiError::from_status(handle.status()), options_.retry_after_seconds);
    }
    handles.push_back(std::move(handle.value()));
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    metrics_.add_prompt_tokens(static_cast<int64_t>(prompts[i].size()));

  setup.chat = chat;
  setup.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  setup.model = model_.model_name;
  setup.created = std::time(nullptr);
  setup.n = common.sampling.n;
  setup.logprobs = common.sampling.logprobs;
  setup.top_logprobs = common.sampling.top_logprobs;
  setup.include_usage = common.include_usage;
  setup.arrival = arrival;
  auto stream = std::make_shared<CompletionStream>(std::move(setup), std::move(handles),
                                                   *model_.generator, tok, metrics_);

  if (!common.stream) {
    // A client that leaves is noticed between pumps (every 100 ms at most): its request is
    // cancelled, so the engine frees its pages and a drain does not wait for it.
    while (stream->pump(std::chrono::milliseconds(100), nullptr)) {
      if (req.connection_closed()) {
        stream->cancel();
        record_tokens(*stream);
        res.status = 499;  // nginx's "client closed request", for the access log; never sent
        return;
      }
    }
    record_tokens(*stream);
    write_json(res, stream->response());
    return;
  }

  struct State {
    std::shared_ptr<CompletionStream> stream;
    std::shared_ptr<Admission> admission;
    bool opened = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>();
  state->stream = std::move(stream);
  state->admission = std::move(admission);
  const int heartbeat_ms = options_.heartbeat_ms;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_stream(
      "text/event-stream",
      [state, heartbeat_ms](StreamSink& sink) {
        std::string out;
        if (!state->opened) {
          state->opened = true;
          for (const json& chunk : state->stream->opening_chunks()) out += sse_data(chunk);
        }
        std::vector<json> chunks;
        const bool more = state->stream->pump(std::chrono::milliseconds(50), &chunks);
        record_tokens(*state->stream);
        for (const json& chunk : chunks) out += sse_data(chunk);
        if (!more) {
          for (const json& chunk : state->stream->closing_chunks()) out += sse_data(chunk);
          out += kSseDone;
        }
        const auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - state->last_write > std::chrono::milliseconds(heartbeat_ms)) {
          out = ": keep-alive\n\n";  // an SSE comment: lets a vanished client be noticed
        }
        if (!out.empty()) {
          state->last_write = now;
          if (!sink.write(out)) {
            state->stream->cancel();
            return false;
          }
        }
        if (!more) sink.done();
        return true;
      },
      [state](bool success) {
        if (!success || !state->stream->finished()) state->stream->cancel();
        state->stream.reset();
        state->admission.reset();
      });
}

}  // namespace syv::server
