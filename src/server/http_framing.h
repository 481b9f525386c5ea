// The transport's decisions that need no socket, shared by the server (http_server.cpp) and the
// framing fuzzer (tests/fuzz/http_framing_fuzz.cpp): the checks on a request's line and headers
// before its body is read, the inflation of an accepted compressed body within the body limit, and
// the writing of a response head.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/http_message.h"

namespace syv::server {

// Limits on what one request may make the server read and hold (docs/server.md "Limits").
struct HttpLimits {
  size_t max_body_bytes = 8u << 20;  // larger bodies (declared, chunked or inflated) get 413
  // The request line, and the header fields together, each at most this (Beast's parser limits
  // them one after the other): more gets 431 (414 for a request line over max_uri_bytes).
  size_t max_header_bytes = 16u << 10;
  size_t max_header_count = 100;    // more header fields get 431
  size_t max_uri_bytes = 8u << 10;  // a longer request target gets 414
  // gzip / deflate request bodies: inflated after auth, as a stream, within max_body_bytes.
  // Off: any Content-Encoding but identity gets 415.
  bool accept_compressed = false;
};

// The refusal a request earns from its line and headers alone (after the HTTP parser accepted
// them), or nullopt: 414 target too long, 431 too many headers, 400 duplicate or listed
// Content-Length or an unsupported Transfer-Encoding, 411 a POST/PUT/PATCH that declares no length,
// 415 a Content-Encoding that is not accepted.
std::optional<ApiError> check_request_head(const HttpRequest& head, const HttpLimits& limits);

// gzip (any number of members, as gunzip reads them) or deflate (zlib or raw), for a
// Content-Encoding that check_request_head accepted. Inflates in pieces and stops as soon as the
// output passes `limit` (413); a corrupt or truncated stream is a 400.
ApiResult<std::string> inflate_body(std::string_view encoding, std::string_view data, size_t limit);

// Percent-decodes a path (%2F -> '/'); a malformed escape stays as it is.
std::string percent_decode_path(std::string_view path);

// The query of a request target ("/p?a=1&b=x%20y" -> {a: "1", b: "x y"}), in order: each
// "name=value" (or bare "name", value "") split on '&', '+' read as a space, then
// percent-decoded as paths are. Empty pieces ("a=1&&b") are skipped. A name given twice is
// returned twice (the caller decides).
std::vector<std::pair<std::string, std::string>> query_params(std::string_view target);

// "HTTP/1.1 <status> <reason>" + headers + Content-Type + (Content-Length: n | Transfer-Encoding:
// chunked when body_length < 0) + Connection + the blank line.
std::string response_head(const HttpResponse& res, long long body_length, bool keep_alive);

// The first line of a request as a log can show it: printable ASCII only, at most `max` bytes.
std::string printable(std::string_view text, size_t max = 200);

// Too-large and framing errors the transport itself answers.
ApiError body_too_large(size_t limit);
ApiError malformed_request(std::string message);

}  // namespace syv::server
