#include "server/openai_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/json_limits.h"
#include "server/request_fields.h"
#include "server/structured_output.h"

namespace syv::server {

using nlohmann::json;

namespace {

std::string truncate_for_message(const std::string& s) {
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

// 400 for JSON past a limit of json_limits.h; `field` names the request field it came from
// ("" = the body), `excess` where inside it the limit was passed, `max_values` the value limit.
ApiError json_limit_error(const std::string& field, const JsonExcess& excess, size_t max_values) {
  std::string param = field;
  if (!excess.field.empty()) param += (param.empty() ? "" : ".") + excess.field;
  std::string where = field;
  if (!excess.path.empty()) {
    where += (where.empty() || excess.path[0] == '[' ? "" : ".") + excess.path;
  }
  const std::string what =
      excess.values ? "more than " + std::to_string(max_values) +
                          " JSON values in the request (--max-json-values)"
                    : "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
  return ApiError{400,
                  (param.empty() ? std::string("request body") : param) + ": " + what + " (at " +
                      (where.empty() ? "the top level" : where) + ")",
                  "invalid_request_error", param, "invalid_value"};
}

// Reads optional typed fields of a request object; every error names the field.
class Fields {
 public:
  explicit Fields(const json& obj, std::string prefix = "")
      : obj_(obj), prefix_(std::move(prefix)) {}

  const json* get(const char* name) const {
    auto it = obj_.find(name);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string path(const char* name) const { return prefix_ + name; }

  ApiError expected(const char* name, const std::string& what, const json& found) const {
    return ApiError::bad_param(
        path(name), path(name) + ": expected " + what + ", found " + describe_json(found));
  }

  // Each returns an error (status != 0) or fills `out` when the field is present and valid.
  std::optional<ApiError> boolean(const char* name, bool& out) const {
    const json* v = get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) return expected(name, "a boolean", *v);
    out = v->get<bool>();
    return std::nullopt;
  }
  std::optional<ApiError> number(const char* name, float& out, double lo, double hi,
                                 bool lo_open = false) const {
    const json* v = get(name);
    if (v == nullptr) return std::nullopt;
    const std::string range = std::string(lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + "]";
    if (!v->is_number()) return expected(name, "a number in " + range, *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
      return expected(name, "a number in " + range, *v);
    }
    // The engine keeps a 32-bit float: 1e-200 is in (0, 1] but stored as 0 (found by
    // openai_request_fuzz), so the stored value must lie in the range too.
    const float f = static_cast<float>(d);
    const float flo = static_cast<float>(lo);
    if (f > static_cast<float>(hi) || f < flo || (lo_open && f == flo)) {
      return expected(name, "a number in " + range + " (as a 32-bit float)", *v);
    }
    out = f;
    return std::nullopt;
  }
  std::optional<ApiError> integer(const char* name, int64_t& out, int64_t lo, int64_t hi,
                                  bool& present) const {
    present = false;
    const json* v = get(name);
    if (v == nullptr) return std::nullopt;
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!is_integral(*v)) return expected(name, "an integer in " + range, *v);
    const double d = v->get<double>();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return expected(name, "an integer in " + range, *v);
    }
    out = v->is_number_unsigned()  ? static_cast<int64_t>(v->get<uint64_t>())
          : v->is_number_integer() ? v->get<int64_t>()
                                   : static_cast<int64_t>(d);
    present = true;
    return std::nullopt;
  }

  static bool is_integral(const json& v) {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15;
    }
    return false;
  }

