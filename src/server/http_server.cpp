#include "server/http_server.h"

#include <exception>

#include "core/log.h"
#include "server/api_error.h"

namespace syv::server {

HttpServer::HttpServer(HttpOptions options, ApiKeys keys, OpenAiRoutes& routes, Metrics& metrics)
    : options_(std::move(options)), keys_(std::move(keys)), routes_(routes), metrics_(metrics) {
  const size_t threads = static_cast<size_t>(options_.threads > 0 ? options_.threads : 1);
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_payload_max_length(options_.max_body_bytes);
  server_.set_read_timeout(options_.read_timeout_s, 0);
  server_.set_write_timeout(options_.write_timeout_s, 0);
  server_.set_tcp_nodelay(true);

  auto* r = &routes_;
  route("POST", "/v1/chat/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->chat_completions(q, s); });
  route("POST", "/v1/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->completions(q, s); });
  route("POST", "/tokenize", Gate::kReady, [r](const auto& q, auto& s) { r->tokenize(q, s); });
  route("POST", "/detokenize", Gate::kReady, [r](const auto& q, auto& s) { r->detokenize(q, s); });
  route("GET", "/v1/models", Gate::kReady, [r](const auto& q, auto& s) { r->models(q, s); });
  route("GET", "/health", Gate::kReady, [r](const auto& q, auto& s) { r->health(q, s); });
  route("GET", "/metrics", Gate::kAlways, [r](const auto& q, auto& s) { r->metrics(q, s); });

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
  server_.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    metrics_.count_response(res.status);
  });
}

HttpServer::~HttpServer() {
  stop();
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (keys_.is_public(req.path)) return true;
  const std::string key =
      extract_api_key(req.get_header_value("Authorization"), req.get_header_value("X-Api-Key"));
  return keys_.matches(key);
}

void HttpServer::route(const std::string& method, const std::string& path, Gate gate,
                       Handler handler) {
  auto wrapped = [this, gate, handler = std::move(handler)](const httplib::Request& req,
                                                            httplib::Response& res) {
    if (!authorized(req)) {
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
  if (options_.port == 0) {
    port_ = server_.bind_to_any_port(options_.host);
    if (port_ <= 0) return Status::Error("cannot bind " + options_.host + " on any port");
  } else {
    if (!server_.bind_to_port(options_.host, options_.port)) {
      return Status::Error("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                           " (address in use, or not an address of this machine)");
    }
    port_ = options_.port;
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
