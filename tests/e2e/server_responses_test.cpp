// POST /v1/responses, GET / DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items and
// POST /v1/responses/{id}/cancel, in-process over loopback (test_server.h): the
// request runs as the equivalent chat request (same prompt tokens, same engine parameters), the
// response object and the streamed event sequence, function calls and their outputs,
// previous_response_id with store true / false, text.format reaching the grammar, errors naming
// the Responses field, auth; the input items of a chain, paged; delete; cancel refused.
#include <gtest/gtest.h>
#include <httplib.h>

#include "e2e/http_test_util.h"
#include "e2e/test_server.h"

namespace syv::testing {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([{"type": "function", "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}])");
const json kChatTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}])");

// The script of a reply that reasons, says a word and calls get_weather.
const std::vector<std::string> kToolScript = {
    "<thi",
    "nk>\nLet me",
    " think.</th",
    "ink>\n\n",
    "Sure. <tool_",
    "call>\n{\"name\": \"get_weather\", ",
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"};

struct SseEvent {
  std::string name;  // the "event:" line
  json data;
};

// Splits a Responses stream into events; every event has an "event:" and a "data:" line.
std::vector<SseEvent> parse_events(const std::string& body) {
  std::vector<SseEvent> out;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find("\n\n", start);
    EXPECT_NE(end, std::string::npos) << "unterminated event at " << start;
    if (end == std::string::npos) break;
    const std::string block = body.substr(start, end - start);
    start = end + 2;
    if (block[0] == ':') continue;  // keep-alive comment
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    out.push_back({block.substr(7, nl - 7), json::parse(block.substr(nl + 7))});
  }
  return out;
}

std::vector<int32_t> prompt_of(const Request& r) {
  return r.prompt_ids;
}

json error_of(const httplib::Result& res) {
  EXPECT_TRUE(is_openai_error(res->body)) << res->body;
  return json::parse(res->body)["error"];
}

// truncation "auto" on the fake generator's 256-token context: a conversation of five ~60-token
// turns does not fit (400 without it); with it the oldest turns go until the prompt leaves room
// for max_output_tokens, the instructions and the last turn kept, and the response says "auto";
// a last turn that alone does not fit is still the 400.
TEST_F(ServerHttp, ResponsesTruncationAutoDropsTheOldestTurns) {
  TestServer s;
  auto words = [](const std::string& w) {
    std::string text;
    for (int i = 0; i < 50; ++i) text += w + " ";
    return text;
  };
  json input = json::array();
  for (const char* w : {"alpha", "bravo", "charlie", "delta"}) {
    input.push_back({{"role", "user"}, {"content", words(w)}});
    input.push_back({{"role", "assistant"}, {"content", std::string("ok ") + w}});
  }
  input.push_back({{"role", "user"}, {"content", words("echo")}});
  json body = {{"instructions", "Be brief."}, {"input", input}, {"max_output_tokens", 8}};
  auto res = s.post("/v1/responses", body);
  ASSERT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(error_of(res)["code"], "context_length_exceeded");

  body["truncation"] = "auto";
  res = s.post("/v1/responses", body);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["truncation"], "auto");
  const std::vector<int32_t> prompt = prompt_of(s.generator.last_request());
  EXPECT_LE(prompt.size() + 8, 256u);
  auto detok = s.post("/detokenize", {{"tokens", prompt}});
  ASSERT_EQ(detok->status, 200) << detok->body;
  const std::string text = json::parse(detok->body)["prompt"].get<std::string>();
  EXPECT_NE(text.find("Be brief."), std::string::npos) << text;
  EXPECT_NE(text.find("echo echo"), std::string::npos) << text;
  EXPECT_EQ(text.find("alpha"), std::string::npos) << "the oldest turn was kept: " << text;
  EXPECT_NE(text.find("charlie charlie"), std::string::npos)
      << "more than needed dropped: " << text;
  EXPECT_NE(text.find("delta delta"), std::string::npos) << "more than needed dropped: " << text;

  // The last turn alone is too long: nothing left to drop.
  body["input"] = words("foxtrot foxtrot foxtrot foxtrot foxtrot foxtrot");
  res = s.post("/v1/responses", body);
  ASSERT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(error_of(res)["code"], "context_length_exceeded");
}

