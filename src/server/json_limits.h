// Nesting limits for JSON that comes from outside the process (request bodies, tool-call
// `arguments` strings, model output parsed as tool calls).
//
// nlohmann's parser is iterative, but copying, dumping and converting a parsed value (to a Jinja
// value for the chat template) recurse once per level: a 50 KB body of `[[[[...` is 25 000 frames
// deep and overflows the stack. So every such text is measured first, by an iterative SAX pass
// that stops at the first value deeper than the limit, and refused before any recursive code sees
// it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace syv::server {

// Containers (objects and arrays) nested inside one another, the outermost one counted: `{}` is 1,
// `{"a": [1]}` is 2. Far beyond any real request (a tool's JSON schema is rarely 20 deep), far
// below what recursion on an HTTP worker's stack survives (thousands).
constexpr int kMaxJsonDepth = 64;

// Where a text first nests deeper than `max_depth`.
struct JsonDepthExcess {
  std::string field;  // the first components of the path, ending at a key, e.g.
                      // "tools[0].function.parameters"; "" when no key leads there
  std::string path;   // a longer prefix of the path, for the message ("...": cut)
};

// Scans `text` without recursion. Returns where it nests deeper than `max_depth`, or nullopt when
// it does not (including when it is not valid JSON: the real parse reports that).
std::optional<JsonDepthExcess> find_json_depth_excess(std::string_view text,
                                                      int max_depth = kMaxJsonDepth);

}  // namespace syv::server
