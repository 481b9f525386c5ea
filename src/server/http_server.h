// The HTTP transport in front of the routes: an event-driven HTTP/1.1 server (Boost.Beast on Asio,
// a few I/O threads for every connection) that hands a request to a worker thread only once it is
// whole and authenticated. Idle, slow and refused connections cost no worker thread.
//
// What every request passes, in this order (docs/server.md "Limits" and "Middleware order"):
//   0. reading the request line and headers, within --header-timeout for the whole head (a
//      keep-alive connection's next head: --keep-alive-timeout), within --max-header-bytes (431;
//      414 when the request line alone passes --max-uri-bytes); a bad or over-limit Content-Length
//      is a 400 / 413 here, before any body byte is read;
//   1. from the head alone: CORS headers for an allowed Origin and its preflight answered 204
//      (cors.h); check_request_head (http_framing.h): 414, 431 for more than --max-header-count
//      fields, 400 duplicate Content-Length or a Transfer-Encoding other than chunked, 411 a POST
//      without a length, 415 a Content-Encoding not accepted;
//   2. the route and auth: a valid API key (Authorization: Bearer / X-Api-Key) unless the route is
//      public, else 401. HEAD runs a path's GET route and answers its status and headers without
//      the body. A path no route serves: 401 without a key, 404 with one; a path served for other
//      methods only: 401 without a key, with one 405 + Allow (OPTIONS: 204 + Allow);
//   3. readiness: 503 + Retry-After until the model is loaded and warm, and for new generation
//      requests once a drain has begun (SIGTERM);
//   4. the body, read within --body-timeout and --max-body-bytes (413 as soon as it passes);
//      "Expect: 100-continue" is answered first; an accepted Content-Encoding (--accept-compressed)
//      is inflated on the worker, within the same limit;
//   5. the route handler (openai_routes.h) on a worker thread; exceptions become 500.
// Refusals before the body close the connection after a short lingering read of what the client
// still sends (so it reads the answer instead of a reset). A worker that answered a body of 64 KiB
// or more returns freed memory to the system (malloc_trim).
// The chat page (webui_assets.h: GET / and /ui/*) is public and answers while the model loads.
// Every response is counted in syv_http_responses_total{code} and logged in one access-log line
// (address, method, path, status, duration, tokens; never a key); every refused key is logged too.
//
// Life cycle: bind() -> start() -> set_ready(true) when the model is warm -> begin_drain() ->
// wait_idle() -> stop().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/http_framing.h"
#include "server/http_message.h"
#include "server/metrics.h"
#include "server/openai_routes.h"

namespace syv::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;     // 0 = an ephemeral port (see port())
  int threads = 64;    // worker threads for authenticated requests; each open stream holds one
  int io_threads = 2;  // threads running every connection's reads and early answers
  HttpLimits limits;   // body, header, URI limits; compressed bodies
  int header_timeout_s = 10;      // a new connection's request line + headers, whole
  int keep_alive_timeout_s = 30;  // idle keep-alive connection: its next request's head, whole
  int body_timeout_s = 60;        // a request body, whole
  int write_timeout_s = 30;       // each write of a response (a stream: each event)
  int max_connections = 4096;     // open connections at most; more are closed at accept
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

  // Binds the listening socket (exclusive: no SO_REUSEPORT; errors name the address).
  Status bind();
  int port() const { return port_; }
  // Serves on background threads until stop().
  void start();
  void set_ready(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }
  // From now on generation routes answer 503; requests already admitted continue.
  void begin_drain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // Waits until no generation request is in flight or the timeout passes; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  void stop();
  // Connections open now (for tests and logs).
  int open_connections() const;
  const HttpOptions& options() const { return options_; }

 private:
  struct Impl;
  class Session;
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // kPublic: no key and no readiness (the chat page); kAlways: a key; kReady: a key and a warm
  // model; kGeneration: also refused once a drain has begun.
  enum class Gate { kPublic, kAlways, kReady, kGeneration };
  struct Route {
    std::string method;
    std::string path;        // exact, or the prefix before a parameter
    bool has_param = false;  // /v1/models/{id}: the rest of the path (non-empty) is matches[1]
    Gate gate = Gate::kAlways;
    Handler handler;
    std::string auth_path;  // the route --public-routes names for it ("" = the request's path)
  };

  void route(std::string method, std::string path, Gate gate, Handler handler,
             std::string auth_path = "", bool has_param = false);
  void route_webui();
  // The route for a request (HEAD: the path's GET route), its captures filled; null when none.
  const Route* find_route(HttpRequest& req) const;
  // The methods some route serves `path` with, as an Allow header ("GET, HEAD, OPTIONS"), and
  // the first such route (for its auth); "" and null when none does.
  std::string allowed_methods(const std::string& path, const Route** first) const;
  // Whether the request may use the route: public, or a valid key (req.key_index set to it).
  bool authorized(HttpRequest& req, const std::string& auth_path) const;
  // CORS headers for the request's Origin; true when it is an allowed preflight (answered 204).
  bool apply_cors(const HttpRequest& req, HttpResponse& res) const;
  // Fills `res` with the answer from the head alone (steps 1-3 above) and returns true, or returns
  // false to read the body and run `route` (set); CORS headers are in `res` either way.
  bool answer_before_body(HttpRequest& req, HttpResponse& res, const Route*& route) const;
  // Accepts the next connection (the accept loop, on the I/O threads).
  void accept_next();
  // Runs the route on the calling (worker) thread; exceptions become 500.
  void run_route(const Route& route, HttpRequest& req, HttpResponse& res) const;
  void log_access(const HttpRequest& req, int status, std::chrono::steady_clock::time_point start,
                  const RequestTokens& tokens) const;

  HttpOptions options_;
  ApiKeys keys_;
  OpenAiRoutes& routes_;
  Metrics& metrics_;
  std::vector<Route> routes_table_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace syv::server
