// The HTTP layer in-process over loopback, with the real tokenizer and chat template and a
// scripted generator (fake_generator.h): auth on every route, readiness, SSE format, reasoning and
// tool-call parsing, each bad-input class, 429, disconnects, drain, and a fuzz of request JSON.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <tuple>

#include "e2e/http_test_util.h"
#include "e2e/test_server.h"

namespace syv::testing {
namespace {

using nlohmann::json;

const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 4}};
const json kCompletion = {{"prompt", "Hello"}, {"max_tokens", 4}};

struct RouteCase {
  std::string method, path;
  json body;
};
const std::vector<RouteCase> kRoutes = {
    {"POST", "/v1/chat/completions", kChat},
    {"POST", "/v1/completions", kCompletion},
    {"POST", "/tokenize", {{"prompt", "Hello"}}},
    {"POST", "/detokenize", {{"tokens", {9707}}}},
    {"GET", "/v1/models", nullptr},
    {"GET", "/health", nullptr},
    {"GET", "/metrics", nullptr},
    {"GET", "/no/such/route", nullptr},
};

TEST_F(ServerHttp, EveryRouteTimesNoKeyWrongKeyRightKey) {
  TestServer s;
  for (const RouteCase& r : kRoutes) {
    for (const std::string& key :
         {std::string(""), std::string("sk-wrong"), std::string(kKey).substr(0, 10),
          std::string(kKey) + "x", std::string(kKey), std::string(kKey2)}) {
      SCOPED_TRACE(r.method + " " + r.path + " key=" + key);
      auto res = r.method == "GET" ? s.get(r.path, key) : s.post(r.path, r.body, key);
      ASSERT_TRUE(res);
      const bool right = key == kKey || key == kKey2;
      if (!right) {
        EXPECT_EQ(res->status, 401);
        EXPECT_TRUE(is_openai_error(res->body)) << res->body;
        EXPECT_EQ(json::parse(res->body)["error"]["code"], "invalid_api_key");
      } else if (r.path == "/no/such/route") {
        EXPECT_EQ(res->status, 404);
        EXPECT_TRUE(is_openai_error(res->body)) << res->body;
      } else {
        EXPECT_EQ(res->status, 200) << res->body;
      }
    }
  }
  // The key never appears in the metrics text.
  auto m = s.get("/metrics");
  EXPECT_EQ(m->body.find(kKey), std::string::npos);
}

TEST_F(ServerHttp, PublicRoutesNeedNoKey) {
  TestServer s({}, {}, "/health,/metrics");
  EXPECT_EQ(s.get("/health", "")->status, 200);
  EXPECT_EQ(s.get("/metrics", "")->status, 200);
  EXPECT_EQ(s.get("/v1/models", "")->status, 401);
  EXPECT_EQ(s.post("/v1/completions", kCompletion, "")->status, 401);
}

TEST_F(ServerHttp, NotReadyAnswers503) {
  TestServer s({}, {}, "", /*ready=*/false);
  for (const RouteCase& r : kRoutes) {
    if (r.path == "/metrics" || r.path == "/no/such/route") continue;
    auto res = r.method == "GET" ? s.get(r.path) : s.post(r.path, r.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << r.path;
    EXPECT_TRUE(is_openai_error(res->body));
    EXPECT_TRUE(res->has_header("Retry-After"));
  }
  EXPECT_EQ(s.get("/health", "")->status, 401);  // auth still comes first
  EXPECT_EQ(s.get("/metrics")->status, 200);
  s.transport->set_ready(true);
  EXPECT_EQ(s.get("/health")->status, 200);
}

TEST_F(ServerHttp, NonStreamingChatAndCompletion) {
  TestServer s;
  auto res = s.post("/v1/chat/completions", kChat);
  ASSERT_EQ(res->status, 200) << res->body;
  json j = json::parse(res->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "fake");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "t0 t1 t2 t3 ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 1);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Sampling fields reach the engine request.
  res = s.post("/v1/completions", {{"prompt", {1, 2, 3}},
                                   {"max_tokens", 3},
                                   {"n", 2},
                                   {"temperature", 0.3},
                                   {"top_p", 0.8},
                                   {"top_k", 5},
                                   {"min_p", 0.1},
                                   {"seed", 7},
                                   {"stop", "xx"},
                                   {"presence_penalty", 0.2},
                                   {"frequency_penalty", 0.4},
                                   {"repetition_penalty", 1.2},
                                   {"logprobs", 2},
                                   {"echo", true}});
  ASSERT_EQ(res->status, 200) << res->body;
  j = json::parse(res->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  // Echo with logprobs: the 3 prompt tokens (the first without a logprob), then the 3 generated.
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), 6u);
  EXPECT_TRUE(j["choices"][0]["logprobs"]["top_logprobs"][0].is_null());
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][1].size(), 2u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][3].size(), 2u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  const Request r = s.generator.last_request();
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.prompt_logprobs, 2);  // echo + logprobs scores the prompt
  EXPECT_FLOAT_EQ(r.params.temperature, 0.3f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.8f);
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.1f);
  EXPECT_EQ(r.params.seed, 7u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"xx"});
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
  EXPECT_EQ(r.params.max_tokens, 3);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2);
}