TEST_F(ServerHttp, ResponsesTextNonStreaming) {
  TestServer s;
  s.generator.set_script({"Hello", " there", "."}, /*finish_with_stop=*/true);
  auto res = s.post("/v1/responses", {{"model", "fake"},
                                      {"instructions", "Be brief."},
                                      {"input", "Hi"},
                                      {"max_output_tokens", 20},
                                      {"temperature", 0.5},
                                      {"metadata", {{"k", "v"}}}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json r = json::parse(res->body);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["model"], "fake");
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["max_output_tokens"], 20);
  EXPECT_EQ(r["temperature"], 0.5);
  EXPECT_EQ(r["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(r["store"], true);
  EXPECT_EQ(r["text"], json({{"format", {{"type", "text"}}}}));
  ASSERT_EQ(r["output"].size(), 1u);
  const json& msg = r["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(msg["content"].size(), 1u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], "Hello there.");
  EXPECT_EQ(msg["content"][0]["annotations"], json::array());
  const json& u = r["usage"];
  EXPECT_EQ(u["output_tokens"], 3);
  EXPECT_EQ(u["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(u["output_tokens_details"]["reasoning_tokens"], 0);
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int>() + 3);

  // The same prompt and parameters as the chat request it maps onto.
  const Request got = s.generator.last_request();
  EXPECT_EQ(got.params.max_tokens, 20);
  EXPECT_FLOAT_EQ(got.params.temperature, 0.5f);
  EXPECT_EQ(u["input_tokens"], static_cast<int>(got.prompt_ids.size()));
  ASSERT_EQ(s.post("/v1/chat/completions", {{"messages",
                                             {{{"role", "system"}, {"content", "Be brief."}},
                                              {{"role", "user"}, {"content", "Hi"}}}},
                                            {"max_tokens", 20}})
                ->status,
            200);
  EXPECT_EQ(prompt_of(s.generator.last_request()), got.prompt_ids);

  // max_output_tokens reached: incomplete.
  res = s.post("/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 2}});
  const json cut = json::parse(res->body);
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(cut["output"][0]["status"], "incomplete");
  EXPECT_EQ(cut["output"][0]["content"][0]["text"], "Hello there");
}

TEST_F(ServerHttp, ResponsesStreamEventSequence) {
  TestServer s;
  s.generator.set_script({"Hello", " there", "."}, /*finish_with_stop=*/true);
  auto res = s.post("/v1/responses", {{"input", "Hi"}, {"stream", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(res->body.find("[DONE]"), std::string::npos);
  const std::vector<SseEvent> events = parse_events(res->body);
  std::vector<std::string> names;
  for (size_t i = 0; i < events.size(); ++i) {
    names.push_back(events[i].name);
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], static_cast<int>(i));
  }
  const std::vector<std::string> expected = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], json::array());
  EXPECT_TRUE(events[0].data["response"]["usage"].is_null());
  const std::string item_id = events[2].data["item"]["id"];
  EXPECT_EQ(events[2].data["output_index"], 0);
  EXPECT_EQ(events[2].data["item"]["status"], "in_progress");
  EXPECT_EQ(events[3].data["part"],
            json({{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}));
  std::string text;
  for (size_t i = 4; i < 7; ++i) {
    EXPECT_EQ(events[i].data["item_id"], item_id);
    EXPECT_EQ(events[i].data["content_index"], 0);
    text += events[i].data["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello there.");
  EXPECT_EQ(events[7].data["text"], "Hello there.");
  EXPECT_EQ(events[8].data["part"]["text"], "Hello there.");
  EXPECT_EQ(events[9].data["item"]["status"], "completed");
  const json& done = events[10].data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][0], events[9].data["item"]);
  EXPECT_EQ(done["usage"]["output_tokens"], 3);

  // The stored object is the one the stream ended with.
  auto stored = s.get("/v1/responses/" + done["id"].get<std::string>());
  ASSERT_EQ(stored->status, 200) << stored->body;
  EXPECT_EQ(json::parse(stored->body), done);

  // Logprobs when asked: on the deltas and the part.
  res = s.post("/v1/responses", {{"input", "Hi"},
                                 {"stream", true},
                                 {"include", {"message.output_text.logprobs"}},
                                 {"top_logprobs", 2}});
  int with_logprobs = 0;
  for (const SseEvent& e : parse_events(res->body)) {
    if (e.name == "response.output_text.delta") {
      ASSERT_EQ(e.data["logprobs"].size(), 1u) << e.data;
      EXPECT_EQ(e.data["logprobs"][0]["logprob"], -0.5);
      EXPECT_EQ(e.data["logprobs"][0]["top_logprobs"].size(), 2u);
      ++with_logprobs;
    }
    if (e.name == "response.completed") {
      EXPECT_EQ(e.data["response"]["output"][0]["content"][0]["logprobs"].size(), 3u);
    }
  }
  EXPECT_EQ(with_logprobs, 3);
}

TEST_F(ServerHttp, ResponsesFunctionCallRoundTrip) {
  TestServer s;
  s.generator.set_script(kToolScript, /*finish_with_stop=*/true);
  json body = {{"input", "Weather in Paris?"}, {"tools", kTools}, {"max_output_tokens", 50}};
  auto res = s.post("/v1/responses", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const json r = json::parse(res->body);
  EXPECT_EQ(r["tools"], kTools);
  EXPECT_EQ(r["tool_choice"], "auto");
  ASSERT_EQ(r["output"].size(), 3u) << r["output"];
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0],
            json({{"type", "reasoning_text"}, {"text", "Let me think."}}));
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Sure.");
  const json& call = r["output"][2];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 3);

  // Streamed: the call as added / arguments delta / done / item done.
  body["stream"] = true;
  res = s.post("/v1/responses", body);
  std::vector<std::string> names;
  std::string args;
  for (const SseEvent& e : parse_events(res->body)) {
    names.push_back(e.name);
    if (e.name == "response.function_call_arguments.delta")
      args += e.data["delta"].get<std::string>();
    if (e.name == "response.function_call_arguments.done") {
      EXPECT_EQ(e.data["arguments"], args);
      EXPECT_EQ(e.data["name"], "get_weather");
    }
  }
  EXPECT_EQ(json::parse(args), json({{"city", "Paris"}}));
  auto count = [&](const std::string& n) { return std::count(names.begin(), names.end(), n); };
  EXPECT_EQ(count("response.output_item.added"), 3);
  EXPECT_EQ(count("response.output_item.done"), 3);
  EXPECT_EQ(count("response.reasoning_text.delta"), 2);  // "Let me", " think."
  EXPECT_EQ(count("response.reasoning_text.done"), 1);
  EXPECT_EQ(count("response.output_text.done"), 1);
  EXPECT_EQ(count("response.function_call_arguments.done"), 1);
  EXPECT_EQ(names.back(), "response.completed");

  // The result goes back as function_call + function_call_output items: the prompt is the chat
  // round trip's, token for token.
  s.generator.set_script({"It is sunny."}, /*finish_with_stop=*/true);
  json second = {
      {"input",
       {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Weather in Paris?"}}}}},
        {{"type", "function_call"},
         {"id", "fc_1"},
         {"call_id", "call_1"},
         {"name", "get_weather"},
         {"arguments", "{\"city\": \"Paris\"}"},
         {"status", "completed"}},
        {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny, 21 C"}}}},
      {"tools", kTools},
      {"max_output_tokens", 8}};
  res = s.post("/v1/responses", second);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["output"][0]["content"][0]["text"], "It is sunny.");
  const std::vector<int32_t> via_responses = prompt_of(s.generator.last_request());
  json chat = {
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"},
            {"type", "function"},
            {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}}}},
      {"tools", kChatTools},
      {"max_tokens", 8}};
  ASSERT_EQ(s.post("/v1/chat/completions", chat)->status, 200);
  EXPECT_EQ(prompt_of(s.generator.last_request()), via_responses);
  const std::string prompt = shared->tokenizer->decode(via_responses, false);
  EXPECT_NE(prompt.find("<tool_response>\nsunny, 21 C\n</tool_response>"), std::string::npos)
      << prompt;

  // tool_choice naming the function constrains the output to a call of it.
  json forced = {{"input", "Weather?"},
                 {"tools", kTools},
                 {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}};
  ASSERT_EQ(s.post("/v1/responses", forced)->status, 200);
  EXPECT_EQ(s.generator.last_request().params.grammar != nullptr, true);
  forced["tool_choice"] = {{"type", "function"}, {"name", "nope"}};
  res = s.post("/v1/responses", forced);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "tool_choice.name") << res->body;
}

