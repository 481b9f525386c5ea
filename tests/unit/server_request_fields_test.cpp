// The request-field policy (server/request_fields.h, docs/server.md "Request fields"): every field
// of the table is listed here again with its treatment on each generation route and a value, and
// checked through the parsers: a supported field changes the parsed request (it is not dropped),
// an ignored one leaves it unchanged (and a value of the wrong type is a 400 naming it), a refused
// one and a field of the other route are 400s naming them. The docs table must say the same.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "server/openai_schema.h"
#include "server/request_fields.h"
#include "server/responses_request.h"

namespace syv::server {
namespace {

using nlohmann::json;

constexpr FieldUse S = FieldUse::kSupported;
constexpr FieldUse I = FieldUse::kIgnored;
constexpr FieldUse R = FieldUse::kRefused;
constexpr FieldUse N = FieldUse::kNone;

struct FieldCase {
  std::string name;
  FieldUse chat, completions;
  json chat_value;        // a valid value on /v1/chat/completions (null: use completion_value)
  json completion_value;  // a valid value on /v1/completions (null: use chat_value)
  json context = json::object();  // other fields the value needs (stream for stream_options)
  bool changes = true;            // supported: whether value differs from the default
  json refused_value = nullptr;   // supported: a value syv cannot honour (400)
};

const json kTools = json::array(
    {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});

// Every field of the table, written out independently of it.
std::vector<FieldCase> all_cases() {
  return {
      {"model", S, S, "tiny", nullptr, json::object(), false},
      {"messages", S, N, json::array({{{"role", "user"}, {"content", "other"}}}), nullptr},
      {"prompt", N, S, nullptr, "other"},
      {"max_tokens", S, S, 9, nullptr},
      {"max_completion_tokens", S, N, 9, nullptr},
      {"n", S, S, 2, nullptr},
      {"temperature", S, S, 0.5, nullptr},
      {"top_p", S, S, 0.5, nullptr},
      {"presence_penalty", S, S, 0.5, nullptr},
      {"frequency_penalty", S, S, 0.5, nullptr},
      {"logit_bias", S, S, {{"5", -3}}, nullptr},
      {"seed", S, S, 7, nullptr},
      {"stop", S, S, "x", nullptr},
      {"stream", S, S, true, nullptr},
      {"stream_options", S, S, {{"include_usage", true}}, nullptr, {{"stream", true}}},
      {"logprobs", S, S, true, 2},
      {"top_logprobs", S, N, 2, nullptr, {{"logprobs", true}}},
      {"tools", S, N, kTools, nullptr},
      {"tool_choice", S, N, "required", nullptr, {{"tools", kTools}}},
      {"parallel_tool_calls",
       S,
       N,
       false,
       nullptr,
       {{"tools", kTools}, {"tool_choice", "required"}}},
      {"response_format",
       S,
       S,
       {{"type", "json_schema"},
        {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}},
       nullptr,
       json::object(),
       true,
       {{"type", "json_schema"},
        {"json_schema", {{"schema", {{"type", "integer"}, {"multipleOf", 2}}}}}}},
      {"modalities", S, N, json::array({"text"}), nullptr, json::object(), false,
       json::array({"audio"})},
      {"reasoning_effort", S, N, "low", nullptr},
      {"echo", R, S, true, nullptr},
      {"best_of", N, S, nullptr, 1, json::object(), false, 2},
      {"suffix", N, S, nullptr, "", json::object(), false, "tail"},
      {"user", I, I, "someone", nullptr},
      {"safety_identifier", I, N, "hash", nullptr},
      {"store", I, N, true, nullptr},
      {"metadata", I, N, {{"k", "v"}}, nullptr},
      {"service_tier", I, N, "auto", nullptr},
      {"prompt_cache_key", I, N, "k", nullptr},
      {"prediction", I, N, {{"type", "content"}, {"content", "x"}}, nullptr},

      {"verbosity", I, N, "low", nullptr},
      {"audio", R, N, {{"voice", "alloy"}, {"format", "wav"}}, nullptr},
      {"web_search_options", R, N, json::object(), nullptr},
      {"functions", R, N, json::array({{{"name", "f"}}}), nullptr},
      {"function_call", R, N, "auto", nullptr},
      {"top_k", S, S, 5, nullptr},
      {"min_p", S, S, 0.1, nullptr},
      {"repetition_penalty", S, S, 1.2, nullptr},
      {"min_tokens", S, S, 2, nullptr},
      {"stop_token_ids", S, S, json::array({5}), nullptr},
      {"include_stop_str_in_output", S, S, true, nullptr},
      {"ignore_eos", S, S, true, nullptr},
      {"skip_special_tokens", S, S, false, nullptr},
      {"chat_template_kwargs", S, N, {{"enable_thinking", false}}, nullptr},
      {"add_generation_prompt", S, N, false, nullptr},
      {"prompt_logprobs", S, S, 1, nullptr, json::object(), true, nullptr},
      {"truncate_prompt_tokens", S, S, 5, nullptr},
      {"guided_json",
       S,
       S,
       {{"type", "object"}},
       nullptr,
       json::object(),
       true,
       {{"type", "string"}, {"format", "email"}}},
      {"guided_regex", S, S, "a+", nullptr, json::object(), true, "(?=a)"},
      {"guided_choice", S, S, json::array({"a", "b"}), nullptr},
      {"guided_grammar", S, S, "root ::= \"a\"", nullptr},
      {"structured_outputs",
       S,
       S,
       {{"json", {{"type", "object"}}}},
       nullptr,
       json::object(),
       true,
       {{"structural_tag", "x"}}},
      {"grammar", S, S, "root ::= \"a\"", nullptr},
      {"json_schema",
       S,
       S,
       {{"type", "object"}},
       nullptr,
       json::object(),
       true,
       {{"type", "array"}, {"uniqueItems", true}}},
      {"use_beam_search", R, R, true, nullptr},
  };
}

SchemaLimits limits() {
  SchemaLimits l;
  l.served_model_name = "tiny";
  l.vocab_size = 1000;
  return l;
}

json sampling_summary(const SamplingParams& s) {
  return {{"n", s.n},
          {"max_tokens", s.max_tokens.value_or(-1)},
          {"temperature", s.temperature},
          {"top_p", s.top_p},
          {"top_k", s.top_k},
          {"min_p", s.min_p},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"repetition_penalty", s.repetition_penalty},
          {"seed", s.seed.has_value() ? json(*s.seed) : json(nullptr)},
          {"stop", s.stop},
          {"stop_token_ids", s.stop_token_ids},
          {"ignore_eos", s.ignore_eos},
          {"skip_special_tokens", s.skip_special_tokens},
          {"logprobs", s.logprobs},
          {"top_logprobs", s.top_logprobs},
          {"logit_bias", s.logit_bias},
          {"min_tokens", s.min_tokens},
          {"include_stop_str_in_output", s.include_stop_str_in_output},
          {"prompt_logprobs", s.prompt_logprobs},
          {"grammar", s.grammar ? s.grammar_field + ": " + s.grammar_text : ""}};
}

// Everything a parsed request carries, to see whether a field changed it.
json summary(const ChatRequest& r) {
  return {{"model", r.model},
          {"stream", r.stream},
          {"include_usage", r.include_usage},
          {"sampling", sampling_summary(r.sampling)},
          {"truncate_prompt_tokens", r.truncate_prompt_tokens.value_or(0)},
          {"messages", r.messages},
          {"tools", r.tools},
          {"tool_choice", r.tool_choice},
          {"chat_template_kwargs", r.chat_template_kwargs},
          {"add_generation_prompt", r.add_generation_prompt},
          {"parse_tool_calls", r.parse_tool_calls}};
}
json summary(const CompletionRequest& r) {
  json prompts = json::array();
  for (const PromptInput& p : r.prompts) prompts.push_back({p.text.value_or(""), p.ids});
  return {{"model", r.model},
          {"stream", r.stream},
          {"include_usage", r.include_usage},
          {"sampling", sampling_summary(r.sampling)},
          {"truncate_prompt_tokens", r.truncate_prompt_tokens.value_or(0)},
          {"prompts", prompts},
          {"echo", r.echo}};
}

// Parses `body` on `route`: the summary, or the error.
struct Parsed {
  bool ok = false;
  json summary;
  ApiError error;
};
Parsed parse(GenerationRoute route, const json& body) {
  Parsed out;
  if (route == GenerationRoute::kChat) {
    auto r = parse_chat_request(body, limits());
    out.ok = r.ok();
    if (r.ok()) out.summary = summary(r.value());
    if (!r.ok()) out.error = r.error();
  } else {
    auto r = parse_completion_request(body, limits());
    out.ok = r.ok();
    if (r.ok()) out.summary = summary(r.value());
    if (!r.ok()) out.error = r.error();
  }
  return out;
}

json base_body(GenerationRoute route, const json& context) {
  json body = route == GenerationRoute::kChat
                  ? json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}
                  : json{{"prompt", "hello"}};
  for (const auto& [k, v] : context.items()) body[k] = v;
  return body;
}