 private:
  static std::string fmt(double d) {
    if (d == std::floor(d) && std::fabs(d) < 1e9) return std::to_string(static_cast<int64_t>(d));
    std::string s = std::to_string(d);
    while (!s.empty() && s.back() == '0') s.pop_back();
    return s;
  }
  const json& obj_;
  std::string prefix_;
};

std::optional<ApiError> check_model(const json& body, const SchemaLimits& limits,
                                    std::string& out) {
  Fields f(body);
  const json* model = f.get("model");
  if (model == nullptr) {
    out = limits.served_model_name;
    return std::nullopt;
  }
  if (!model->is_string()) return f.expected("model", "a string", *model);
  out = model->get<std::string>();
  if (!limits.served_model_name.empty() && out != limits.served_model_name) {
    ApiError e = ApiError::not_found("The model `" + truncate_for_message(out) +
                                         "` does not exist; this server serves `" +
                                         limits.served_model_name + "`",
                                     "model_not_found");
    e.param = "model";
    return e;
  }
  return std::nullopt;
}

// Supported fields with values syv cannot honour.
std::optional<ApiError> check_refused(const json& body) {
  Fields f(body);
  if (const json* v = f.get("best_of"); v != nullptr && !(v->is_number() && *v == 1)) {
    return ApiError::unsupported("best_of",
                                 "best_of: only 1 is supported, found " + describe_json(*v));
  }
  if (const json* v = f.get("suffix");
      v != nullptr && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
    return ApiError::unsupported("suffix", "suffix: not supported by syv");
  }
  return std::nullopt;
}

// OpenAI's logit_bias: {"<token id>": bias in [-100, 100], ...}.
std::optional<ApiError> parse_logit_bias(const json& body, const SchemaLimits& limits,
                                         std::vector<std::pair<int32_t, float>>& out) {
  Fields f(body);
  const json* v = f.get("logit_bias");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) {
    return f.expected("logit_bias", "an object mapping token ids to biases in [-100, 100]", *v);
  }
  if (static_cast<int>(v->size()) > limits.max_logit_bias) {
    return ApiError::bad_param("logit_bias", "logit_bias: at most " +
                                                 std::to_string(limits.max_logit_bias) +
                                                 " entries, found " + std::to_string(v->size()));
  }
  for (const auto& [key, bias] : v->items()) {
    const std::string at = "logit_bias[\"" + truncate_for_message(key) + "\"]";
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 &&
        key.find_first_not_of("0123456789") == std::string::npos) {
      id = std::stoll(key);
    }
    if (id < 0 || id >= limits.vocab_size) {
      return ApiError::bad_param("logit_bias", at + ": expected a token id in [0, " +
                                                   std::to_string(limits.vocab_size) +
                                                   ") as the key");
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100 ||
        bias.get<double>() > 100) {
      return ApiError::bad_param(
          "logit_bias", at + ": expected a number in [-100, 100], found " + describe_json(bias));
    }
    out.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stream_options(const json& body, CommonRequest& out) {
  Fields f(body);
  const json* so = f.get("stream_options");
  if (so == nullptr) return std::nullopt;
  if (!so->is_object()) return f.expected("stream_options", "an object", *so);
  if (!out.stream) {
    return ApiError::bad_param("stream_options",
                               "stream_options: only allowed when stream is true");
  }
  Fields sof(*so, "stream_options.");
  SYV_API_RETURN_IF(sof.boolean("include_usage", out.include_usage));
  bool obfuscation = false;  // OpenAI pads chunks against side channels; syv sends none
  SYV_API_RETURN_IF(sof.boolean("include_obfuscation", obfuscation));
  for (const auto& [key, value] : so->items()) {
    if (key != "include_usage" && key != "include_obfuscation" && !value.is_null()) {
      const std::string p = "stream_options." + truncate_for_message(key);
      return ApiError{400, p + ": unknown field (syv reads include_usage)", "invalid_request_error",
                      p, "unknown_parameter"};
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_common(const json& body, const SchemaLimits& limits, bool chat,
                                     const nlohmann::ordered_json* ordered, CommonRequest& out) {
  Fields f(body);
  SYV_API_RETURN_IF(check_model(body, limits, out.model));
  SYV_API_RETURN_IF(
      check_request_fields(body, chat ? GenerationRoute::kChat : GenerationRoute::kCompletions));
  SYV_API_RETURN_IF(check_refused(body));
  SYV_API_RETURN_IF(f.boolean("stream", out.stream));
  SYV_API_RETURN_IF(parse_stream_options(body, out));
  SamplingParams& s = out.sampling;
  bool present = false;
  int64_t v = 0;
  SYV_API_RETURN_IF(
      f.integer("truncate_prompt_tokens", v, -1, std::numeric_limits<int32_t>::max(), present));
  if (present && v == 0) {
    return ApiError::bad_param("truncate_prompt_tokens",
                               "truncate_prompt_tokens: expected -1 (as much of the prompt as the "
                               "context leaves room for) or a count of tokens >= 1, found 0");
  }
  if (present) out.truncate_prompt_tokens = static_cast<int>(v);
  SYV_API_RETURN_IF(f.integer("n", v, 1, limits.max_n, present));
  if (present) s.n = static_cast<int>(v);
  // Completions: 0 scores the prompt (echo or prompt_logprobs, checked by its parser).
  SYV_API_RETURN_IF(
      f.integer("max_tokens", v, chat ? 1 : 0, std::numeric_limits<int32_t>::max(), present));
  if (present) s.max_tokens = static_cast<int>(v);
  if (chat) {
    SYV_API_RETURN_IF(
        f.integer("max_completion_tokens", v, 1, std::numeric_limits<int32_t>::max(), present));
    if (present) s.max_tokens = static_cast<int>(v);
  }
  SYV_API_RETURN_IF(f.number("temperature", s.temperature, 0.0, 2.0));
  SYV_API_RETURN_IF(f.number("top_p", s.top_p, 0.0, 1.0, /*lo_open=*/true));
  SYV_API_RETURN_IF(f.integer("top_k", v, -1, std::numeric_limits<int32_t>::max(), present));
  if (present) s.top_k = v < 0 ? 0 : static_cast<int>(v);
  SYV_API_RETURN_IF(f.number("min_p", s.min_p, 0.0, 1.0));
  SYV_API_RETURN_IF(f.number("presence_penalty", s.presence_penalty, -2.0, 2.0));
  SYV_API_RETURN_IF(f.number("frequency_penalty", s.frequency_penalty, -2.0, 2.0));
  // At least 0.01: the sampler divides positive logits by it, and a tiny divisor turns them into
  // infinities (the probabilities into NaN).
  SYV_API_RETURN_IF(f.number("repetition_penalty", s.repetition_penalty, 0.01, 2.0));
  SYV_API_RETURN_IF(f.integer("seed", v, std::numeric_limits<int64_t>::min() / 2,
                              std::numeric_limits<int64_t>::max() / 2, present));
  if (present) s.seed = static_cast<uint64_t>(v);
  SYV_API_RETURN_IF(f.boolean("ignore_eos", s.ignore_eos));
  SYV_API_RETURN_IF(f.boolean("skip_special_tokens", s.skip_special_tokens));
  SYV_API_RETURN_IF(f.boolean("include_stop_str_in_output", s.include_stop_str_in_output));
  SYV_API_RETURN_IF(f.integer("min_tokens", v, 0, std::numeric_limits<int32_t>::max(), present));
  if (present) s.min_tokens = static_cast<int>(v);
  if (s.max_tokens.has_value() && s.min_tokens > *s.max_tokens) {
    return ApiError::bad_param("min_tokens", "min_tokens: expected at most max_tokens (" +
                                                 std::to_string(*s.max_tokens) + "), found " +
                                                 std::to_string(s.min_tokens));
  }
  SYV_API_RETURN_IF(parse_logit_bias(body, limits, s.logit_bias));
  StructuredOutput structured;
  SYV_API_RETURN_IF(parse_structured_output(body, ordered, structured));
  if (structured.grammar != nullptr) {
    // The grammar decides where the output ends (the engine refuses these too).
    if (s.ignore_eos) {
      return ApiError::unsupported("ignore_eos", "ignore_eos: cannot be combined with " +
                                                     structured.field +
                                                     " (the grammar decides where the output "
                                                     "ends)");
    }
    if (s.min_tokens > 0) {
      return ApiError::unsupported("min_tokens", "min_tokens: cannot be combined with " +
                                                     structured.field +
                                                     " (the grammar decides where the output "
                                                     "ends)");
    }
    s.grammar = std::move(structured.grammar);
    s.grammar_field = std::move(structured.field);
    s.grammar_text = std::move(structured.gbnf);
  }

  if (const json* stop = f.get("stop"); stop != nullptr) {
    const std::string what =
        "a string or an array of at most " + std::to_string(limits.max_stop) + " non-empty strings";
    if (stop->is_string()) {
      if (stop->get_ref<const std::string&>().empty()) return f.expected("stop", what, *stop);
      s.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (static_cast<int>(stop->size()) > limits.max_stop) return f.expected("stop", what, *stop);
      for (const json& item : *stop) {
        if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
          return f.expected("stop", what, *stop);
        }
        s.stop.push_back(item.get<std::string>());
      }
    } else {
      return f.expected("stop", what, *stop);
    }
  }
  if (const json* ids = f.get("stop_token_ids"); ids != nullptr) {
    const std::string what =
        "an array of token ids in [0, " + std::to_string(limits.vocab_size) + ")";
    if (!ids->is_array() || ids->size() > 256) return f.expected("stop_token_ids", what, *ids);
    for (const json& id : *ids) {
      if (!Fields::is_integral(id) || id.get<double>() < 0 ||
          id.get<double>() >= static_cast<double>(limits.vocab_size)) {
        return ApiError::bad_param(
            "stop_token_ids", "stop_token_ids: expected " + what + ", found " + describe_json(id));
      }
      s.stop_token_ids.push_back(static_cast<int32_t>(id.get<double>()));
    }
  }

  SYV_API_RETURN_IF(f.integer("prompt_logprobs", v, 0, limits.max_top_logprobs, present));
  if (present) s.prompt_logprobs = static_cast<int>(v);

  // logprobs: a boolean (+ top_logprobs) for chat, an integer for completions.
  if (chat) {
    SYV_API_RETURN_IF(f.boolean("logprobs", s.logprobs));
    SYV_API_RETURN_IF(f.integer("top_logprobs", v, 0, limits.max_top_logprobs, present));
    if (present) {
      if (!s.logprobs && v > 0) {
        return ApiError::bad_param("top_logprobs", "top_logprobs: requires logprobs to be true");
      }
      s.top_logprobs = static_cast<int>(v);
    }
  } else {
    SYV_API_RETURN_IF(f.integer("logprobs", v, 0, limits.max_top_logprobs, present));
    if (present) {
      s.logprobs = true;
      s.top_logprobs = static_cast<int>(v);
    }
  }
  return std::nullopt;
}

// Content of a message: a string, null, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> normalize_content(json& message, const std::string& where, bool null_ok) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    if (null_ok) return std::nullopt;
    return ApiError::bad_param(where + ".content", where +
                                                       ".content: missing (a string or an "
                                                       "array of text parts expected)");
  }
  if (it->is_string()) return std::nullopt;
  if (!it->is_array()) {
    return ApiError::bad_param(where + ".content", where +
                                                       ".content: expected a string or an "
                                                       "array of text parts, found " +
                                                       describe_json(*it));
  }
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string p = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      return ApiError::bad_param(p, p + ": expected an object, found " + describe_json(part));
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      return ApiError::bad_param(p + ".type", p + ".type: expected a string");
    }
    if (*type != "text") {
      return ApiError::unsupported(p + ".type", p +
                                                    ".type: only \"text\" parts are supported, "
                                                    "found " +
                                                    describe_json(*type));
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      return ApiError::bad_param(p + ".text", p + ".text: expected a string");
    }
    text += t->get<std::string>();
  }
  *it = text;
  return std::nullopt;
}