TEST_F(ServerHttp, ResponsesPreviousResponseId) {
  TestServer s;
  s.generator.set_script({"Paris", "."}, /*finish_with_stop=*/true);
  auto first = s.post("/v1/responses",
                      {{"instructions", "Answer in one word."}, {"input", "Capital of France?"}});
  ASSERT_EQ(first->status, 200) << first->body;
  const std::string id = json::parse(first->body)["id"];
  s.generator.set_script({"Berlin", "."}, /*finish_with_stop=*/true);
  auto second = s.post("/v1/responses", {{"previous_response_id", id},
                                         {"instructions", "Answer in one word."},
                                         {"input", "And of Germany?"}});
  ASSERT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(json::parse(second->body)["previous_response_id"], id);
  const std::vector<int32_t> chained = prompt_of(s.generator.last_request());
  // The same conversation sent whole on the chat route.
  ASSERT_EQ(
      s.post("/v1/chat/completions", {{"messages",
                                       {{{"role", "system"}, {"content", "Answer in one word."}},
                                        {{"role", "user"}, {"content", "Capital of France?"}},
                                        {{"role", "assistant"}, {"content", "Paris."}},
                                        {{"role", "user"}, {"content", "And of Germany?"}}}}})
          ->status,
      200);
  EXPECT_EQ(prompt_of(s.generator.last_request()), chained);

  // A chain of three: the second's id carries the whole conversation.
  const std::string id2 = json::parse(second->body)["id"];
  ASSERT_EQ(s.post("/v1/responses", {{"previous_response_id", id2}, {"input", "Italy?"}})->status,
            200);
  const std::string third = shared->tokenizer->decode(prompt_of(s.generator.last_request()), false);
  for (const char* part :
       {"Capital of France?", "Paris.", "And of Germany?", "Berlin.", "Italy?"}) {
    EXPECT_NE(third.find(part), std::string::npos) << part << " missing from " << third;
  }
  EXPECT_EQ(third.find("Answer in one word."), std::string::npos) << "instructions carried over";

  // store: false keeps nothing.
  auto unstored = s.post("/v1/responses", {{"input", "Hi"}, {"store", false}});
  ASSERT_EQ(unstored->status, 200);
  const std::string unstored_id = json::parse(unstored->body)["id"];
  EXPECT_EQ(json::parse(unstored->body)["store"], false);
  EXPECT_EQ(s.get("/v1/responses/" + unstored_id)->status, 404);
  auto res = s.post("/v1/responses", {{"previous_response_id", unstored_id}, {"input", "Hi"}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "previous_response_id");
  EXPECT_EQ(error_of(res)["code"], "previous_response_not_found");
  EXPECT_EQ(s.get("/v1/responses/" + id, "")->status, 401);
}

TEST_F(ServerHttp, ResponsesStoreBoundAndExpiry) {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  server::ResponsesStore store({/*max_entries=*/2, std::chrono::seconds(10)}, [&] { return now; });
  auto put = [&](const std::string& id) {
    store.put({{{"id", id}},
               nlohmann::ordered_json::array({{{"role", "user"}, {"content", id}}}),
               nlohmann::ordered_json::array({{{"id", "msg_" + id}}})});
  };
  put("a");
  put("b");
  EXPECT_TRUE(store.conversation("a").has_value());
  put("c");  // over the bound: the oldest goes
  EXPECT_FALSE(store.conversation("a").has_value());
  EXPECT_EQ((*store.conversation("b"))[0]["content"], "b");
  EXPECT_EQ(store.size(), 2u);
  now += std::chrono::seconds(9);
  put("d");  // b goes by count
  EXPECT_TRUE(store.response("c").has_value());
  now += std::chrono::seconds(1);  // c is 10 s old: expired; d is 1 s old
  EXPECT_FALSE(store.response("c").has_value());
  EXPECT_TRUE(store.response("d").has_value());
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.get("d")->input_items[0]["id"], "msg_d");
  put("e");
  EXPECT_TRUE(store.erase("d"));  // erase: gone at once, the others stay
  EXPECT_FALSE(store.get("d").has_value());
  EXPECT_FALSE(store.erase("d"));
  EXPECT_EQ(store.size(), 1u);
  now += std::chrono::seconds(10);
  EXPECT_FALSE(store.erase("e")) << "expired";
  EXPECT_EQ(store.size(), 0u);
  server::ResponsesStore none({0, std::chrono::seconds(10)}, [&] { return now; });
  none.put({{{"id", "x"}}, nlohmann::ordered_json::array(), nlohmann::ordered_json::array()});
  EXPECT_FALSE(none.response("x").has_value());
}