void expect_names(const Parsed& p, const std::string& field, const std::string& code) {
  ASSERT_FALSE(p.ok) << field << " should be refused";
  EXPECT_EQ(p.error.status, 400);
  EXPECT_EQ(p.error.param, field);
  EXPECT_EQ(p.error.code, code);
  EXPECT_NE(p.error.message.find(field), std::string::npos) << p.error.message;
}

TEST(ServerRequestFields, TheTableIsExactlyTheFieldsListedHere) {
  std::map<std::string, std::pair<FieldUse, FieldUse>> table;
  for (const RequestField& f : request_fields()) {
    EXPECT_TRUE(table.emplace(f.name, std::make_pair(f.chat, f.completions)).second)
        << f.name << " listed twice";
  }
  const std::vector<FieldCase> cases = all_cases();
  EXPECT_EQ(cases.size(), table.size());
  for (const FieldCase& c : cases) {
    auto it = table.find(c.name);
    ASSERT_NE(it, table.end()) << c.name << " is missing from request_fields()";
    EXPECT_EQ(it->second.first, c.chat) << c.name << " on chat";
    EXPECT_EQ(it->second.second, c.completions) << c.name << " on completions";
  }
}

TEST(ServerRequestFields, EachFieldIsTreatedAsTheTableSays) {
  int checked = 0;
  for (const FieldCase& c : all_cases()) {
    for (GenerationRoute route : {GenerationRoute::kChat, GenerationRoute::kCompletions}) {
      const bool chat = route == GenerationRoute::kChat;
      const FieldUse use = chat ? c.chat : c.completions;
      const json& value = chat ? (c.chat_value.is_null() ? c.completion_value : c.chat_value)
                               : (c.completion_value.is_null() ? c.chat_value : c.completion_value);
      SCOPED_TRACE(c.name + (chat ? " on chat" : " on completions") + " = " + value.dump());
      ASSERT_EQ(field_use(c.name, route), use);
      const json base = base_body(route, use == N ? json::object() : c.context);
      json body = base;
      body[c.name] = value;
      const Parsed without = parse(route, base);
      ASSERT_TRUE(without.ok) << without.error.message;
      const Parsed with = parse(route, body);
      switch (use) {
        case FieldUse::kSupported:
          ASSERT_TRUE(with.ok) << with.error.message;
          if (c.changes) {
            EXPECT_NE(with.summary, without.summary) << "the field was dropped";
          } else {
            EXPECT_EQ(with.summary, without.summary);
          }
          if (!c.refused_value.is_null()) {
            body[c.name] = c.refused_value;
            expect_names(parse(route, body), c.name, "unsupported_parameter");
          }
          break;
        case FieldUse::kIgnored:
          ASSERT_TRUE(with.ok) << with.error.message;
          EXPECT_EQ(with.summary, without.summary) << "an ignored field changed the request";
          body[c.name] = json::array({1});  // no ignored field is an array
          expect_names(parse(route, body), c.name, "invalid_value");
          break;
        case FieldUse::kRefused:
          expect_names(with, c.name, "unsupported_parameter");
          break;
        case FieldUse::kNone:
          expect_names(with, c.name, "unknown_parameter");
          break;
      }
      // null is absence, whatever the field (a required one is then missing).
      body[c.name] = nullptr;
      if (use == S && (c.name == "messages" || c.name == "prompt")) {
        expect_names(parse(route, body), c.name, "invalid_value");
      } else {
        EXPECT_TRUE(parse(route, body).ok);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(all_cases().size()));
}

TEST(ServerRequestFields, UnknownFieldsAreRefusedByName) {
  for (GenerationRoute route : {GenerationRoute::kChat, GenerationRoute::kCompletions}) {
    json body = base_body(route, json::object());
    body["some_unknown_field"] = 1;
    expect_names(parse(route, body), "some_unknown_field", "unknown_parameter");
    body["some_unknown_field"] = nullptr;
    EXPECT_TRUE(parse(route, body).ok);
    body = base_body(route, {{"stream", true}});
    body["stream_options"] = {{"continuous_usage_stats", true}};
    expect_names(parse(route, body), "stream_options.continuous_usage_stats", "unknown_parameter");
    body["stream_options"] = {{"include_usage", true}, {"include_obfuscation", false}};
    EXPECT_TRUE(parse(route, body).ok);
  }
}

// docs/server.md's table between the request-fields markers says what the code does.
TEST(ServerRequestFields, TheDocsTableMatches) {
  std::ifstream in(std::string(SYV_SOURCE_DIR) + "/docs/server.md");
  ASSERT_TRUE(in) << "docs/server.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t begin = doc.find("<!-- request-fields:begin");
  const size_t end = doc.find("<!-- request-fields:end");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  auto use_of = [](std::string cell) {
    cell.erase(0, cell.find_first_not_of(' '));
    if (cell.rfind("supported", 0) == 0) return S;
    if (cell.rfind("ignored", 0) == 0) return I;
    if (cell.rfind("refused", 0) == 0) return R;
    return N;
  };
  std::map<std::string, std::pair<FieldUse, FieldUse>> documented;
  std::istringstream lines(doc.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    for (size_t p = 1, q; (q = line.find('|', p)) != std::string::npos; p = q + 1)
      cells.push_back(line.substr(p, q - p));
    ASSERT_GE(cells.size(), 3u) << line;
    const size_t a = cells[0].find('`'), b = cells[0].find('`', a + 1);
    documented[cells[0].substr(a + 1, b - a - 1)] = {use_of(cells[1]), use_of(cells[2])};
  }
  EXPECT_EQ(documented.size(), request_fields().size());
  for (const RequestField& f : request_fields()) {
    auto it = documented.find(f.name);
    ASSERT_NE(it, documented.end()) << f.name << " is not in docs/server.md";
    EXPECT_EQ(it->second.first, f.chat) << f.name << " (chat column)";
    EXPECT_EQ(it->second.second, f.completions) << f.name << " (completions column)";
  }
}

// POST /v1/responses has its own table (request_fields.h, docs/server.md "Responses fields").
namespace responses {

struct ResponsesCase {
  std::string name;
  FieldUse use;
  json value;
  json context = json::object();
  bool changes = true;
  json refused_value = nullptr;  // supported: a value syv cannot honour (400 naming the field)
};

const json kRespTools =
    json::array({{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "object"}}}}});

