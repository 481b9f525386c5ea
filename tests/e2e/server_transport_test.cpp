// Issue 23, the transport under hostile clients, on loopback against the in-process server
// (test_server.h): slow and idle connections cost no worker thread, deadlines for the head and the
// body, header and URI limits, framing errors answered at once, bodies limited while read
// (declared, chunked, inflated), connections capped. Every attack is followed, or accompanied, by
// an authenticated request that must be answered promptly.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/resource.h>
#include <zlib.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "e2e/http_test_util.h"
#include "e2e/test_server.h"

namespace syv::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const json kCompletion = {{"prompt", "Hello"}, {"max_tokens", 4}};

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Room for `n` more descriptors (each loopback connection costs two in this process).
void ensure_descriptors(size_t n) {
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  ASSERT_GE(files.rlim_cur, n + 256) << "the open-file limit is too low for this test";
}

// An authenticated completion on a fresh client, with the time it took.
struct Timed {
  int status = 0;
  Clock::duration took{};
};
Timed timed_completion(int port) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(5, 0);
  const auto t0 = Clock::now();
  auto res = cli.Post("/v1/completions", {{"Authorization", std::string("Bearer ") + kKey}},
                      kCompletion.dump(), "application/json");
  return Timed{res ? res->status : -1, Clock::now() - t0};
}

std::string head_with_length(const std::string& key, const std::string& length_line) {
  std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!key.empty()) head += "Authorization: Bearer " + key + "\r\n";
  return head + "Content-Type: application/json\r\n" + length_line + "\r\n";
}

std::string gzip(const std::string& data, int members = 1) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string member(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(member.data());
  z.avail_out = static_cast<uInt>(member.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  member.resize(z.total_out);
  deflateEnd(&z);
  std::string out;
  for (int i = 0; i < members; ++i) out += member;
  return out;
}

// 600 connections that sent part of a request line and then trickle a byte each 400 ms hold no
// worker (the server has 4): authenticated requests are answered in under a second throughout.
// With a 2 s head deadline every one of them is closed, however it trickles.
TEST_F(ServerHttp, SlowConnectionsHoldNoWorker) {
  ensure_descriptors(1400);
  server::HttpOptions http;
  http.threads = 4;
  http.header_timeout_s = 3;
  TestServer s({}, http);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 600; ++i) {
    slow.push_back(std::make_unique<RawConnection>(s.transport->port()));
    ASSERT_TRUE(slow.back()->connected()) << i;
    ASSERT_TRUE(slow.back()->send_raw("POST /v1/completions HTTP/1.1\r\nHost: 1"));
  }
  for (int i = 0; i < 100 && s.transport->open_connections() < 600; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GE(s.transport->open_connections(), 600);
  const auto attack_start = Clock::now();
  for (int round = 0; round < 4; ++round) {
    for (auto& c : slow) c->send_raw("2");
    const Timed t = timed_completion(s.transport->port());
    EXPECT_EQ(t.status, 200) << "round " << round;
    EXPECT_LT(t.took, seconds(1)) << "round " << round;
    std::this_thread::sleep_for(milliseconds(400));
  }
  // The head deadline is for the whole head: trickling does not extend it.
  int closed = 0;
  for (auto& c : slow) closed += c->closed_by_server_within(milliseconds(3500)) ? 1 : 0;
  EXPECT_EQ(closed, 600);
  EXPECT_LT(Clock::now() - attack_start, seconds(7));
  EXPECT_EQ(timed_completion(s.transport->port()).status, 200);
  EXPECT_EQ(s.generator.submitted(), 5);
}

// A body slower than its deadline is dropped; a body that never comes (Content-Length larger than
// what is sent) holds no worker while it is awaited, and one without a key is refused from its
// head.
TEST_F(ServerHttp, BodyDeadlineAndMissingBytesHoldNoWorker) {
  server::HttpOptions http;
  http.threads = 1;
  http.body_timeout_s = 1;
  TestServer s({}, http);
  std::vector<std::unique_ptr<RawConnection>> waiting;
  for (int i = 0; i < 20; ++i) {
    waiting.push_back(std::make_unique<RawConnection>(s.transport->port()));
    ASSERT_TRUE(waiting.back()->send_raw(head_with_length(kKey, "Content-Length: 1000\r\n") +
                                         "{\"prompt\""));
  }
  const Timed t = timed_completion(s.transport->port());
  EXPECT_EQ(t.status, 200);
  EXPECT_LT(t.took, seconds(1));
  const auto t0 = Clock::now();
  for (auto& c : waiting) EXPECT_TRUE(c->closed_by_server_within(seconds(3)));
  EXPECT_LT(Clock::now() - t0, milliseconds(2500));
  // Without a key: 401 from the head, the body never awaited.
  RawConnection anon(s.transport->port());
  ASSERT_TRUE(anon.send_raw(head_with_length("", "Content-Length: 1000\r\n")));
  const auto t1 = Clock::now();
  const std::string got = anon.read_until("}}", 1, seconds(5));
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
  EXPECT_LT(Clock::now() - t1, milliseconds(500));
  EXPECT_EQ(s.generator.submitted(), 1);
}

// Bad Content-Length values, duplicates and conflicting framing are answered at once (never a
// wait for a body), key or not.
TEST_F(ServerHttp, BadFramingIsAnsweredAtOnce) {
  TestServer s;
  struct Case {
    std::string framing;
    int status;
  };
  const std::vector<Case> cases = {
      {"Content-Length: -1\r\n", 400},
      {"Content-Length: 1e30\r\n", 400},
      {"Content-Length: abc\r\n", 400},
      {"Content-Length: 99999999999999999999999999\r\n", 400},
      {"Content-Length: 5\r\nContent-Length: 5\r\n", 400},
      {"Content-Length: 5, 5\r\n", 400},
      {"Content-Length: 5\r\nContent-Length: 7\r\n", 400},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Transfer-Encoding: gzip\r\n", 400},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Content-Length: 1000000000000\r\n", 413},
      {"", 411},
  };
  for (const std::string& key : {std::string(), std::string(kKey)}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.framing + (key.empty() ? " without a key" : " with a key"));
      RawConnection conn(s.transport->port());
      ASSERT_TRUE(conn.send_raw(head_with_length(key, c.framing)));
      const auto t0 = Clock::now();
      const std::string got = conn.read_until("}}", 1, seconds(5));
      EXPECT_EQ(got.rfind("HTTP/1.1 " + std::to_string(c.status), 0), 0u) << got;
      EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
      EXPECT_LT(Clock::now() - t0, milliseconds(500));
    }
  }
  EXPECT_EQ(timed_completion(s.transport->port()).status, 200);
  EXPECT_EQ(s.generator.submitted(), 1);
}