// `max_values`: the JSON values the tool-call `arguments` strings of all messages may hold
// together (each is parsed into an object for the template).
std::optional<ApiError> parse_messages(const json& body, size_t max_values, json& out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return ApiError::bad_param("messages", "messages: required (a non-empty array of messages)");
  }
  if (!it->is_array() || it->empty()) {
    return ApiError::bad_param("messages",
                               "messages: expected a non-empty array, found " + describe_json(*it));
  }
  out = json::array();
  size_t argument_values = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    json m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      return ApiError::bad_param(where, where + ": expected an object, found " + describe_json(m));
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return ApiError::bad_param(where + ".role", where +
                                                      ".role: expected one of system, user, "
                                                      "assistant, tool, developer");
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
      return ApiError::bad_param(where + ".role", where +
                                                      ".role: expected one of system, user, "
                                                      "assistant, tool, developer, found \"" +
                                                      truncate_for_message(r) + "\"");
    }
    if (r == "developer") m["role"] = "system";
    if (auto name = m.find("name"); name != m.end() && !name->is_null() && !name->is_string()) {
      return ApiError::bad_param(where + ".name",
                                 where + ".name: expected a string, found " + describe_json(*name));
    }
    // An empty tool_calls list is no tool call (templates would open an empty block).
    if (auto tc = m.find("tool_calls"); tc != m.end() && tc->is_array() && tc->empty()) {
      m.erase(tc);
    }
    const bool has_tool_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    SYV_API_RETURN_IF(normalize_content(m, where, r == "assistant"));
    // An assistant turn that only called tools arrives with "content": null or no content at all
    // (the OpenAI clients send both). Templates are written for what transformers users pass and
    // vLLM hands them: a string ("'</think>' in message.content" fails on None), so it becomes "".
    if (r == "assistant" && (!m.contains("content") || m["content"].is_null())) m["content"] = "";
    if (has_tool_calls) {
      const json& calls = m["tool_calls"];
      if (r != "assistant" || !calls.is_array()) {
        return ApiError::bad_param(
            where + ".tool_calls",
            where + ".tool_calls: expected an array on an assistant message");
      }
      json normalized = json::array();
      for (size_t k = 0; k < calls.size(); ++k) {
        const std::string p = where + ".tool_calls[" + std::to_string(k) + "]";
        const json& call = calls[k];
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
            !call["function"].contains("name") || !call["function"]["name"].is_string()) {
          return ApiError::bad_param(p, p + ": expected {\"type\": \"function\", \"function\": "
                                            "{\"name\": ..., \"arguments\": ...}}");
        }
        json fn = call["function"];
        // Qwen's template writes arguments with tojson when it is not a string; hand it the
        // object so the prompt matches what the model was trained on.
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
          const std::string& text = fn["arguments"].get_ref<const std::string&>();
          size_t values = 0;
          if (auto excess = find_json_excess(
                  text, JsonLimits{kMaxJsonDepth, max_values - argument_values}, &values)) {
            return json_limit_error(p + ".function.arguments", *excess, max_values);
          }
          argument_values += values;
          json parsed = json::parse(text, nullptr, false);
          if (!parsed.is_discarded()) fn["arguments"] = parsed;
        }
        json c = call;
        c["function"] = fn;
        normalized.push_back(c);
      }
      m["tool_calls"] = normalized;
    }
    if (auto rc = m.find("reasoning_content");
        rc != m.end() && !rc->is_null() && !rc->is_string()) {
      return ApiError::bad_param(where + ".reasoning_content",
                                 where + ".reasoning_content: expected a string");
    }
    out.push_back(std::move(m));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const json& body, json& tools) {
  tools = nullptr;
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) {
    return ApiError::bad_param("tools", "tools: expected an array, found " + describe_json(*it));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) {
      return ApiError::bad_param(p, p + ": expected an object, found " + describe_json(t));
    }
    if (!t.contains("type") || t["type"] != "function") {
      return ApiError::bad_param(p + ".type", p + ".type: expected \"function\"");
    }
    if (!t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string() ||
        t["function"]["name"].get_ref<const std::string&>().empty()) {
      return ApiError::bad_param(p + ".function.name",
                                 p + ".function.name: expected a non-empty string");
    }
    if (t["function"].contains("parameters") && !t["function"]["parameters"].is_null() &&
        !t["function"]["parameters"].is_object()) {
      return ApiError::bad_param(p + ".function.parameters",
                                 p + ".function.parameters: expected a JSON-schema object");
    }
  }
  tools = *it;
  if (tools.empty()) tools = nullptr;
  return std::nullopt;
}

