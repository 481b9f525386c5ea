#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "server/json_limits.h"
#include "server/random_id.h"
#include "server/reasoning_parser.h"

namespace syv::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

bool parse_tool_call_body(std::string_view body, ToolCall& out) {
  // Model output is steered by the prompt: nesting past the limit stays text, never recursion.
  if (find_json_depth_excess(body).has_value()) return false;
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return false;
  }
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  std::string arguments = "{}";
  if (args != j.end()) {
    if (args->is_object()) {
      arguments = args->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else if (args->is_string()) {
      arguments = args->get<std::string>();
    } else {
      return false;
    }
  }
  out.id = random_id("call_");
  out.name = name->get<std::string>();
  out.arguments = std::move(arguments);
  return true;
}

void ToolCallParser::emit_content(std::string_view text, Delta& out) {
  if (text.empty()) return;
  if (is_blank(text)) {
    whitespace_.append(text);
    return;
  }
  // Trailing whitespace is held too: it is dropped if a tool call follows.
  const size_t end = text.find_last_not_of(" \t\r\n") + 1;
  out.content.append(whitespace_);
  out.content.append(text.substr(0, end));
  whitespace_ = std::string(text.substr(end));
}

ToolCallParser::Delta ToolCallParser::feed(std::string_view text) {
  Delta out;
  std::string buf = std::move(pending_);
  pending_.clear();
  buf.append(text);
  std::string_view rest(buf);
  while (!rest.empty()) {
    if (!inside_) {
      const size_t open = rest.find(kOpen);
      if (open == std::string_view::npos) {
        const size_t hold = partial_tag_suffix(rest, kOpen);
        emit_content(rest.substr(0, rest.size() - hold), out);
        pending_ = std::string(rest.substr(rest.size() - hold));
        break;
      }
      emit_content(rest.substr(0, open), out);
      rest.remove_prefix(open + kOpen.size());
      inside_ = true;
    } else {
      const size_t close = rest.find(kClose);
      if (close == std::string_view::npos) {
        pending_ = std::string(rest);
        break;
      }
      const std::string_view body = rest.substr(0, close);
      ToolCall call;
      if (parse_tool_call_body(body, call)) {
        whitespace_.clear();
        out.calls.push_back(std::move(call));
        ++num_calls_;
      } else {
        emit_content(std::string(kOpen) + std::string(body) + std::string(kClose), out);
      }
      rest.remove_prefix(close + kClose.size());
      inside_ = false;
    }
  }
  return out;
}

ToolCallParser::Delta ToolCallParser::finish() {
  Delta out;
  std::string held = std::move(pending_);
  pending_.clear();
  if (inside_) {
    held = std::string(kOpen) + held;
    inside_ = false;
  }
  if (!held.empty() && !is_blank(held)) {
    emit_content(held, out);
  } else if (num_calls_ == 0) {
    out.content = whitespace_ + held;
  }
  whitespace_.clear();
  return out;
}

}  // namespace syv::server
