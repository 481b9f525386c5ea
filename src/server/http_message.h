// The request a route handler reads and the response it fills, independent of the transport
// (http_server.cpp reads and writes them on the wire with Boost.Beast). A response is either a
// whole body or a stream: a provider the transport calls repeatedly on the handler's worker thread,
// each call writing what it has through a StreamSink (chunked transfer encoding); a write blocks
// until the client takes the bytes (back-pressure) or the write deadline passes.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syv::server {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive ASCII comparison of header names.
bool header_name_equals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target's path, percent-decoded
  HeaderFields headers;
  std::string body;  // whole, inflated when the transport accepts a Content-Encoding
  // The route's captures: [0] is the path, [1].. what each parameter matched (/v1/models/{id}).
  std::vector<std::string> matches;
  std::string remote_addr;
  int remote_port = 0;
  // The API key the request was accepted with, as its index among the configured keys (set by
  // the transport's auth; -1: none, e.g. a public route). The access log names it "key #<i+1>".
  int key_index = -1;
  // True once the client has closed or reset the connection (set by the transport; without one,
  // always false). Cheap: one poll() of the socket.
  std::function<bool()> is_connection_closed;

  bool has_header(std::string_view name) const;
  // The first value of `name`, or "".
  std::string get_header_value(std::string_view name) const;
  size_t header_count(std::string_view name) const;
  bool connection_closed() const { return is_connection_closed && is_connection_closed(); }
};

// What a streamed response writes through; the transport frames each write as one chunk.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Blocks until the bytes are written; false when the client is gone or too slow.
  virtual bool write(std::string_view data) = 0;
  // The stream is complete: the transport writes the last chunk after the provider returns.
  virtual void done() = 0;
};

struct HttpResponse {
  int status = -1;  // -1: the handler set none (the transport answers 500)
  HeaderFields headers;
  std::string body;
  std::string content_type;
  // A streamed body: `provider` is called until it calls sink.done() (success) or returns false
  // (abort: the connection is closed without the last chunk); `on_end(success)` runs once after.
  std::function<bool(StreamSink&)> provider;
  std::function<void(bool)> on_end;

  void set_header(std::string name, std::string value);
  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;
  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
  void set_stream(std::string type, std::function<bool(StreamSink&)> stream_provider,
                  std::function<void(bool)> stream_end) {
    content_type = std::move(type);
    provider = std::move(stream_provider);
    on_end = std::move(stream_end);
  }
  bool streamed() const { return static_cast<bool>(provider); }
};

}  // namespace syv::server