std::vector<ResponsesCase> all_cases() {
  return {
      {"model", S, "tiny", json::object(), false},
      {"input", S, "other"},
      {"instructions", S, "Be brief."},
      {"max_output_tokens", S, 9},
      {"temperature", S, 0.5},
      {"top_p", S, 0.5},
      {"tools", S, kRespTools},
      {"tool_choice", S, "required", {{"tools", kRespTools}}},
      {"parallel_tool_calls", S, false, {{"tools", kRespTools}, {"tool_choice", "required"}}},
      {"text", S, {{"format", {{"type", "json_object"}}}}},
      {"reasoning", S, {{"effort", "low"}}},
      {"include", S, json::array({"message.output_text.logprobs"})},
      {"top_logprobs", S, 2},
      {"previous_response_id", S, "resp_x"},
      {"store", S, false},
      {"metadata", S, {{"k", "v"}}},
      {"stream", S, true},
      {"stream_options", S, {{"include_obfuscation", false}}, {{"stream", true}}, false},
      {"truncation", S, "auto"},
      {"background", S, false, json::object(), false, true},
      {"user", I, "someone"},
      {"safety_identifier", I, "hash"},
      {"prompt_cache_key", I, "k"},
      {"prompt_cache_retention", I, "24h"},
      {"service_tier", I, "auto"},
      {"max_tool_calls", I, 3},
      {"conversation", R, "conv_1"},
      {"prompt", R, {{"id", "pmpt_1"}}},
      {"seed", S, 7},
      {"top_k", S, 5},
      {"min_p", S, 0.1},
      {"repetition_penalty", S, 1.2},
      {"chat_template_kwargs", S, {{"enable_thinking", false}}},
  };
}

