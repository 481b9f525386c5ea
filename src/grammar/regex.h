// A regular expression (the subset clients send for guided_regex / a JSON Schema "pattern") as a
// GBNF expression (grammar.h). The whole output must match: `^` at the start and `$` at the end
// are accepted and change nothing.
//
// Supported: literals and escaped punctuation; . (any character but \n); classes [a-z], [^...],
// with \d \w \s \D \W \S inside or outside them; \n \r \t \f \v \0 \xHH \uHHHH \u{H...};
// groups ( ), (?: ), (?P<name> ), (?<name> ); alternation |; quantifiers * + ? {m} {m,} {m,n}
// (a lazy `?` after one changes nothing for a whole match). Refused with the reason:
// backreferences, lookaround, \b \B, anchors elsewhere than the ends, possessive quantifiers,
// inline flags.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace syv::grammar {

// GBNF text whose start rule "root" matches exactly the strings `pattern` matches.
Result<std::string> regex_to_gbnf(std::string_view pattern);

// The expression alone. With `in_json_string`, it matches the JSON-string encoding of those
// strings (what goes between the quotes): `"` and `\` and control characters appear escaped
// (\" \\ \n \t \r \b \f \u00XX), everything else as itself.
Result<std::string> regex_to_gbnf_expr(std::string_view pattern, bool in_json_string);

}  // namespace syv::grammar