std::optional<ApiError> parse_template_kwargs(const json& body, json& out) {
  out = nullptr;
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    return ApiError::bad_param("chat_template_kwargs",
                               "chat_template_kwargs: expected an object, "
                               "found " +
                                   describe_json(*it));
  }
  for (const char* reserved :
       {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (it->contains(reserved)) {
      return ApiError::bad_param("chat_template_kwargs",
                                 std::string("chat_template_kwargs: may not set \"") + reserved +
                                     "\" (use the request field instead)");
    }
  }
  out = *it;
  return std::nullopt;
}

// modalities: ["text"] is what syv produces; anything else is refused.
std::optional<ApiError> parse_modalities(const json& body) {
  Fields f(body);
  const json* m = f.get("modalities");
  if (m == nullptr) return std::nullopt;
  if (!m->is_array()) return f.expected("modalities", "an array of strings", *m);
  for (const json& item : *m) {
    if (!item.is_string()) return f.expected("modalities", "an array of strings", *m);
    if (item != "text") {
      return ApiError::unsupported(
          "modalities", "modalities: only [\"text\"] is supported, found " + describe_json(item));
    }
  }
  return std::nullopt;
}

// reasoning_effort goes to the chat template as the variable of that name, as vLLM hands it
// (chat_template_kwargs.reasoning_effort, when given, wins). Qwen3's templates do not read it;
// their switch is chat_template_kwargs.enable_thinking.
std::optional<ApiError> parse_reasoning_effort(const json& body, json& template_kwargs) {
  Fields f(body);
  const json* e = f.get("reasoning_effort");
  if (e == nullptr) return std::nullopt;
  const std::string what = "one of \"none\", \"minimal\", \"low\", \"medium\", \"high\"";
  if (!e->is_string()) return f.expected("reasoning_effort", what, *e);
  const std::string& v = e->get_ref<const std::string&>();
  if (v != "none" && v != "minimal" && v != "low" && v != "medium" && v != "high") {
    return f.expected("reasoning_effort", what, *e);
  }
  if (template_kwargs.is_null()) template_kwargs = json::object();
  if (!template_kwargs.contains("reasoning_effort")) template_kwargs["reasoning_effort"] = v;
  return std::nullopt;
}

