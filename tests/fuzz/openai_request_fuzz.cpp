// Fuzzes what a client's bytes reach on /v1/chat/completions, /v1/completions, /v1/responses,
// /tokenize and /detokenize before the engine: the depth and value-count pre-pass and JSON parse
// (parse_json_body; the pre-pass's count checked against the parsed tree and against what it
// hands the parse budget, the limit one value below it refusing the body; count_argument_values),
// each route's validation (server/openai_schema.h, server/responses_request.h: the Responses body
// mapped to a chat request, a previous_response_id resolving to a stored conversation), and for a
// valid chat or Responses request the chat template (Qwen3's, and Qwen3.5's for odd-sized inputs)
// rendering its messages, tools and kwargs. Every outcome must be a value: an ApiError that
// serializes, or a request whose fields lie in their documented ranges; never a crash, a sanitizer
// report, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "server/openai_schema.h"
#include "server/responses_items.h"
#include "server/responses_request.h"
#include "tokenizer/chat_template.h"

namespace {

using nlohmann::json;
using syv::server::ApiError;

const syv::ChatTemplate* load_template(const char* name) {
  std::ifstream in(std::string(SYV_SOURCE_DIR) + "/tests/fixtures/chat/templates/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = syv::ChatTemplate::parse(ss.str());
  if (!parsed.ok()) __builtin_trap();  // the committed templates parse
  return new syv::ChatTemplate(std::move(parsed.value()));
}

const syv::server::SchemaLimits& limits() {
  static const syv::server::SchemaLimits l = [] {
    syv::server::SchemaLimits x;
    x.served_model_name = "qwen3";
    x.vocab_size = 151936;
    // Low enough that fuzzed bodies and their tool-call arguments strings reach it.
    x.max_json_values = 1024;
    return x;
  }();
  return l;
}

// An error the server would write: a 4xx with a message, and a body that serializes.
void check_error(const ApiError& e) {
  if (e.status != 400 && e.status != 404) __builtin_trap();
  if (e.message.empty() || e.type.empty() || e.code.empty()) __builtin_trap();
  if (e.body().empty()) __builtin_trap();
}

void check_sampling(const syv::server::CommonRequest& r) {
  const syv::server::SamplingParams& s = r.sampling;
  if (s.n < 1 || s.n > limits().max_n) __builtin_trap();
  if (s.max_tokens.has_value() && *s.max_tokens < 0) __builtin_trap();
  if (!(s.temperature >= 0 && s.temperature <= 2)) __builtin_trap();
  if (!(s.top_p > 0 && s.top_p <= 1)) __builtin_trap();
  if (!(s.min_p >= 0 && s.min_p <= 1)) __builtin_trap();
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2)) __builtin_trap();
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2)) __builtin_trap();
  if (!(s.repetition_penalty >= 0.01f && s.repetition_penalty <= 2)) __builtin_trap();
  if (s.stop.size() > static_cast<size_t>(limits().max_stop)) __builtin_trap();
  if (s.top_logprobs < 0 || s.top_logprobs > limits().max_top_logprobs) __builtin_trap();
  for (int32_t id : s.stop_token_ids) {
    if (id < 0 || id >= limits().vocab_size) __builtin_trap();
  }
  if (r.include_usage && !r.stream) __builtin_trap();
}

void render(const syv::server::ChatRequest& r, bool qwen3_5);

void chat(const json& body, bool qwen3_5) {
  auto parsed = syv::server::parse_chat_request(body, limits());
  if (!parsed.ok()) return check_error(parsed.error());
  render(parsed.value(), qwen3_5);
}

void responses(const json& body, bool qwen3_5) {
  // Any id resolves to a small stored conversation (one that ends in tool calls).
  const auto lookup = [](const std::string&) -> std::optional<syv::server::StoredResponse> {
    return syv::server::StoredResponse{
        nlohmann::ordered_json::parse(R"({"id": "resp_1", "output": [{"id": "fc_1",
            "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}]})"),
        nlohmann::ordered_json::parse(
            R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]}])"),
        nlohmann::ordered_json::parse(R"([{"id": "msg_1", "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "hi"}], "status": "completed"}])")};
  };
  auto parsed =
      syv::server::parse_responses_request(body, nlohmann::ordered_json(body), limits(), lookup);
  if (!parsed.ok()) return check_error(parsed.error());
  if (!parsed.value().echo.is_object()) __builtin_trap();
  // Every input item has a unique id; the page of any query is a list object or a 400.
  std::unordered_set<std::string> ids;
  for (const auto& item : parsed.value().input_items) {
    if (!item["id"].is_string() || !ids.insert(item["id"].get<std::string>()).second)
      __builtin_trap();
  }
  auto page = syv::server::input_items_page(parsed.value().input_items,
                                            {{"limit", "2"}, {"order", "desc"}});
  if (!page.ok() || page.value()["data"].size() > 2) __builtin_trap();
  render(parsed.value().chat, qwen3_5);
}