Parsed parse(const json& body) {
  const auto lookup = [](const std::string& id) -> std::optional<StoredResponse> {
    if (id != "resp_x") return std::nullopt;
    return StoredResponse{
        {{"id", "resp_x"}, {"output", nlohmann::ordered_json::array()}},
        nlohmann::ordered_json::array({{{"role", "user"}, {"content", "before"}}}),
        nlohmann::ordered_json::array()};
  };
  Parsed out;
  auto r = parse_responses_request(body, nlohmann::ordered_json(body), limits(), lookup);
  out.ok = r.ok();
  if (!r.ok()) {
    out.error = r.error();
    return out;
  }
  json echo = json(r->echo);
  echo.erase("user");  // bookkeeping repeated in the response object, no effect on the output
  out.summary = {{"chat", summary(r->chat)},
                 {"echo", echo},
                 {"store", r->store},
                 {"logprobs", r->logprobs},
                 {"input", json(r->input_messages)},
                 {"history", json(r->history)}};
  return out;
}

json base_body(const json& context) {
  json body = {{"input", "hi"}};
  for (const auto& [k, v] : context.items()) body[k] = v;
  return body;
}

TEST(ServerResponsesFields, TheTableIsExactlyTheFieldsListedHere) {
  std::map<std::string, FieldUse> table;
  for (const ResponsesField& f : responses_fields()) {
    EXPECT_TRUE(table.emplace(f.name, f.use).second) << f.name << " listed twice";
  }
  EXPECT_EQ(all_cases().size(), table.size());
  for (const ResponsesCase& c : all_cases()) {
    auto it = table.find(c.name);
    ASSERT_NE(it, table.end()) << c.name << " is missing from responses_fields()";
    EXPECT_EQ(it->second, c.use) << c.name;
  }
}