std::optional<ApiError> parse_token_array(const json& v, const std::string& param,
                                          const SchemaLimits& limits, bool allow_empty,
                                          std::vector<int32_t>& out) {
  const std::string what = std::string(allow_empty ? "an" : "a non-empty") +
                           " array of token ids in [0, " + std::to_string(limits.vocab_size) + ")";
  if (!v.is_array() || (!allow_empty && v.empty())) {
    return ApiError::bad_param(param, param + ": expected " + what + ", found " + describe_json(v));
  }
  out.clear();
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& id = v[i];
    if (!Fields::is_integral(id) || id.get<double>() < 0 ||
        id.get<double>() >= static_cast<double>(limits.vocab_size)) {
      const std::string p = param + "[" + std::to_string(i) + "]";
      return ApiError::bad_param(p, p + ": expected a token id in [0, " +
                                        std::to_string(limits.vocab_size) + "), found " +
                                        describe_json(id));
    }
    out.push_back(static_cast<int32_t>(id.get<double>()));
  }
  return std::nullopt;
}

}  // namespace

std::string describe_json(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return std::string("the boolean ") + (value.get<bool>() ? "true" : "false");
    case json::value_t::string:
      return "the string \"" + truncate_for_message(value.get<std::string>()) + "\"";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "the number " + truncate_for_message(value.dump());
    case json::value_t::array:
      return "an array of " + std::to_string(value.size());
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

ApiResult<json> parse_json_body(
    std::string_view body, size_t max_values,
    const std::function<std::optional<ApiError>(size_t values)>& before_parse) {
  if (body.empty()) {
    return ApiError{400, "request body: expected a JSON object, found an empty body",
                    "invalid_request_error", "", "invalid_json"};
  }
  // Measured before the real parse: a deeply nested body must never reach recursive code.
  size_t values = 0;
  if (auto excess = find_json_excess(body, JsonLimits{kMaxJsonDepth, max_values}, &values)) {
    return json_limit_error("", *excess, max_values);
  }
  if (before_parse) SYV_API_RETURN_IF(before_parse(values));
  try {
    json j = json::parse(body.begin(), body.end());
    if (!j.is_object()) {
      return ApiError{400, "request body: expected a JSON object, found " + describe_json(j),
                      "invalid_request_error", "", "invalid_json"};
    }
    return j;
  } catch (const json::exception& e) {
    return ApiError{400, std::string("request body: invalid JSON: ") + e.what(),
                    "invalid_request_error", "", "invalid_json"};
  }
}

size_t count_argument_values(const json& body, size_t cap) {
  size_t total = 0;
  std::vector<const json*> todo = {&body};  // iterative: no recursion on client input
  while (!todo.empty() && total < cap) {
    const json* j = todo.back();
    todo.pop_back();
    if (j->is_array()) {
      for (const json& e : *j) todo.push_back(&e);
    } else if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        if (it.key() == "arguments" && it->is_string()) {
          size_t values = 0;
          (void)find_json_excess(it->get_ref<const std::string&>(),
                                 JsonLimits{kMaxJsonDepth, cap - total}, &values);
          total += std::min(values, cap - total);
        } else if (it->is_structured()) {
          todo.push_back(&*it);
        }
      }
    }
  }
  return total;
}

