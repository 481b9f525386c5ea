// Structured outputs: the request fields that constrain the output to a grammar, read into one
// compiled grammar (grammar/), or a 400 naming the field.
//
//   response_format     {"type": "json_object"} (any JSON object; a "schema" inside it, as
//                       llama-server takes, is a JSON Schema), {"type": "json_schema",
//                       "json_schema": {"name", "schema", "strict"}} (strict true or false: syv
//                       always enforces the schema), {"type": "text"} (no constraint)
//   structured_outputs  vLLM: exactly one of {json, regex, choice, grammar, json_object};
//                       disable_fallback is accepted (syv has no fallback)
//   guided_json, guided_regex, guided_choice, guided_grammar     vLLM's older names
//   grammar, json_schema                                         llama-server's names
//   tool_choice "required" / a named function (tool_call_grammar below; read by the chat parser)
//
// At most one of them per request. Grammars are compiled once per distinct text and shared
// (an LRU of the last 64), so the engine's token-mask caches carry over between requests that
// send the same schema. Schemas keep their property order when the caller passes the body parsed
// as ordered JSON (the routes do); otherwise properties come in alphabetical order.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "grammar/grammar.h"
#include "server/api_error.h"

namespace syv::server {

struct StructuredOutput {
  std::string field;                                // the request field it came from, "" when none
  std::string gbnf;                                 // the grammar text syv compiled
  std::shared_ptr<const grammar::Grammar> grammar;  // null when the request has no constraint
};

// The structured-output fields of `body`; `ordered` (may be null) is the same body parsed with
// its key order kept.
std::optional<ApiError> parse_structured_output(const nlohmann::json& body,
                                                const nlohmann::ordered_json* ordered,
                                                StructuredOutput& out);

// Whether `body` has any structured-output field or forces a tool call (so the caller knows to
// keep key order).
bool has_structured_output_field(const nlohmann::json& body);

// tool_choice "required" (`name` empty: one or more calls of any tool; exactly one when `single`,
// i.e. parallel_tool_calls false) or naming a function (exactly one call of it): a grammar of the calls as Qwen's chat templates write them,
//   <tool_call>\n{"name": "<name>", "arguments": <the tool's parameters>}\n</tool_call>
// joined by "\n". `tools` is the validated array (parse_tools), `ordered` the body with its key
// order (may be null). The tags are spelled with ordinary tokens (added tokens are never in a
// mask); the server's tool-call parser reads the text either way.
std::optional<ApiError> tool_call_grammar(const nlohmann::json& tools,
                                          const nlohmann::ordered_json* ordered,
                                          const std::string& name, bool single,
                                          StructuredOutput& out);

}  // namespace syv::server