// Header floods: 200 000 header lines stop at the head's byte limit (431) without being held, a
// long target gets 414, and the server's memory does not follow the flood.
TEST_F(ServerHttp, HeaderAndUriLimits) {
  TestServer s;
  const size_t before = resident_bytes();
  {
    RawConnection conn(s.transport->port());
    std::string flood = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 0; i < 200000; ++i) flood += "X-" + std::to_string(i) + ": y\r\n";
    ::send(conn.fd(), flood.data(), flood.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    const std::string got = conn.read_until("}}", 1, seconds(5));
    EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got.substr(0, 300);
  }
  {
    RawConnection conn(s.transport->port());
    ASSERT_TRUE(conn.send_raw("GET /health?" + std::string(9000, 'a') +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string got = conn.read_until("}}", 1, seconds(5));
    EXPECT_EQ(got.rfind("HTTP/1.1 414", 0), 0u) << got.substr(0, 300);
  }
  {
    RawConnection conn(s.transport->port());
    ASSERT_TRUE(conn.send_raw("GET /health?" + std::string(40000, 'a') +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string got = conn.read_until("}}", 1, seconds(5));
    EXPECT_EQ(got.rfind("HTTP/1.1 414", 0), 0u) << got.substr(0, 300);
  }
  EXPECT_LT(resident_bytes(), before + (size_t{32} << 20));
  EXPECT_EQ(timed_completion(s.transport->port()).status, 200);
}

// Chunked bodies are read within the body limit: one inside it is served, one past it gets 413 as
// soon as it passes (the rest is never buffered).
TEST_F(ServerHttp, ChunkedBodiesWithinTheLimit) {
  server::HttpOptions http;
  http.limits.max_body_bytes = 64 << 10;
  TestServer s({}, http);
  auto chunked = [](const std::string& body) {
    std::string out;
    for (size_t i = 0; i < body.size(); i += 1000) {
      const std::string piece = body.substr(i, 1000);
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
      out += size + piece + "\r\n";
    }
    return out + "0\r\n\r\n";
  };
  {
    RawConnection conn(s.transport->port());
    ASSERT_TRUE(conn.send_raw(head_with_length(kKey, "Transfer-Encoding: chunked\r\n") +
                              chunked(kCompletion.dump())));
    const std::string got = conn.read_until("}}", 1, seconds(5));
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  }
  {
    RawConnection conn(s.transport->port());
    const json big = {{"prompt", std::string(200 << 10, 'a')}};
    const std::string body = chunked(big.dump());
    ASSERT_TRUE(conn.send_raw(head_with_length(kKey, "Transfer-Encoding: chunked\r\n")));
    ::send(conn.fd(), body.data(), body.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    const std::string got = conn.read_until("}}", 1, seconds(5));
    EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  }
  EXPECT_EQ(s.generator.submitted(), 1);
}

// --accept-compressed: gzip and deflate bodies are inflated after auth, within the body limit. A
// gzip bomb (1 GiB of zeros in about 1 MB) without a key is refused from its head; with one, the
// inflation stops at the limit (413) and memory stays bounded. br is refused (415) even then.
TEST_F(ServerHttp, CompressedBodiesWhenAccepted) {
  server::HttpOptions http;
  http.limits.accept_compressed = true;
  TestServer s({}, http);
  const std::string body = kCompletion.dump();
  auto post = [&](const std::string& encoding, const std::string& payload, const std::string& key) {
    RawConnection conn(s.transport->port());
    std::string head = head_with_length(key, "Content-Length: " + std::to_string(payload.size()) +
                                                 "\r\nContent-Encoding: " + encoding + "\r\n");
    conn.send_raw(head);
    ::send(conn.fd(), payload.data(), payload.size(), MSG_NOSIGNAL);
    return conn.read_until("}", 1, seconds(10));
  };
  EXPECT_EQ(post("gzip", gzip(body), kKey).rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(post("gzip", gzip(body), "").rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(post("br", body, kKey).rfind("HTTP/1.1 415", 0), 0u);
  EXPECT_EQ(post("gzip", "not gzip at all", kKey).rfind("HTTP/1.1 400", 0), 0u);
  const std::string bomb = gzip(std::string(1 << 20, '\0'), 1024);  // 1 GiB inflated
  ASSERT_LT(bomb.size(), s.transport->options().limits.max_body_bytes);
  const size_t before = resident_bytes();
  EXPECT_EQ(post("gzip", bomb, "").rfind("HTTP/1.1 401", 0), 0u);
  const auto t0 = Clock::now();
  const std::string got = post("gzip", bomb, kKey);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_LT(Clock::now() - t0, seconds(3));
  // The limit (8 MiB) twice over, plus the compressed body: well under 64 MiB.
  EXPECT_LT(resident_bytes(), before + (size_t{64} << 20));
  EXPECT_EQ(s.generator.submitted(), 1);
}

// Connections beyond --max-connections are closed at accept; the ones inside keep working, and
// once the crowd leaves new connections are served again.
TEST_F(ServerHttp, ConnectionCap) {
  server::HttpOptions http;
  http.max_connections = 20;
  TestServer s({}, http);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<RawConnection>(s.transport->port()));
  for (int i = 0; i < 100 && s.transport->open_connections() < 20; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  RawConnection extra(s.transport->port());
  EXPECT_TRUE(extra.closed_by_server_within(seconds(2)));
  ASSERT_TRUE(idle[0]->send_post("/v1/completions", kKey, kCompletion.dump()));
  EXPECT_EQ(idle[0]->read_until("}", 1, seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
  idle.clear();
  for (int i = 0; i < 100 && s.transport->open_connections() > 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(timed_completion(s.transport->port()).status, 200);
}

// Keep-alive and pipelining: two requests written at once are answered in order on one connection;
// Expect: 100-continue gets its interim answer before the body is sent.
TEST_F(ServerHttp, KeepAlivePipeliningAndContinue) {
  TestServer s;
  RawConnection conn(s.transport->port());
  const std::string req =
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: " + std::string(kKey) + "\r\n\r\n";
  ASSERT_TRUE(conn.send_raw(req + req));
  const std::string both = conn.read_until("HTTP/1.1 200", 2, seconds(5));
  EXPECT_EQ(both.rfind("HTTP/1.1 200", 0), 0u) << both;
  EXPECT_NE(both.find("HTTP/1.1 200", 10), std::string::npos) << both;

  RawConnection cont(s.transport->port());
  const std::string body = kCompletion.dump();
  ASSERT_TRUE(cont.send_raw(head_with_length(
      kKey, "Content-Length: " + std::to_string(body.size()) + "\r\nExpect: 100-continue\r\n")));
  EXPECT_EQ(cont.read_until("\r\n\r\n", 1, seconds(5)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(cont.send_raw(body));
  EXPECT_EQ(cont.read_until("}", 1, seconds(5)).rfind("HTTP/1.1 200", 0), 0u);
}

// Back-pressure: a stream whose client stops reading blocks only its own worker, each write for at
// most the write deadline; then the stream is dropped, its request cancelled, and the worker
// serves others again. (60 MB of events: more than loopback's socket buffers hold.)
TEST_F(ServerHttp, StreamToAClientThatStopsReadingIsDropped) {
  server::HttpOptions http;
  http.threads = 2;
  http.write_timeout_s = 1;
  TestServer s({}, http);
  // 240 tokens of 256 KiB, one per 20 ms: the buffers fill within a second, while the request
  // still has seconds to run (a request that already finished has nothing to cancel).
  s.generator.set_script({std::string(256 << 10, 'a')}, false);
  s.generator.set_tick(milliseconds(20));
  json body = kCompletion;
  body["stream"] = true;
  body["max_tokens"] = 240;
  RawConnection stalled(s.transport->port());
  ASSERT_TRUE(stalled.send_post("/v1/completions", kKey, body.dump()));
  const auto t0 = Clock::now();
  for (int i = 0; i < 800 && (s.generator.cancels() < 1 || s.routes.active_requests() > 0); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(s.generator.cancels(), 1);
  EXPECT_EQ(s.routes.active_requests(), 0);
  EXPECT_LT(Clock::now() - t0, milliseconds(4500));
  s.generator.set_script({"ok"}, false);
  EXPECT_EQ(timed_completion(s.transport->port()).status, 200);
}

// Requests without a key are answered on the I/O threads: with the only worker held by a stream,
// they still get their 401 at once, and so do framing errors.
TEST_F(ServerHttp, RefusalsNeedNoWorker) {
  server::HttpOptions http;
  http.threads = 1;
  TestServer s({}, http);
  s.generator.pause(true);
  json body = kCompletion;
  body["stream"] = true;
  RawConnection stream(s.transport->port());
  ASSERT_TRUE(stream.send_post("/v1/completions", kKey, body.dump()));
  for (int i = 0; i < 200 && s.routes.active_requests() < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(s.routes.active_requests(), 1);
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    auto res = s.post("/v1/completions", kCompletion, "sk-wrong");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    EXPECT_LT(Clock::now() - t0, milliseconds(500));
  }
  s.generator.pause(false);
  EXPECT_NE(stream.read_until("[DONE]", 1).find("data: [DONE]"), std::string::npos);
}

// HEAD and OPTIONS, as a client expects them: HEAD of a GET route is GET's status and headers
// (Content-Length included) without the body, auth and readiness as for GET; a path served for
// other methods only is 405 with Allow (OPTIONS: 204 with Allow), after auth; an unknown path 404
// (401 without a key, as for every method). No CORS header without --allowed-origins.
TEST_F(ServerHttp, HeadAndOptionsAnswerLikeTheirGetRoute) {
  TestServer s;
  const std::string key_header = "X-Api-Key: " + std::string(kKey) + "\r\n";
  // The head of an answer, and what follows it on the connection within `wait`.
  struct Answer {
    std::string head, rest;
  };
  auto ask = [&](RawConnection& conn, const std::string& method, const std::string& path,
                 const std::string& headers) {
    EXPECT_TRUE(
        conn.send_raw(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n"));
    std::string got = conn.read_until("\r\n\r\n", 1, seconds(5));
    const size_t end = got.find("\r\n\r\n");
    EXPECT_NE(end, std::string::npos) << got;
    return Answer{got.substr(0, end + 4), got.substr(std::min(got.size(), end + 4))};
  };
  auto header = [](const std::string& head, const std::string& name) {
    const size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return std::string("(none)");
    const size_t start = at + name.size() + 4;
    return head.substr(start, head.find("\r\n", start) - start);
  };

  for (const char* path : {"/health", "/v1/models", "/v1/models/fake", "/metrics"}) {
    SCOPED_TRACE(path);
    auto get = s.get(path);
    ASSERT_TRUE(get);
    ASSERT_EQ(get->status, 200);
    // HEAD then GET on one keep-alive connection: the HEAD answer carries no body (the GET's
    // status line comes next), and the lengths agree.
    RawConnection conn(s.transport->port());
    Answer head = ask(conn, "HEAD", path, key_header);
    EXPECT_EQ(head.head.rfind("HTTP/1.1 200 ", 0), 0u) << head.head;
    EXPECT_EQ(head.rest, "");
    EXPECT_EQ(header(head.head, "Content-Type"), get->get_header_value("Content-Type"));
    if (std::string(path) != "/metrics") {  // the metrics text changes between two requests
      EXPECT_EQ(header(head.head, "Content-Length"), std::to_string(get->body.size()));
    }
    Answer next = ask(conn, "GET", path, key_header);
    EXPECT_EQ(next.head.rfind("HTTP/1.1 200 ", 0), 0u) << next.head;
    EXPECT_EQ(next.rest, get->body.substr(0, next.rest.size()));
    // Without a key: 401, without its body either (the next answer follows at once).
    RawConnection anon(s.transport->port());
    Answer refused = ask(anon, "HEAD", path, "");
    EXPECT_EQ(refused.head.rfind("HTTP/1.1 401 ", 0), 0u) << refused.head;
    EXPECT_EQ(refused.rest, "");
    EXPECT_EQ(ask(anon, "HEAD", path, key_header).head.rfind("HTTP/1.1 200 ", 0), 0u);
  }
  // Unknown paths: 404 with a key, 401 without, for HEAD and OPTIONS alike.
  for (const char* method : {"HEAD", "OPTIONS", "DELETE"}) {
    SCOPED_TRACE(method);
    RawConnection conn(s.transport->port());
    EXPECT_EQ(ask(conn, method, "/no/such/route", key_header).head.rfind("HTTP/1.1 404 ", 0), 0u);
    RawConnection anon(s.transport->port());
    EXPECT_EQ(ask(anon, method, "/no/such/route", "").head.rfind("HTTP/1.1 401 ", 0), 0u);
  }
  // A POST route asked with GET or HEAD: 405 naming the methods; without a key still 401.
  auto wrong = s.get("/v1/chat/completions");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST, OPTIONS");
  ASSERT_TRUE(is_openai_error(wrong->body)) << wrong->body;
  EXPECT_EQ(json::parse(wrong->body)["error"]["code"], "method_not_allowed");
  EXPECT_EQ(s.get("/v1/chat/completions", "")->status, 401);
  {
    RawConnection conn(s.transport->port());
    Answer head = ask(conn, "HEAD", "/v1/completions", key_header);
    EXPECT_EQ(head.head.rfind("HTTP/1.1 405 ", 0), 0u) << head.head;
    EXPECT_EQ(header(head.head, "Allow"), "POST, OPTIONS");
    EXPECT_EQ(head.rest, "");
  }
  auto del = s.client->Delete("/v1/models", {{"X-Api-Key", kKey}});
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  EXPECT_EQ(del->get_header_value("Allow"), "GET, HEAD, OPTIONS");
  // OPTIONS: 204 with Allow after auth, and never a CORS header (CORS is off).
  for (const auto& [path, allow] :
       {std::pair<std::string, std::string>{"/v1/models", "GET, HEAD, OPTIONS"},
        {"/v1/chat/completions", "POST, OPTIONS"},
        // The sub-route prefix serves GET (retrieve, input_items), POST (cancel) and DELETE.
        {"/v1/responses/resp_x", "GET, HEAD, POST, DELETE, OPTIONS"}}) {
    SCOPED_TRACE(path);
    auto res = s.client->Options(path.c_str(), {{"X-Api-Key", kKey},
                                                {"Origin", "https://evil.example"},
                                                {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 204);
    EXPECT_EQ(res->get_header_value("Allow"), allow);
    EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
    EXPECT_TRUE(res->body.empty());
    auto anon = s.client->Options(path.c_str(), {{"Origin", "https://evil.example"},
                                                 {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(anon);
    EXPECT_EQ(anon->status, 401);
    EXPECT_FALSE(anon->has_header("Access-Control-Allow-Origin"));
  }
  // HEAD waits for readiness like GET.
  TestServer loading({}, {}, "", /*ready=*/false);
  RawConnection conn(loading.transport->port());
  EXPECT_EQ(ask(conn, "HEAD", "/v1/models", key_header).head.rfind("HTTP/1.1 503 ", 0), 0u);
}

}  // namespace
}  // namespace syv::testing
