#include "server/responses_request.h"

#include <string_view>
#include <vector>

#include "server/json_limits.h"
#include "server/request_fields.h"
#include "server/responses_items.h"

namespace syv::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

ApiError expected(const std::string& param, const std::string& what, const ordered_json& found) {
  return ApiError::bad_param(
      param, param + ": expected " + what + ", found " + describe_json(json(found)));
}

ApiError unknown_key(const std::string& param, const std::string& reads) {
  return ApiError{400, param + ": unknown field (syv reads " + reads + ")", "invalid_request_error",
                  param, "unknown_parameter"};
}

const ordered_json* field(const ordered_json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Every non-null key of `obj` is one of `known` (else 400 naming `prefix.key`).
std::optional<ApiError> only_keys(const ordered_json& obj, const std::string& prefix,
                                  std::initializer_list<std::string_view> known) {
  std::string reads;
  for (std::string_view k : known) reads += (reads.empty() ? "" : ", ") + std::string(k);
  for (const auto& [key, value] : obj.items()) {
    if (value.is_null()) continue;
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) return unknown_key(prefix + "." + key.substr(0, 64), reads);
  }
  return std::nullopt;
}

// A string, or an array of text parts (`types`: the part types read; anything else is refused
// by name), joined.
std::optional<ApiError> content_text(const ordered_json& content, const std::string& where,
                                     std::initializer_list<std::string_view> types,
                                     std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return expected(where, "a string or an array of content parts", content);
  out.clear();
  for (size_t j = 0; j < content.size(); ++j) {
    const ordered_json& part = content[j];
    const std::string p = indexed(where, j);
    if (!part.is_object()) return expected(p, "an object", part);
    const ordered_json* type = field(part, "type");
    if (type == nullptr || !type->is_string()) return expected(p + ".type", "a string", part);
    const std::string t = type->get<std::string>();
    bool known = false;
    std::string list;
    for (std::string_view k : types) {
      known = known || t == k;
      list += (list.empty() ? "" : ", ") + std::string(k);
    }
    if (!known) {
      return ApiError::unsupported(p + ".type", p + ".type: syv reads text parts only (" + list +
                                                    "), found " + describe_json(json(*type)));
    }
    const char* key = t == "refusal" ? "refusal" : "text";
    const ordered_json* text = field(part, key);
    if (text == nullptr || !text->is_string()) {
      return expected(p + "." + key, "a string", part.value(key, ordered_json()));
    }
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// The input items as chat messages, with the input path each came from (for errors).
class Conversation {
 public:
  ordered_json messages = ordered_json::array();
  std::vector<std::string> origins;

  void add(ordered_json message, std::string origin) {
    const bool assistant = message["role"] == "assistant";
    if (assistant && !reasoning_.empty()) message["reasoning_content"] = std::move(reasoning_);
    reasoning_.clear();
    messages.push_back(std::move(message));
    origins.push_back(std::move(origin));
    open_assistant_ = assistant;
  }

  std::optional<ApiError> item(const ordered_json& it, const std::string& p) {
    if (!it.is_object()) return expected(p, "an object (an input item)", it);
    const ordered_json* type = field(it, "type");
    if (type != nullptr && !type->is_string()) return expected(p + ".type", "a string", *type);
    const std::string t = type == nullptr ? "message" : type->get<std::string>();
    if (t == "message") return message(it, p);
    if (t == "function_call") return function_call(it, p);
    if (t == "function_call_output") {
      std::string call_id, output;
      SYV_API_RETURN_IF(string_field(it, p, "call_id", call_id));
      const ordered_json* out = field(it, "output");
      if (out == nullptr) return expected(p + ".output", "a string", ordered_json());
      SYV_API_RETURN_IF(content_text(*out, p + ".output", {"input_text", "output_text"}, output));
      add({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}}, p);
      return std::nullopt;
    }
    if (t == "reasoning") {
      // The reasoning text of an earlier turn (its summary and encrypted_content are not text
      // syv wrote); handed to the template with the next assistant message.
      if (const ordered_json* content = field(it, "content"); content != nullptr) {
        std::string text;
        SYV_API_RETURN_IF(content_text(*content, p + ".content", {"reasoning_text"}, text));
        reasoning_ += text;
      }
      return std::nullopt;
    }
    return ApiError::unsupported(
        p + ".type", p +
                         ".type: syv reads message, function_call, function_call_output and "
                         "reasoning items, found " +
                         describe_json(json(*type)));
  }

 private:
  static std::optional<ApiError> string_field(const ordered_json& it, const std::string& p,
                                              const char* name, std::string& out) {
    const ordered_json* v = field(it, name);
    if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
      return expected(p + "." + name, "a non-empty string", v == nullptr ? ordered_json() : *v);
    }
    out = v->get<std::string>();
    return std::nullopt;
  }

  std::optional<ApiError> message(const ordered_json& it, const std::string& p) {
    const ordered_json* role = field(it, "role");
    const std::string roles = "one of \"user\", \"assistant\", \"system\", \"developer\"";
    if (role == nullptr || !role->is_string()) {
      return expected(p + ".role", roles, role == nullptr ? ordered_json() : *role);
    }
    std::string r = role->get<std::string>();
    if (r != "user" && r != "assistant" && r != "system" && r != "developer") {
      return expected(p + ".role", roles, *role);
    }
    if (r == "developer") r = "system";
    const ordered_json* content = field(it, "content");
    if (content == nullptr) {
      return expected(p + ".content", "a string or an array of content parts", ordered_json());
    }
    std::string text;
    SYV_API_RETURN_IF(
        content_text(*content, p + ".content", {"input_text", "output_text", "refusal"}, text));
    add({{"role", r}, {"content", text}}, p);
    return std::nullopt;
  }

  std::optional<ApiError> function_call(const ordered_json& it, const std::string& p) {
    std::string call_id, name;
    SYV_API_RETURN_IF(string_field(it, p, "call_id", call_id));
    SYV_API_RETURN_IF(string_field(it, p, "name", name));
    const ordered_json* args = field(it, "arguments");
    if (args == nullptr || !args->is_string()) {
      return expected(p + ".arguments", "a string (the call's JSON arguments)",
                      args == nullptr ? ordered_json() : *args);
    }
    if (auto excess = find_json_depth_excess(args->get_ref<const std::string&>())) {
      return ApiError::bad_param(p + ".arguments", p + ".arguments: JSON nested more than " +
                                                       std::to_string(kMaxJsonDepth) +
                                                       " levels deep");
    }
    ordered_json call = {{"id", call_id},
                         {"type", "function"},
                         {"function", {{"name", name}, {"arguments", *args}}}};
    if (!open_assistant_) add({{"role", "assistant"}, {"content", ""}}, p);
    ordered_json& last = messages.back();
    if (!last.contains("tool_calls")) last["tool_calls"] = ordered_json::array();
    last["tool_calls"].push_back(std::move(call));
    return std::nullopt;
  }

  std::string reasoning_;        // reasoning text waiting for its assistant message
  bool open_assistant_ = false;  // the last message is an assistant turn calls may join
};

