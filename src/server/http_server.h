// The HTTP transport (cpp-httplib) in front of the routes, with the middleware every request
// passes, in this order:
//   0. before the body is read (pre-routing): CORS headers when the Origin is allowed, and an
//      allowed preflight answered 204 before auth (cors.h); a Content-Encoding other than identity
//      gets 415 (httplib would inflate it whole, without a limit, before auth); Transfer-Encoding,
//      or a POST without Content-Length, gets 411 (httplib caps only declared lengths); more than
//      max_header_count headers get 431;
//   1. body limit: a body over max_body_bytes is refused with 413 before it is read into memory
//      (httplib's payload limit; the error handler writes the JSON body);
//   2. auth: a valid API key (Authorization: Bearer / X-Api-Key) unless the route is public,
//      else 401 (unknown routes too: without a key they answer 401, with one 404);
//   3. readiness: 503 + Retry-After until the model is loaded and warmed, and for new requests
//      once a drain has begun (SIGTERM);
//   4. the route handler (openai_routes.h); exceptions become 500 in OpenAI's error shape.
// The chat page (webui_assets.h: GET / and /ui/*) is public and answers while the model loads:
// it must show before a key is typed; every API call it makes carries that key. webui = false
// (--no-webui) leaves those paths unrouted (401 without a key, 404 with one).
// Every response is counted in syv_http_responses_total{code} and logged in one access-log line
// (address, method, path, status, duration, tokens; never a key); every refused key is logged
// too.
//
// Life cycle: bind() -> start() (listens on its own thread) -> set_ready(true) when the model is
// warm -> begin_drain() -> wait_idle() -> stop().
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/status.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/openai_routes.h"

namespace syv::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0 = an ephemeral port (see port())
  int threads = 64;                  // HTTP worker threads: each open stream holds one
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  size_t max_header_count = 100;  // more request headers get 431
  int listen_backlog = 1024;      // connections the kernel queues before accept()
  bool access_log = true;         // one INFO line per request
  CorsPolicy cors;                // --allowed-origins; off by default
  bool webui = true;              // serve the chat page at / (--no-webui: off)
};

class HttpServer {
 public:
  // `routes` and `metrics` must outlive the server.
  HttpServer(HttpOptions options, ApiKeys keys, OpenAiRoutes& routes, Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (errors name the address).
  Status bind();
  int port() const { return port_; }
  // Serves on a background thread until stop().
  void start();
  void set_ready(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }
  // From now on generation routes answer 503; requests already admitted continue.
  void begin_drain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // Waits until no generation request is in flight or the timeout passes; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  void stop();

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  enum class Gate { kAlways, kReady, kGeneration };
  // `path` is a regex (httplib); `auth_path` is the route --public-routes names for it ("" =
  // the request's path).
  void route(const std::string& method, const std::string& path, Gate gate, Handler handler,
             std::string auth_path = "");
  // GET / and /ui/<file>: the embedded page, no key needed.
  void route_webui();
  bool authorized(const httplib::Request& req, const std::string& auth_path = "") const;
  // CORS headers for the request's Origin; true when it is an allowed preflight (answered 204).
  bool apply_cors(const httplib::Request& req, httplib::Response& res) const;
  // The checks that need only the request line and headers (see 0. above).
  std::optional<ApiError> check_before_body(const httplib::Request& req) const;
  void log_access(const httplib::Request& req, const httplib::Response& res) const;
  // When the current worker thread's request arrived (set before routing).
  static thread_local std::chrono::steady_clock::time_point request_start_;

  HttpOptions options_;
  ApiKeys keys_;
  OpenAiRoutes& routes_;
  Metrics& metrics_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  socket_t listen_fd_ = -1;  // the listening socket, once bound
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace syv::server
