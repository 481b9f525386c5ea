#include "server/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>

#include "core/log.h"
#include "server/api_error.h"
#include "server/webui_assets.h"

namespace syv::server {

namespace {

std::string lower_trimmed(std::string s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  s = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// An exact path as an httplib route pattern (a regex).
std::string exact_path_pattern(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '/' && c != '_' && c != '-') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

}  // namespace

std::optional<ApiError> HttpServer::check_before_body(const httplib::Request& req) const {
  // Compressed bodies: httplib would inflate them whole, past the body limit and before auth.
  if (req.has_header("Content-Encoding")) {
    const std::string encoding = lower_trimmed(req.get_header_value("Content-Encoding"));
    if (encoding != "identity" && !encoding.empty()) {
      std::string shown = req.get_header_value("Content-Encoding").substr(0, 40);
      return ApiError{415,
                      "Content-Encoding: \"" + shown +
                          "\" is not supported; send the request body uncompressed",
                      "invalid_request_error", "", "unsupported_content_encoding"};
    }
  }
  // httplib caps only bodies that declare a Content-Length: chunked bodies (any method) and POST
  // bodies read until the connection closes would grow without limit, so a body must say its
  // length up front.
  if (req.has_header("Transfer-Encoding")) {
    return ApiError{411,
                    "Transfer-Encoding: \"" +
                        req.get_header_value("Transfer-Encoding").substr(0, 40) +
                        "\" request bodies are not accepted; send Content-Length",
                    "invalid_request_error", "", "length_required"};
  }
  if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
      !req.has_header("Content-Length")) {
    return ApiError{411, "request body: a Content-Length header is required",
                    "invalid_request_error", "", "length_required"};
  }
  if (req.headers.size() > options_.max_header_count) {
    return ApiError{431,
                    "too many request headers (" + std::to_string(req.headers.size()) +
                        "; the limit is " + std::to_string(options_.max_header_count) + ")",
                    "invalid_request_error", "", "request_header_fields_too_large"};
  }
  return std::nullopt;
}

HttpServer::HttpServer(HttpOptions options, ApiKeys keys, OpenAiRoutes& routes, Metrics& metrics)
    : options_(std::move(options)), keys_(std::move(keys)), routes_(routes), metrics_(metrics) {
  const size_t threads = static_cast<size_t>(options_.threads > 0 ? options_.threads : 1);
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_payload_max_length(options_.max_body_bytes);
  server_.set_read_timeout(options_.read_timeout_s, 0);
  server_.set_write_timeout(options_.write_timeout_s, 0);
  server_.set_tcp_nodelay(true);
  // The listening socket: SO_REUSEADDR (a restart may bind while old connections sit in
  // TIME_WAIT) but not httplib's default SO_REUSEPORT, which lets a second server bind the same
  // port and take half of the connections. The descriptor is kept to raise the backlog in bind().
  server_.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = sock;
  });
  // Runs after the request line and headers are read, before the body: refusals here cost no
  // body memory. "Connection: close" asks the client to close (httplib 0.11 does not close on its
  // own; it would read the unread body as the next request, which then gets 400).
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    request_start_ = std::chrono::steady_clock::now();
    current_request_tokens() = RequestTokens{};
    if (apply_cors(req, res)) {
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (auto error = check_before_body(req)) {
      write_error(res, *error);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  auto* r = &routes_;
  route("POST", "/v1/chat/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->chat_completions(q, s); });
  route("POST", "/v1/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->completions(q, s); });
  route("POST", "/v1/responses", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->responses(q, s); });
  route("GET", "/v1/responses/([^/]+)", Gate::kReady,
        [r](const auto& q, auto& s) { r->response_by_id(q, s); });
  route("POST", "/tokenize", Gate::kReady, [r](const auto& q, auto& s) { r->tokenize(q, s); });
  route("POST", "/detokenize", Gate::kReady, [r](const auto& q, auto& s) { r->detokenize(q, s); });
  route("GET", "/v1/models", Gate::kReady, [r](const auto& q, auto& s) { r->models(q, s); });
  // An id may hold '/' ("Qwen/Qwen3-8B"); the route is public when /v1/models is.
  route(
      "GET", "/v1/models/(.+)", Gate::kReady, [r](const auto& q, auto& s) { r->model(q, s); },
      "/v1/models");
  route("POST", "/v1/embeddings", Gate::kAlways,
        [r](const auto& q, auto& s) { r->embeddings(q, s); });
  route("GET", "/health", Gate::kReady, [r](const auto& q, auto& s) { r->health(q, s); });
  route("GET", "/metrics", Gate::kAlways, [r](const auto& q, auto& s) { r->metrics(q, s); });
  if (options_.webui) route_webui();

  // Statuses set by httplib itself (404 unknown route, 413 body too large, 400 bad HTTP) get an
  // OpenAI-shaped body; an unknown route without a valid key is a 401, not a 404.
  const size_t max_body = options_.max_body_bytes;
  httplib::Server::HandlerWithResponse on_error = [this, max_body](const httplib::Request& req,
                                                                   httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError error;
    if (res.status == 404 && !authorized(req)) {
      error = ApiError::unauthorized(
          "missing or invalid API key (Authorization: Bearer <key> or "
          "X-Api-Key: <key>)");
      res.status = 401;
    } else if (res.status == 404) {
      error = ApiError::not_found("no route " + req.method + " " + req.path);
    } else if (res.status == 413 && req.body.size() <= max_body &&
               req.get_header_value("Content-Type").find("x-www-form-urlencoded") !=
                   std::string::npos) {
      // httplib caps form-encoded bodies at 8 KiB (curl -d sends that type by default).
      error = ApiError{413,
                       "request body: application/x-www-form-urlencoded bodies are limited to "
                       "8192 bytes; send Content-Type: application/json",
                       "invalid_request_error", "", "request_too_large"};
    } else if (res.status == 413) {
      error = ApiError{413,
                       "request body exceeds the limit of " + std::to_string(max_body) +
                           " bytes (--max-body-bytes)",
                       "invalid_request_error", "", "request_too_large"};
    } else if (res.status >= 500) {
      error = ApiError::server_error("internal error");
      error.status = res.status;
    } else {
      error = ApiError{res.status, "malformed HTTP request", "invalid_request_error", "", ""};
    }
    res.set_content(error.body(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  server_.set_error_handler(std::move(on_error));
  server_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_response(res.status);
    log_access(req, res);
  });
}

HttpServer::~HttpServer() {
  stop();
}

thread_local std::chrono::steady_clock::time_point HttpServer::request_start_{};

bool HttpServer::apply_cors(const httplib::Request& req, httplib::Response& res) const {
  if (!options_.cors.enabled() || !req.has_header("Origin")) return false;
  const std::string origin = req.get_header_value("Origin");
  const bool preflight = req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method");
  const HeaderList headers =
      preflight ? options_.cors.preflight_headers(
                      origin, req.get_header_value("Access-Control-Request-Headers"))
                : options_.cors.response_headers(origin);
  for (const auto& [name, value] : headers) res.set_header(name, value);
  return preflight && !headers.empty();
}

bool HttpServer::authorized(const httplib::Request& req, const std::string& auth_path) const {
  if (keys_.is_public(auth_path.empty() ? req.path : auth_path)) return true;
  const std::string key =
      extract_api_key(req.get_header_value("Authorization"), req.get_header_value("X-Api-Key"));
  if (keys_.matches(key)) return true;
  // Never the key itself, not even masked: a wrong key may be someone's real one elsewhere.
  SYV_LOG(WARN) << "auth: refused " << req.method << " " << req.path.substr(0, 200) << " from "
                << req.remote_addr << ":" << req.remote_port << " ("
                << (key.empty() ? "no key" : "invalid key") << ")";
  return false;
}

// One line per answered request. The start time is set by the pre-routing handler on the same
// worker thread (httplib runs pre-routing, the handler, the writing of the response and the
// logger of one request on one thread).
void HttpServer::log_access(const httplib::Request& req, const httplib::Response& res) const {
  const RequestTokens tokens = current_request_tokens();
  current_request_tokens() = RequestTokens{};
  const auto start = request_start_;
  request_start_ = {};
  if (!options_.access_log) return;
  char duration[32] = "-";  // httplib refused the request before routing (bad request line)
  if (start != std::chrono::steady_clock::time_point{}) {
    std::snprintf(
        duration, sizeof duration, "%.1f ms",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::string token_counts;
  if (tokens.prompt >= 0) {
    token_counts = ", tokens " + std::to_string(tokens.prompt) + " in / " +
                   std::to_string(tokens.completion) + " out";
  }
  SYV_LOG(INFO) << "http: " << req.remote_addr << ":" << req.remote_port << " " << req.method << " "
                << req.path.substr(0, 200) << " " << res.status << " " << duration << token_counts;
}

void HttpServer::route_webui() {
  for (const WebUiAsset& asset : webui_assets()) {
    server_.Get(exact_path_pattern(asset.path),
                [&asset](const httplib::Request&, httplib::Response& res) {
                  res.set_content(asset.body.data(), asset.body.size(),
                                  std::string(asset.content_type).c_str());
                  // Revalidate every load: a rebuilt binary serves the new page at once.
                  res.set_header("Cache-Control", "no-cache");
                  res.set_header("X-Content-Type-Options", "nosniff");
                  res.set_header("Referrer-Policy", "no-referrer");
                  // The page runs only its own files and talks only to this server; even if a
                  // bug let model text become markup, no inline script or outside request runs.
                  res.set_header("Content-Security-Policy",
                                 "default-src 'none'; script-src 'self'; style-src 'self'; "
                                 "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                                 "form-action 'none'; frame-ancestors 'none'");
                });
  }
}

void HttpServer::route(const std::string& method, const std::string& path, Gate gate,
                       Handler handler, std::string auth_path) {
  auto wrapped = [this, gate, handler = std::move(handler), auth_path = std::move(auth_path)](
                     const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, auth_path)) {
      return write_error(
          res, ApiError::unauthorized("missing or invalid API key (Authorization: Bearer <key> or "
                                      "X-Api-Key: <key>)"));
    }
    if (req.body.size() > options_.max_body_bytes) {
      return write_error(res, ApiError{413,
                                       "request body exceeds the limit of " +
                                           std::to_string(options_.max_body_bytes) + " bytes",
                                       "invalid_request_error", "", "request_too_large"});
    }
    if (gate != Gate::kAlways && !ready_.load()) {
      return write_error(res, ApiError{503, "the model is loading; retry shortly", "server_error",
                                       "", "model_not_ready"});
    }
    if (gate == Gate::kGeneration && draining_.load()) {
      return write_error(
          res, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
    }
    try {
      handler(req, res);
    } catch (const std::exception& e) {
      SYV_LOG(ERROR) << req.method << " " << req.path << ": " << e.what();
      write_error(res, ApiError::server_error(std::string("internal error: ") + e.what()));
    } catch (...) {
      write_error(res, ApiError::server_error("internal error"));
    }
  };
  if (method == "GET") {
    server_.Get(path, wrapped);
  } else {
    server_.Post(path, wrapped);
  }
}

Status HttpServer::bind() {
  if (options_.port < 0 || options_.port > 65535) {
    return Status::Error("port " + std::to_string(options_.port) +
                         ": expected 1..65535 (or 0 for any free port)");
  }
  if (options_.port == 0) {
    port_ = server_.bind_to_any_port(options_.host);
    if (port_ <= 0) return Status::Error("cannot bind " + options_.host + " on any port");
  } else {
    if (!server_.bind_to_port(options_.host, options_.port)) {
      return Status::Error("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                           " (address in use, e.g. by another server, or not an address of "
                           "this machine)");
    }
    port_ = options_.port;
  }
  // httplib listens with a backlog of 5 (compiled into the shared library); listen() again on the
  // bound socket raises it, so a burst of connections is not refused while workers are busy.
  if (listen_fd_ >= 0 && ::listen(listen_fd_, options_.listen_backlog) != 0) {
    SYV_LOG(WARN) << "http: cannot raise the listen backlog to " << options_.listen_backlog;
  }
  return Status::Ok();
}

void HttpServer::start() {
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (routes_.active_requests() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::stop() {
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace syv::server
