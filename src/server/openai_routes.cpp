#include "server/openai_routes.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "server/completion_stream.h"
#include "server/generator.h"
#include "server/http_framing.h"
#include "server/random_id.h"
#include "server/reasoning_parser.h"
#include "server/responses_items.h"
#include "server/responses_request.h"
#include "server/responses_stream.h"
#include "server/sse.h"
#include "server/structured_output.h"

namespace syv::server {

using nlohmann::json;

namespace {

void write_json(HttpResponse& res, const json& body) {
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

// Checks prompt + max_tokens against the context; fills `max_tokens` when unset.
std::optional<ApiError> check_length(int prompt_len, std::optional<int> requested,
                                     int max_model_len, const char* prompt_param,
                                     const std::string& max_tokens_param, int& max_tokens) {
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
        max_tokens_param, "This model's maximum context length is " +
                              std::to_string(max_model_len) + " tokens, but the prompt is " +
                              std::to_string(prompt_len) + " tokens and " + max_tokens_param +
                              " asks for " + std::to_string(*requested) + " more (" +
                              std::to_string(total) + " in total)");
    e.code = "context_length_exceeded";
    return e;
  }
  max_tokens = requested.value_or(max_model_len - prompt_len);
  return std::nullopt;
}

// vLLM's truncate_prompt_tokens: each prompt keeps its last `keep` tokens; -1 keeps what the
// context leaves room for after max_tokens (after 1 token without it). More than the context is
// a 400 (vLLM's refusal). An echoed prompt becomes the text of the tokens kept.
std::optional<ApiError> truncate_prompts(int keep, std::optional<int> max_tokens, int max_model_len,
                                         const Tokenizer& tok,
                                         std::vector<std::vector<int32_t>>& prompts,
                                         std::vector<std::string>& echo) {
  if (keep > max_model_len) {
    return ApiError::bad_param("truncate_prompt_tokens",
                               "truncate_prompt_tokens: " + std::to_string(keep) +
                                   " is greater than the model's maximum context length (" +
                                   std::to_string(max_model_len) +
                                   " tokens); send a smaller count, or -1 for as much of the "
                                   "prompt as the context leaves room for");
  }
  if (keep == -1) keep = std::max(1, max_model_len - std::max(1, max_tokens.value_or(1)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t>& p = prompts[i];
    if (p.size() <= static_cast<size_t>(keep)) continue;
    p.erase(p.begin(), p.end() - keep);
    if (i < echo.size()) echo[i] = tok.decode(p);
  }
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
  p.prompt_logprobs = s.prompt_logprobs;
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
    : metrics_(metrics),
      options_(std::move(options)),
      created_(std::time(nullptr)),
      store_(options_.responses_store),
      parse_budget_(options_.max_parse_bytes) {}

std::optional<ApiError> OpenAiRoutes::hold_parse_bytes(ParseBudget::Hold& hold,
                                                       size_t bytes) const {
  const auto mb = [](size_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MB"; };
  switch (hold.grow(bytes)) {
    case ParseBudget::Hold::Grow::kOk:
      return std::nullopt;
    case ParseBudget::Hold::Grow::kBusy:
      return ApiError{503,
                      "the server is parsing other request bodies: this one's parse (~" +
                          mb(hold.bytes() + bytes) + ") does not fit next to theirs in " +
                          "--max-parse-memory-mb (" + mb(parse_budget_.capacity()) +
                          "); retry after " + std::to_string(options_.retry_after_seconds) + " s",
                      "server_error", "", "server_busy"};
    case ParseBudget::Hold::Grow::kTooLarge:
      break;
  }
  return ApiError{413,
                  "request body: its parse would take ~" + mb(hold.bytes() + bytes) +
                      " (the body's bytes + " + std::to_string(kParseBytesPerValue) +
                      " bytes a JSON value), more than the server's whole parse budget, "
                      "--max-parse-memory-mb (" +
                      mb(parse_budget_.capacity()) + "); send a smaller request",
                  "invalid_request_error", "", "parse_budget_exceeded"};
}

ApiResult<OpenAiRoutes::ParsedBody> OpenAiRoutes::parse_body(const HttpRequest& req) {
  ParseBudget::Hold hold = parse_budget_.hold();
  ApiResult<json> body =
      parse_json_body(req.body, options_.limits.max_json_values, [&](size_t values) {
        return hold_parse_bytes(hold, req.body.size() + values * kParseBytesPerValue);
      });
  if (!body.ok()) return body.error();
  // Tool-call arguments strings become parse trees for the chat template too.
  const size_t argument_values =
      count_argument_values(body.value(), options_.limits.max_json_values);
  if (argument_values > 0) {
    SYV_API_RETURN_IF(hold_parse_bytes(hold, argument_values * kParseBytesPerValue));
  }
  return ParsedBody{std::move(body.value()), std::move(hold)};
}

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
  ApiResult<ParsedBody> body = parse_body(req);
  if (!body.ok()) return write_error(res, body.error(), options_.retry_after_seconds);
  ApiResult<TokenizeRequest> parsed = parse_tokenize_request(body->value, options_.limits);
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
  ApiResult<ParsedBody> body = parse_body(req);
  if (!body.ok()) return write_error(res, body.error(), options_.retry_after_seconds);
  ApiResult<DetokenizeRequest> parsed = parse_detokenize_request(body->value, options_.limits);
  if (!parsed.ok()) return write_error(res, parsed.error());
  write_json(res, {{"prompt", model_.tokenizer->decode(parsed->tokens, false)}});
}

void OpenAiRoutes::chat_completions(const HttpRequest& req, HttpResponse& res) {
  generate(req, res, /*chat=*/true);
}

void OpenAiRoutes::completions(const HttpRequest& req, HttpResponse& res) {
  generate(req, res, /*chat=*/false);
}

// A validated generation request: its prompts and what its answer needs.
struct OpenAiRoutes::Job {
  CommonRequest common;
  StreamSetup setup;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> extra_stops;
  bool chat = true;
  // The request fields errors name: the prompt (chat: "messages"; /v1/responses: "input") and
  // the output length ("max_tokens"; /v1/responses: "max_output_tokens").
  std::string prompt_param = "messages";
  std::string max_tokens_param = "max_tokens";
};

std::optional<ApiError> OpenAiRoutes::chat_job(ChatRequest parsed, Job& job) const {
  const Tokenizer& tok = *model_.tokenizer;
  if (model_.chat_template == nullptr) {
    return ApiError::bad_param(job.prompt_param,
                               job.prompt_param +
                                   ": this model has no chat template (tokenizer_config.json); "
                                   "use /v1/completions");
  }
  Result<std::string> text =
      model_.chat_template->render(parsed.messages, parsed.tools, parsed.add_generation_prompt,
                                   parsed.chat_template_kwargs, tok.bos_token(), tok.eos_token());
  if (!text.ok()) return ApiError::bad_param(job.prompt_param, text.message());
  job.prompts.push_back(tok.encode(*text, /*add_special_tokens=*/false));
  // A constrained output is the answer itself, even after a template that opened <think>.
  job.setup.start_in_reasoning =
      prompt_opens_reasoning(*text) && parsed.sampling.grammar == nullptr;
  job.setup.parse_tool_calls = parsed.parse_tool_calls;
  if (!parsed.sampling.ignore_eos) job.extra_stops = model_.chat_stop_token_ids;
  job.chat = true;
  job.common = std::move(parsed);
  return std::nullopt;
}

namespace {

// Where the turns of `messages` start (see chat_job_fitted): [0] after the leading system /
// developer messages, then each later user message (the last entry is the last one, never
// dropped); dropping k turns erases [starts[0], starts[k]).
std::vector<size_t> turn_starts(const nlohmann::json& messages) {
  auto role = [&](size_t i) { return messages[i].value("role", std::string()); };
  size_t first = 0;
  while (first < messages.size() && (role(first) == "system" || role(first) == "developer"))
    ++first;
  std::vector<size_t> starts = {first};
  for (size_t i = first + 1; i < messages.size(); ++i)
    if (role(i) == "user") starts.push_back(i);
  return starts;
}

}  // namespace

std::optional<ApiError> OpenAiRoutes::chat_job_fitted(ChatRequest parsed, Job& job) const {
  const int max_model_len = model_.generator->max_model_len();
  const std::optional<int> max_tokens = parsed.sampling.max_tokens;
  const std::vector<size_t> starts = turn_starts(parsed.messages);
  const size_t droppable = starts.size() - 1;
  // The prompt without the oldest k turns, and whether it fits.
  auto attempt = [&](size_t k, Job& out) -> std::optional<ApiError> {
    ChatRequest r = parsed;
    if (k > 0) {
      r.messages.erase(r.messages.begin() + static_cast<std::ptrdiff_t>(starts[0]),
                       r.messages.begin() + static_cast<std::ptrdiff_t>(starts[k]));
    }
    out = Job();
    out.prompt_param = job.prompt_param;
    out.max_tokens_param = job.max_tokens_param;
    return chat_job(std::move(r), out);
  };
  // Fits: start()'s own length check passes.
  auto fits = [&](const Job& j) {
    int left = 0;
    return !check_length(static_cast<int>(j.prompts.at(0).size()), max_tokens, max_model_len,
                         job.prompt_param.c_str(), job.max_tokens_param, left);
  };
  // Dropping more turns only shortens the prompt: the fewest that fit, by bisection (a few
  // renders however long the conversation), else all of them (start() then gives the 400).
  Job best;
  if (auto err = attempt(0, best)) return err;
  if (fits(best) || droppable == 0) {
    job = std::move(best);
    return std::nullopt;
  }
  if (auto err = attempt(droppable, best)) return err;
  size_t lo = 0, hi = droppable;  // lo does not fit; hi fits, or is all there is to drop
  if (fits(best)) {
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      Job j;
      if (auto err = attempt(mid, j)) return err;
      if (fits(j)) {
        hi = mid;
        best = std::move(j);
      } else {
        lo = mid;
      }
    }
  }
  job = std::move(best);
  return std::nullopt;
}

ApiResult<std::shared_ptr<CompletionStream>> OpenAiRoutes::start(
    Job& job, std::chrono::steady_clock::time_point arrival,
    std::shared_ptr<Admission>& admission) {
  // Context length.
  const int max_model_len = model_.generator->max_model_len();
  if (job.common.truncate_prompt_tokens.has_value()) {
    if (auto err =
            truncate_prompts(*job.common.truncate_prompt_tokens, job.common.sampling.max_tokens,
                             max_model_len, *model_.tokenizer, job.prompts, job.setup.echo)) {
      return *err;
    }
  }
  const auto& prompts = job.prompts;
  std::vector<int> max_tokens(prompts.size(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string param =
        job.chat ? job.prompt_param
                 : (prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt");
    if (auto err =
            check_length(static_cast<int>(prompts[i].size()), job.common.sampling.max_tokens,
                         max_model_len, param.c_str(), job.max_tokens_param, max_tokens[i])) {
      return *err;
    }
    if (job.common.sampling.min_tokens > max_tokens[i]) {
      return ApiError::bad_param(
          "min_tokens", "min_tokens: expected at most the " + std::to_string(max_tokens[i]) +
                            " tokens left in the context after " + param + ", found " +
                            std::to_string(job.common.sampling.min_tokens));
    }
  }

  // Admission: 429 when too many requests are in flight.
  if (active_.fetch_add(1) >= options_.max_pending) {
    active_.fetch_sub(1);
    return ApiError{429,
                    "too many requests in flight (" + std::to_string(options_.max_pending) +
                        "); retry after " + std::to_string(options_.retry_after_seconds) + " s",
                    "rate_limit_error", "", "rate_limit_exceeded"};
  }
  admission = std::make_shared<Admission>(active_);

  std::vector<std::shared_ptr<RequestHandle>> handles;
  StreamSetup& setup = job.setup;
  setup.prompt_logprobs = job.common.sampling.prompt_logprobs;
  if (setup.echo_logprobs || setup.prompt_logprobs >= 0) setup.prompt_ids = prompts;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request request;
    request.prompt_ids = prompts[i];
    request.params = to_engine_params(job.common.sampling, max_tokens[i]);
    // Echo with logprobs scores the prompt with the same number of alternatives.
    if (setup.echo_logprobs) {
      request.params.prompt_logprobs =
          std::max(request.params.prompt_logprobs, job.common.sampling.top_logprobs);
    }
    for (int32_t id : job.extra_stops) request.params.stop_token_ids.push_back(id);
    setup.prompt_lengths.push_back(static_cast<int>(prompts[i].size()));
    Result<std::shared_ptr<RequestHandle>> handle = model_.generator->submit(std::move(request));
    if (!handle.ok()) {
      for (auto& h : handles) model_.generator->cancel(*h);
      // 400 for a request the engine refuses, 503 when the engine has stopped (by the code).
      return ApiError::from_status(handle.status());
    }
    handles.push_back(std::move(handle.value()));
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    metrics_.add_prompt_tokens(static_cast<int64_t>(prompts[i].size()));

  setup.chat = job.chat;
  setup.id = random_id(job.chat ? "chatcmpl-" : "cmpl-");
  setup.model = model_.model_name;
  setup.created = std::time(nullptr);
  setup.n = job.common.sampling.n;
  setup.logprobs = job.common.sampling.logprobs;
  setup.top_logprobs = job.common.sampling.top_logprobs;
  setup.include_usage = job.common.include_usage;
  setup.arrival = arrival;
  return std::make_shared<CompletionStream>(std::move(setup), std::move(handles), *model_.generator,
                                            *model_.tokenizer, metrics_);
}

// What a generation request sends back: SSE text while streaming, or one JSON body.
class GenerationAnswer {
 public:
  virtual ~GenerationAnswer() = default;
  virtual std::string opening() = 0;  // streaming: sent before the first pump
  // Reads what the engine produced (waiting up to `wait`); `sse` (null when not streaming) gets
  // the events. False once the request has ended.
  virtual bool pump(std::chrono::milliseconds wait, std::string* sse) = 0;
  virtual std::string closing() = 0;     // after the last pump, streamed or not: called once
  virtual std::string body() const = 0;  // not streaming: the response, after closing()
  virtual void cancel() = 0;
  virtual bool finished() const = 0;
  virtual const CompletionStream& completion() const = 0;  // token counts for the access log
};

namespace {

// /v1/chat/completions and /v1/completions: chunks as "data:" lines, then "data: [DONE]".
class CompletionAnswer final : public GenerationAnswer {
 public:
  explicit CompletionAnswer(std::shared_ptr<CompletionStream> stream)
      : stream_(std::move(stream)) {}
  std::string opening() override {
    std::string out;
    for (const json& chunk : stream_->opening_chunks()) out += sse_data(chunk);
    return out;
  }
  bool pump(std::chrono::milliseconds wait, std::string* sse) override {
    if (sse == nullptr) return stream_->pump(wait, nullptr);
    std::vector<json> chunks;
    const bool more = stream_->pump(wait, &chunks);
    for (const json& chunk : chunks) *sse += sse_data(chunk);
    return more;
  }
  std::string closing() override {
    std::string out;
    for (const json& chunk : stream_->closing_chunks()) out += sse_data(chunk);
    return out + std::string(kSseDone);
  }
  std::string body() const override { return dump_json(stream_->response()); }
  void cancel() override { stream_->cancel(); }
  bool finished() const override { return stream_->finished(); }
  const CompletionStream& completion() const override { return *stream_; }

 private:
  std::shared_ptr<CompletionStream> stream_;
};

// /v1/responses: "event:" + "data:" per event; the response is stored when it ends (store).
class ResponsesAnswer final : public GenerationAnswer {
 public:
  ResponsesAnswer(std::shared_ptr<ResponsesStream> stream, ResponsesStore* store,
                  nlohmann::ordered_json conversation, nlohmann::ordered_json input_items)
      : stream_(std::move(stream)),
        store_(store),
        conversation_(std::move(conversation)),
        input_items_(std::move(input_items)) {}
  std::string opening() override { return events(stream_->opening_events()); }
  bool pump(std::chrono::milliseconds wait, std::string* sse) override {
    std::vector<nlohmann::ordered_json> list;
    const bool more = stream_->pump(wait, &list);
    if (sse != nullptr) *sse += events(list);
    return more;
  }
  std::string closing() override {
    if (store_ != nullptr && stream_->status() != "failed") {
      conversation_.push_back(stream_->output_message());
      store_->put({stream_->response(), std::move(conversation_), std::move(input_items_)});
    }
    return "";
  }
  std::string body() const override { return dump_json(stream_->response()); }
  void cancel() override { stream_->cancel(); }
  bool finished() const override { return stream_->finished(); }
  const CompletionStream& completion() const override { return stream_->chat(); }

 private:
  static std::string events(const std::vector<nlohmann::ordered_json>& list) {
    std::string out;
    for (const auto& e : list) out += sse_event(e["type"].get<std::string>(), e);
    return out;
  }
  std::shared_ptr<ResponsesStream> stream_;
  ResponsesStore* store_;                // null: store false
  nlohmann::ordered_json conversation_;  // the messages before the output
  nlohmann::ordered_json input_items_;   // the items of the prompt (responses_items.h)
};

}  // namespace

void OpenAiRoutes::generate(const HttpRequest& req, HttpResponse& res, bool chat) {
  const auto arrival = std::chrono::steady_clock::now();
  Job job;
  std::shared_ptr<Admission> admission;
  std::shared_ptr<CompletionStream> stream;
  {  // The parse trees, and their hold on the parse budget, end with this block: before generation.
    ApiResult<ParsedBody> body = parse_body(req);
    if (!body.ok()) return write_error(res, body.error(), options_.retry_after_seconds);
    // A JSON Schema's properties keep their order in the output: read it from the raw body
    // (already checked for depth, size and syntax by parse_body).
    std::optional<nlohmann::ordered_json> ordered;
    if (has_structured_output_field(body->value)) ordered = nlohmann::ordered_json::parse(req.body);
    const nlohmann::ordered_json* ordered_body = ordered ? &*ordered : nullptr;

    // Validate, then build the prompts.
    if (chat) {
      ApiResult<ChatRequest> parsed =
          parse_chat_request(body->value, options_.limits, ordered_body);
      if (!parsed.ok()) return write_error(res, parsed.error());
      if (auto err = chat_job(std::move(parsed.value()), job)) return write_error(res, *err);
    } else {
      ApiResult<CompletionRequest> parsed =
          parse_completion_request(body->value, options_.limits, ordered_body);
      if (!parsed.ok()) return write_error(res, parsed.error());
      const Tokenizer& tok = *model_.tokenizer;
      for (const PromptInput& p : parsed->prompts) {
        job.prompts.push_back(p.text.has_value() ? tok.encode(*p.text, true) : p.ids);
        if (parsed->echo)
          job.setup.echo.push_back(p.text.has_value() ? *p.text : tok.decode(p.ids));
      }
      job.setup.echo_logprobs = parsed->echo && parsed->sampling.logprobs;
      job.chat = false;
      job.common = std::move(parsed.value());
    }
    ApiResult<std::shared_ptr<CompletionStream>> started = start(job, arrival, admission);
    if (!started.ok()) return write_error(res, started.error(), options_.retry_after_seconds);
    stream = std::move(started.value());
  }
  answer(req, res, std::make_shared<CompletionAnswer>(std::move(stream)), job.common.stream,
         std::move(admission));
}

void OpenAiRoutes::responses(const HttpRequest& req, HttpResponse& res) {
  const auto arrival = std::chrono::steady_clock::now();
  std::shared_ptr<Admission> admission;
  std::shared_ptr<GenerationAnswer> out;
  bool stream = false;
  {  // The parse trees, and their hold on the parse budget, end with this block: before generation.
    ApiResult<ParsedBody> body = parse_body(req);
    if (!body.ok()) return write_error(res, body.error(), options_.retry_after_seconds);
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(req.body);
    ApiResult<ResponsesRequest> parsed = parse_responses_request(
        body->value, ordered, options_.limits,
        [this](const std::string& id) { return store_.get(id); },
        [this](const std::string& id) { return store_.item(id); });
    if (!parsed.ok()) return write_error(res, parsed.error());
    ResponsesRequest& r = parsed.value();
    Job job;
    job.prompt_param = "input";
    job.max_tokens_param = "max_output_tokens";
    stream = r.chat.stream;
    if (auto err = r.truncate_auto ? chat_job_fitted(std::move(r.chat), job)
                                   : chat_job(std::move(r.chat), job)) {
      return write_error(res, *err);
    }
    ApiResult<std::shared_ptr<CompletionStream>> chat = start(job, arrival, admission);
    if (!chat.ok()) return write_error(res, chat.error(), options_.retry_after_seconds);

    ResponsesSetup setup;
    setup.id = random_id("resp_");
    setup.model = model_.model_name;
    setup.created_at = std::time(nullptr);
    setup.echo = std::move(r.echo);
    setup.logprobs = r.logprobs;
    nlohmann::ordered_json conversation = std::move(r.history);
    for (auto& m : r.input_messages) conversation.push_back(std::move(m));
    auto events = std::make_shared<ResponsesStream>(std::move(setup), std::move(chat.value()));
    out = std::make_shared<ResponsesAnswer>(std::move(events), r.store ? &store_ : nullptr,
                                            std::move(conversation), std::move(r.input_items));
  }
  answer(req, res, std::move(out), stream, std::move(admission));
}

namespace {

// What follows "/v1/responses/" in a sub-route's path: the id, and "" or the name after it.
std::pair<std::string, std::string> response_subpath(const HttpRequest& req) {
  const std::string rest = req.matches.size() > 1 ? req.matches[1] : "";
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return {rest, ""};
  return {rest.substr(0, slash), rest.substr(slash + 1)};
}

ApiError no_route(const HttpRequest& req) {
  return ApiError::not_found("no route " + printable(req.method, 16) + " " + printable(req.path));
}

ApiError response_not_found(const std::string& id) {
  return ApiError::not_found("no stored response `" + id.substr(0, 80) +
                             "` (never stored, stored with store: false, expired, pushed out, "
                             "or deleted)");
}

}  // namespace

void OpenAiRoutes::response_get(const HttpRequest& req, HttpResponse& res) {
  const auto [id, sub] = response_subpath(req);
  if (!sub.empty() && sub != "input_items") return write_error(res, no_route(req));
  std::optional<StoredResponse> stored = store_.get(id);
  if (!stored.has_value()) return write_error(res, response_not_found(id));
  if (sub.empty()) {
    // OpenAI's retrieve can replay a response as events (stream, starting_after) or add to it
    // (include): syv answers the stored object only, so any query is refused by name.
    const auto query = query_params(req.target);
    if (!query.empty()) {
      const std::string name = query.front().first.substr(0, 64);
      return write_error(
          res, ApiError::unsupported(name, name + ": GET /v1/responses/{id} returns the stored "
                                                  "response object as it is and takes no query "
                                                  "parameters"));
    }
    res.status = 200;
    res.set_content(dump_json(stored->response), "application/json");
    return;
  }
  ApiResult<nlohmann::ordered_json> page =
      input_items_page(stored->input_items, query_params(req.target));
  if (!page.ok()) return write_error(res, page.error());
  res.status = 200;
  res.set_content(dump_json(page.value()), "application/json");
}

void OpenAiRoutes::response_delete(const HttpRequest& req, HttpResponse& res) {
  const auto [id, sub] = response_subpath(req);
  if (!sub.empty()) return write_error(res, no_route(req));
  if (!store_.erase(id)) return write_error(res, response_not_found(id));
  write_json(res, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

void OpenAiRoutes::response_cancel(const HttpRequest& req, HttpResponse& res) {
  const auto [id, sub] = response_subpath(req);
  if (sub != "cancel") return write_error(res, no_route(req));
  if (!store_.get(id).has_value()) return write_error(res, response_not_found(id));
  // Only background responses can be cancelled (OpenAI); syv refuses background: true, so every
  // stored response ran in its request and is over.
  write_error(res, ApiError{400,
                            "Cannot cancel a synchronous response: only responses created with "
                            "background: true can be cancelled, and syv runs none (background: "
                            "true is refused). To stop a response while it runs, close its "
                            "connection.",
                            "invalid_request_error", "", ""});
}

void OpenAiRoutes::answer(const HttpRequest& req, HttpResponse& res,
                          std::shared_ptr<GenerationAnswer> out, bool stream,
                          std::shared_ptr<Admission> admission) {
  if (!stream) {
    // A client that leaves is noticed between pumps (every 100 ms at most): its request is
    // cancelled, so the engine frees its pages and a drain does not wait for it.
    while (out->pump(std::chrono::milliseconds(100), nullptr)) {
      if (req.connection_closed()) {
        out->cancel();
        record_tokens(out->completion());
        res.status = 499;  // nginx's "client closed request", for the access log; never sent
        return;
      }
    }
    record_tokens(out->completion());
    out->closing();
    res.status = 200;
    res.set_content(out->body(), "application/json");
    return;
  }

  struct State {
    std::shared_ptr<GenerationAnswer> out;
    std::shared_ptr<Admission> admission;
    bool opened = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<State>();
  state->out = std::move(out);
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
          out += state->out->opening();
        }
        const bool more = state->out->pump(std::chrono::milliseconds(50), &out);
        record_tokens(state->out->completion());
        if (!more) out += state->out->closing();
        const auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - state->last_write > std::chrono::milliseconds(heartbeat_ms)) {
          out = ": keep-alive\n\n";  // an SSE comment: lets a vanished client be noticed
        }
        if (!out.empty()) {
          state->last_write = now;
          if (!sink.write(out)) {
            state->out->cancel();
            return false;
          }
        }
        if (!more) sink.done();
        return true;
      },
      [state](bool success) {
        if (!success || !state->out->finished()) state->out->cancel();
        state->out.reset();
        state->admission.reset();
      });
}

}  // namespace syv::server
