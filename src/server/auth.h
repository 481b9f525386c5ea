// API-key authentication, deny by default.
//
// Every route needs a valid key unless it is listed as public. A key is read from
// `Authorization: Bearer <key>` or `X-Api-Key: <key>`. Comparison is constant-time in the key's
// content (it still leaks nothing but whether lengths match: every configured key is compared in
// full, whatever the presented key). Keys are never logged whole: use mask_key().
//
// Thread safety: an ApiKeys is filled before the server starts and only read afterwards;
// const methods may be called from any number of threads.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace syv::server {

class ApiKeys {
 public:
  // Adds one key. Refuses empty keys and keys with whitespace or control characters.
  Status add(std::string_view key);
  // Reads one key a line from `path`; blank lines and lines starting with '#' are skipped.
  // Errors name the file and the line.
  Status add_file(const std::string& path);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  const std::vector<std::string>& keys() const { return keys_; }

  // True when `presented` equals one of the keys. Every key is compared in full in constant time.
  bool matches(std::string_view presented) const;
  // The index of the key `presented` equals (in the order added: the order `serve` prints them,
  // masked, at start-up), or -1. Every key is compared in full in constant time.
  int find(std::string_view presented) const;

  // Marks `route` (an exact path such as "/health") as reachable without a key.
  Status add_public_route(std::string_view route);
  // Parses a comma-separated list: "/health,/metrics". Empty entries are refused.
  Status add_public_routes(std::string_view comma_separated);
  bool is_public(std::string_view path) const;
  const std::set<std::string, std::less<>>& public_routes() const { return public_routes_; }

 private:
  std::vector<std::string> keys_;
  std::set<std::string, std::less<>> public_routes_;
};

// Extracts the key from the header values (either may be empty). Returns "" when neither holds one.
// "Bearer" is matched case-insensitively; surrounding spaces are trimmed.
std::string extract_api_key(std::string_view authorization, std::string_view x_api_key);

// Constant-time equality of two byte strings (time depends only on the lengths).
bool constant_time_equal(std::string_view a, std::string_view b);

// "sk-syv-abcd…wxyz" style: the first 4 and last 4 characters of keys longer than 12, else "****".
std::string mask_key(std::string_view key);

// A fresh random key "sk-syv-" + 40 hex digits from the OS random source (/dev/urandom).
Result<std::string> generate_api_key();

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

}  // namespace syv::server
