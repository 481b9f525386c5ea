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
    // Structured outputs (server/structured_output.h): vLLM's and llama.cpp's names.
    RequestField{"guided_json", S, S, kAny, ""},
    RequestField{"guided_regex", S, S, kAny, ""},
    RequestField{"guided_choice", S, S, kAny, ""},
    RequestField{"guided_grammar", S, S, kAny, ""},
    RequestField{"structured_outputs", S, S, kAny, ""},
    RequestField{"grammar", S, S, kAny, ""},
    RequestField{"json_schema", S, S, kAny, ""},
    // vLLM extensions refused.
    RequestField{"prompt_logprobs", R, R, kAny, "prompt logprobs are not implemented yet"},
    RequestField{"use_beam_search", R, R, kAny, "syv has no beam search"},
};

const char* kind_name(JsonKind kind) {
  switch (kind) {
    case JsonKind::kString:
      return "a string";
    case JsonKind::kBoolean:
      return "a boolean";
    case JsonKind::kObject:
      return "an object";
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
    case JsonKind::kAny:
      break;
  }
  return true;
}

const RequestField* find_field(std::string_view name) {
  for (const RequestField& f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

std::string shown(const std::string& name) {
  return name.size() <= 64 ? name : name.substr(0, 61) + "...";
}

}  // namespace

std::span<const RequestField> request_fields() {
  return kFields;
}

FieldUse field_use(std::string_view name, GenerationRoute route) {
  const RequestField* f = find_field(name);
  if (f == nullptr) return FieldUse::kNone;
  return route == GenerationRoute::kChat ? f->chat : f->completions;
}

std::optional<ApiError> check_request_fields(const json& body, GenerationRoute route) {
  const char* path = route == GenerationRoute::kChat ? "/v1/chat/completions" : "/v1/completions";
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;
    const RequestField* field = find_field(name);
    const std::string param = shown(name);
    switch (field_use(name, route)) {
      case FieldUse::kSupported:
        break;
      case FieldUse::kIgnored:
        if (!has_kind(value, field->type)) {
          return ApiError::bad_param(param, param + ": expected " + kind_name(field->type) +
                                                ", found " + describe_json(value));
        }
        break;
      case FieldUse::kRefused:
        return ApiError::unsupported(param, param + ": not supported by syv (" + field->note + ")");
      case FieldUse::kNone:
        return ApiError{400,
                        param + ": unknown field for " + path +
                            " (the fields syv reads, ignores and refuses are listed in "
                            "docs/server.md, \"Request fields\")",
                        "invalid_request_error", param, "unknown_parameter"};
    }
  }
  return std::nullopt;
}

}  // namespace syv::server
