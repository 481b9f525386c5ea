// A choice list (vLLM's guided_choice) as GBNF: the output is exactly one of the strings.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace syv::grammar {

// "root ::= \"a\" | \"b\"". Refuses an empty list and strings that are not valid UTF-8.
Result<std::string> choice_gbnf(const std::vector<std::string>& choices);

}  // namespace syv::grammar
