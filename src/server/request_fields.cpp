#include "server/request_fields.h"

#include <array>
#include <string>

#include "server/openai_schema.h"

namespace syv::server {

using nlohmann::json;

namespace {

constexpr FieldUse S = FieldUse::kSupported;
constexpr FieldUse I = FieldUse::kIgnored;
constexpr FieldUse R = FieldUse::kRefused;
constexpr FieldUse N = FieldUse::kNone;
constexpr JsonKind kAny = JsonKind::kAny;

// Keep in step with docs/server.md "Request fields" (unit_server_request_fields_test checks).
constexpr std::array kFields = {
    // OpenAI fields syv honours.
    RequestField{"model", S, S, kAny, ""},
    RequestField{"messages", S, N, kAny, ""},
    RequestField{"prompt", N, S, kAny, ""},
    RequestField{"max_tokens", S, S, kAny, ""},
    RequestField{"max_completion_tokens", S, N, kAny, ""},
    RequestField{"n", S, S, kAny, ""},
    RequestField{"temperature", S, S, kAny, ""},
    RequestField{"top_p", S, S, kAny, ""},
    RequestField{"presence_penalty", S, S, kAny, ""},
    RequestField{"frequency_penalty", S, S, kAny, ""},
    RequestField{"logit_bias", S, S, kAny, ""},
    RequestField{"seed", S, S, kAny, ""},
    RequestField{"stop", S, S, kAny, ""},
    RequestField{"stream", S, S, kAny, ""},
    RequestField{"stream_options", S, S, kAny, ""},
    RequestField{"logprobs", S, S, kAny, ""},
    RequestField{"top_logprobs", S, N, kAny, ""},
    RequestField{"tools", S, N, kAny, ""},
    RequestField{"tool_choice", S, N, kAny, ""},
    RequestField{"parallel_tool_calls", S, N, kAny, ""},
    RequestField{"response_format", S, S, kAny, ""},
    RequestField{"modalities", S, N, kAny, ""},
    RequestField{"reasoning_effort", S, N, kAny, ""},
    RequestField{"echo", R, S, kAny, "echo is a /v1/completions field"},
    RequestField{"best_of", N, S, kAny, ""},
    RequestField{"suffix", N, S, kAny, ""},
    // OpenAI fields accepted and ignored (harmless: bookkeeping, routing or speed hints).
    RequestField{"user", I, I, JsonKind::kString, ""},
    RequestField{"safety_identifier", I, N, JsonKind::kString, ""},
    RequestField{"store", I, N, JsonKind::kBoolean, ""},
    RequestField{"metadata", I, N, JsonKind::kObject, ""},
    RequestField{"service_tier", I, N, JsonKind::kString, ""},
    RequestField{"prompt_cache_key", I, N, JsonKind::kString, ""},
    RequestField{"prediction", I, N, JsonKind::kObject, ""},
    RequestField{"verbosity", I, N, JsonKind::kString, ""},
    // OpenAI fields refused.
    RequestField{"audio", R, N, kAny, "audio output is not supported; syv generates text"},
    RequestField{"web_search_options", R, N, kAny, "syv has no web search"},
    RequestField{"functions", R, N, kAny, "deprecated by OpenAI; send tools"},
    RequestField{"function_call", R, N, kAny, "deprecated by OpenAI; send tool_choice"},
    // vLLM extensions syv honours.
    RequestField{"top_k", S, S, kAny, ""},
    RequestField{"min_p", S, S, kAny, ""},
    RequestField{"repetition_penalty", S, S, kAny, ""},
    RequestField{"min_tokens", S, S, kAny, ""},
    RequestField{"stop_token_ids", S, S, kAny, ""},
    RequestField{"include_stop_str_in_output", S, S, kAny, ""},
    RequestField{"ignore_eos", S, S, kAny, ""},
    RequestField{"skip_special_tokens", S, S, kAny, ""},
    RequestField{"chat_template_kwargs", S, N, kAny, ""},
    RequestField{"add_generation_prompt", S, N, kAny, ""},
    RequestField{"prompt_logprobs", S, S, kAny, ""},
    RequestField{"truncate_prompt_tokens", S, S, kAny, ""},
    // Structured outputs (server/structured_output.h): vLLM's and llama.cpp's names.
    RequestField{"guided_json", S, S, kAny, ""},
    RequestField{"guided_regex", S, S, kAny, ""},
    RequestField{"guided_choice", S, S, kAny, ""},
    RequestField{"guided_grammar", S, S, kAny, ""},
    RequestField{"structured_outputs", S, S, kAny, ""},
    RequestField{"grammar", S, S, kAny, ""},
    RequestField{"json_schema", S, S, kAny, ""},
    // vLLM extensions refused.
    RequestField{"use_beam_search", R, R, kAny, "syv has no beam search"},
};

// Keep in step with docs/server.md "Responses fields" (unit_server_request_fields_test checks).
// The request is mapped onto the chat route (server/responses_request.h).
constexpr std::array kResponsesFields = {
    // OpenAI fields syv honours.
    ResponsesField{"model", S, kAny, ""},
    ResponsesField{"input", S, kAny, ""},
    ResponsesField{"instructions", S, kAny, ""},
    ResponsesField{"max_output_tokens", S, kAny, ""},
    ResponsesField{"temperature", S, kAny, ""},
    ResponsesField{"top_p", S, kAny, ""},
    ResponsesField{"tools", S, kAny, ""},
    ResponsesField{"tool_choice", S, kAny, ""},
    ResponsesField{"parallel_tool_calls", S, kAny, ""},
    ResponsesField{"text", S, kAny, ""},
    ResponsesField{"reasoning", S, kAny, ""},
    ResponsesField{"include", S, kAny, ""},
    ResponsesField{"top_logprobs", S, kAny, ""},
    ResponsesField{"previous_response_id", S, kAny, ""},
    ResponsesField{"store", S, kAny, ""},
    ResponsesField{"metadata", S, kAny, ""},
    ResponsesField{"stream", S, kAny, ""},
    ResponsesField{"stream_options", S, kAny, ""},
    ResponsesField{"truncation", S, kAny, ""},
    ResponsesField{"background", S, kAny, ""},
    // OpenAI fields accepted and ignored.
    ResponsesField{"user", I, JsonKind::kString, ""},
    ResponsesField{"safety_identifier", I, JsonKind::kString, ""},
    ResponsesField{"prompt_cache_key", I, JsonKind::kString, ""},
    ResponsesField{"prompt_cache_retention", I, JsonKind::kString, ""},
    ResponsesField{"service_tier", I, JsonKind::kString, ""},
    ResponsesField{"max_tool_calls", I, JsonKind::kInteger, ""},
    // OpenAI fields refused.
    ResponsesField{"conversation", R, kAny,
                   "syv has no Conversations API; chain responses with previous_response_id"},
    ResponsesField{"prompt", R, kAny, "syv has no stored prompt templates; send input"},
    // vLLM extensions syv honours (as on the chat route).
    ResponsesField{"seed", S, kAny, ""},
    ResponsesField{"top_k", S, kAny, ""},
    ResponsesField{"min_p", S, kAny, ""},
    ResponsesField{"repetition_penalty", S, kAny, ""},
    ResponsesField{"chat_template_kwargs", S, kAny, ""},
};

const char* kind_name(JsonKind kind) {
  switch (kind) {
    case JsonKind::kString:
      return "a string";
    case JsonKind::kBoolean:
      return "a boolean";
    case JsonKind::kObject:
      return "an object";
    case JsonKind::kInteger:
      return "an integer";
    case JsonKind::kAny:
      break;
  }
  return "any value";
}

bool has_kind(const json& value, JsonKind kind) {
  switch (kind) {
    case JsonKind::kString:
      return value.is_string();
    case JsonKind::kBoolean:
      return value.is_boolean();
    case JsonKind::kObject:
      return value.is_object();
    case JsonKind::kInteger:
      return value.is_number_integer() || value.is_number_unsigned();
    case JsonKind::kAny:
      break;
  }
  return true;
}

// The use of a field on a route, its type when ignored and the reason when refused.
struct Policy {
  FieldUse use = FieldUse::kNone;
  JsonKind type = JsonKind::kAny;
  const char* note = "";
};

Policy policy_of(std::string_view name, GenerationRoute route) {
  if (route == GenerationRoute::kResponses) {
    for (const ResponsesField& f : kResponsesFields)
      if (name == f.name) return {f.use, f.type, f.note};
    return {};
  }
  for (const RequestField& f : kFields) {
    if (name == f.name) {
      return {route == GenerationRoute::kChat ? f.chat : f.completions, f.type, f.note};
    }
  }
  return {};
}

const char* route_path(GenerationRoute route) {
  switch (route) {
    case GenerationRoute::kChat:
      return "/v1/chat/completions";
    case GenerationRoute::kCompletions:
      return "/v1/completions";
    case GenerationRoute::kResponses:
      break;
  }
  return "/v1/responses";
}

std::string shown(const std::string& name) {
  return name.size() <= 64 ? name : name.substr(0, 61) + "...";
}

}  // namespace

std::span<const RequestField> request_fields() {
  return kFields;
}

std::span<const ResponsesField> responses_fields() {
  return kResponsesFields;
}

FieldUse field_use(std::string_view name, GenerationRoute route) {
  return policy_of(name, route).use;
}

std::optional<ApiError> check_request_fields(const json& body, GenerationRoute route) {
  const char* path = route_path(route);
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;
    const Policy policy = policy_of(name, route);
    const std::string param = shown(name);
    switch (policy.use) {
      case FieldUse::kSupported:
        break;
      case FieldUse::kIgnored:
        if (!has_kind(value, policy.type)) {
          return ApiError::bad_param(param, param + ": expected " + kind_name(policy.type) +
                                                ", found " + describe_json(value));
        }
        break;
      case FieldUse::kRefused:
        return ApiError::unsupported(param, param + ": not supported by syv (" + policy.note + ")");
      case FieldUse::kNone:
        return ApiError{
            400,
            param + ": unknown field for " + path +
                " (the fields syv reads, ignores and refuses are listed in "
                "docs/server.md, \"" +
                (route == GenerationRoute::kResponses ? "Responses fields" : "Request fields") +
                "\")",
            "invalid_request_error", param, "unknown_parameter"};
    }
  }
  return std::nullopt;
}

}  // namespace syv::server
