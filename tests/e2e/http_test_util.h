// Helpers for the server tests: a raw loopback HTTP connection (to read part of a stream and
// hang up), SSE parsing and OpenAI error-shape checks.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/sse.h"

namespace syv::testing {

// True when `body` is {"error": {"message": string, "type": string, "param", "code"}}.
inline bool is_openai_error(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error")) return false;
  const nlohmann::json& e = j["error"];
  return e.is_object() && e.contains("message") && e["message"].is_string() && e.contains("type") &&
         e["type"].is_string() && e.contains("param") && e.contains("code");
}

// Splits an SSE body into payloads; fails the caller's expectations through the return value:
// `ok` is false when a line is neither "data: ...", a comment, nor blank.
struct SseBody {
  std::vector<std::string> events;
  bool ok = true;
};
inline SseBody parse_sse(const std::string& body) {
  SseBody out;
  size_t start = 0;
  while (start < body.size()) {
    size_t nl = body.find('\n', start);
    if (nl == std::string::npos) nl = body.size();
    const std::string line = body.substr(start, nl - start);
    if (!(line.empty() || line.rfind("data: ", 0) == 0 || line[0] == ':')) out.ok = false;
    start = nl + 1;
  }
  server::SseReader reader;
  out.events = reader.feed(body);
  if (!reader.pending().empty()) out.ok = false;
  return out;
}

// A blocking loopback TCP connection.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConnection() { close(); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send_post(const std::string& path, const std::string& key, const std::string& body) {
    const std::string req =
        "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    return ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  bool send_raw(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Reads until `needle` has been received `count` times (or the timeout / EOF); returns all.
  std::string read_until(const std::string& needle, int count,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      int seen = 0;
      for (size_t p = got.find(needle); p != std::string::npos; p = got.find(needle, p + 1)) ++seen;
      if (seen >= count) break;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads (and drops) until the server closes the connection; true when it did within `timeout`.
  bool closed_by_server_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      timeval tv{static_cast<time_t>(left.count() / 1000000),
                 static_cast<suseconds_t>(left.count() % 1000000)};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace syv::testing