TEST_F(ServerHttp, ResponsesTextFormatAndFields) {
  TestServer s;
  // text.format json_schema is the chat route's response_format json_schema.
  json body = {{"input", "A person"},
               {"text",
                {{"format",
                  {{"type", "json_schema"},
                   {"name", "person"},
                   {"strict", true},
                   {"schema",
                    {{"type", "object"},
                     {"properties", {{"name", {{"type", "string"}}}}},
                     {"required", {"name"}}}}}}}}};
  auto res = s.post("/v1/responses", body);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["text"]["format"]["name"], "person");
  const Request with_schema = s.generator.last_request();
  ASSERT_NE(with_schema.params.grammar, nullptr);
  json chat = {
      {"messages", {{{"role", "user"}, {"content", "A person"}}}},
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema",
         {{"name", "person"}, {"strict", true}, {"schema", body["text"]["format"]["schema"]}}}}}};
  ASSERT_EQ(s.post("/v1/chat/completions", chat)->status, 200);
  EXPECT_EQ(s.generator.last_request().params.grammar, with_schema.params.grammar)
      << "the same schema compiles to the same shared grammar";
  body["text"]["format"] = {{"type", "json_object"}};
  ASSERT_EQ(s.post("/v1/responses", body)->status, 200);
  EXPECT_NE(s.generator.last_request().params.grammar, nullptr);

  struct Case {
    json body;
    std::string param, code;
  };
  const json schema_bad = {{"type", "integer"}, {"multipleOf", 2}};
  const std::vector<Case> cases = {
      {{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens", "invalid_value"},
      {{{"input", "x"}, {"max_output_tokens", 1000}},
       "max_output_tokens",
       "context_length_exceeded"},
      {{{"input", "x"}, {"temperature", 3}}, "temperature", "invalid_value"},
      {{{"input", "x"}, {"frobnicate", 1}}, "frobnicate", "unknown_parameter"},
      {{{"input", "x"}, {"max_tokens", 5}}, "max_tokens", "unknown_parameter"},
      {{{"input", "x"}, {"conversation", "conv_1"}}, "conversation", "unsupported_parameter"},
      {{{"input", "x"}, {"user", 5}}, "user", "invalid_value"},
      {{{"input", "x"}, {"background", true}}, "background", "unsupported_parameter"},
      {{{"input", "x"}, {"truncation", "middle"}}, "truncation", "invalid_value"},
      {{{"input", "x"}, {"include", {"file_search_call.results"}}},
       "include[0]",
       "unsupported_parameter"},
      {{{"input", "x"}, {"reasoning", {{"summary", "detailed"}}}},
       "reasoning.summary",
       "unsupported_parameter"},
      {{{"input", "x"}, {"reasoning", {{"effort", "huge"}}}}, "reasoning.effort", "invalid_value"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"schema", schema_bad}}}}}},
       "text.format",
       "unsupported_parameter"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}},
       "text.format.schema",
       "invalid_value"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}},
       "text.format.type",
       "invalid_value"},
      {{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}},
       "tools[0].type",
       "unsupported_parameter"},
      {{{"input", "x"}, {"tools", {{{"type", "function"}}}}}, "tools[0].name", "invalid_value"},
      {{{"input", "x"}, {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", 3}}}}},
       "tools[0].parameters",
       "invalid_value"},
      {{{"input", "x"}, {"tool_choice", "required"}}, "tool_choice", "invalid_value"},
      {{{"input", "x"}, {"tool_choice", {{"type", "file_search"}}}},
       "tool_choice.type",
       "unsupported_parameter"},
      {{{"input", 5}}, "input", "invalid_value"},
      {json::object(), "input", "invalid_value"},
      {{{"input", json::array()}}, "input", "invalid_value"},
      {{{"input", {{{"role", "robot"}, {"content", "x"}}}}}, "input[0].role", "invalid_value"},
      {{{"input",
         {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}},
       "input[0].content[0].type",
       "unsupported_parameter"},
      {{{"input", json::array({"x"})}}, "input[0]", "invalid_value"},
      {{{"input",
         {{{"role", "user"}, {"content", "x"}}, {{"type", "item_reference"}, {"id", "msg_1"}}}}},
       "input[1].id",
       "invalid_value"},
      {{{"input", {{{"type", "item_reference"}}}}}, "input[0].id", "invalid_value"},
      {{{"input", {{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}}}},
       "input[0].call_id",
       "invalid_value"},
      {{{"input", {{{"type", "function_call_output"}, {"call_id", "c"}}}}},
       "input[0].output",
       "invalid_value"},
      {{{"input", "x"}, {"previous_response_id", "resp_nope"}},
       "previous_response_id",
       "previous_response_not_found"},
      {{{"input", "x"}, {"model", "other"}}, "model", "model_not_found"},
      {{{"input", "x"}, {"stream_options", {{"include_obfuscation", false}}}},
       "stream_options",
       "invalid_value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    res = s.post("/v1/responses", c.body);
    ASSERT_TRUE(res);
    EXPECT_GE(res->status, 400) << res->body;
    const json e = error_of(res);
    EXPECT_EQ(e["param"], c.param) << e;
    EXPECT_EQ(e["code"], c.code) << e;
    if (c.code != "model_not_found" && c.code != "context_length_exceeded") {
      EXPECT_EQ(e["message"].get<std::string>().rfind(c.param, 0), 0u) << e;
    }
  }
  // Ignored fields and items echoed back by clients pass.
  res = s.post("/v1/responses",
               {{"input",
                 {{{"type", "message"}, {"role", "developer"}, {"content", "Be nice."}},
                  {{"type", "reasoning"},
                   {"id", "rs_1"},
                   {"summary", json::array()},
                   {"content", {{{"type", "reasoning_text"}, {"text", "hmm"}}}}},
                  {{"type", "message"},
                   {"id", "msg_1"},
                   {"status", "completed"},
                   {"role", "assistant"},
                   {"content",
                    {{{"type", "output_text"}, {"text", "Hi!"}, {"annotations", json::array()}}}}},
                  {{"role", "user"}, {"content", "Again"}}}},
                {"user", "u-1"},
                {"service_tier", "auto"},
                {"prompt_cache_key", "k"},
                {"safety_identifier", "s"},
                {"max_tool_calls", 3},
                {"truncation", "disabled"},
                {"background", false},
                {"parallel_tool_calls", true},
                {"text", {{"verbosity", "low"}}},
                {"include", {"reasoning.encrypted_content"}},
                {"reasoning", {{"effort", "low"}, {"summary", "auto"}}},
                {"top_p", 0.9},
                {"seed", 3}});
  ASSERT_EQ(res->status, 200) << res->body;
  // Auth like every route.
  EXPECT_EQ(s.post("/v1/responses", {{"input", "x"}}, "")->status, 401);
  EXPECT_EQ(s.post("/v1/responses", {{"input", "x"}}, "sk-wrong")->status, 401);
}

// Pages of /v1/responses/{id}/input_items with `query`, concatenated by following `after`.
json all_pages(TestServer& s, const std::string& id, const std::string& query) {
  json items = json::array();
  std::string after;
  for (int page = 0; page < 20; ++page) {
    auto res = s.get("/v1/responses/" + id + "/input_items?" + query + after);
    EXPECT_EQ(res->status, 200) << res->body;
    const json p = json::parse(res->body);
    EXPECT_EQ(p["object"], "list");
    for (const json& item : p["data"]) items.push_back(item);
    if (!p["has_more"].get<bool>()) break;
    after = "&after=" + p["last_id"].get<std::string>();
  }
  return items;
}

TEST_F(ServerHttp, ResponsesInputItemsDeleteCancel) {
  TestServer s;
  s.generator.set_script({"Hello", "."}, /*finish_with_stop=*/true);
  auto res =
      s.post("/v1/responses", {{"instructions", "Not an item."},
                               {"input",
                                {{{"role", "user"}, {"content", "Hi"}},
                                 {{"type", "message"},
                                  {"id", "msg_client"},
                                  {"role", "developer"},
                                  {"content", {{{"type", "input_text"}, {"text", "Be kind"}}}}}}}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json first = json::parse(res->body);
  const std::string id = first["id"];

  // The input as items: ids (the client's kept), text parts, status; instructions are no item.
  res = s.get("/v1/responses/" + id + "/input_items");
  ASSERT_EQ(res->status, 200) << res->body;
  json page = json::parse(res->body);
  EXPECT_EQ(page["object"], "list");
  EXPECT_EQ(page["has_more"], false);
  ASSERT_EQ(page["data"].size(), 2u) << page.dump();
  const json& user = page["data"][0];
  EXPECT_EQ(user["type"], "message");
  EXPECT_EQ(user["role"], "user");
  EXPECT_EQ(user["status"], "completed");
  EXPECT_EQ(user["content"], json::parse(R"([{"type": "input_text", "text": "Hi"}])"));
  EXPECT_EQ(user["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(page["data"][1]["id"], "msg_client");
  EXPECT_EQ(page["data"][1]["role"], "developer");
  EXPECT_EQ(page["first_id"], user["id"]);
  EXPECT_EQ(page["last_id"], "msg_client");

  // A chain: the earlier input, its output, then the new input (a function call and its output).
  res = s.post("/v1/responses",
               {{"previous_response_id", id},
                {"input",
                 {{{"type", "function_call"},
                   {"call_id", "call_1"},
                   {"name", "get_weather"},
                   {"arguments", "{}"}},
                  {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}},
                  {{"role", "user"}, {"content", "And?"}}}}});
  ASSERT_EQ(res->status, 200) << res->body;
  const std::string second = json::parse(res->body)["id"];
  const json items = all_pages(s, second, "limit=100");
  ASSERT_EQ(items.size(), 6u) << items.dump();
  EXPECT_EQ(items[0], user);
  EXPECT_EQ(items[1]["id"], "msg_client");
  EXPECT_EQ(items[2], first["output"][0]);
  EXPECT_EQ(items[3]["type"], "function_call");
  EXPECT_EQ(items[3]["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(items[3]["status"], "completed");
  EXPECT_EQ(items[4]["type"], "function_call_output");
  EXPECT_EQ(items[4]["output"], "sunny");
  EXPECT_EQ(items[5]["content"][0]["text"], "And?");

  // Paging: any limit, either order, gives the same items; before pages back from an item.
  for (const std::string limit : {"1", "2", "4", "6"}) {
    SCOPED_TRACE("limit " + limit);
    EXPECT_EQ(all_pages(s, second, "limit=" + limit), items);
    json reversed = all_pages(s, second, "order=desc&limit=" + limit);
    std::reverse(reversed.begin(), reversed.end());
    EXPECT_EQ(reversed, items);
  }
  page = json::parse(s.get("/v1/responses/" + second + "/input_items?limit=2")->body);
  EXPECT_EQ(page["has_more"], true);
  EXPECT_EQ(page["last_id"], "msg_client");
  const std::string fourth = items[4]["id"];
  page =
      json::parse(s.get("/v1/responses/" + second + "/input_items?limit=2&before=" + fourth)->body);
  EXPECT_EQ(page["data"], json({items[2], items[3]}));
  EXPECT_EQ(page["has_more"], true);
  page = json::parse(s.get("/v1/responses/" + second + "/input_items?after=" +
                           items[0]["id"].get<std::string>() + "&before=" + fourth)
                         ->body);
  EXPECT_EQ(page["data"], json({items[1], items[2], items[3]}));
  EXPECT_EQ(page["has_more"], false);
  page = json::parse(
      s.get("/v1/responses/" + second + "/input_items?order=desc&limit=1&after=" + fourth)->body);
  EXPECT_EQ(page["data"], json::array({items[3]}));  // json({x}) copies x under clang
  page = json::parse(
      s.get("/v1/responses/" + second + "/input_items?after=" + items[5]["id"].get<std::string>())
          ->body);
  EXPECT_EQ(page["data"], json::array());
  EXPECT_TRUE(page["first_id"].is_null());
  EXPECT_EQ(page["has_more"], false);

  // Item references (what the AI SDK sends for earlier output while store is on) read as the
  // kept items themselves: the same prompt as sending them.
  json by_value = {{"input",
                    {{{"role", "user"}, {"content", "Again"}},
                     first["output"][0],
                     {{"role", "user"}, {"content", "More"}}}}};
  ASSERT_EQ(s.post("/v1/responses", by_value)->status, 200);
  const std::vector<int32_t> expected_prompt = prompt_of(s.generator.last_request());
  json by_reference = by_value;
  by_reference["input"][1] = {{"type", "item_reference"}, {"id", first["output"][0]["id"]}};
  res = s.post("/v1/responses", by_reference);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(prompt_of(s.generator.last_request()), expected_prompt);
  const json referenced = all_pages(s, json::parse(res->body)["id"], "");
  ASSERT_EQ(referenced.size(), 3u);
  EXPECT_EQ(referenced[1], first["output"][0]) << "listed as the item itself";
  by_reference["input"][1]["id"] = "msg_client";  // an input item is kept too
  EXPECT_EQ(s.post("/v1/responses", by_reference)->status, 200);
  by_reference["input"][1]["id"] = "msg_nope";
  res = s.post("/v1/responses", by_reference);
  ASSERT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "input[1].id");

  // Bad queries name their parameter.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"limit=0", "limit"},
      {"limit=101", "limit"},
      {"limit=2x", "limit"},
      {"order=up", "order"},
      {"after=msg_nope", "after"},
      {"before=msg_nope", "before"},
      {"limit=1&limit=2", "limit"},
      {"include=x", "include"},
      {"starting_after=x", "starting_after"}};
  for (const auto& [query, param] : bad) {
    SCOPED_TRACE(query);
    res = s.get("/v1/responses/" + second + "/input_items?" + query);
    ASSERT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(error_of(res)["param"], param);
  }

  // Cancel: only background responses can be, and syv runs none; unknown ids are 404s.
  res = s.post("/v1/responses/" + id + "/cancel", json::object());
  ASSERT_EQ(res->status, 400) << res->body;
  EXPECT_NE(error_of(res)["message"].get<std::string>().find("Cannot cancel a synchronous"),
            std::string::npos);
  EXPECT_EQ(s.post("/v1/responses/resp_nope/cancel", json::object())->status, 404);

  // Other sub-routes are no routes.
  EXPECT_EQ(s.get("/v1/responses/" + id + "/other")->status, 404);
  EXPECT_EQ(s.post("/v1/responses/" + id + "/other", json::object())->status, 404);
  EXPECT_EQ(s.post("/v1/responses/" + id, json::object())->status, 404);
  EXPECT_EQ(s.del("/v1/responses/" + id + "/input_items")->status, 404);
  EXPECT_EQ(s.get("/v1/responses/" + id)->status, 200);
  res = s.get("/v1/responses/" + id + "?stream=true");
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "stream");

  // Every sub-route needs the key.
  EXPECT_EQ(s.get("/v1/responses/" + id + "/input_items", "")->status, 401);
  EXPECT_EQ(s.del("/v1/responses/" + id, "")->status, 401);
  EXPECT_EQ(s.post("/v1/responses/" + id + "/cancel", json::object(), "")->status, 401);
  EXPECT_EQ(s.del("/v1/responses/" + id, "sk-wrong")->status, 401);

  // Delete: the deleted object, then the id is gone everywhere.
  res = s.del("/v1/responses/" + id);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body), json({{"id", id}, {"object", "response"}, {"deleted", true}}));
  EXPECT_EQ(s.get("/v1/responses/" + id)->status, 404);
  EXPECT_EQ(s.get("/v1/responses/" + id + "/input_items")->status, 404);
  EXPECT_EQ(s.del("/v1/responses/" + id)->status, 404);
  EXPECT_EQ(s.post("/v1/responses/" + id + "/cancel", json::object())->status, 404);
  res = s.post("/v1/responses", {{"previous_response_id", id}, {"input", "Hi"}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["code"], "previous_response_not_found");
  EXPECT_EQ(s.get("/v1/responses/" + second)->status, 200) << "the chain's later response stays";

  // store: false keeps no input items either.
  res = s.post("/v1/responses", {{"input", "Hi"}, {"store", false}});
  const std::string unstored = json::parse(res->body)["id"];
  EXPECT_EQ(s.get("/v1/responses/" + unstored + "/input_items")->status, 404);
}

}  // namespace
}  // namespace syv::testing
