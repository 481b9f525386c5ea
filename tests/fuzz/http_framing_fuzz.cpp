// Fuzzes the transport's framing of a request (server/http_parser.h): bytes as they arrive on a
// connection, through Beast's parser with the server's limits and check_request_head, with small
// limits so that every refusal is reachable; then, for a complete request, the path decoding and
// the inflation of a gzip / deflate body within the limit. Every outcome must be a refusal the
// server can send (an ApiError with a 4xx status that serializes), a need for more bytes, or a
// request inside the limits; never a crash, a sanitizer report, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http_framing.h"
#include "server/http_parser.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  syv::server::HttpLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_header_bytes = 2048;
  limits.max_header_count = 16;
  limits.max_uri_bytes = 512;
  limits.accept_compressed = (size & 1) != 0;
  using Kind = syv::server::FramingResult::Kind;
  const syv::server::FramingResult r = syv::server::parse_request(bytes, limits);
  switch (r.kind) {
    case Kind::kNeedMore:
      break;
    case Kind::kRefused:
      check(r.refusal.has_value());
      check(r.refusal->status >= 400 && r.refusal->status < 500);
      check(!r.refusal->body().empty());
      break;
    case Kind::kComplete: {
      const syv::server::HttpRequest& req = r.request;
      check(r.consumed <= size);
      check(req.body.size() <= limits.max_body_bytes);
      check(req.target.size() <= limits.max_uri_bytes);
      check(req.headers.size() <= limits.max_header_count);
      check(!check_request_head(req, limits).has_value());
      const std::string encoding = req.get_header_value("Content-Encoding");
      if (!encoding.empty()) {
        auto inflated = syv::server::inflate_body(encoding, req.body, limits.max_body_bytes);
        check(inflated.ok() ? inflated.value().size() <= limits.max_body_bytes
                            : inflated.error().status == 400 || inflated.error().status == 413);
      }
      break;
    }
  }
  return 0;
}
