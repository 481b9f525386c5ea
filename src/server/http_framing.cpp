#include "server/http_framing.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace syv::server {

namespace {

std::string lower_trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  std::string out(b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1));
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_compressed_encoding_accepted(const std::string& encoding) {
  return encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate";
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

ApiError body_too_large(size_t limit) {
  return ApiError{
      413,
      "request body exceeds the limit of " + std::to_string(limit) + " bytes (--max-body-bytes)",
      "invalid_request_error", "", "request_too_large"};
}

ApiError malformed_request(std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", "", "malformed_request"};
}

std::string printable(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > max) out += "...";
  return out;
}

std::optional<ApiError> check_request_head(const HttpRequest& head, const HttpLimits& limits) {
  if (head.target.size() > limits.max_uri_bytes) {
    return ApiError{414,
                    "request target is " + std::to_string(head.target.size()) +
                        " bytes; the limit is " + std::to_string(limits.max_uri_bytes),
                    "invalid_request_error", "", "uri_too_long"};
  }
  if (head.headers.size() > limits.max_header_count) {
    return ApiError{431,
                    "too many request headers (" + std::to_string(head.headers.size()) +
                        "; the limit is " + std::to_string(limits.max_header_count) + ")",
                    "invalid_request_error", "", "request_header_fields_too_large"};
  }
  // One length, stated once: two Content-Length fields (even equal), or a list, are how request
  // smuggling starts between proxies that pick different ones.
  const size_t lengths = head.header_count("Content-Length");
  if (lengths > 1 || head.get_header_value("Content-Length").find(',') != std::string::npos) {
    return malformed_request("malformed framing: Content-Length must appear once, as one number");
  }
  const bool chunked = head.has_header("Transfer-Encoding");
  if (chunked) {
    const std::string te = lower_trimmed(head.get_header_value("Transfer-Encoding"));
    if (head.header_count("Transfer-Encoding") > 1 || te != "chunked") {
      return malformed_request("malformed framing: Transfer-Encoding \"" +
                               printable(head.get_header_value("Transfer-Encoding"), 40) +
                               "\" is not supported (only chunked)");
    }
  }
  if ((head.method == "POST" || head.method == "PUT" || head.method == "PATCH") && lengths == 0 &&
      !chunked) {
    return ApiError{411,
                    "request body: a Content-Length header (or Transfer-Encoding: chunked) is "
                    "required",
                    "invalid_request_error", "", "length_required"};
  }
  if (head.has_header("Content-Encoding")) {
    const std::string encoding = lower_trimmed(head.get_header_value("Content-Encoding"));
    const bool identity = encoding.empty() || encoding == "identity";
    if (!identity && !(limits.accept_compressed && head.header_count("Content-Encoding") == 1 &&
                       is_compressed_encoding_accepted(encoding))) {
      return ApiError{415,
                      "Content-Encoding: \"" +
                          printable(head.get_header_value("Content-Encoding"), 40) +
                          "\" is not supported; send the request body uncompressed" +
                          (limits.accept_compressed ? " or as gzip / deflate" : ""),
                      "invalid_request_error", "", "unsupported_content_encoding"};
    }
  }
  return std::nullopt;
}

ApiResult<std::string> inflate_body(std::string_view encoding_raw, std::string_view data,
                                    size_t limit) {
  const std::string encoding = lower_trimmed(encoding_raw);
  const bool gzip = encoding == "gzip" || encoding == "x-gzip";
  // deflate is zlib-wrapped by the standard; some clients send it raw: try zlib first.
  const std::vector<int> attempts = gzip ? std::vector<int>{15 + 16} : std::vector<int>{15, -15};
  for (const int window_bits : attempts) {
    z_stream z{};
    if (inflateInit2(&z, window_bits) != Z_OK) return ApiError::server_error("inflate: init");
    std::string out;
    char piece[1 << 16];
    size_t offset = 0;
    int rc = Z_OK;
    bool too_large = false;
    while (true) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + offset));
      const size_t avail = std::min<size_t>(data.size() - offset, 1u << 30);
      z.avail_in = static_cast<uInt>(avail);
      z.next_out = reinterpret_cast<Bytef*>(piece);
      z.avail_out = sizeof piece;
      rc = inflate(&z, Z_NO_FLUSH);
      offset += avail - z.avail_in;
      const size_t produced = sizeof piece - z.avail_out;
      if (out.size() + produced > limit) {  // refused before the piece is kept
        too_large = true;
        break;
      }
      out.append(piece, produced);
      if (rc == Z_STREAM_END) {
        // gzip: another member may follow (gunzip inflates them all).
        if (gzip && offset < data.size()) {
          inflateReset(&z);
          continue;
        }
        break;
      }
      if (rc == Z_BUF_ERROR && z.avail_in == 0 && offset >= data.size()) break;  // truncated
      if (rc != Z_OK) break;
    }
    inflateEnd(&z);
    if (too_large) return body_too_large(limit);
    if (rc == Z_STREAM_END && offset == data.size()) return out;
    if (rc == Z_DATA_ERROR && window_bits == 15) continue;  // deflate: try raw
    return malformed_request("request body: not a valid " + std::string(gzip ? "gzip" : "deflate") +
                             " stream (Content-Encoding: " + printable(encoding, 40) + ")");
  }
  return malformed_request("request body: not a valid deflate stream");
}

std::string percent_decode_path(std::string_view path) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && hex(path[i + 1]) >= 0 && hex(path[i + 2]) >= 0) {
      out += static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
      i += 2;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> query_params(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> out;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string query(target.substr(q + 1));
  for (char& c : query) {
    if (c == '+') c = ' ';
  }
  std::string_view rest = query;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view piece = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (piece.empty()) continue;
    const size_t eq = piece.find('=');
    out.emplace_back(percent_decode_path(piece.substr(0, eq)),
                     eq == std::string_view::npos ? "" : percent_decode_path(piece.substr(eq + 1)));
  }
  return out;
}

std::string response_head(const HttpResponse& res, long long body_length, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (header_name_equals(name, "Content-Length") || header_name_equals(name, "Connection") ||
        header_name_equals(name, "Transfer-Encoding")) {
      continue;  // the transport's to say
    }
    out += name + ": " + value + "\r\n";
  }
  if (!res.content_type.empty() && !res.has_header("Content-Type")) {
    out += "Content-Type: " + res.content_type + "\r\n";
  }
  if (body_length >= 0) {
    out += "Content-Length: " + std::to_string(body_length) + "\r\n";
  } else {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  return out;
}

}  // namespace syv::server
