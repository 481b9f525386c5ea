// The request-field policy of the generation routes (docs/server.md "Request fields"): every
// top-level field of a /v1/chat/completions, /v1/completions or /v1/responses body is supported
// (its parser reads it, and it takes effect), ignored (an OpenAI field known to be harmless:
// type-checked, no effect), refused (400 `unsupported_parameter` with the reason), or unknown (400
// `unknown_parameter`). A field whose value is null counts as absent, whatever its name.
//
// The table is the single source: the schema checks bodies against it, the unit test lists every
// field independently and compares, and the docs table is checked against it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>

#include "server/api_error.h"

namespace syv::server {

enum class GenerationRoute { kChat, kCompletions, kResponses };

enum class FieldUse {
  kNone,       // not a field of this route: refused as unknown
  kSupported,  // read by the route's parser; values it cannot honour get their own 400
  kIgnored,    // accepted when of the right JSON type, no effect
  kRefused,    // 400 unsupported_parameter whenever not null
};

// The JSON type an ignored field must have.
enum class JsonKind { kAny, kString, kBoolean, kObject, kInteger };

struct RequestField {
  const char* name;
  FieldUse chat;
  FieldUse completions;
  JsonKind type;     // for kIgnored
  const char* note;  // for kRefused: why, in the error message
};

// Every field syv knows, in the order of the docs table.
std::span<const RequestField> request_fields();

// The fields of POST /v1/responses (its own table: OpenAI's Responses API names its fields
// differently), in the order of the docs table.
struct ResponsesField {
  const char* name;
  FieldUse use;
  JsonKind type;     // for kIgnored
  const char* note;  // for kRefused: why, in the error message
};
std::span<const ResponsesField> responses_fields();

// The use of `name` on `route` (kNone when the field is not in the table).
FieldUse field_use(std::string_view name, GenerationRoute route);

// Checks every non-null top-level field of `body` against the table: unknown and refused fields
// get a 400 naming them, ignored fields a 400 when of the wrong JSON type.
std::optional<ApiError> check_request_fields(const nlohmann::json& body, GenerationRoute route);

}  // namespace syv::server
