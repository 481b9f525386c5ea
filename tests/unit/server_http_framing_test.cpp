// The transport's framing without sockets (server/http_parser.h, server/http_framing.h): what a
// request's bytes earn from Beast's parser with the server's limits and check_request_head, the
// inflation of accepted bodies within the limit, path decoding and response heads.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "server/http_framing.h"
#include "server/http_parser.h"

namespace syv::server {
namespace {

using Kind = FramingResult::Kind;

HttpLimits small_limits() {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  limits.max_header_bytes = 1024;
  limits.max_header_count = 8;
  limits.max_uri_bytes = 200;
  return limits;
}

int refusal_status(const std::string& bytes, const HttpLimits& limits = small_limits()) {
  const FramingResult r = parse_request(bytes, limits);
  return r.kind == Kind::kRefused ? r.refusal->status : 0;
}

TEST(HttpFraming, CompleteRequests) {
  const FramingResult r = parse_request(
      "POST /v1/models/org%2Fname?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET",
      small_limits());
  ASSERT_EQ(r.kind, Kind::kComplete);
  EXPECT_EQ(r.request.method, "POST");
  EXPECT_EQ(r.request.target, "/v1/models/org%2Fname?x=1");
  EXPECT_EQ(r.request.path, "/v1/models/org/name");
  EXPECT_EQ(r.request.body, "hello");
  EXPECT_EQ(r.request.get_header_value("content-length"), "5");
  EXPECT_EQ(r.consumed, r.request.target.size() + 51);  // the pipelined "GET" is left
  const FramingResult chunked = parse_request(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n",
      small_limits());
  ASSERT_EQ(chunked.kind, Kind::kComplete);
  EXPECT_EQ(chunked.request.body, "helloabc");
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel", small_limits()).kind,
            Kind::kNeedMore);
  EXPECT_EQ(parse_request("GET / HTTP/1.1\r\nHost:", small_limits()).kind, Kind::kNeedMore);
}

TEST(HttpFraming, ChunkedTrailersCannotChangeTheCheckedHead) {
  // Beast merges trailer fields into the message; the request keeps the head as it was checked,
  // so a trailer cannot add a Content-Encoding after the head passed (the framing fuzzer found
  // this). Beast itself refuses framing fields (Content-Length) in a trailer.
  const FramingResult r = parse_request(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
      "Content-Encoding: deflate\r\nX-Checksum: 27\r\n\r\n",
      small_limits());
  ASSERT_EQ(r.kind, Kind::kComplete);
  EXPECT_EQ(r.request.body, "hello");
  EXPECT_EQ(r.request.headers.size(), 1u);
  EXPECT_FALSE(r.request.has_header("Content-Encoding"));
  EXPECT_FALSE(r.request.has_header("X-Checksum"));
  EXPECT_FALSE(check_request_head(r.request, small_limits()).has_value());
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
                           "0\r\nContent-Length: 27\r\n\r\n"),
            400);
}

