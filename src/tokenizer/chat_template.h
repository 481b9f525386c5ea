// Chat templates: renders a Hugging Face chat template (Jinja2 source, as found in
// tokenizer_config.json "chat_template" or chat_template.jinja) into a prompt string, byte-exactly
// like transformers' apply_chat_template (jinja2 with trim_blocks=True, lstrip_blocks=True, the
// tojson/raise_exception/strftime_now helpers transformers installs).
//
// The interpreter lives in src/tokenizer/jinja/ (lexer -> parser -> AST -> renderer). Rendering is
// bounded (output size, steps, recursion depth), so a hostile template returns an error instead of
// hanging or exhausting the stack.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace syv {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parses a template. Errors read "chat template line L, column C: <what>" (1-based).
  static Result<ChatTemplate> parse(const std::string& source);

  // Renders the template. The context holds, as transformers passes them: `messages`,
  // `tools` (only when `tools` is not null), `add_generation_prompt`, `bos_token`, `eos_token`,
  // and every key of `extra_kwargs` (an object, e.g. {"enable_thinking": false}; null = none).
  // Errors (raise_exception, type errors, limits) read "chat template line L, column C: <what>".
  // Safe to call concurrently on one ChatTemplate.
  Result<std::string> render(const nlohmann::json& messages, const nlohmann::json& tools,
                             bool add_generation_prompt, const nlohmann::json& extra_kwargs,
                             const std::string& bos_token, const std::string& eos_token) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace syv
