// Jinja parser: tokens -> Template (statements and expressions with jinja2's precedence:
// cond-expr < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < postfix
// (.attr, [i], [a:b:c], call) < filters and tests). Nesting depth is bounded so hostile input
// cannot overflow the stack.
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"

namespace syv::jinja {

// Throws Error with the position of the offending token.
Template parse_template(const std::string& source);

}  // namespace syv::jinja