TEST(HttpFraming, MalformedFramingIsRefused) {
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 1e30\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: "
                           "chunked\r\n\r\n"),
            400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nHost: a\r\n\r\n"), 411);
  EXPECT_EQ(refusal_status("GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
}

TEST(HttpFraming, LimitsAreRefusedWithTheirStatus) {
  // Body: declared over the limit at the head, chunked as soon as it passes.
  EXPECT_EQ(refusal_status("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n"), 413);
  std::string chunks = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 30; ++i) chunks += "40\r\n" + std::string(64, 'a') + "\r\n";
  EXPECT_EQ(refusal_status(chunks), 413);
  // Headers: count, bytes; the URI: inside and past the head limit.
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(refusal_status(many + "\r\n"), 431);
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nX: " + std::string(2000, 'y') + "\r\n\r\n"), 431);
  EXPECT_EQ(refusal_status("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  EXPECT_EQ(refusal_status("GET /" + std::string(3000, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  // An endless head with no line end is refused once it passes the limit, not held.
  EXPECT_EQ(refusal_status("GET / HTTP/1.1\r\nX: " + std::string(5000, 'y')), 431);
}

TEST(HttpFraming, ContentEncoding) {
  HttpLimits limits = small_limits();
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 0\r\nContent-Encoding: ";
  EXPECT_EQ(refusal_status(head + "gzip\r\n\r\n", limits), 415);
  EXPECT_EQ(parse_request(head + "identity\r\n\r\n", limits).kind, Kind::kComplete);
  limits.accept_compressed = true;
  EXPECT_EQ(parse_request(head + "gzip\r\n\r\n", limits).kind, Kind::kComplete);
  EXPECT_EQ(parse_request(head + "deflate\r\n\r\n", limits).kind, Kind::kComplete);
  EXPECT_EQ(refusal_status(head + "br\r\n\r\n", limits), 415);
  EXPECT_EQ(refusal_status(head + "gzip, gzip\r\n\r\n", limits), 415);
}

std::string compress(const std::string& data, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(HttpFraming, InflateWithinTheLimit) {
  const std::string text = "{\"prompt\": \"hello\"}";
  auto gz = inflate_body("gzip", compress(text, 15 + 16), 1000);
  ASSERT_TRUE(gz.ok()) << gz.error().message;
  EXPECT_EQ(gz.value(), text);
  // Two gzip members read as one body, as gunzip does.
  auto two = inflate_body("gzip", compress("ab", 15 + 16) + compress("cd", 15 + 16), 1000);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two.value(), "abcd");
  auto zlib_wrapped = inflate_body("deflate", compress(text, 15), 1000);
  ASSERT_TRUE(zlib_wrapped.ok());
  EXPECT_EQ(zlib_wrapped.value(), text);
  auto raw = inflate_body("deflate", compress(text, -15), 1000);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.value(), text);
  // A bomb stops at the limit: 8 MiB of zeros (about 8 KB compressed) against 100 KB.
  auto bomb = inflate_body("gzip", compress(std::string(8u << 20, 0), 15 + 16), 100000);
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(bomb.error().status, 413);
  EXPECT_EQ(inflate_body("gzip", "not gzip", 1000).error().status, 400);
  const std::string full = compress(text, 15 + 16);
  EXPECT_EQ(inflate_body("gzip", full.substr(0, full.size() - 4), 1000).error().status, 400);
  EXPECT_EQ(inflate_body("gzip", full + "trailing", 1000).error().status, 400);
}

TEST(HttpFraming, ResponseHeads) {
  HttpResponse res;
  res.status = 429;
  res.set_content("{}", "application/json");
  res.set_header("Retry-After", "1");
  res.set_header("Content-Length", "99");  // the transport's to say: dropped
  EXPECT_EQ(response_head(res, 2, false),
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Type: "
            "application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
  res.status = 200;
  EXPECT_NE(response_head(res, -1, true)
                .find("Transfer-Encoding: chunked\r\nConnection: "
                      "keep-alive\r\n"),
            std::string::npos);
  EXPECT_EQ(percent_decode_path("/a%2fb%zz%4"), "/a/b%zz%4");
  EXPECT_EQ(printable(std::string("a\nb\x01", 4), 10), "a?b?");
}

TEST(HttpFraming, QueryParams) {
  using Params = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(query_params("/v1/x"), Params{});
  EXPECT_EQ(query_params("/v1/x?"), Params{});
  EXPECT_EQ(query_params("/v1/x?limit=2&order=desc&after=msg_1"),
            (Params{{"limit", "2"}, {"order", "desc"}, {"after", "msg_1"}}));
  EXPECT_EQ(query_params("/p?a=x+y%2By&&flag&a=%zz&c=%3D="),
            (Params{{"a", "x y+y"}, {"flag", ""}, {"a", "%zz"}, {"c", "=="}}));
  EXPECT_EQ(query_params("/p?include%5B%5D=x"), (Params{{"include[]", "x"}}));
}

}  // namespace
}  // namespace syv::server
