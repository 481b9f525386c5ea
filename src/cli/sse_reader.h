// The server-sent events of a streamed OpenAI completion as a client sees them (`syv bench serve`
// and `syv verify` against any OpenAI-compatible server, whose bytes are untrusted: fuzzed by
// tests/fuzz/server_replies_fuzz.cpp): lines split however the transport delivered them, each
// "data: {json}", "data: [DONE]", a ": comment" or blank.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace syv::cli {

// One streamed completion as the client saw it. Times are seconds since the request was sent.
struct StreamReply {
  int status = 0;
  std::string error;  // transport error, or the body of a non-200 answer
  double ttft = -1;   // the first chunk carrying output (text, reasoning or a tool call)
  double e2e = -1;    // the end of the stream
  std::vector<double> output_times;  // every chunk carrying output, in order
  std::string text;                  // choice 0's text / content, joined
  std::string finish_reason;
  nlohmann::json usage;      // the last "usage" object seen (stream_options.include_usage), or null
  bool done = false;         // "data: [DONE]" ended the stream
  bool format_ok = true;     // every line was "data: ...", ": comment" or blank; every payload JSON
  std::string format_error;  // the first line or payload that was not
  int64_t completion_tokens() const;  // usage.completion_tokens, else the output chunks
  int64_t cached_tokens() const;      // usage.prompt_tokens_details.cached_tokens, else 0
};

// Reads a 200 answer's body into a StreamReply as its bytes arrive.
class SseReader {
 public:
  explicit SseReader(StreamReply* out) : out_(out) {}
  // The next bytes, received `t` seconds after the request (t never decreasing): every complete
  // line is read. Returns the output chunks read so far.
  size_t feed(std::string_view bytes, double t);
  // The stream ended: a last line without its newline is a format error.
  void finish();

 private:
  void line(std::string_view line, double t);
  StreamReply* out_;
  std::string buffer_;  // the bytes after the last newline
};

}  // namespace syv::cli