// An error from the chat parser, renamed to the Responses field it came from.
class ErrorNames {
 public:
  explicit ErrorNames(std::vector<std::string> origins) : origins_(std::move(origins)) {}

  ApiError operator()(ApiError e) const {
    e.param = rename(e.param);
    // Messages start with the path of the value at fault ("response_format.json_schema.schema:
    // ..."), which may be deeper than the param.
    const size_t colon = e.message.find(':');
    if (colon != std::string::npos && e.message.find(' ') > colon) {
      e.message = rename(e.message.substr(0, colon)) + e.message.substr(colon);
    }
    return e;
  }

 private:
  static bool starts(const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0 &&
           (s.size() == prefix.size() || s[prefix.size()] == '.' || s[prefix.size()] == '[');
  }

  std::string rename(const std::string& param) const {
    static const std::vector<std::pair<std::string, std::string>> kFields = {
        {"response_format.json_schema", "text.format"},
        {"response_format", "text.format"},
        {"max_tokens", "max_output_tokens"},
        {"reasoning_effort", "reasoning.effort"},
        {"tool_choice.function", "tool_choice"},
    };
    for (const auto& [from, to] : kFields) {
      if (starts(param, from)) return to + param.substr(from.size());
    }
    if (starts(param, "messages")) {
      if (param.size() > 9 && param[8] == '[') {
        const size_t close = param.find(']');
        const size_t k = std::stoul(param.substr(9, close - 9));
        if (k < origins_.size()) return origins_[k] + param.substr(close + 1);
      }
      return "input";
    }
    // tools[i].function.x -> tools[i].x (the Responses tool shape is flat).
    if (param.rfind("tools[", 0) == 0) {
      const size_t close = param.find(']');
      if (close != std::string::npos && param.compare(close + 1, 10, ".function.") == 0) {
        return param.substr(0, close + 1) + param.substr(close + 10);
      }
    }
    return param;
  }

