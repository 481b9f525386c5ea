#include "cli/sse_reader.h"

namespace syv::cli {
namespace {

// Output in one chunk: choice 0's text (completions), content, reasoning or a tool call (chat).
bool chunk_output(const nlohmann::json& chunk, std::string* text, std::string* finish) {
  if (!chunk.is_object() || !chunk.contains("choices") || !chunk["choices"].is_array() ||
      chunk["choices"].empty())
    return false;
  const nlohmann::json& c = chunk["choices"][0];
  if (!c.is_object()) return false;
  if (c.contains("finish_reason") && c["finish_reason"].is_string())
    *finish = c["finish_reason"].get<std::string>();
  bool output = false;
  auto take = [&](const nlohmann::json& obj, const char* key, bool keep) {
    if (obj.contains(key) && obj[key].is_string() && !obj[key].get<std::string>().empty()) {
      if (keep) *text += obj[key].get<std::string>();
      output = true;
    }
  };
  take(c, "text", true);
  if (c.contains("delta") && c["delta"].is_object()) {
    const nlohmann::json& d = c["delta"];
    take(d, "content", true);
    take(d, "reasoning_content", false);
    if (d.contains("tool_calls") && d["tool_calls"].is_array() && !d["tool_calls"].empty())
      output = true;
  }
  return output;
}

}  // namespace

int64_t StreamReply::completion_tokens() const {
  if (usage.is_object() && usage.contains("completion_tokens") &&
      usage["completion_tokens"].is_number_integer())
    return usage["completion_tokens"].get<int64_t>();
  return static_cast<int64_t>(output_times.size());
}

int64_t StreamReply::cached_tokens() const {
  if (!usage.is_object()) return 0;
  const nlohmann::json d = usage.value("prompt_tokens_details", nlohmann::json());
  if (!d.is_object() || !d.contains("cached_tokens") || !d["cached_tokens"].is_number_integer())
    return 0;
  return d["cached_tokens"].get<int64_t>();
}

size_t SseReader::feed(std::string_view bytes, double t) {
  buffer_.append(bytes);
  size_t start = 0, nl;
  while ((nl = buffer_.find('\n', start)) != std::string::npos) {
    line(std::string_view(buffer_).substr(start, nl - start), t);
    start = nl + 1;
  }
  buffer_.erase(0, start);
  return out_->output_times.size();
}

void SseReader::finish() {
  if (buffer_.empty()) return;
  out_->format_ok = false;
  out_->format_error = "the stream ended inside a line: " + buffer_.substr(0, 80);
}

void SseReader::line(std::string_view line, double t) {
  StreamReply& out = *out_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty() || line[0] == ':') return;
  if (line.substr(0, 5) != "data:") {
    if (out.format_ok) out.format_error = "not an SSE line: " + std::string(line.substr(0, 80));
    out.format_ok = false;
    return;
  }
  std::string_view payload = line.substr(5);
  if (!payload.empty() && payload[0] == ' ') payload.remove_prefix(1);
  if (payload == "[DONE]") {
    out.done = true;
    return;
  }
  if (out.done && out.format_ok) {
    out.format_ok = false;
    out.format_error = "data after [DONE]";
  }
  nlohmann::json chunk = nlohmann::json::parse(payload, nullptr, false);
  if (chunk.is_discarded()) {
    if (out.format_ok) out.format_error = "not JSON: " + std::string(payload.substr(0, 80));
    out.format_ok = false;
    return;
  }
  if (chunk.is_object() && chunk.contains("usage") && chunk["usage"].is_object())
    out.usage = chunk["usage"];
  if (chunk_output(chunk, &out.text, &out.finish_reason)) {
    if (out.ttft < 0) out.ttft = t;
    out.output_times.push_back(t);
  }
}

}  // namespace syv::cli
