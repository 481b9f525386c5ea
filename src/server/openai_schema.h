// Request validation for the OpenAI-compatible routes: JSON body -> typed request, or an ApiError
// naming the parameter at fault with expected vs found ("temperature: expected a number in
// [0, 2], found 7"). The generation routes check every field against the policy table
// (request_fields.h): unknown fields and fields syv cannot honour (tool_choice "required", a
// JSON Schema keyword the grammar converter lacks ...) are refused, never silently dropped.
//
// Pure functions of the body and the limits: no tokenizer, no engine. Token-level checks (context
// length, token ids against the vocabulary) happen in the routes after tokenization.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "server/api_error.h"
#include "server/json_limits.h"

namespace syv::server {

// Bounds that depend on the served model and the server configuration.
struct SchemaLimits {
  std::string served_model_name;  // requests naming another model get a 404
  int32_t vocab_size = 0;         // token ids must lie in [0, vocab_size)
  int max_n = 16;                 // most samples per request (n)
  int max_prompts = 64;           // most prompts in one /v1/completions request
  int max_stop = 16;              // most stop strings
  int max_top_logprobs = 20;
  int max_logit_bias = 1024;  // most logit_bias entries
  // JSON values in a body, and in its messages' tool-call `arguments` strings together
  // (--max-json-values; json_limits.h).
  size_t max_json_values = kDefaultMaxJsonValues;
};

struct SamplingParams {
  int n = 1;                            // samples per prompt
  std::optional<int> max_tokens;        // unset: up to the context length
  float temperature = 1.0f;             // 0 = greedy
  float top_p = 1.0f;                   // (0, 1]
  int top_k = 0;                        // 0 or -1 = off
  float min_p = 0.0f;                   // [0, 1]
  float presence_penalty = 0.0f;        // [-2, 2]
  float frequency_penalty = 0.0f;       // [-2, 2]
  float repetition_penalty = 1.0f;      // (0, 2]
  std::optional<uint64_t> seed;         // per-request RNG seed
  std::vector<std::string> stop;        // stop strings, excluded from the output
  std::vector<int32_t> stop_token_ids;  // extra stop tokens (vLLM extension)
  bool ignore_eos = false;              // vLLM extension
  bool skip_special_tokens = true;      // detokenization
  bool logprobs = false;                // return the sampled token's logprob
  int top_logprobs = 0;                 // and this many alternatives, [0, 20]
  int prompt_logprobs = -1;  // vLLM: the prompt tokens' logprobs + this many alternatives; -1 off
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100])
  int min_tokens = 0;                                 // vLLM: no stop before this many tokens
  bool include_stop_str_in_output = false;            // vLLM: keep the matched stop string
  // Structured output (server/structured_output.h): the compiled grammar the output must follow
  // (null: none), the field that asked for it and the grammar's text.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string grammar_field;
  std::string grammar_text;
};

struct CommonRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  SamplingParams sampling;
  // vLLM: keep only the last k prompt tokens (chat: of the rendered prompt); -1: as many as the
  // context leaves room for after max_tokens. Unset: the prompt is never cut. >= 1 or -1.
  std::optional<int> truncate_prompt_tokens;
};

struct ChatRequest : CommonRequest {
  nlohmann::json messages;     // validated array; content parts joined into strings
  nlohmann::json tools;        // array, or null when absent / tool_choice is "none"
  nlohmann::json tool_choice;  // "auto", "none", "required", {"type": "function", ...} or null
  nlohmann::json chat_template_kwargs;  // object, or null
  bool add_generation_prompt = true;
  bool parse_tool_calls = false;  // tools given and tool_choice != "none"
};

// One prompt of /v1/completions: text, or pre-tokenized ids.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;  // used when text is unset
};

struct CompletionRequest : CommonRequest {
  std::vector<PromptInput> prompts;
  bool echo = false;  // prepend the prompt to the output text (with logprobs: and its logprobs)
};

struct TokenizeRequest {
  std::optional<std::string> prompt;  // plain text, or
  nlohmann::json messages;            // chat messages rendered with the template
  nlohmann::json tools;
  nlohmann::json chat_template_kwargs;
  bool add_generation_prompt = true;
  bool add_special_tokens = true;
};

struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

// Parses the raw body as a JSON object (400 "invalid JSON" with the parser's position otherwise).
// First, without building anything, a body nested deeper than kMaxJsonDepth or holding more than
// `max_values` JSON values is refused (400 naming the field where it passed the limit). Then
// `before_parse` (when set) gets the number of values counted, still before anything is built;
// an error it returns is the answer (the server's parse budget: parse_budget.h).
ApiResult<nlohmann::json> parse_json_body(
    std::string_view body, size_t max_values = kDefaultMaxJsonValues,
    const std::function<std::optional<ApiError>(size_t values)>& before_parse = {});

// The JSON values inside every string under an "arguments" key of `body` (tool calls: a chat
// message's tool_calls[].function.arguments, a Responses function_call item's arguments), which
// the routes parse for the chat template; counted without parsing, up to `cap` in all. `body`
// must have passed parse_json_body (its nesting is bounded).
size_t count_argument_values(const nlohmann::json& body, size_t cap);

// `ordered` (may be null): the same body parsed with its key order kept, so a JSON Schema's
// properties keep their order in the output (alphabetical without it).
ApiResult<ChatRequest> parse_chat_request(const nlohmann::json& body, const SchemaLimits& limits,
                                          const nlohmann::ordered_json* ordered = nullptr);
ApiResult<CompletionRequest> parse_completion_request(
    const nlohmann::json& body, const SchemaLimits& limits,
    const nlohmann::ordered_json* ordered = nullptr);
ApiResult<TokenizeRequest> parse_tokenize_request(const nlohmann::json& body,
                                                  const SchemaLimits& limits);
ApiResult<DetokenizeRequest> parse_detokenize_request(const nlohmann::json& body,
                                                      const SchemaLimits& limits);

// A short description of a JSON value's type and, for scalars, its value, for error messages:
// "a string \"abc\"", "the number 7", "an object".
std::string describe_json(const nlohmann::json& value);

}  // namespace syv::server