ApiResult<ChatRequest> parse_chat_request(const json& body, const SchemaLimits& limits,
                                          const nlohmann::ordered_json* ordered) {
  ChatRequest req;
  SYV_API_RETURN_IF(parse_common(body, limits, /*chat=*/true, ordered, req));
  SYV_API_RETURN_IF(parse_messages(body, limits.max_json_values, req.messages));
  SYV_API_RETURN_IF(parse_tools(body, req.tools));
  SYV_API_RETURN_IF(parse_template_kwargs(body, req.chat_template_kwargs));
  Fields f(body);
  SYV_API_RETURN_IF(f.boolean("add_generation_prompt", req.add_generation_prompt));
  req.tool_choice = req.tools.is_null() ? json("none") : json("auto");
  bool parallel = true;  // parallel_tool_calls false: a forced tool call is one call
  SYV_API_RETURN_IF(f.boolean("parallel_tool_calls", parallel));
  if (const json* tc = f.get("tool_choice"); tc != nullptr) {
    std::string forced;  // "required", or the named function
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s != "auto" && s != "none" && s != "required") {
        return f.expected("tool_choice", "\"auto\", \"none\", \"required\" or a function", *tc);
      }
      req.tool_choice = s;
      if (s == "required") forced = s;
    } else if (tc->is_object()) {
      const json* fn = tc->contains("function") ? &(*tc)["function"] : nullptr;
      if ((*tc).value("type", json()) != "function" || fn == nullptr || !fn->is_object() ||
          !fn->contains("name") || !(*fn)["name"].is_string() ||
          (*fn)["name"].get_ref<const std::string&>().empty()) {
        return ApiError::bad_param("tool_choice.function.name",
                                   "tool_choice.function.name: expected {\"type\": \"function\", "
                                   "\"function\": {\"name\": ...}}, found " +
                                       describe_json(*tc));
      }
      forced = (*fn)["name"].get<std::string>();
      req.tool_choice = *tc;
    } else {
      return f.expected("tool_choice", "\"auto\", \"none\", \"required\" or a function", *tc);
    }
    if (!forced.empty()) {
      if (req.tools.is_null()) {
        return ApiError::bad_param("tool_choice",
                                   "tool_choice: forcing a tool call needs tools, found none");
      }
      if (req.sampling.grammar != nullptr) {
        return ApiError::bad_param("tool_choice",
                                   "tool_choice: cannot force a tool call together "
                                   "with " +
                                       req.sampling.grammar_field);
      }
      if (req.sampling.ignore_eos || req.sampling.min_tokens > 0) {
        return ApiError::unsupported(
            req.sampling.ignore_eos ? "ignore_eos" : "min_tokens",
            std::string(req.sampling.ignore_eos ? "ignore_eos" : "min_tokens") +
                ": cannot be combined with a forced tool call (the grammar decides where the "
                "output ends)");
      }
      StructuredOutput calls;
      SYV_API_RETURN_IF(tool_call_grammar(req.tools, ordered, forced == "required" ? "" : forced,
                                          !parallel, calls));
      req.sampling.grammar = std::move(calls.grammar);
      req.sampling.grammar_field = "tool_choice";
      req.sampling.grammar_text = std::move(calls.gbnf);
    }
  }
  if (req.tool_choice == "none") req.tools = nullptr;
  req.parse_tool_calls = !req.tools.is_null();
  SYV_API_RETURN_IF(parse_modalities(body));
  SYV_API_RETURN_IF(parse_reasoning_effort(body, req.chat_template_kwargs));
  return req;
}

