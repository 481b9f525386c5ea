#include "server/responses_items.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "server/random_id.h"

namespace syv::server {

using nlohmann::ordered_json;

namespace {

const char* id_prefix(const std::string& type) {
  if (type == "function_call") return "fc_";
  if (type == "function_call_output") return "fco_";
  if (type == "reasoning") return "rs_";
  return "msg_";
}

// A message's content as parts: a string is one text part.
ordered_json content_parts(const ordered_json& content, bool assistant) {
  if (!content.is_string()) return content;
  if (assistant) {
    return ordered_json::array(
        {{{"type", "output_text"}, {"text", content}, {"annotations", ordered_json::array()}}});
  }
  return ordered_json::array({{{"type", "input_text"}, {"text", content}}});
}

}  // namespace

void append_input_items(const ordered_json& input, ordered_json& items) {
  std::unordered_set<std::string> used;
  for (const ordered_json& it : items) {
    if (it.contains("id") && it["id"].is_string()) used.insert(it["id"].get<std::string>());
  }
  std::vector<ordered_json> list;
  if (input.is_string()) {
    list.push_back({{"type", "message"}, {"role", "user"}, {"content", input}});
  } else {
    for (const ordered_json& it : input) list.push_back(it);
  }
  for (ordered_json& it : list) {
    if (!it.contains("type") || it["type"].is_null()) it["type"] = "message";
    const std::string type = it["type"].get<std::string>();
    const ordered_json given = it.value("id", ordered_json());
    std::string id = given.is_string() ? given.get<std::string>() : "";
    if (id.empty() || used.count(id) != 0) id = random_id(id_prefix(type));
    used.insert(id);
    ordered_json out = {{"id", id}, {"type", type}};
    for (const auto& [key, value] : it.items()) {
      if (key == "id" || key == "type" || value.is_null()) continue;
      out[key] = key == "content" && type == "message"
                     ? content_parts(value, it.value("role", "") == "assistant")
                     : value;
    }
    if (!out.contains("status")) out["status"] = "completed";
    items.push_back(std::move(out));
  }
}

ApiResult<ordered_json> input_items_page(
    const ordered_json& items, const std::vector<std::pair<std::string, std::string>>& query) {
  int limit = 20;
  bool descending = false;
  std::string after, before;  // "" when not given
  bool has_after = false, has_before = false;
  std::unordered_set<std::string> seen;
  for (const auto& [name, value] : query) {
    const std::string shown = name.substr(0, 64);
    if (!seen.insert(name).second) {
      return ApiError::bad_param(shown, shown + ": given more than once");
    }
    if (name == "limit") {
      int v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size() || v < 1 || v > 100) {
        return ApiError::bad_param(
            "limit", "limit: expected an integer in 1..100, found \"" + value.substr(0, 32) + "\"");
      }
      limit = v;
    } else if (name == "order") {
      if (value != "asc" && value != "desc") {
        return ApiError::bad_param(
            "order", "order: expected \"asc\" or \"desc\", found \"" + value.substr(0, 32) + "\"");
      }
      descending = value == "desc";
    } else if (name == "after") {
      after = value;
      has_after = true;
    } else if (name == "before") {
      before = value;
      has_before = true;
    } else if (name == "include" || name == "include[]") {
      return ApiError::unsupported(shown, shown +
                                              ": syv's input items are text, function calls and "
                                              "their outputs; there is nothing more to include");
    } else {
      return ApiError{400,
                      shown + ": unknown query parameter (syv reads limit, order, after, before)",
                      "invalid_request_error", shown, "unknown_parameter"};
    }
  }

  std::vector<const ordered_json*> list;
  for (const ordered_json& it : items) list.push_back(&it);
  if (descending) std::reverse(list.begin(), list.end());
  auto position = [&](const std::string& param,
                      const std::string& id) -> ApiResult<std::ptrdiff_t> {
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const ordered_json* item) { return (*item)["id"] == id; });
    if (it == list.end()) {
      return ApiError::bad_param(
          param, param + ": no item `" + id.substr(0, 80) + "` among this response's input items");
    }
    return it - list.begin();
  };
  std::ptrdiff_t begin = 0, end = static_cast<std::ptrdiff_t>(list.size());
  if (has_after) {
    ApiResult<std::ptrdiff_t> p = position("after", after);
    if (!p.ok()) return p.error();
    begin = p.value() + 1;
  }
  if (has_before) {
    ApiResult<std::ptrdiff_t> p = position("before", before);
    if (!p.ok()) return p.error();
    end = p.value();
  }
  end = std::max(begin, end);
  const bool more = end - begin > limit;
  // With only `before`, the page is the items closest to it; otherwise it starts at `begin`.
  if (more && has_before && !has_after) {
    begin = end - limit;
  } else if (more) {
    end = begin + limit;
  }
  ordered_json data = ordered_json::array();
  for (std::ptrdiff_t i = begin; i < end; ++i) data.push_back(*list[static_cast<size_t>(i)]);
  ordered_json page = {{"object", "list"}, {"data", data}};
  page["first_id"] = data.empty() ? ordered_json() : data.front()["id"];
  page["last_id"] = data.empty() ? ordered_json() : data.back()["id"];
  page["has_more"] = more;
  return page;
}

}  // namespace syv::server
