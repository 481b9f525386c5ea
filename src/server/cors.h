// CORS (cross-origin resource sharing) for browser clients on other origins, off by default
// (--allowed-origins). When the request's Origin is allowed, every response carries
// Access-Control-Allow-Origin (the origin itself) and Vary: Origin, and a preflight (OPTIONS with
// Origin and Access-Control-Request-Method) is answered 204 before auth with the methods, the
// headers asked for and a max age. A request from an origin that is not allowed gets no CORS
// headers (the browser then refuses the answer to its page); its preflight is answered like any
// other OPTIONS request (401 without a key, 404 with one).
//
// Thread safety: filled before the server starts, then only read.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace syv::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class CorsPolicy {
 public:
  // "" = off; "*" = every origin; else comma-separated origins ("https://app.example.com,
  // http://localhost:3000"): scheme://host[:port], no path. Errors name the entry.
  static Result<CorsPolicy> parse(std::string_view comma_separated);

  bool enabled() const { return any_ || !origins_.empty(); }
  // Origins compare case-insensitively, as browsers serialise them in lower case.
  bool allows(std::string_view origin) const;

  // Headers for an ordinary response to a request with this Origin ("" = none: no headers).
  HeaderList response_headers(std::string_view origin) const;
  // Headers of the 204 answer to an allowed preflight; `requested_headers` is the request's
  // Access-Control-Request-Headers (echoed when it is a plain list of header names).
  HeaderList preflight_headers(std::string_view origin, std::string_view requested_headers) const;

  static constexpr int kMaxAgeSeconds = 600;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;  // lower case
};

}  // namespace syv::server