ApiResult<CompletionRequest> parse_completion_request(const json& body, const SchemaLimits& limits,
                                                      const nlohmann::ordered_json* ordered) {
  CompletionRequest req;
  SYV_API_RETURN_IF(parse_common(body, limits, /*chat=*/false, ordered, req));
  Fields f(body);
  SYV_API_RETURN_IF(f.boolean("echo", req.echo));
  if (req.sampling.max_tokens == 0 && !req.echo && req.sampling.prompt_logprobs < 0) {
    return ApiError::bad_param("max_tokens",
                               "max_tokens: 0 generates nothing, so it needs echo or "
                               "prompt_logprobs (the prompt scored); expected >= 1, found 0");
  }
  const json* prompt = f.get("prompt");
  const std::string what =
      "a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (prompt == nullptr) return ApiError::bad_param("prompt", "prompt: required (" + what + ")");
  if (prompt->is_string()) {
    req.prompts.push_back({prompt->get<std::string>(), {}});
  } else if (prompt->is_array() && !prompt->empty()) {
    const json& first = (*prompt)[0];
    if (first.is_number()) {
      PromptInput p;
      SYV_API_RETURN_IF(parse_token_array(*prompt, "prompt", limits, false, p.ids));
      req.prompts.push_back(std::move(p));
    } else {
      if (static_cast<int>(prompt->size()) > limits.max_prompts) {
        return ApiError::bad_param(
            "prompt", "prompt: at most " + std::to_string(limits.max_prompts) +
                          " prompts per request, found " + std::to_string(prompt->size()));
      }
      for (size_t i = 0; i < prompt->size(); ++i) {
        const json& item = (*prompt)[i];
        const std::string p = "prompt[" + std::to_string(i) + "]";
        if (item.is_string()) {
          req.prompts.push_back({item.get<std::string>(), {}});
        } else if (item.is_array()) {
          PromptInput in;
          SYV_API_RETURN_IF(parse_token_array(item, p, limits, false, in.ids));
          req.prompts.push_back(std::move(in));
        } else {
          return ApiError::bad_param(
              p, p + ": expected a string or an array of token ids, found " + describe_json(item));
        }
      }
    }
  } else {
    return f.expected("prompt", what, *prompt);
  }
  if (static_cast<int>(req.prompts.size()) * req.sampling.n > limits.max_prompts * limits.max_n) {
    return ApiError::bad_param("n", "n: too many samples in total");
  }
  return req;
}