TEST(ServerResponsesFields, EachFieldIsTreatedAsTheTableSays) {
  for (const ResponsesCase& c : all_cases()) {
    SCOPED_TRACE(c.name + " = " + c.value.dump());
    ASSERT_EQ(field_use(c.name, GenerationRoute::kResponses), c.use);
    const json base = base_body(c.context);
    json body = base;
    body[c.name] = c.value;
    const Parsed without = parse(base);
    ASSERT_TRUE(without.ok) << without.error.message;
    const Parsed with = parse(body);
    switch (c.use) {
      case FieldUse::kSupported:
        ASSERT_TRUE(with.ok) << with.error.message;
        if (c.changes) {
          EXPECT_NE(with.summary, without.summary) << "the field was dropped";
        } else {
          EXPECT_EQ(with.summary, without.summary);
        }
        if (!c.refused_value.is_null()) {
          body[c.name] = c.refused_value;
          expect_names(parse(body), c.name, "unsupported_parameter");
        }
        break;
      case FieldUse::kIgnored:
        ASSERT_TRUE(with.ok) << with.error.message;
        EXPECT_EQ(with.summary, without.summary) << "an ignored field changed the request";
        body[c.name] = json::array({1});  // no ignored field is an array
        expect_names(parse(body), c.name, "invalid_value");
        break;
      case FieldUse::kRefused:
        expect_names(with, c.name, "unsupported_parameter");
        break;
      case FieldUse::kNone:
        FAIL() << "every listed field is known";
    }
    body[c.name] = nullptr;
    if (c.name == "input") {
      expect_names(parse(body), c.name, "invalid_value");
    } else {
      EXPECT_TRUE(parse(body).ok);
    }
  }
  // Unknown fields, and the chat names of mapped fields, are refused by name.
  for (const char* name : {"some_unknown_field", "messages", "max_tokens", "response_format"}) {
    json body = base_body(json::object());
    body[name] = 1;
    expect_names(parse(body), name, "unknown_parameter");
  }
}

// docs/server.md's table between the responses-fields markers says what the code does.
TEST(ServerResponsesFields, TheDocsTableMatches) {
  std::ifstream in(std::string(SYV_SOURCE_DIR) + "/docs/server.md");
  ASSERT_TRUE(in) << "docs/server.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t begin = doc.find("<!-- responses-fields:begin");
  const size_t end = doc.find("<!-- responses-fields:end");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::map<std::string, FieldUse> documented;
  std::istringstream lines(doc.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    for (size_t p = 1, q; (q = line.find('|', p)) != std::string::npos; p = q + 1)
      cells.push_back(line.substr(p, q - p));
    ASSERT_GE(cells.size(), 2u) << line;
    const size_t a = cells[0].find('`'), b = cells[0].find('`', a + 1);
    std::string cell = cells[1];
    cell.erase(0, cell.find_first_not_of(' '));
    const FieldUse use = cell.rfind("supported", 0) == 0 ? S
                         : cell.rfind("ignored", 0) == 0 ? I
                         : cell.rfind("refused", 0) == 0 ? R
                                                         : N;
    documented[cells[0].substr(a + 1, b - a - 1)] = use;
  }
  EXPECT_EQ(documented.size(), responses_fields().size());
  for (const ResponsesField& f : responses_fields()) {
    auto it = documented.find(f.name);
    ASSERT_NE(it, documented.end()) << f.name << " is not in docs/server.md";
    EXPECT_EQ(it->second, f.use) << f.name;
  }
}

}  // namespace responses

}  // namespace
}  // namespace syv::server
