// Server-sent events as the OpenAI streaming API writes them: one "data: <json>\n\n" per chunk,
// closed by "data: [DONE]\n\n". SseReader splits a received stream back into payloads (tests,
// and anything that consumes a syv stream).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace syv::server {

std::string sse_data(const nlohmann::json& payload);
// "event: <type>\ndata: <json>\n\n", as the Responses API streams (no [DONE] after the last).
std::string sse_event(const std::string& type, const nlohmann::ordered_json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

class SseReader {
 public:
  // Appends bytes; returns the data payloads of the events completed by them ("[DONE]" included
  // as is). Lines other than "data:" (comments, event:, id:) are skipped.
  std::vector<std::string> feed(std::string_view bytes);
  // Bytes of an event not yet terminated by a blank line.
  const std::string& pending() const { return buffer_; }

 private:
  std::string buffer_;
};

}  // namespace syv::server