TEST_F(ServerHttp, SseFormat) {
  TestServer s;
  json body = kChat;
  body["stream"] = true;
  body["n"] = 2;
  body["stream_options"] = {{"include_usage", true}};
  body["logprobs"] = true;
  body["top_logprobs"] = 1;
  auto res = s.post("/v1/chat/completions", body);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  SseBody sse = parse_sse(res->body);
  EXPECT_TRUE(sse.ok) << res->body;
  ASSERT_GE(sse.events.size(), 3u);
  EXPECT_EQ(sse.events.back(), "[DONE]");
  EXPECT_EQ(res->body.substr(res->body.size() - 14), "data: [DONE]\n\n");
  std::string text[2];
  int finishes = 0, roles = 0;
  for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
    json chunk = json::parse(sse.events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    if (i + 2 == sse.events.size()) {  // the usage chunk
      EXPECT_TRUE(chunk["choices"].empty());
      EXPECT_EQ(chunk["usage"]["completion_tokens"], 8);
      EXPECT_TRUE(chunk["usage"]["prompt_tokens_details"].contains("cached_tokens"));
      continue;
    }
    EXPECT_TRUE(chunk["usage"].is_null());
    const json& c = chunk["choices"][0];
    const int idx = c["index"];
    if (c["delta"].contains("role")) ++roles;
    if (c["delta"].contains("content")) text[idx] += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finishes;
    if (c["delta"].contains("content") && !c["delta"]["content"].get<std::string>().empty()) {
      EXPECT_EQ(c["logprobs"]["content"][0]["top_logprobs"].size(), 1u);
    }
  }
  EXPECT_EQ(roles, 2);
  EXPECT_EQ(finishes, 2);
  EXPECT_EQ(text[0], "t0 t1 t2 t3 ");
  EXPECT_EQ(text[1], "t0 t1 t2 t3 ");

  // Completions stream the same way.
  json comp = kCompletion;
  comp["stream"] = true;
  res = s.post("/v1/completions", comp);
  sse = parse_sse(res->body);
  EXPECT_TRUE(sse.ok);
  EXPECT_EQ(sse.events.back(), "[DONE]");
  std::string all;
  for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
    json chunk = json::parse(sse.events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    all += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(all, "t0 t1 t2 t3 ");
}

TEST_F(ServerHttp, ReasoningAndToolCallsStreamedAndWhole) {
  TestServer s;
  s.generator.set_script({"<thi", "nk>\nLet me", " think.</th", "ink>\n\n", "Sure. <tool_",
                          "call>\n{\"name\": \"get_weather\", ",
                          "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
                         /*finish_with_stop=*/true);
  json body = kChat;
  body["max_tokens"] = 50;
  body["tools"] = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  auto res = s.post("/v1/chat/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  json msg = json::parse(res->body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Let me think.");
  EXPECT_EQ(msg["content"], "Sure.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(json::parse(res->body)["choices"][0]["finish_reason"], "tool_calls");

  body["stream"] = true;
  res = s.post("/v1/chat/completions", body);
  SseBody sse = parse_sse(res->body);
  std::string reasoning, content, finish;
  json calls = json::array();
  for (const std::string& e : sse.events) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    const json& c = chunk["choices"][0];
    if (c["delta"].contains("reasoning_content"))
      reasoning += c["delta"]["reasoning_content"].get<std::string>();
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) {
      for (const json& t : c["delta"]["tool_calls"]) calls.push_back(t);
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(content, "Sure.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(finish, "tool_calls");

  // Without tools the block stays text.
  body.erase("tools");
  body["stream"] = false;
  res = s.post("/v1/chat/completions", body);
  msg = json::parse(res->body)["choices"][0]["message"];
  EXPECT_NE(msg["content"].get<std::string>().find("<tool_call>"), std::string::npos);
  EXPECT_FALSE(msg.contains("tool_calls"));
}

TEST_F(ServerHttp, BadInputsGet4xxNamingTheField) {
  server::HttpOptions http;
  http.limits.max_body_bytes = 64 * 1024;
  TestServer s({}, http, "", true, /*max_len=*/64);
  struct Case {
    std::string path, body;
    int status;
    std::string param;  // "" = null
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{not json", 400, ""},
      {"/v1/chat/completions", "[1,2]", 400, ""},
      {"/v1/chat/completions", "", 400, ""},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "temperature": 5})", 400, "temperature"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", 400,
       "n"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1000})", 400,
       "max_tokens"},
      // Issue 23.7: prompt_len + max_tokens used to wrap around in 32 bits (param and code null).
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2147483647})", 400,
       "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 2147483647})", 400, "max_tokens"},
      {"/v1/chat/completions",
       R"({"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})", 404, "model"},
      {"/v1/completions", R"({"prompt": [1, 99999999]})", 400, "prompt[1]"},
      {"/v1/completions", R"({"prompt": ""})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "x", "logprobs": 50})", 400, "logprobs"},
      {"/tokenize", R"({"prompt": 5})", 400, "prompt"},
      {"/detokenize", R"({"tokens": "abc"})", 400, "tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.body);
    auto res = s.post_raw(c.path, c.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status) << res->body;
    ASSERT_TRUE(is_openai_error(res->body)) << res->body;
    json err = json::parse(res->body)["error"];
    if (c.param.empty()) {
      EXPECT_TRUE(err["param"].is_null());
    } else {
      EXPECT_EQ(err["param"], c.param);
    }
  }
  // A prompt longer than the context: 400 stating both lengths.
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "hello ";
  auto res = s.post("/v1/completions", {{"prompt", long_prompt}});
  ASSERT_EQ(res->status, 400);
  const std::string msg = json::parse(res->body)["error"]["message"];
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  const size_t prompt_len = shared->tokenizer->encode(long_prompt).size();
  EXPECT_NE(msg.find(std::to_string(prompt_len) + " tokens"), std::string::npos) << msg;
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "context_length_exceeded");
  // Over the body limit: 413.
  res = s.post("/v1/completions", {{"prompt", std::string(100 * 1024, 'a')}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_TRUE(is_openai_error(res->body)) << res->body;
  // The connection is still usable afterwards.
  EXPECT_EQ(s.get("/health")->status, 200);
  EXPECT_EQ(s.generator.submitted(), 0);
}

// Issue 23.1: JSON nested 10^5 and 10^6 deep at every position a client controls used to
// overflow a worker's stack (SIGSEGV). Each is now a 400 naming the field, before any recursive
// code runs, and the server keeps answering.
TEST_F(ServerHttp, DeeplyNestedJsonGets400NamingTheField) {
  server::HttpOptions http;
  http.limits.max_body_bytes = 4u << 20;  // room for 10^6 levels (2 MB of brackets)
  TestServer s({}, http);
  struct Case {
    std::string path, prefix, suffix;  // body = prefix + nesting + suffix
    std::string param;
  };
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::vector<Case> cases = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi", "x": )", "}]}",
       "messages[0].x"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": )", "}]}",
       "messages[0].content"},
      {"/v1/chat/completions",
       R"({"messages": [)" + user +
           R"(], "tools": [{"type": "function", "function": {"name": "f", "parameters": )",
       "}}]}", "tools[0].function.parameters"},
      {"/v1/chat/completions", R"({"messages": [)" + user + R"(], "chat_template_kwargs": )", "}",
       "chat_template_kwargs"},
      {"/v1/chat/completions",
       R"({"messages": [)" + user +
           R"(, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": )"
           R"("function", "function": {"name": "f", "arguments": ")",
       R"("}}]}]})", "messages[1].tool_calls[0].function.arguments"},
      {"/tokenize", R"({"messages": [{"role": "user", "content": "hi", "x": )", "}]}",
       "messages[0].x"},
      {"/v1/completions", R"({"prompt": )", "}", "prompt"},
      {"/v1/chat/completions", "", "", ""},  // the body itself
  };
  for (const size_t depth : {size_t{100000}, size_t{1000000}}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.path + " " + c.prefix + " depth " + std::to_string(depth));
      std::string nesting(depth, '[');
      nesting.append(depth, ']');
      if (c.path == "/v1/chat/completions" && c.param == "chat_template_kwargs") {
        nesting = "{\"k\": " + nesting + "}";
      }
      auto res = s.post_raw(c.path, c.prefix + nesting + c.suffix);
      ASSERT_TRUE(res) << "no answer (the server died?)";
      EXPECT_EQ(res->status, 400) << res->body.substr(0, 300);
      ASSERT_TRUE(is_openai_error(res->body)) << res->body.substr(0, 300);
      const json err = json::parse(res->body)["error"];
      if (c.param.empty()) {
        EXPECT_TRUE(err["param"].is_null()) << err.dump();
      } else if (c.param == "chat_template_kwargs") {
        EXPECT_EQ(err["param"], "chat_template_kwargs.k");
      } else {
        EXPECT_EQ(err["param"], c.param);
      }
      EXPECT_NE(err["message"].get<std::string>().find("nested more than 64 levels"),
                std::string::npos)
          << err.dump();
      ASSERT_EQ(s.get("/health")->status, 200);
    }
  }
  // At the limit a value still works end to end (the chat template sees it).
  std::string ok_nesting(40, '[');
  ok_nesting.append(40, ']');
  auto res = s.post_raw(
      "/tokenize", R"({"messages": [{"role": "user", "content": "hi", "x": )" + ok_nesting + "}]}");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(s.generator.submitted(), 0);
}

