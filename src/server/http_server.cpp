#include "server/http_server.h"

#include <malloc.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/log.h"
#include "server/http_beast.h"
#include "server/webui_assets.h"

namespace syv::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// Authenticated requests run here, one at a time per thread, whole (a stream included).
class WorkerPool {
 public:
  ~WorkerPool() { stop(); }
  void start(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Waits for the tasks running now; tasks still queued are dropped.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(queue_);
    }
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

// Writes all of `data` to a socket by the deadline; false when the peer is gone or too slow. The
// worker owns the socket meanwhile (no asynchronous operation is pending on it).
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) {
        return false;
      }
      if ((p.revents & (POLLERR | POLLHUP)) != 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

// True once the peer has closed or reset the connection. A client that only half-closes
// (shutdown(SHUT_WR)) after its request counts as gone, as in uvicorn.
bool peer_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// A streamed body as chunks; the last chunk is written by finish().
class ChunkWriter : public StreamSink {
 public:
  ChunkWriter(int fd, std::chrono::seconds timeout) : fd_(fd), timeout_(timeout) {}
  bool write(std::string_view data) override {
    if (failed_ || done_) return false;
    if (data.empty()) return true;
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string frame = size;
    frame.append(data);
    frame += "\r\n";
    failed_ = !send_all(fd_, frame, Clock::now() + timeout_);
    return !failed_;
  }
  void done() override { done_ = true; }
  bool failed() const { return failed_; }
  bool is_done() const { return done_; }
  bool finish() { return !failed_ && send_all(fd_, "0\r\n\r\n", Clock::now() + timeout_); }

 private:
  int fd_;
  std::chrono::seconds timeout_;
  bool failed_ = false;
  bool done_ = false;
};

// Requests with at least this many body bytes return their memory to the system when answered.
// A body's parse costs up to ~160 bytes per body byte (a million `{}` in 3 MB took ~480 MB), so
// 64 KiB may leave ~10 MB behind; a trim costs well under a generation request's time.
constexpr size_t kTrimAfterBodyBytes = size_t{64} << 10;

// Statuses after which the connection is closed: the request's framing is in doubt.
bool closes_connection(int status) {
  return status == 400 || status == 408 || status == 411 || status == 413 || status == 414 ||
         status == 415 || status == 431;
}

bool is_disconnect(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == http::error::end_of_stream ||
         ec == http::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == asio::error::broken_pipe || ec == asio::error::bad_descriptor;
}

}  // namespace

// The shared state of the transport. Members the sessions touch in their destructors are declared
// before the io_context, so they outlive the sessions it destroys.
struct HttpServer::Impl {
  std::atomic<int> connections{0};
  std::mutex fds_mutex;
  std::set<int> fds;  // the open connections' sockets, shut down by stop()
  std::atomic<uint64_t> refused_connections{0};
  asio::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  WorkerPool pool;
  bool started = false;
  bool stopped = false;
};

