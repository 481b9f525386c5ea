#include "server/sse.h"

#include "server/api_error.h"

namespace syv::server {

std::string sse_data(const nlohmann::json& payload) {
  std::string out = "data: ";
  out += dump_json(payload);
  out += "\n\n";
  return out;
}

std::string sse_event(const std::string& type, const nlohmann::ordered_json& payload) {
  std::string out = "event: ";
  out += type;
  out += "\ndata: ";
  out += dump_json(payload);
  out += "\n\n";
  return out;
}

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::vector<std::string> events;
  size_t end;
  while ((end = buffer_.find("\n\n")) != std::string::npos) {
    const std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    std::string data;
    size_t start = 0;
    bool any = false;
    while (start <= event.size()) {
      size_t nl = event.find('\n', start);
      if (nl == std::string::npos) nl = event.size();
      std::string_view line(event.data() + start, nl - start);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (any) data.push_back('\n');
        data.append(line);
        any = true;
      }
      start = nl + 1;
    }
    if (any) events.push_back(std::move(data));
  }
  return events;
}

}  // namespace syv::server