void render(const syv::server::ChatRequest& r, bool qwen3_5) {
  static const syv::ChatTemplate* qwen3 = load_template("qwen3.jinja");
  static const syv::ChatTemplate* qwen35 = load_template("qwen3_5.jinja");
  check_sampling(r);
  if (!r.messages.is_array() || r.messages.empty()) __builtin_trap();
  if (!r.tools.is_null() && !r.tools.is_array()) __builtin_trap();
  if (!r.chat_template_kwargs.is_null() && !r.chat_template_kwargs.is_object()) __builtin_trap();
  // As the route renders it (errors become a 400 naming messages).
  const syv::ChatTemplate* t = qwen3_5 ? qwen35 : qwen3;
  auto text = t->render(r.messages, r.tools, r.add_generation_prompt, r.chat_template_kwargs, "",
                        "<|im_end|>");
  if (!text.ok() && text.message().empty()) __builtin_trap();
}

void completion(const json& body) {
  auto parsed = syv::server::parse_completion_request(body, limits());
  if (!parsed.ok()) return check_error(parsed.error());
  const syv::server::CompletionRequest& r = parsed.value();
  check_sampling(r);
  if (r.prompts.empty() || r.prompts.size() > static_cast<size_t>(limits().max_prompts)) {
    __builtin_trap();
  }
  for (const syv::server::PromptInput& p : r.prompts) {
    if (!p.text.has_value() && p.ids.empty()) __builtin_trap();
    for (int32_t id : p.ids) {
      if (id < 0 || id >= limits().vocab_size) __builtin_trap();
    }
  }
}

void tokenize_routes(const json& body) {
  auto tok = syv::server::parse_tokenize_request(body, limits());
  if (!tok.ok()) check_error(tok.error());
  auto detok = syv::server::parse_detokenize_request(body, limits());
  if (!detok.ok()) return check_error(detok.error());
  for (int32_t id : detok.value().tokens) {
    if (id < 0 || id >= limits().vocab_size) __builtin_trap();
  }
}

// The values of a parsed document, counted without recursion.
size_t count_values(const json& j) {
  size_t n = 0;
  std::vector<const json*> stack{&j};
  while (!stack.empty()) {
    const json* v = stack.back();
    stack.pop_back();
    ++n;
    if (v->is_structured()) {
      for (const json& child : *v) stack.push_back(&child);
    }
  }
  return n;
}

// The pre-pass counted every value of the parsed body (more when an object repeats a key: the
// tree keeps one), and a limit one below its count refuses the body, naming the flag. Returns the
// count.
size_t check_value_count(std::string_view text, const json& body) {
  size_t counted = 0;
  const syv::server::JsonLimits within{syv::server::kMaxJsonDepth, limits().max_json_values};
  if (syv::server::find_json_excess(text, within, &counted)) __builtin_trap();
  if (counted < count_values(body) || counted > limits().max_json_values) __builtin_trap();
  auto tight = syv::server::parse_json_body(text, counted - 1);
  if (tight.ok()) __builtin_trap();
  check_error(tight.error());
  if (tight.error().message.find("--max-json-values") == std::string::npos) __builtin_trap();
  return counted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The count the parse budget's estimate is made of (openai_routes.cpp parse_body).
  size_t before_parse = SIZE_MAX;
  auto body = syv::server::parse_json_body(text, limits().max_json_values, [&](size_t values) {
    before_parse = values;
    return std::optional<ApiError>();
  });
  if (!body.ok()) {
    check_error(body.error());
    return 0;
  }
  if (!body.value().is_object()) __builtin_trap();
  if (check_value_count(text, body.value()) != before_parse) __builtin_trap();
  // The arguments strings' part of the estimate: counted without parsing, within its cap.
  const size_t cap = limits().max_json_values;
  if (syv::server::count_argument_values(body.value(), cap) > cap) __builtin_trap();
  chat(body.value(), size % 2 == 1);
  responses(body.value(), size % 2 == 1);
  completion(body.value());
  tokenize_routes(body.value());
  return 0;
}
