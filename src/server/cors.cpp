#include "server/cors.h"

#include <algorithm>
#include <cctype>

namespace syv::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// scheme://host[:port] with no path, query or spaces.
bool is_origin(std::string_view s) {
  const size_t sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0 || sep + 3 >= s.size()) return false;
  for (char c : s.substr(0, sep))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      return false;
  for (char c : s.substr(sep + 3))
    if (c == '/' || c == '?' || c == '#' || static_cast<unsigned char>(c) <= ' ') return false;
  return true;
}

// A comma-separated list of header names (RFC 9110 tokens), short enough to echo.
bool is_header_list(std::string_view s) {
  if (s.empty() || s.size() > 2048) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != ',' &&
        c != ' ' && c != '.')
      return false;
  }
  return true;
}

}  // namespace

Result<CorsPolicy> CorsPolicy::parse(std::string_view comma_separated) {
  CorsPolicy policy;
  if (trim(comma_separated).empty()) return policy;
  size_t start = 0;
  while (start <= comma_separated.size()) {
    size_t end = comma_separated.find(',', start);
    if (end == std::string_view::npos) end = comma_separated.size();
    const std::string_view entry = trim(comma_separated.substr(start, end - start));
    if (entry == "*") {
      policy.any_ = true;
    } else if (is_origin(entry)) {
      policy.origins_.push_back(lower(entry));
    } else {
      return Status::Error("--allowed-origins: \"" + std::string(entry) +
                           "\" is not an origin (expected scheme://host[:port] with no path, "
                           "or *)");
    }
    start = end + 1;
  }
  return policy;
}

bool CorsPolicy::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  if (any_) return true;
  const std::string o = lower(origin);
  return std::find(origins_.begin(), origins_.end(), o) != origins_.end();
}

HeaderList CorsPolicy::response_headers(std::string_view origin) const {
  if (!allows(origin)) return {};
  return {{"Access-Control-Allow-Origin", std::string(origin)}, {"Vary", "Origin"}};
}

HeaderList CorsPolicy::preflight_headers(std::string_view origin,
                                         std::string_view requested_headers) const {
  HeaderList h = response_headers(origin);
  if (h.empty()) return h;
  const std::string_view asked = trim(requested_headers);
  h.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  h.emplace_back("Access-Control-Allow-Headers",
                 is_header_list(asked) ? std::string(asked)
                                       : std::string("Authorization, Content-Type, X-Api-Key"));
  h.emplace_back("Access-Control-Max-Age", std::to_string(kMaxAgeSeconds));
  return h;
}

}  // namespace syv::server
