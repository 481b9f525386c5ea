// Jinja lexer with jinja2's whitespace control, as transformers configures it:
// trim_blocks=True (drop the first newline after a block or comment tag), lstrip_blocks=True (drop
// spaces/tabs before a block or comment tag that starts a line), `-` on a tag side strips all
// whitespace on that side, `+` disables lstrip/trim for that tag; newlines are normalised to \n and
// one trailing newline of the source is dropped (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace syv::jinja {

enum class Tok {
  kData,        // literal template text (already whitespace-controlled)
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,  // value: unescaped text
  kInt,
  kFloat,
  kOp,  // text: the operator, e.g. "(", "==", "|"
  kEnd,
};

struct Token {
  Tok type = Tok::kEnd;
  std::string text;
  int64_t ival = 0;
  double fval = 0.0;
  Pos pos;
};

// Throws Error (with position) on malformed input: unterminated tags, strings or comments,
// unexpected characters.
std::vector<Token> lex(const std::string& source);

}  // namespace syv::jinja
