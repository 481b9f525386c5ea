// Turns Qwen's tool-call blocks in the answer text into OpenAI tool calls:
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// becomes {id: "call_...", type: "function", function: {name, arguments: "<JSON string>"}}.
// Incremental like ReasoningParser: chunks may split tags anywhere; a block is emitted whole once
// its closing tag arrives. A block whose body is not {"name": string, "arguments": object|string}
// is passed through as plain content, as is an unclosed block at finish(). Whitespace-only text
// next to tool calls is dropped (OpenAI returns content null for a pure tool-call answer).
//
// Not thread-safe: one parser per sample.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace syv::server {

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits
  std::string name;       // function name
  std::string arguments;  // JSON text of the arguments object
};

class ToolCallParser {
 public:
  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
  };

  Delta feed(std::string_view text);
  Delta finish();
  int num_calls() const { return num_calls_; }

 private:
  void emit_content(std::string_view text, Delta& out);

  bool inside_ = false;
  int num_calls_ = 0;
  std::string pending_;     // partial tag (outside) or the block body so far (inside)
  std::string whitespace_;  // whitespace-only content held until we know what follows
};

// Parses one block body; false when it is not a valid call.
bool parse_tool_call_body(std::string_view body, ToolCall& out);

}  // namespace syv::server