  std::vector<std::string> origins_;
};

std::optional<ApiError> read_tools(const ordered_json& tools, ordered_json& chat_tools) {
  if (!tools.is_array()) return expected("tools", "an array of function tools", tools);
  chat_tools = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string p = indexed("tools", i);
    if (!t.is_object()) return expected(p, "an object", t);
    const ordered_json* type = field(t, "type");
    if (type == nullptr || !type->is_string()) {
      return expected(p + ".type", "\"function\"", type == nullptr ? ordered_json() : *type);
    }
    if (*type != "function") {
      return ApiError::unsupported(
          p + ".type", p +
                           ".type: syv runs no built-in tools (web search, file search, code "
                           "interpreter, ...); declare {\"type\": \"function\", \"name\", "
                           "\"parameters\"} tools, found " +
                           describe_json(json(*type)));
    }
    SYV_API_RETURN_IF(only_keys(t, p, {"type", "name", "description", "parameters", "strict"}));
    ordered_json fn = ordered_json::object();
    for (const char* key : {"name", "description", "parameters", "strict"}) {
      if (const ordered_json* v = field(t, key)) fn[key] = *v;
    }
    if (const ordered_json* d = field(t, "description"); d != nullptr && !d->is_string()) {
      return expected(p + ".description", "a string", *d);
    }
    if (const ordered_json* s = field(t, "strict"); s != nullptr && !s->is_boolean()) {
      return expected(p + ".strict", "a boolean", *s);
    }
    chat_tools.push_back({{"type", "function"}, {"function", fn}});
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const ordered_json& tc, ordered_json& chat_tc) {
  const std::string what = "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\"}";
  if (tc.is_string()) {
    chat_tc = tc;  // the chat parser checks the value
    return std::nullopt;
  }
  if (!tc.is_object()) return expected("tool_choice", what, tc);
  const ordered_json* type = field(tc, "type");
  if (type == nullptr || !type->is_string()) {
    return expected("tool_choice.type", "\"function\"", type == nullptr ? ordered_json() : *type);
  }
  if (*type != "function") {
    return ApiError::unsupported("tool_choice.type",
                                 "tool_choice.type: syv forces function tools only ({\"type\": "
                                 "\"function\", \"name\"}), found " +
                                     describe_json(json(*type)));
  }
  SYV_API_RETURN_IF(only_keys(tc, "tool_choice", {"type", "name"}));
  const ordered_json* name = field(tc, "name");
  if (name == nullptr || !name->is_string()) {
    return expected("tool_choice.name", "a function name",
                    name == nullptr ? ordered_json() : *name);
  }
  chat_tc = {{"type", "function"}, {"function", {{"name", *name}}}};
  return std::nullopt;
}

