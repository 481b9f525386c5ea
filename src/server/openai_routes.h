// The route handlers: POST /v1/chat/completions, /v1/completions, /v1/responses, /tokenize,
// /detokenize, /v1/embeddings (501: generation models only), /v1/responses/{id}/cancel; GET
// /v1/models, /v1/models/{id}, /v1/responses/{id}, /v1/responses/{id}/input_items, /health,
// /metrics; DELETE /v1/responses/{id}. /v1/responses runs as a chat request
// (responses_request.h) and answers with the Responses API's objects and events
// (responses_stream.h); the responses it keeps for previous_response_id live in a ResponsesStore.
// Auth, readiness and body limits are applied before these run (http_server.h); the handlers
// validate the body (openai_schema.h), tokenize, check the context length, admit the request (429 +
// Retry-After when max_pending requests are in flight), and answer with one JSON body or an SSE
// stream (completion_stream.h).
//
// Thread safety: handlers run on many HTTP threads at once; set_model() must happen before the
// server is marked ready.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/http_message.h"
#include "server/metrics.h"
#include "server/openai_schema.h"
#include "server/parse_budget.h"
#include "server/responses_store.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace syv::server {

class Generator;
class CompletionStream;
class GenerationAnswer;  // what a generation request sends back (openai_routes.cpp)

// Token counts of the generation request being answered on this thread, for the access log
// (http_server.cpp reads and resets them after each response). The transport runs a request's
// handler, its stream and its log line on one worker thread. -1 = not a generation request, or not
// known.
struct RequestTokens {
  int64_t prompt = -1;
  int64_t completion = -1;
};
RequestTokens& current_request_tokens();

// What the routes need from the loaded model.
struct ModelContext {
  const Tokenizer* tokenizer = nullptr;         // required
  const ChatTemplate* chat_template = nullptr;  // null: chat routes answer 400
  Generator* generator = nullptr;               // required
  std::string model_name;                       // served name (--served-model-name)
  std::vector<int32_t> chat_stop_token_ids;     // e.g. <|im_end|>: ends a chat turn
};

struct RouteOptions {
  int max_pending = 512;        // generation requests in flight at most (running + queued)
  int retry_after_seconds = 1;  // Retry-After of a 429 (and of a 503 from a stopped engine)
  int heartbeat_ms = 2000;      // SSE comment after this long without output
  SchemaLimits limits;          // served_model_name / vocab_size filled by set_model()
  ResponsesStoreOptions responses_store;  // /v1/responses kept for previous_response_id
  // Estimated memory of the request bodies being parsed at once (--max-parse-memory-mb;
  // parse_budget.h): a body that does not fit next to the others gets 503 server_busy.
  size_t max_parse_bytes = kDefaultMaxParseMemoryMb << 20;
};

class OpenAiRoutes {
 public:
  OpenAiRoutes(Metrics& metrics, RouteOptions options);

  void set_model(ModelContext model);

  void chat_completions(const HttpRequest& req, HttpResponse& res);
  void completions(const HttpRequest& req, HttpResponse& res);
  void responses(const HttpRequest& req, HttpResponse& res);
  // The stored responses, by id (req.matches[1]: "{id}" or "{id}/<name>"); an id that is not
  // stored is a 404, another sub-route a 404 naming the route.
  // GET /v1/responses/{id}: the response object; GET /v1/responses/{id}/input_items: a page of
  // its input items (responses_items.h).
  void response_get(const HttpRequest& req, HttpResponse& res);
  // DELETE /v1/responses/{id}: {"id", "object": "response", "deleted": true}; the id is gone.
  void response_delete(const HttpRequest& req, HttpResponse& res);
  // POST /v1/responses/{id}/cancel: 400, as OpenAI answers for a response that did not run in the
  // background (syv runs none).
  void response_cancel(const HttpRequest& req, HttpResponse& res);
  void tokenize(const HttpRequest& req, HttpResponse& res);
  void detokenize(const HttpRequest& req, HttpResponse& res);
  void models(const HttpRequest& req, HttpResponse& res);
  // GET /v1/models/{id}: the served model's card, or 404 model_not_found naming the id
  // (req.matches[1]).
  void model(const HttpRequest& req, HttpResponse& res);
  void embeddings(const HttpRequest& req, HttpResponse& res);
  void health(const HttpRequest& req, HttpResponse& res);
  void metrics(const HttpRequest& req, HttpResponse& res);

  // Generation requests being answered (streams included).
  int active_requests() const { return active_.load(); }
  // The budget request bodies' parses hold (tests fill it to see a request refused).
  ParseBudget& parse_budget() { return parse_budget_; }

 private:
  struct Admission;
  struct Job;
  // A request body parsed, and the bytes of the parse budget its parse is estimated to take
  // (released when this goes: before generation, or with the error that ends the request).
  struct ParsedBody {
    nlohmann::json value;
    ParseBudget::Hold hold;
  };
  // parse_json_body with the estimate held: body bytes + kParseBytesPerValue x its JSON values
  // (before the parse), then x the values of its tool-call arguments strings (before the
  // template parses them). 503 server_busy when the budget has no room now, 413
  // parse_budget_exceeded when the estimate alone is larger than the budget.
  ApiResult<ParsedBody> parse_body(const HttpRequest& req);
  std::optional<ApiError> hold_parse_bytes(ParseBudget::Hold& hold, size_t bytes) const;
  void generate(const HttpRequest& req, HttpResponse& res, bool chat);
  // The chat template and tokenizer applied to a validated chat request.
  std::optional<ApiError> chat_job(ChatRequest parsed, Job& job) const;
  // chat_job() for /v1/responses' truncation "auto": when the rendered prompt leaves no room for
  // max_output_tokens (1 token without it), the fewest of the conversation's oldest turns that
  // make it fit are dropped (a turn: a user message and what follows it up to the next one, after
  // the leading system / developer messages; found by bisection); the last user turn is never
  // dropped, so a conversation that still does not fit is the usual 400.
  std::optional<ApiError> chat_job_fitted(ChatRequest parsed, Job& job) const;
  // Context length, admission (429), submission: the stream of the running request.
  ApiResult<std::shared_ptr<CompletionStream>> start(Job& job,
                                                     std::chrono::steady_clock::time_point arrival,
                                                     std::shared_ptr<Admission>& admission);
  // Streams `out` as server-sent events, or waits for its end and writes its body.
  void answer(const HttpRequest& req, HttpResponse& res, std::shared_ptr<GenerationAnswer> out,
              bool stream, std::shared_ptr<Admission> admission);
  EngineGauges engine_gauges() const;
  nlohmann::json model_card() const;

  Metrics& metrics_;
  RouteOptions options_;
  ModelContext model_;                             // written once by set_model(), before ready
  std::atomic<Generator*> gauge_source_{nullptr};  // /metrics reads it while loading too
  int64_t created_ = 0;
  std::atomic<int> active_{0};
  ResponsesStore store_;
  ParseBudget parse_budget_;
};

// Writes `error` as the response (status, JSON body, Retry-After for 429/503).
void write_error(HttpResponse& res, const ApiError& error, int retry_after_seconds = 1);

}  // namespace syv::server
