// Chat templates: renders a Hugging Face chat template (Jinja2 source, as found in
// tokenizer_config.json "chat_template" or chat_template.jinja) into a prompt string, byte-exactly
// like transformers' apply_chat_template (jinja2 with trim_blocks=True, lstrip_blocks=True, the
// tojson/raise_exception/strftime_now helpers transformers installs).
//
// The interpreter lives in src/tokenizer/jinja/ (lexer -> parser -> AST -> renderer). Rendering is
// bounded (output size, steps, nesting), so a hostile template returns an error instead of
// hanging or exhausting the stack. docs/chat-templates.md lists what is supported.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace syv {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parses a template. Errors read "chat template line L, column C: <what>" (1-based; the
  // column counts code points).
  static Result<ChatTemplate> parse(const std::string& source);

  // Renders the template with the variables transformers passes: `messages`, `tools` (None when
  // `tools` is null), `documents` (None), `add_generation_prompt`, `bos_token`, `eos_token`, and
  // every key of `extra_kwargs` (an object such as {"enable_thinking": false}, or null; it may
  // override bos_token/eos_token but not messages/tools/add_generation_prompt).
  // Errors (raise_exception, type errors, limits) read "chat template line L, column C: <what>".
  // Safe to call concurrently on one ChatTemplate.
  //
  // Key order matters (tojson prints dicts in insertion order, like Python): pass ordered_json
  // parsed from the request. The nlohmann::json overload sorts object keys alphabetically.
  Result<std::string> render(const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra_kwargs,
                             const std::string& bos_token, const std::string& eos_token) const;
  Result<std::string> render(const nlohmann::json& messages, const nlohmann::json& tools,
                             bool add_generation_prompt, const nlohmann::json& extra_kwargs,
                             const std::string& bos_token, const std::string& eos_token) const;

  // Renders with exactly `context` (an object) as the variables. max_steps = 0 keeps the default
  // step limit (5M); tests and fuzzers pass smaller ones.
  Result<std::string> render_context(const nlohmann::ordered_json& context,
                                     uint64_t max_steps = 0) const;

  // Fixes the clock strftime_now() reads (Llama 3.x templates print "Today Date: ..." from it
  // unless the caller passes `date_string`) to `local_time`, for every later render. Unset (the
  // default, what the server uses): the local time at each render. Golden tests fix it to the
  // moment their transformers renders were made, so they pass on any day. Call before sharing the
  // template between threads.
  void fix_clock(const std::tm& local_time) { fixed_local_time_ = local_time; }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
  std::optional<std::tm> fixed_local_time_;
};

}  // namespace syv