// text: {"format": {"type": "text" | "json_object" | "json_schema", ...}, "verbosity"}.
std::optional<ApiError> read_text(const ordered_json& text, ordered_json& response_format,
                                  ordered_json& echo) {
  if (!text.is_object()) return expected("text", "an object ({\"format\": {...}})", text);
  SYV_API_RETURN_IF(only_keys(text, "text", {"format", "verbosity"}));
  echo = {{"format", {{"type", "text"}}}};
  // verbosity: a length hint to OpenAI's models, no sampling parameter (ignored, as on chat).
  if (const ordered_json* v = field(text, "verbosity"); v != nullptr) {
    if (!v->is_string()) return expected("text.verbosity", "a string", *v);
    echo["verbosity"] = *v;
  }
  const ordered_json* format = field(text, "format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object()) return expected("text.format", "an object", *format);
  const ordered_json* type = field(*format, "type");
  const std::string types = "\"text\", \"json_object\" or \"json_schema\"";
  if (type == nullptr || !type->is_string()) {
    return expected("text.format.type", types, type == nullptr ? ordered_json() : *type);
  }
  echo["format"] = *format;
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    response_format = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (*type != "json_schema") return expected("text.format.type", types, *type);
  ordered_json schema = ordered_json::object();
  for (const auto& [key, value] : format->items()) {
    if (key != "type") schema[key] = value;
  }
  response_format = {{"type", "json_schema"}, {"json_schema", schema}};
  return std::nullopt;
}

std::optional<ApiError> read_metadata(const ordered_json& metadata) {
  const std::string what = "an object of at most 16 string values";
  if (!metadata.is_object() || metadata.size() > 16) return expected("metadata", what, metadata);
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) return expected("metadata." + key.substr(0, 64), "a string", value);
  }
  return std::nullopt;
}

// The fields that are not sampling or messages: they shape the request or its answer.
std::optional<ApiError> read_options(const ordered_json& body, ordered_json& chat,
                                     ResponsesRequest& out) {
  if (const ordered_json* v = field(body, "store")) {
    if (!v->is_boolean()) return expected("store", "a boolean", *v);
    out.store = v->get<bool>();
  }
  if (const ordered_json* v = field(body, "background")) {
    if (!v->is_boolean()) return expected("background", "a boolean", *v);
    if (v->get<bool>()) {
      return ApiError::unsupported("background",
                                   "background: syv answers within the request (stream it to see "
                                   "the output as it comes); send false or leave it out");
    }
  }
  if (const ordered_json* v = field(body, "truncation")) {
    if (*v != "disabled" && *v != "auto") {
      return expected("truncation", "\"disabled\" or \"auto\"", *v);
    }
    out.truncate_auto = *v == "auto";
  }
  if (const ordered_json* v = field(body, "stream_options")) {
    if (!v->is_object()) return expected("stream_options", "an object", *v);
    if (field(body, "stream") == nullptr || *field(body, "stream") != true) {
      return ApiError::bad_param("stream_options",
                                 "stream_options: only allowed when stream is true");
    }
    SYV_API_RETURN_IF(only_keys(*v, "stream_options", {"include_obfuscation"}));
    // include_obfuscation: OpenAI pads events against side channels; syv adds none.
    if (const ordered_json* o = field(*v, "include_obfuscation");
        o != nullptr && !o->is_boolean()) {
      return expected("stream_options.include_obfuscation", "a boolean", *o);
    }
  }
  if (const ordered_json* v = field(body, "include")) {
    if (!v->is_array()) return expected("include", "an array of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] == "message.output_text.logprobs") {
        out.logprobs = true;
        continue;
      }
      // Asked so reasoning can be sent back statelessly: syv's reasoning items carry their text
      // in `content`, which clients send back and syv reads; there is nothing to encrypt.
      if ((*v)[i] == "reasoning.encrypted_content") continue;
      const std::string p = indexed("include", i);
      if (!(*v)[i].is_string()) return expected(p, "a string", (*v)[i]);
      return ApiError::unsupported(p, p +
                                          ": syv can include \"message.output_text.logprobs\" "
                                          "(and accepts \"reasoning.encrypted_content\"), "
                                          "found " +
                                          describe_json(json((*v)[i])));
    }
  }
  if (const ordered_json* v = field(body, "top_logprobs")) {
    // Alternatives imply logprobs; the chat parser checks the range.
    if (v->is_number() && *v != 0) out.logprobs = true;
  }
  if (out.logprobs) chat["logprobs"] = true;
  if (const ordered_json* v = field(body, "reasoning")) {
    if (!v->is_object()) return expected("reasoning", "an object ({\"effort\"})", *v);
    SYV_API_RETURN_IF(only_keys(*v, "reasoning", {"effort", "summary", "generate_summary"}));
    // "auto" leaves it to the server whether a summary comes: syv has no summarizer, so its
    // reasoning items carry the reasoning text and an empty summary. Asking for one is refused.
    for (const char* key : {"summary", "generate_summary"}) {
      const ordered_json* summary = field(*v, key);
      if (summary != nullptr && *summary != "auto") {
        const std::string p = std::string("reasoning.") + key;
        return ApiError::unsupported(p, p +
                                            ": syv returns the model's reasoning text itself "
                                            "(reasoning items), not a summary of it; send "
                                            "\"auto\" or leave it out, found " +
                                            describe_json(json(*summary)));
      }
    }
    if (const ordered_json* effort = field(*v, "effort")) chat["reasoning_effort"] = *effort;
  }
  return std::nullopt;
}

}  // namespace