ApiResult<TokenizeRequest> parse_tokenize_request(const json& body, const SchemaLimits& limits) {
  TokenizeRequest req;
  Fields f(body);
  std::string model;
  SYV_API_RETURN_IF(check_model(body, limits, model));
  SYV_API_RETURN_IF(f.boolean("add_special_tokens", req.add_special_tokens));
  SYV_API_RETURN_IF(f.boolean("add_generation_prompt", req.add_generation_prompt));
  const json* prompt = f.get("prompt");
  const bool has_messages = f.get("messages") != nullptr;
  if (prompt != nullptr && has_messages) {
    return ApiError::bad_param("prompt", "prompt: give either prompt or messages, not both");
  }
  if (prompt != nullptr) {
    if (!prompt->is_string()) return f.expected("prompt", "a string", *prompt);
    req.prompt = prompt->get<std::string>();
    return req;
  }
  if (!has_messages) {
    return ApiError::bad_param("prompt", "prompt: required (a string), or messages (an array)");
  }
  SYV_API_RETURN_IF(parse_messages(body, limits.max_json_values, req.messages));
  SYV_API_RETURN_IF(parse_tools(body, req.tools));
  SYV_API_RETURN_IF(parse_template_kwargs(body, req.chat_template_kwargs));
  return req;
}

ApiResult<DetokenizeRequest> parse_detokenize_request(const json& body,
                                                      const SchemaLimits& limits) {
  DetokenizeRequest req;
  std::string model;
  SYV_API_RETURN_IF(check_model(body, limits, model));
  auto it = body.find("tokens");
  if (it == body.end() || it->is_null()) {
    return ApiError::bad_param("tokens", "tokens: required (an array of token ids)");
  }
  SYV_API_RETURN_IF(parse_token_array(*it, "tokens", limits, true, req.tokens));
  return req;
}

}  // namespace syv::server