// Issue 23.2: a body's size does not bound its parse (a 3 MB body of a million `{}` took ~480 MB).
// More JSON values than --max-json-values, at any position a client controls, are a 400 naming
// the field and the flag before anything is built, and the server keeps answering.
TEST_F(ServerHttp, TooManyJsonValuesGet400NamingTheLimit) {
  TestServer s;
  const size_t n = server::kDefaultMaxJsonValues + 1;  // one array more than the default allows
  std::string wide = "[0";
  for (size_t i = 1; i < n; ++i) wide += ",0";
  wide += "]";
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi", "x": )" + wide + "}]}", "messages[0].x"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": )" + wide + "}]}",
       "messages[0].content"},
      {"/v1/chat/completions",
       R"({"messages": [)" + user +
           R"(], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"p": )" +
           wide + "}}}]}",
       "tools[0].function.parameters"},
      {"/v1/chat/completions",
       R"({"messages": [)" + user + R"(], "chat_template_kwargs": {"k": )" + wide + "}}",
       "chat_template_kwargs.k"},
      {"/v1/chat/completions",
       R"({"messages": [)" + user +
           R"(, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": )"
           R"("function", "function": {"name": "f", "arguments": ")" +
           wide + R"("}}]}]})",
       "messages[1].tool_calls[0].function.arguments"},
      {"/tokenize", R"({"messages": [{"role": "user", "content": "hi", "x": )" + wide + "}]}",
       "messages[0].x"},
      {"/v1/completions", R"({"prompt": )" + wide + "}", "prompt"},
      {"/detokenize", R"({"tokens": )" + wide + "}", "tokens"},
      {"/v1/responses", R"({"input": )" + wide + "}", "input"},
  };
  for (const auto& [path, body, param] : cases) {
    SCOPED_TRACE(path + " " + param);
    auto res = s.post_raw(path, body);
    ASSERT_TRUE(res) << "no answer";
    EXPECT_EQ(res->status, 400) << res->body.substr(0, 300);
    ASSERT_TRUE(is_openai_error(res->body)) << res->body.substr(0, 300);
    const json err = json::parse(res->body)["error"];
    EXPECT_EQ(err["param"], param) << err.dump();
    EXPECT_EQ(err["code"], "invalid_value");
    EXPECT_NE(err["message"].get<std::string>().find(
                  "more than 262144 JSON values in the request (--max-json-values)"),
              std::string::npos)
        << err.dump();
    ASSERT_EQ(s.get("/health")->status, 200);
  }
  EXPECT_EQ(s.generator.submitted(), 0);

  // A lower limit: at it a request is served, one value past it refused.
  server::RouteOptions options;
  options.limits.max_json_values = 2048;
  TestServer low(options);
  auto with_x = [](size_t values) {  // 6 values around x
    std::string x = "[0";
    for (size_t i = 1; i < values - 6; ++i) x += ",0";
    return R"({"messages": [{"role": "user", "content": "hi", "x": )" + x + "]}]}";
  };
  EXPECT_EQ(low.post_raw("/tokenize", with_x(2048))->status, 200);
  auto res = low.post_raw("/tokenize", with_x(2049));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("more than 2048 JSON values"), std::string::npos) << res->body;
  EXPECT_EQ(low.post("/v1/completions", kCompletion)->status, 200);
}

