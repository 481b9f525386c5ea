// HTTP/1.1 request framing as the server reads it: Boost.Beast's parser with the server's limits
// (header bytes, body bytes) followed by check_request_head (http_framing.h). The server drives the
// same parser asynchronously (http_server.cpp, through http_beast.h); parse_request runs it over a
// buffer in one call, for the framing fuzzer and the framing unit tests.
#pragma once

#include <optional>
#include <string_view>

#include "server/api_error.h"
#include "server/http_framing.h"
#include "server/http_message.h"

namespace syv::server {

struct FramingResult {
  enum class Kind { kNeedMore, kRefused, kComplete };
  Kind kind = Kind::kNeedMore;
  std::optional<ApiError> refusal;  // kRefused: the answer the server sends before closing
  HttpRequest request;              // kComplete: the request (body as sent, not inflated)
  size_t consumed = 0;              // kComplete: bytes of `bytes` the request took
};

// One request from the start of `bytes`.
FramingResult parse_request(std::string_view bytes, const HttpLimits& limits);

}  // namespace syv::server
