// Nesting limits for JSON that comes from outside the process (request bodies, tool-call
// `arguments` strings, model output parsed as tool calls).
//
// nlohmann's parser is iterative, but copying, dumping and converting a parsed value (to a Jinja
// value for the chat template) recurse once per level: a 50 KB body of `[[[[...` is 25 000 frames
// deep and overflows the stack. So every such text is measured first, by an iterative SAX pass
// that stops at the first value deeper than the limit, and refused before any recursive code sees
// it.
//
// A body's size does not bound what its parse costs either: each JSON value becomes a node of the
// parse tree, and the chat route converts the messages, tools and template kwargs again (ordered
// JSON, then Jinja values of 128 bytes each), ~230-480 bytes per value in all. A 3 MB body of a
// million `{}` took ~480 MB. So the same pass counts values and stops at a limit
// (--max-json-values), which bounds a request's parse to ~0.5 KB x the limit.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace syv::server {

// Containers (objects and arrays) nested inside one another, the outermost one counted: `{}` is 1,
// `{"a": [1]}` is 2. Far beyond any real request (a tool's JSON schema is rarely 20 deep), far
// below what recursion on an HTTP worker's stack survives (thousands).
constexpr int kMaxJsonDepth = 64;

// JSON values (scalars and containers; object keys are not counted: `{"a": 1}` is 2) in one
// request, the default of --max-json-values. 2^18 admits a prompt of 262,000 token ids (one value
// each) and bounds the parse of a hostile body to ~130 MB (docs/server.md "Limits").
constexpr size_t kDefaultMaxJsonValues = size_t{1} << 18;

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  size_t max_values = kDefaultMaxJsonValues;
};

// Where a text first passes a limit.
struct JsonExcess {
  bool values = false;  // false: nested deeper than max_depth; true: more than max_values values
  std::string field;    // the first components of the path, ending at a key, e.g.
                        // "tools[0].function.parameters"; "" when no key leads there
  std::string path;     // a longer prefix of the path, for the message ("...": cut)
};

// Scans `text` without recursion and without building anything. Returns where it nests deeper
// than `limits.max_depth` or holds more than `limits.max_values` values, or nullopt when it does
// neither (including when it is not valid JSON: the real parse reports that). `values`, when not
// null, receives the values counted (all of them when nullopt is returned).
std::optional<JsonExcess> find_json_excess(std::string_view text, const JsonLimits& limits,
                                           size_t* values = nullptr);

// The nesting limit alone (any number of values).
std::optional<JsonExcess> find_json_depth_excess(std::string_view text,
                                                 int max_depth = kMaxJsonDepth);

}  // namespace syv::server
