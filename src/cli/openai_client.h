// A client of an OpenAI-compatible server (syv, vLLM, llama-server) for `syv bench serve` and
// `syv verify`: JSON requests, and streamed ones (SSE) timed chunk by chunk. Each call opens its
// own connection (cpp-httplib clients are not shared between threads), so calls may run from
// any number of threads at once.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/sse_reader.h"
#include "core/status.h"

namespace syv::cli {

struct HttpReply {
  int status = 0;     // 0: no answer (see error)
  std::string body;   // the answer's body
  std::string error;  // transport error ("Connection", "Read"...); "" when answered
  std::string header(const std::string& name) const;
  std::vector<std::pair<std::string, std::string>> headers;
};

class OpenAiClient {
 public:
  // `url`: the server's root, "http://host:port" (https too); a trailing "/v1" or "/" is dropped.
  static Result<OpenAiClient> create(const std::string& url, const std::string& api_key);

  // `key`: the key to send instead of the client's ("" = no Authorization header).
  HttpReply get(const std::string& path, std::optional<std::string> key = std::nullopt) const;
  HttpReply post(const std::string& path, const nlohmann::json& body,
                 std::optional<std::string> key = std::nullopt) const;
  // POSTs `body` (which should have "stream": true) and reads the stream; with `stop_after` > 0
  // the connection is closed after that many output chunks (a client that goes away).
  StreamReply stream(const std::string& path, const nlohmann::json& body, int stop_after = 0) const;

  const std::string& url() const { return base_; }
  const std::string& api_key() const { return key_; }
  void set_timeout_s(int seconds) { timeout_s_ = seconds; }

 private:
  std::string base_;    // scheme://host:port
  std::string prefix_;  // a path before the routes ("" or "/something")
  std::string key_;
  int timeout_s_ = 600;
};

// The first model id of GET /v1/models, or an error naming what came back.
Result<std::string> served_model(const OpenAiClient& client);

}  // namespace syv::cli
