// Reading a server's answers in `syv verify`'s checks (cli/verify_checks.h): one-line
// descriptions for FAIL lines, and bodies parsed so that checks may index them freely.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/openai_client.h"

namespace syv::cli {

// "no answer (Connection)" or "HTTP 400: <the body's first 200 bytes>".
inline std::string describe(const HttpReply& r) {
  if (r.status == 0) return "no answer (" + r.error + ")";
  return "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200);
}

// The body as a JSON object ({} when it is not one).
inline nlohmann::json parse_object(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

}  // namespace syv::cli
