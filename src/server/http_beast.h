// The Boost.Beast side of request framing (internal to the transport: http_server.cpp and
// http_parser.cpp include it; nothing else should pay for Beast's headers).
#pragma once

#include <boost/beast/http.hpp>
#include <string_view>

#include "server/api_error.h"
#include "server/http_framing.h"
#include "server/http_message.h"

namespace syv::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Header and body limits from `limits` (the body limit applies to declared and chunked bodies
// while they are read: a Content-Length over it fails at the header).
void configure_parser(RequestParser& parser, const HttpLimits& limits);

// Method, target, decoded path and header fields of a parsed head.
HttpRequest request_head(const RequestParser& parser);

// Beast's parser consumes the request line before the header fields, and applies the header
// limit to each: the request line still unparsed in `unparsed` (what the parser has not consumed),
// or "" once the parser has it.
std::string_view unparsed_request_line(const RequestParser& parser, std::string_view unparsed);

// The answer to a parse failure: 431 (or 414 when `request_line`, the unparsed request line,
// passes the URI limit) for a head over the header limit, 413 for a body over the body limit,
// 400 for the rest.
ApiError refusal_for_parse_error(const boost::system::error_code& ec, std::string_view request_line,
                                 const HttpLimits& limits);

}  // namespace syv::server