// One connection: its reads and early answers on the I/O threads (one strand), its authenticated
// requests on a worker, one request at a time.
class HttpServer::Session : public std::enable_shared_from_this<HttpServer::Session> {
 public:
  Session(HttpServer& server, tcp::socket socket)
      : server_(server),
        impl_(*server.impl_),
        stream_(std::move(socket)),
        buffer_(server.options_.limits.max_header_bytes + (64u << 10)) {
    beast::error_code ec;
    const tcp::endpoint peer = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      remote_addr_ = peer.address().to_string();
      remote_port_ = peer.port();
    }
    fd_ = stream_.socket().native_handle();
    impl_.connections.fetch_add(1);
    std::lock_guard<std::mutex> lock(impl_.fds_mutex);
    impl_.fds.insert(fd_);
  }
  ~Session() {
    {
      std::lock_guard<std::mutex> lock(impl_.fds_mutex);
      impl_.fds.erase(fd_);
    }
    impl_.connections.fetch_sub(1);
  }

  void start() { read_head(); }

 private:
  const HttpOptions& options() const { return server_.options_; }
  // A HEAD request's answer is its head alone.
  bool head_only() const { return req_.method == "HEAD"; }

  void read_head() {
    parser_.emplace();
    configure_parser(*parser_, options().limits);
    req_ = HttpRequest{};
    res_ = HttpResponse{};
    route_ = nullptr;
    stream_.expires_after(
        std::chrono::seconds(first_ ? options().header_timeout_s : options().keep_alive_timeout_s));
    first_ = false;
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    start_ = Clock::now();
    if (ec) {
      if (ec == beast::error::timeout && buffer_.size() > 0) {
        SYV_LOG(DEBUG) << "http: " << remote_addr_ << ":" << remote_port_
                       << " closed: no complete request head within the deadline";
      }
      if (is_disconnect(ec)) return close();
      const char* data = static_cast<const char*>(buffer_.data().data());
      req_.remote_addr = remote_addr_;
      req_.remote_port = remote_port_;
      req_.method = "-";
      req_.path = "-";
      return refuse(refusal_for_parse_error(
          ec, unparsed_request_line(*parser_, std::string_view(data, buffer_.size())),
          options().limits));
    }
    req_ = request_head(*parser_);
    req_.remote_addr = remote_addr_;
    req_.remote_port = remote_port_;
    if (server_.answer_before_body(req_, res_, route_)) {
      const bool keep_alive =
          parser_->is_done() && parser_->get().keep_alive() && !closes_connection(res_.status);
      return answer_now(keep_alive);
    }
    if (!parser_->is_done() && beast::iequals(req_.get_header_value("Expect"), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(std::chrono::seconds(options().write_timeout_s));
      return asio::async_write(stream_, asio::buffer(kContinue),
                               [self = shared_from_this()](beast::error_code e, size_t) {
                                 if (e) return self->close();
                                 self->read_body();
                               });
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_body({});
    stream_.expires_after(std::chrono::seconds(options().body_timeout_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec) {
      if (is_disconnect(ec)) return close();
      return refuse(refusal_for_parse_error(ec, {}, options().limits));
    }
    req_.body = std::move(parser_->get().body());
    impl_.pool.post([self = shared_from_this()] { self->serve_on_worker(); });
  }

  // On a worker: inflate, run the route, write the answer (blocking, with deadlines), then hand
  // the connection back to the I/O threads.
  void serve_on_worker() {
    current_request_tokens() = RequestTokens{};
    const int fd = fd_;
    req_.is_connection_closed = [fd] { return peer_closed(fd); };
    bool run = true;
    const std::string encoding = req_.get_header_value("Content-Encoding");
    if (!encoding.empty() && !beast::iequals(encoding, "identity")) {
      ApiResult<std::string> inflated =
          inflate_body(encoding, req_.body, options().limits.max_body_bytes);
      if (inflated.ok()) {
        req_.body = std::move(inflated.value());
      } else {
        write_error(res_, inflated.error());
        run = false;
      }
    }
    if (run) server_.run_route(*route_, req_, res_);
    bool keep_alive = parser_->get().keep_alive() && !closes_connection(res_.status);
    const auto write_timeout = std::chrono::seconds(options().write_timeout_s);
    bool ok = false;
    if (res_.status == 499) {
      // The client left (the handler noticed): nothing to write.
    } else if (!res_.streamed() || head_only()) {
      // HEAD: GET's status and headers (its Content-Length included), without the body; a stream
      // is not started.
      const std::string out =
          response_head(res_, res_.streamed() ? -1 : static_cast<long long>(res_.body.size()),
                        keep_alive) +
          (head_only() ? std::string() : res_.body);
      ok = send_all(fd, out, Clock::now() + write_timeout);
      if (res_.streamed()) {
        if (res_.on_end) res_.on_end(false);
        res_.provider = nullptr;
        res_.on_end = nullptr;
      }
    } else {
      ChunkWriter sink(fd, write_timeout);
      bool finished = false;
      if (send_all(fd, response_head(res_, -1, keep_alive), Clock::now() + write_timeout)) {
        while (res_.provider(sink) && !sink.failed()) {
          if (sink.is_done()) {
            finished = sink.finish();
            break;
          }
        }
      }
      if (res_.on_end) res_.on_end(finished);
      res_.provider = nullptr;
      res_.on_end = nullptr;
      ok = finished;
    }
    const RequestTokens tokens = current_request_tokens();
    current_request_tokens() = RequestTokens{};
    server_.metrics_.count_response(res_.status);
    server_.log_access(req_, res_.status, start_, tokens);
    req_.is_connection_closed = nullptr;
    // A large body leaves its parse trees, template values and prompt freed in this thread's
    // malloc arena, which glibc keeps: give them back to the system now (a 0.8 MB body of 262,000
    // `{}` peaks at +125 MB while it is served; without this, most of it stayed resident).
    if (req_.body.size() >= kTrimAfterBodyBytes) {
      req_.body = std::string();
      malloc_trim(0);
    }
    keep_alive = keep_alive && ok;
    asio::post(stream_.get_executor(), [self = shared_from_this(), keep_alive] {
      if (keep_alive) {
        self->read_head();
      } else {
        self->linger();
      }
    });
  }

  void refuse(const ApiError& error) {
    write_error(res_, error);
    answer_now(/*keep_alive=*/false);
  }

  // Writes res_ from the I/O thread (an answer that needs no worker).
  void answer_now(bool keep_alive) {
    if (res_.status < 0) write_error(res_, ApiError::server_error("internal error"));
    server_.metrics_.count_response(res_.status);
    server_.log_access(req_, res_.status, start_, RequestTokens{});
    auto out = std::make_shared<std::string>(
        response_head(res_, static_cast<long long>(res_.body.size()), keep_alive) +
        (head_only() ? std::string() : res_.body));
    stream_.expires_after(std::chrono::seconds(options().write_timeout_s));
    asio::async_write(stream_, asio::buffer(*out),
                      [self = shared_from_this(), out, keep_alive](beast::error_code ec, size_t) {
                        if (ec) return self->close();
                        if (keep_alive) return self->read_head();
                        self->linger();
                      });
  }

  // Closes after the answer: stop sending, then read and drop what the client still sends (its
  // unread body) for a moment, so that closing does not reset the connection before the client
  // has read the answer.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    lingered_ = 0;
    discard_.resize(16384);
    stream_.expires_after(std::chrono::seconds(2));
    linger_read();
  }
  void linger_read() {
    stream_.async_read_some(
        asio::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->lingered_ += n;
          if (ec || self->lingered_ > self->options().limits.max_body_bytes + (1u << 20)) {
            return self->close();
          }
          self->linger_read();
        });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  HttpServer& server_;
  Impl& impl_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  HttpRequest req_;
  HttpResponse res_;
  const Route* route_ = nullptr;
  std::string remote_addr_;
  int remote_port_ = 0;
  int fd_ = -1;
  bool first_ = true;
  Clock::time_point start_ = Clock::now();
  std::vector<char> discard_;  // allocated when lingering only
  size_t lingered_ = 0;
};

HttpServer::HttpServer(HttpOptions options, ApiKeys keys, OpenAiRoutes& routes, Metrics& metrics)
    : options_(std::move(options)),
      keys_(std::move(keys)),
      routes_(routes),
      metrics_(metrics),
      impl_(std::make_unique<Impl>()) {
  auto* r = &routes_;
  route("POST", "/v1/chat/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->chat_completions(q, s); });
  route("POST", "/v1/completions", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->completions(q, s); });
  route("POST", "/v1/responses", Gate::kGeneration,
        [r](const auto& q, auto& s) { r->responses(q, s); });
  // GET /v1/responses/{id}[/input_items], DELETE /v1/responses/{id}, POST
  // /v1/responses/{id}/cancel: public when /v1/responses is.
  route(
      "GET", "/v1/responses/", Gate::kReady, [r](const auto& q, auto& s) { r->response_get(q, s); },
      "/v1/responses",
      /*has_param=*/true);
  route(
      "DELETE", "/v1/responses/", Gate::kReady,
      [r](const auto& q, auto& s) { r->response_delete(q, s); }, "/v1/responses",
      /*has_param=*/true);
  route(
      "POST", "/v1/responses/", Gate::kReady,
      [r](const auto& q, auto& s) { r->response_cancel(q, s); }, "/v1/responses",
      /*has_param=*/true);
  route("POST", "/tokenize", Gate::kReady, [r](const auto& q, auto& s) { r->tokenize(q, s); });
  route("POST", "/detokenize", Gate::kReady, [r](const auto& q, auto& s) { r->detokenize(q, s); });
  route("GET", "/v1/models", Gate::kReady, [r](const auto& q, auto& s) { r->models(q, s); });
  // An id may hold '/' ("Qwen/Qwen3-8B"); the route is public when /v1/models is.
  route(
      "GET", "/v1/models/", Gate::kReady, [r](const auto& q, auto& s) { r->model(q, s); },
      "/v1/models", /*has_param=*/true);
  route("POST", "/v1/embeddings", Gate::kAlways,
        [r](const auto& q, auto& s) { r->embeddings(q, s); });
  route("GET", "/health", Gate::kReady, [r](const auto& q, auto& s) { r->health(q, s); });
  route("GET", "/metrics", Gate::kAlways, [r](const auto& q, auto& s) { r->metrics(q, s); });
  if (options_.webui) route_webui();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::route(std::string method, std::string path, Gate gate, Handler handler,
                       std::string auth_path, bool has_param) {
  routes_table_.push_back(Route{std::move(method), std::move(path), has_param, gate,
                                std::move(handler), std::move(auth_path)});
}

void HttpServer::route_webui() {
  for (const WebUiAsset& asset : webui_assets()) {
    route("GET", std::string(asset.path), Gate::kPublic,
          [&asset](const HttpRequest&, HttpResponse& res) {
            res.status = 200;
            res.set_content(std::string(asset.body), std::string(asset.content_type));
            // Revalidate every load: a rebuilt binary serves the new page at once.
            res.set_header("Cache-Control", "no-cache");
            res.set_header("X-Content-Type-Options", "nosniff");
            res.set_header("Referrer-Policy", "no-referrer");
            // The page runs only its own files and talks only to this server; even if a bug let
            // model text become markup, no inline script or outside request runs.
            res.set_header("Content-Security-Policy",
                           "default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'");
          });
  }
}

namespace {

// Whether `route_path` (a prefix when `has_param`) serves `path`.
bool path_matches(const std::string& route_path, bool has_param, const std::string& path) {
  if (!has_param) return path == route_path;
  return path.size() > route_path.size() && path.rfind(route_path, 0) == 0;
}

}  // namespace

const HttpServer::Route* HttpServer::find_route(HttpRequest& req) const {
  const std::string method = req.method == "HEAD" ? std::string("GET") : req.method;
  for (const Route& r : routes_table_) {
    if (r.method != method || !path_matches(r.path, r.has_param, req.path)) continue;
    req.matches = {req.path};
    if (r.has_param) req.matches.push_back(req.path.substr(r.path.size()));
    return &r;
  }
  return nullptr;
}

std::string HttpServer::allowed_methods(const std::string& path, const Route** first) const {
  bool get = false, post = false, del = false;
  *first = nullptr;
  for (const Route& r : routes_table_) {
    if (!path_matches(r.path, r.has_param, path)) continue;
    if (*first == nullptr) *first = &r;
    get = get || r.method == "GET";
    post = post || r.method == "POST";
    del = del || r.method == "DELETE";
  }
  std::string allow;
  if (*first == nullptr) return allow;
  if (get) allow.append("GET, HEAD, ");
  if (post) allow.append("POST, ");
  if (del) allow.append("DELETE, ");
  return allow.append("OPTIONS");
}

bool HttpServer::apply_cors(const HttpRequest& req, HttpResponse& res) const {
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

bool HttpServer::authorized(HttpRequest& req, const std::string& auth_path) const {
  if (keys_.is_public(auth_path.empty() ? req.path : auth_path)) return true;
  const std::string key =
      extract_api_key(req.get_header_value("Authorization"), req.get_header_value("X-Api-Key"));
  req.key_index = keys_.find(key);
  if (req.key_index >= 0) return true;
  // Never the key itself, not even masked: a wrong key may be someone's real one elsewhere.
  SYV_LOG(WARN) << "auth: refused " << printable(req.method, 16) << " " << printable(req.path)
                << " from " << req.remote_addr << ":" << req.remote_port << " ("
                << (key.empty() ? "no key" : "invalid key") << ")";
  return false;
}

bool HttpServer::answer_before_body(HttpRequest& req, HttpResponse& res,
                                    const Route*& route) const {
  if (apply_cors(req, res)) {
    res.status = 204;
    return true;
  }
  if (std::optional<ApiError> error = check_request_head(req, options_.limits)) {
    write_error(res, *error);
    return true;
  }
  const ApiError unauthorized = ApiError::unauthorized(
      "missing or invalid API key (Authorization: Bearer <key> or X-Api-Key: <key>)");
  route = find_route(req);
  if (route == nullptr) {
    // An unknown route without a valid key is a 401, not a 404 (nor a 405: without a key, which
    // paths exist is not told).
    const Route* other = nullptr;
    const std::string allow = allowed_methods(req.path, &other);
    if (!(other != nullptr && other->gate == Gate::kPublic) &&
        !authorized(req, other != nullptr ? other->auth_path : "")) {
      write_error(res, unauthorized);
    } else if (allow.empty()) {
      write_error(res, ApiError::not_found("no route " + printable(req.method, 16) + " " +
                                           printable(req.path)));
    } else if (req.method == "OPTIONS") {
      res.status = 204;
      res.set_header("Allow", allow);
    } else {
      write_error(res, ApiError{405,
                                printable(req.path) + " does not take " +
                                    printable(req.method, 16) + " (it takes " + allow + ")",
                                "invalid_request_error", "", "method_not_allowed"});
      res.set_header("Allow", allow);
    }
    return true;
  }
  if (route->gate == Gate::kPublic) return false;
  if (!authorized(req, route->auth_path)) {
    write_error(res, unauthorized);
    return true;
  }
  if (route->gate != Gate::kAlways && !ready_.load()) {
    write_error(res, ApiError{503, "the model is loading; retry shortly", "server_error", "",
                              "model_not_ready"});
    return true;
  }
  if (route->gate == Gate::kGeneration && draining_.load()) {
    write_error(res,
                ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
    return true;
  }
  return false;
}

void HttpServer::run_route(const Route& route, HttpRequest& req, HttpResponse& res) const {
  try {
    route.handler(req, res);
    if (res.status < 0) write_error(res, ApiError::server_error("internal error: no answer"));
  } catch (const std::exception& e) {
    SYV_LOG(ERROR) << req.method << " " << printable(req.path) << ": " << e.what();
    res = HttpResponse{};
    write_error(res, ApiError::server_error(std::string("internal error: ") + e.what()));
  } catch (...) {
    res = HttpResponse{};
    write_error(res, ApiError::server_error("internal error"));
  }
}

// One line per answered request.
void HttpServer::log_access(const HttpRequest& req, int status, Clock::time_point start,
                            const RequestTokens& tokens) const {
  if (!options_.access_log) return;
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.1f ms",
                std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  std::string details;
  if (tokens.prompt >= 0) {
    details = ", tokens " + std::to_string(tokens.prompt) + " in / " +
              std::to_string(tokens.completion) + " out";
  }
  // Which key, by its number in the start-up line's list (never the key, not even masked).
  if (req.key_index >= 0) details.append(", key #").append(std::to_string(req.key_index + 1));
  SYV_LOG(INFO) << "http: " << req.remote_addr << ":" << req.remote_port << " "
                << printable(req.method, 16) << " " << printable(req.path) << " " << status << " "
                << duration << details;
}

Status HttpServer::bind() {
  if (options_.port < 0 || options_.port > 65535) {
    return Status::Error("port " + std::to_string(options_.port) +
                         ": expected 1..65535 (or 0 for any free port)");
  }
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto endpoints =
      resolver.resolve(options_.host, std::to_string(options_.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return Status::Error("cannot bind " + where + ": the host does not resolve (" + ec.message() +
                         ")");
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& acceptor = impl_->acceptor.emplace(impl_->ioc);
  acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR (a restart may bind while old connections sit in TIME_WAIT) but never
  // SO_REUSEPORT: a second server on the same port must fail, not take half of the connections.
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) {
    impl_->acceptor.reset();
    return Status::Error("cannot bind " + where +
                         " (address in use, e.g. by another server, or not an address of this "
                         "machine): " +
                         ec.message());
  }
  acceptor.listen(options_.listen_backlog, ec);
  if (ec) return Status::Error("cannot listen on " + where + ": " + ec.message());
  port_ = acceptor.local_endpoint().port();
  // Every connection holds a descriptor: raise the soft limit to the hard one, and keep the
  // connection cap below it (with room for model files, pipes and the like).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      (void)setrlimit(RLIMIT_NOFILE, &files);
      (void)getrlimit(RLIMIT_NOFILE, &files);
    }
    const int64_t fit = static_cast<int64_t>(files.rlim_cur) - 128;
    if (fit < options_.max_connections) {
      SYV_LOG(WARN) << "http: --max-connections lowered from " << options_.max_connections << " to "
                    << std::max<int64_t>(fit, 16) << " (open-file limit " << files.rlim_cur << ")";
      options_.max_connections = static_cast<int>(std::max<int64_t>(fit, 16));
    }
  }
  return Status::Ok();
}

void HttpServer::start() {
  if (impl_->started || !impl_->acceptor) return;
  impl_->started = true;
  impl_->pool.start(std::max(1, options_.threads));
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->accept_retry.emplace(impl_->ioc);
  asio::post(impl_->ioc, [this] { accept_next(); });
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    impl_->io_threads.emplace_back([this] { impl_->ioc.run(); });
  }
}

// The accept loop: a connection over --max-connections is closed at once; running out of
// descriptors pauses accepting for 100 ms instead of spinning.
void HttpServer::accept_next() {
  impl_->acceptor->async_accept(
      asio::make_strand(impl_->ioc), [this](beast::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !impl_->acceptor->is_open()) return;
        if (ec) {
          if (impl_->refused_connections.fetch_add(1) % 1000 == 0) {
            SYV_LOG(WARN) << "http: accept: " << ec.message();
          }
          impl_->accept_retry->expires_after(std::chrono::milliseconds(100));
          impl_->accept_retry->async_wait([this](beast::error_code e) {
            if (!e) accept_next();
          });
          return;
        }
        beast::error_code ignored;
        if (impl_->connections.load() >= options_.max_connections) {
          if (impl_->refused_connections.fetch_add(1) % 1000 == 0) {
            SYV_LOG(WARN) << "http: " << options_.max_connections
                          << " connections open (--max-connections): closing new ones";
          }
          socket.close(ignored);
        } else {
          socket.set_option(tcp::no_delay(true), ignored);
          std::make_shared<Session>(*this, std::move(socket))->start();
        }
        accept_next();
      });
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (routes_.active_requests() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int HttpServer::open_connections() const {
  return impl_->connections.load();
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->started) {
    asio::post(impl_->ioc, [this] {
      beast::error_code ignored;
      if (impl_->acceptor) impl_->acceptor->close(ignored);
      impl_->accept_retry->cancel();
    });
  }
  // Shut every open connection down: a worker still writing to one stops at its next write.
  {
    std::lock_guard<std::mutex> lock(impl_->fds_mutex);
    for (int fd : impl_->fds) ::shutdown(fd, SHUT_RDWR);
  }
  impl_->work.reset();
  impl_->pool.stop();
  impl_->ioc.stop();
  for (std::thread& t : impl_->io_threads) {
    if (t.joinable()) t.join();
  }
  impl_->io_threads.clear();
}

}  // namespace syv::server
