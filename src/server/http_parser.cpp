#include "server/http_parser.h"

#include "server/http_beast.h"

namespace syv::server {

namespace http = boost::beast::http;

void configure_parser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

HttpRequest request_head(const RequestParser& parser) {
  const auto& msg = parser.get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = percent_decode_path(std::string_view(req.target).substr(0, req.target.find('?')));
  for (const auto& field : msg) {
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return req;
}

std::string_view unparsed_request_line(const RequestParser& parser, std::string_view unparsed) {
  return parser.get().target().empty() && parser.get().method_string().empty() ? unparsed
                                                                               : std::string_view();
}

ApiError refusal_for_parse_error(const boost::system::error_code& ec, std::string_view request_line,
                                 const HttpLimits& limits) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    // The request line is "METHOD SP target SP HTTP/1.1": a line longer than the URI limit plus
    // room for the rest is a target over the limit.
    const size_t line = std::min(request_line.find("\r\n"), request_line.size());
    if (line > limits.max_uri_bytes + 32) {
      return ApiError{414,
                      "request target is longer than the limit of " +
                          std::to_string(limits.max_uri_bytes) + " bytes",
                      "invalid_request_error", "", "uri_too_long"};
    }
    return ApiError{431,
                    "request line and headers exceed the limit of " +
                        std::to_string(limits.max_header_bytes) + " bytes",
                    "invalid_request_error", "", "request_header_fields_too_large"};
  }
  if (ec == http::error::body_limit) return body_too_large(limits.max_body_bytes);
  if (ec == http::error::bad_content_length) {
    return malformed_request("malformed framing: Content-Length must be one non-negative number");
  }
  if (ec == http::error::bad_transfer_encoding) {
    return malformed_request(
        "malformed framing: Transfer-Encoding with Content-Length, or chunked twice");
  }
  return malformed_request("malformed HTTP request: " + ec.message());
}

FramingResult parse_request(std::string_view bytes, const HttpLimits& limits) {
  FramingResult out;
  RequestParser parser;
  configure_parser(parser, limits);
  parser.eager(false);
  boost::system::error_code ec;
  size_t used = 0;
  HttpRequest head;  // as checked when the head completed
  auto refused = [&](ApiError error) {
    out.kind = FramingResult::Kind::kRefused;
    out.refusal = std::move(error);
    return out;
  };
  while (!parser.is_done()) {
    if (used >= bytes.size()) return out;  // kNeedMore
    const bool in_head = !parser.is_header_done();
    const size_t n =
        parser.put(boost::asio::const_buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) {
      if (n == 0 || used >= bytes.size()) return out;  // kNeedMore
      ec = {};
      continue;
    }
    if (ec) {
      return refused(
          refusal_for_parse_error(ec, unparsed_request_line(parser, bytes.substr(used)), limits));
    }
    if (in_head && parser.is_header_done()) {
      head = request_head(parser);
      if (std::optional<ApiError> refusal = check_request_head(head, limits)) {
        return refused(std::move(*refusal));
      }
      parser.eager(true);
    }
  }
  out.kind = FramingResult::Kind::kComplete;
  // The head as it was checked, as the server keeps it (http_server.cpp on_head): Beast merges the
  // trailer fields of a chunked body into the message, and a trailer may not change the framing,
  // the encoding or anything else the head decided. Trailers are discarded (RFC 9112 §7.1.2).
  out.request = std::move(head);
  out.request.body = parser.get().body();
  out.consumed = used;
  return out;
}

}  // namespace syv::server
