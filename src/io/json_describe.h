// A short description of a JSON value for "expected ..., found ..." messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace syv {

// Turns a JSON string's text into what the message shows (each caller keeps its own quoting and
// escaping, which its tests and users already read).
using ShowJsonString = std::string (*)(const std::string& text);

// "null", "true"/"false", the number, show_string(text) for a string, "an array of N",
// "an object". Never throws.
std::string describe_json_value(const nlohmann::json& value, ShowJsonString show_string);

}  // namespace syv