// `input` with every item reference replaced by the kept item it names.
ApiResult<ordered_json> resolve_references(const ordered_json& input, const ItemLookup& items) {
  ordered_json out = input;
  for (size_t i = 0; i < out.size(); ++i) {
    ordered_json& it = out[i];
    if (!it.is_object() || it.value("type", ordered_json()) != "item_reference") continue;
    const std::string p = indexed("input", i);
    const ordered_json* id = field(it, "id");
    if (id == nullptr || !id->is_string()) {
      return expected(p + ".id", "the id of a kept item", id == nullptr ? ordered_json() : *id);
    }
    SYV_API_RETURN_IF(only_keys(it, p, {"type", "id"}));
    std::optional<ordered_json> found = items ? items(id->get<std::string>()) : std::nullopt;
    if (!found.has_value()) {
      return ApiError::bad_param(p + ".id", p + ".id: no kept item `" +
                                                id->get<std::string>().substr(0, 80) +
                                                "` (items are kept with their response: never "
                                                "stored, store: false, expired, pushed out or "
                                                "deleted); send the item itself");
    }
    it = std::move(*found);
  }
  return out;
}

ApiResult<ResponsesRequest> parse_responses_request(const json& body, const ordered_json& ordered,
                                                    const SchemaLimits& limits,
                                                    const ConversationLookup& lookup,
                                                    const ItemLookup& items) {
  SYV_API_RETURN_IF(check_request_fields(body, GenerationRoute::kResponses));
  ResponsesRequest out;
  ordered_json chat = ordered_json::object();
  // Same name and meaning on the chat route: its parser checks them.
  for (const char* name :
       {"model", "stream", "temperature", "top_p", "parallel_tool_calls", "top_logprobs", "seed",
        "top_k", "min_p", "repetition_penalty", "chat_template_kwargs"}) {
    if (const ordered_json* v = field(ordered, name)) chat[name] = *v;
  }
  if (const ordered_json* v = field(ordered, "max_output_tokens")) chat["max_tokens"] = *v;
  SYV_API_RETURN_IF(read_options(ordered, chat, out));

  ordered_json text_echo = {{"format", {{"type", "text"}}}};
  if (const ordered_json* v = field(ordered, "text")) {
    ordered_json response_format;
    SYV_API_RETURN_IF(read_text(*v, response_format, text_echo));
    if (!response_format.is_null()) chat["response_format"] = response_format;
  }
  ordered_json tools_echo = ordered_json::array();
  if (const ordered_json* v = field(ordered, "tools")) {
    ordered_json chat_tools;
    SYV_API_RETURN_IF(read_tools(*v, chat_tools));
    tools_echo = *v;
    if (!chat_tools.empty()) chat["tools"] = chat_tools;
  }
  if (const ordered_json* v = field(ordered, "tool_choice")) {
    ordered_json chat_tc;
    SYV_API_RETURN_IF(read_tool_choice(*v, chat_tc));
    chat["tool_choice"] = chat_tc;
  }
  if (const ordered_json* v = field(ordered, "metadata")) SYV_API_RETURN_IF(read_metadata(*v));

  // The conversation: instructions, the stored one before this request, then the input.
  Conversation conv;
  if (const ordered_json* v = field(ordered, "instructions")) {
    if (!v->is_string()) return expected("instructions", "a string", *v);
    conv.add({{"role", "system"}, {"content", *v}}, "instructions");
  }
  std::string previous;
  if (const ordered_json* v = field(ordered, "previous_response_id")) {
    if (!v->is_string()) return expected("previous_response_id", "a string", *v);
    previous = v->get<std::string>();
    std::optional<StoredResponse> stored = lookup ? lookup(previous) : std::nullopt;
    if (!stored.has_value()) {
      return ApiError{400,
                      "previous_response_id: no stored response `" + previous.substr(0, 80) +
                          "` (never stored, stored with store: false, expired, or pushed out; "
                          "docs/server.md \"The Responses API\")",
                      "invalid_request_error", "previous_response_id",
                      "previous_response_not_found"};
    }
    out.history = std::move(stored->conversation);
    for (const ordered_json& m : out.history) conv.add(m, "previous_response_id");
    out.input_items = std::move(stored->input_items);
    for (const ordered_json& item : stored->response.value("output", ordered_json::array()))
      out.input_items.push_back(item);
  }
  const size_t first_input = conv.messages.size();
  const ordered_json* input = field(ordered, "input");
  if (input == nullptr) {
    return ApiError::bad_param("input", "input: required (a string or an array of input items)");
  }
  ordered_json resolved;
  if (input->is_array()) {
    ApiResult<ordered_json> r = resolve_references(*input, items);
    if (!r.ok()) return r.error();
    resolved = std::move(r.value());
    input = &resolved;
  }
  if (input->is_string()) {
    conv.add({{"role", "user"}, {"content", *input}}, "input");
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      SYV_API_RETURN_IF(conv.item((*input)[i], indexed("input", i)));
    }
  } else {
    return expected("input", "a string or an array of input items", *input);
  }
  if (conv.messages.size() == first_input && out.history.empty()) {
    return ApiError::bad_param("input", "input: no message to answer (the input is empty)");
  }
  for (size_t i = first_input; i < conv.messages.size(); ++i) {
    out.input_messages.push_back(conv.messages[i]);
  }
  append_input_items(*input, out.input_items);
  chat["messages"] = conv.messages;

  const ErrorNames names(conv.origins);
  ApiResult<ChatRequest> parsed = parse_chat_request(json(chat), limits, &chat);
  if (!parsed.ok()) return names(parsed.error());
  out.chat = std::move(parsed.value());

  const SamplingParams& s = out.chat.sampling;
  ordered_json& e = out.echo;
  e["instructions"] = ordered.value("instructions", ordered_json());
  e["max_output_tokens"] = s.max_tokens.has_value() ? ordered_json(*s.max_tokens) : nullptr;
  e["metadata"] = ordered.value("metadata", ordered_json::object());
  if (e["metadata"].is_null()) e["metadata"] = ordered_json::object();
  e["parallel_tool_calls"] = ordered.value("parallel_tool_calls", ordered_json(true));
  if (e["parallel_tool_calls"].is_null()) e["parallel_tool_calls"] = true;
  e["previous_response_id"] = previous.empty() ? ordered_json() : ordered_json(previous);
  e["reasoning"] = {{"effort", chat.value("reasoning_effort", ordered_json())},
                    {"summary", nullptr}};
  e["store"] = out.store;
  e["temperature"] = s.temperature;
  e["text"] = text_echo;
  ordered_json tc = ordered.value("tool_choice", ordered_json("auto"));
  e["tool_choice"] = tc.is_null() ? ordered_json("auto") : tc;
  e["tools"] = tools_echo;
  e["top_logprobs"] = s.top_logprobs;
  e["top_p"] = s.top_p;
  e["truncation"] = out.truncate_auto ? "auto" : "disabled";
  e["user"] = ordered.value("user", ordered_json());
  e["background"] = false;
  return out;
}

}  // namespace syv::server
