// Fuzzes the Jinja parser and renderer: any template text, rendered with a fixed small chat
// context, must parse-or-fail and render-or-fail with an error; never crash, hang or overflow.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi <tool_response>x</tool_response> é 東京"},
      {"role": "assistant", "content": "<think>\nr\n</think>\n\nok", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "id": "abcdefghi",
                       "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, null, true], "c": {"d": "e"}}}}]},
      {"role": "tool", "content": "{\"t\": 21.5}", "tool_call_id": "abcdefghi"},
      {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "documents": null, "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>",
    "d": {"b": 1, "a": {"x": [1, 2]}, "s": "str", "n": null, "f": 0.5, "t": true, "e": [], "o": {}},
    "s": "Hello, World", "u": "héllo wörld 東京 🚀", "n": 7, "f": 2.5, "l": [3, 1, 2],
    "words": ["b", "A", "c", "a"], "empty": [], "t": true, "none": null
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string source(reinterpret_cast<const char*>(data), size);
  auto tmpl = syv::ChatTemplate::parse(source);
  if (!tmpl.ok()) {
    if (tmpl.message().rfind("chat template", 0) != 0) __builtin_trap();  // errors must say where
    return 0;
  }
  auto out = tmpl->render_context(context(), /*max_steps=*/20000);
  if (!out.ok() && out.message().rfind("chat template", 0) != 0) __builtin_trap();
  return 0;
}