// Issue 22.1: the second turn of every agent loop sends the assistant's tool call back with
// "content": null or no content at all, then the tool's result. The Qwen3 template must render it
// (it used to fail: "argument of type 'NoneType' is not iterable"), and both forms must give the
// prompt a string content "" gives.
TEST_F(ServerHttp, ToolRoundTripWithContentNullOrAbsent) {
  TestServer s;
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  auto conversation = [&](const json& assistant_content, bool present) {
    json assistant = {
        {"role", "assistant"},
        {"tool_calls",
         {{{"id", "call_1"},
           {"type", "function"},
           {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}};
    if (present) assistant["content"] = assistant_content;
    return json{{"messages",
                 {{{"role", "user"}, {"content", "Weather in Paris?"}},
                  assistant,
                  {{"role", "tool"},
                   {"tool_call_id", "call_1"},
                   {"name", "get_weather"},
                   {"content", {{{"type", "text"}, {"text", "sunny, 21 C"}}}}}}},
                {"tools", tools},
                {"max_tokens", 4}};
  };
  std::vector<json> token_lists;
  for (const auto& [content, present] :
       {std::pair<json, bool>{nullptr, true}, {nullptr, false}, {"", true}}) {
    SCOPED_TRACE("content " + (present ? content.dump() : std::string("absent")));
    const json body = conversation(content, present);
    auto res = s.post("/v1/chat/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    json stream_body = body;
    stream_body["stream"] = true;
    res = s.post("/v1/chat/completions", stream_body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_NE(res->body.find("data: [DONE]"), std::string::npos);
    res = s.post("/tokenize", json{{"messages", body["messages"]}, {"tools", tools}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    token_lists.push_back(json::parse(res->body)["tokens"]);
  }
  EXPECT_EQ(token_lists[0], token_lists[2]);
  EXPECT_EQ(token_lists[1], token_lists[2]);
  // The prompt carries the call and the result where Qwen's template puts them.
  const std::string prompt =
      shared->tokenizer->decode(token_lists[0].get<std::vector<int32_t>>(), false);
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                        "\"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_response>\nsunny, 21 C\n</tool_response>"), std::string::npos)
      << prompt;
  // A name that is not a string is named.
  json bad = conversation(nullptr, true);
  bad["messages"][2]["name"] = 5;
  auto res = s.post("/v1/chat/completions", bad);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "messages[2].name");
}

// Issue 23.2: a compressed body is refused from its headers alone, before it is read, inflated or
// authenticated. The body is a real gzip bomb: 1024 concatenated gzip members of 1 MiB of zeros
// each (about 1 MB that `gunzip` inflates to 1 GiB). The 415 arrives before a byte of the body is
// sent, with and without a key, and the process's resident memory grows by less than 64 MiB.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

std::string gzip_bomb_1gib() {
  const std::string zeros(1 << 20, '\0');
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string member(deflateBound(&z, zeros.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
  z.avail_in = static_cast<uInt>(zeros.size());
  z.next_out = reinterpret_cast<Bytef*>(member.data());
  z.avail_out = static_cast<uInt>(member.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  member.resize(z.total_out);
  deflateEnd(&z);
  std::string bomb;
  for (int i = 0; i < 1024; ++i) bomb += member;
  return bomb;
}

TEST_F(ServerHttp, CompressedBodiesGet415BeforeTheyAreRead) {
  TestServer s;
  const std::string bomb = gzip_bomb_1gib();
  ASSERT_LT(bomb.size(), size_t{4} << 20);
  const size_t before = resident_bytes();
  for (const char* encoding_c : {"gzip", "br", "deflate", "GZIP", "gzip, br"}) {
    const std::string encoding = encoding_c;
    for (const std::string& key : {std::string(), std::string(kKey)}) {
      SCOPED_TRACE(encoding + (key.empty() ? " without a key" : " with a key"));
      RawConnection conn(s.transport->port());
      ASSERT_TRUE(conn.connected());
      std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      if (!key.empty()) head += "Authorization: Bearer " + key + "\r\n";
      head += "Content-Type: application/json\r\nContent-Encoding: " + encoding +
              "\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n\r\n";
      ASSERT_TRUE(conn.send_raw(head));
      const std::string got = conn.read_until("}}", 1, std::chrono::seconds(10));
      EXPECT_EQ(got.rfind("HTTP/1.1 415", 0), 0u) << got;
      EXPECT_NE(got.find("unsupported_content_encoding"), std::string::npos) << got;
      conn.send_raw(bomb);  // the server has answered and closes; it may or may not take these
    }
  }
  EXPECT_LT(resident_bytes(), before + (size_t{64} << 20));
  // identity is no encoding at all.
  httplib::Headers h{{"Content-Encoding", "identity"},
                     {"Authorization", std::string("Bearer ") + kKey}};
  auto res = s.client->Post("/v1/chat/completions", h, kChat.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(s.get("/health")->status, 200);
}

// Issue 23.3: more headers than the limit get 431 before the body.
TEST_F(ServerHttp, HeaderFloodGets431) {
  server::HttpOptions http;
  http.limits.max_header_count = 20;
  TestServer s({}, http);
  httplib::Headers h{{"Authorization", std::string("Bearer ") + kKey}};
  for (int i = 0; i < 40; ++i) h.emplace("X-Flood-" + std::to_string(i), "x");
  auto res = s.client->Post("/v1/completions", h, kCompletion.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 431);
  EXPECT_TRUE(is_openai_error(res->body)) << res->body;
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
}

// A POST that declares no length (neither Content-Length nor chunked) gets 411 from its head, key
// or not (server_transport_test covers chunked bodies).
TEST_F(ServerHttp, BodiesWithoutContentLengthGet411) {
  TestServer s;
  RawConnection conn(s.transport->port());
  ASSERT_TRUE(
      conn.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\n\r\n"));
  const std::string got = conn.read_until("}}", 1, std::chrono::seconds(10));
  EXPECT_EQ(got.rfind("HTTP/1.1 411", 0), 0u) << got;
  EXPECT_NE(got.find("length_required"), std::string::npos) << got;
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
}

// Issue 23.4: the port is exclusive (no SO_REUSEPORT): a second server on it fails to bind with a
// message naming the address, and the first keeps serving. Ports outside 0..65535 are refused.
TEST_F(ServerHttp, SecondServerOnTheSamePortFailsToBind) {
  TestServer first;
  server::HttpOptions http;
  http.host = "127.0.0.1";
  http.port = first.transport->port();
  server::Metrics metrics;
  server::OpenAiRoutes routes(metrics, {});
  server::ApiKeys keys;
  ASSERT_TRUE(keys.add(kKey).ok());
  server::HttpServer second(http, keys, routes, metrics);
  const Status st = second.bind();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot bind 127.0.0.1:" + std::to_string(http.port)),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("address in use"), std::string::npos) << st.message();
  EXPECT_EQ(first.get("/health")->status, 200);
  for (const int port : {-1, 65536, 99999}) {
    http.port = port;
    server::HttpServer bad(http, keys, routes, metrics);
    const Status b = bad.bind();
    ASSERT_FALSE(b.ok()) << port;
    EXPECT_NE(b.message().find("expected 1..65535"), std::string::npos) << b.message();
  }
}

TEST_F(ServerHttp, FullQueueAnswers429WithRetryAfter) {
  server::RouteOptions ro;
  ro.max_pending = 2;
  ro.retry_after_seconds = 3;
  TestServer s(ro);
  s.generator.pause(true);
  json body = kCompletion;
  body["stream"] = true;
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<RawConnection>(s.transport->port()));
    ASSERT_TRUE(held.back()->send_post("/v1/completions", kKey, body.dump()));
  }
  for (int i = 0; i < 200 && s.routes.active_requests() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(s.routes.active_requests(), 2);
  auto res = s.post("/v1/completions", kCompletion);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "3");
  EXPECT_TRUE(is_openai_error(res->body));
  s.generator.pause(false);
  for (auto& c : held) {
    EXPECT_NE(c->read_until("[DONE]", 1).find("data: [DONE]"), std::string::npos);
  }
  for (int i = 0; i < 200 && s.routes.active_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
}

TEST_F(ServerHttp, DisconnectMidStreamCancels) {
  TestServer s;
  s.generator.set_tick(std::chrono::milliseconds(20));
  json body = kCompletion;
  body["stream"] = true;
  body["max_tokens"] = 10000;
  body.erase("max_tokens");  // up to the context
  {
    RawConnection conn(s.transport->port());
    ASSERT_TRUE(conn.send_post("/v1/completions", kKey, body.dump()));
    const std::string got = conn.read_until("data: ", 3);
    EXPECT_NE(got.find("200 OK"), std::string::npos);
    conn.close();
  }
  for (int i = 0; i < 500 && (s.generator.live() > 0 || s.routes.active_requests() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.generator.live(), 0u);
  EXPECT_EQ(s.generator.cancels(), 1);
  EXPECT_EQ(s.routes.active_requests(), 0);
}

// Issue 23.6: a non-streaming request whose client leaves is cancelled (it used to generate to the
// end, and a drain waited for it).
TEST_F(ServerHttp, DisconnectWhileNonStreamingCancels) {
  TestServer s;
  s.generator.set_tick(std::chrono::milliseconds(20));
  json body = kCompletion;
  body.erase("max_tokens");  // up to the context: 256 tokens, 5 s at this tick
  {
    RawConnection conn(s.transport->port());
    ASSERT_TRUE(conn.send_post("/v1/completions", kKey, body.dump()));
    for (int i = 0; i < 500 && s.generator.live() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(s.generator.live(), 1u);
    conn.close();
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 300 && (s.generator.live() > 0 || s.routes.active_requests() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.generator.live(), 0u);
  EXPECT_EQ(s.generator.cancels(), 1);
  EXPECT_EQ(s.routes.active_requests(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // A client that stays gets its whole answer.
  auto res = s.post("/v1/completions", kCompletion);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(s.generator.cancels(), 1);
}

TEST_F(ServerHttp, DrainRefusesNewAndFinishesRunning) {
  TestServer s;
  s.generator.set_tick(std::chrono::milliseconds(10));
  json body = kCompletion;
  body["stream"] = true;
  body["max_tokens"] = 50;
  RawConnection conn(s.transport->port());
  ASSERT_TRUE(conn.send_post("/v1/completions", kKey, body.dump()));
  conn.read_until("data: ", 2);
  s.transport->begin_drain();
  auto res = s.post("/v1/completions", kCompletion);
  EXPECT_EQ(res->status, 503);
  EXPECT_TRUE(is_openai_error(res->body));
  EXPECT_TRUE(s.transport->wait_idle(std::chrono::seconds(20)));
  const std::string rest = conn.read_until("[DONE]", 1);
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(s.generator.cancels(), 0);
}

// An engine that stopped (or is stopping) is the server's state, not the client's mistake: 503 with
// Retry-After and an OpenAI-shaped body, on both generation routes; parameter errors stay 400.
TEST_F(ServerHttp, StoppedEngineAnswers503NotBadRequest) {
  server::RouteOptions ro;
  ro.retry_after_seconds = 2;
  TestServer s(ro);
  s.generator.set_stopped(true);
  for (const auto& [path, body] : {std::pair<std::string, json>{"/v1/completions", kCompletion},
                                   {"/v1/chat/completions", kChat}}) {
    auto res = s.post(path, body);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 503) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Retry-After"), "2") << path;
    ASSERT_TRUE(is_openai_error(res->body)) << res->body;
    const json err = json::parse(res->body)["error"];
    EXPECT_EQ(err["type"], "server_error");
    EXPECT_EQ(err["code"], "engine_unavailable");
    EXPECT_NE(err["message"].get<std::string>().find("not accepting requests"), std::string::npos);
  }
  json bad = kCompletion;
  bad["top_p"] = 0;  // a parameter error stays the client's fault
  s.generator.set_stopped(false);
  EXPECT_EQ(s.post("/v1/completions", bad)->status, 400);
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
  EXPECT_EQ(s.routes.active_requests(), 0);
}

TEST_F(ServerHttp, FuzzedRequestBodiesAlwaysGetJson) {
  TestServer s({}, {}, "", true, 128);
  std::mt19937 rng(99);
  const std::vector<std::pair<std::string, json>> seeds = {
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
        {"max_tokens", 2},
        {"stream", false},
        {"n", 1},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
        {"stop", {"a"}},
        {"logprobs", true},
        {"top_logprobs", 1}}},
      {"/v1/completions",
       {{"prompt", {1, 2, 3}}, {"max_tokens", 2}, {"echo", true}, {"logprobs", 1}}},
      {"/tokenize", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}},
      {"/detokenize", {{"tokens", {1, 2, 3}}}},
  };
  const std::string alphabet = "{}[]\":,0123456789.-eE truefalsnul\\ab";
  int answered = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const auto& [path, seed] = seeds[static_cast<size_t>(iter) % seeds.size()];
    std::string body = seed.dump();
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(pos, 1 + rng() % 6);
          break;
        default:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    auto res = s.post_raw(path, body);
    ASSERT_TRUE(res) << "no answer to " << body;
    ++answered;
    ASSERT_LT(res->status, 500) << body << " -> " << res->body;
    if (res->get_header_value("Content-Type").find("event-stream") != std::string::npos) {
      SseBody sse = parse_sse(res->body);
      EXPECT_TRUE(sse.ok);
      for (const std::string& e : sse.events) {
        if (e != "[DONE]") {
          EXPECT_FALSE(json::parse(e, nullptr, false).is_discarded()) << e;
        }
      }
    } else {
      EXPECT_FALSE(json::parse(res->body, nullptr, false).is_discarded())
          << body << " -> " << res->body;
      if (res->status >= 400) {
        EXPECT_TRUE(is_openai_error(res->body)) << res->body;
      }
    }
  }
  EXPECT_EQ(answered, 400);
  EXPECT_EQ(s.get("/health")->status, 200);
}

}  // namespace
}  // namespace syv::testing
