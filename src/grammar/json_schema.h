// JSON Schema -> GBNF (grammar.h), for structured outputs: the grammar accepts exactly the
// compact-or-lightly-spaced JSON texts that conform to the schema (whitespace: nothing, one space,
// or a newline and up to 20 spaces/tabs between tokens, as llama.cpp's converter allows).
//
// Supported (docs/structured-outputs.md lists it with examples):
//   type (a name or a list: ["string", "null"] is nullable), enum, const, anyOf, oneOf (as anyOf:
//   exclusivity is not enforced), allOf with one schema, $ref to "#", "#/$defs/..." and
//   "#/definitions/..." (recursion allowed), nullable: true (OpenAPI);
//   object: properties (in the order given), required, additionalProperties (false, true, a
//   schema; absent = false, as OpenAI's strict mode and XGrammar read it), minProperties 0;
//   array: items, minItems, maxItems;
//   string: minLength, maxLength, pattern (regex.h's subset; unanchored patterns may have text
//   around the match, as JSON Schema says), format date, time, date-time, uuid;
//   integer: minimum / maximum / exclusiveMinimum / exclusiveMaximum (integers);
//   number; boolean; null; {} and true (any JSON value).
// Annotations are ignored: title, description, $schema, $id, $comment, default, examples,
// deprecated, readOnly, writeOnly, strict. Every other keyword is refused: the error names the
// keyword and where it is ("json schema /properties/age: keyword \"multipleOf\" is not
// supported"), never silently dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace syv::grammar {

// GBNF text whose start rule "root" matches the JSON texts conforming to `schema`.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// GBNF text of any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace syv::grammar
