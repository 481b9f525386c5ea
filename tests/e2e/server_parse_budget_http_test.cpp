// The server-wide parse budget (--max-parse-memory-mb, server/parse_budget.h) through the
// in-process server: with a 1 MiB budget, a body whose estimated parse is larger than all of it
// gets 413 parse_budget_exceeded (also when the values are inside a tool call's arguments string),
// and a body that does not fit next to what other requests hold gets an OpenAI-shaped 503
// server_busy with Retry-After on every body-parsing route; the server keeps answering, and the
// budget is back to 0 after every request (success, 400, 413, 503, streamed, a client that left).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "e2e/test_server.h"
#include "server/parse_budget.h"

namespace syv::testing {
namespace {

const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 4}};
const json kCompletion = {{"prompt", "Hello"}, {"max_tokens", 4}};

// A /tokenize body of about `values` JSON values (an extra field the template sees).
std::string tokenize_body(size_t values) {
  std::string x = "[0";
  for (size_t i = 1; i < values; ++i) x += ",0";
  return R"({"messages": [{"role": "user", "content": "hi", "x": )" + x + "]}]}";
}

server::RouteOptions tiny_budget() {
  server::RouteOptions options;
  options.max_parse_bytes = size_t{1} << 20;  // --max-parse-memory-mb 1
  return options;
}

class ServerParseBudget : public ServerHttp {};

TEST_F(ServerParseBudget, LargerThanTheWholeBudgetIs413AndTheServerGoesOn) {
  TestServer s(tiny_budget());
  // 3,000 values: ~1.5 MB estimated (512 bytes a value), more than the 1 MiB budget.
  auto res = s.post_raw("/tokenize", tokenize_body(3000));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  const json err = json::parse(res->body)["error"];
  EXPECT_EQ(err["code"], "parse_budget_exceeded");
  EXPECT_EQ(err["type"], "invalid_request_error");
  EXPECT_NE(err["message"].get<std::string>().find("--max-parse-memory-mb (1 MB)"),
            std::string::npos)
      << err.dump();
  EXPECT_FALSE(res->has_header("Retry-After"));  // retrying cannot help
  EXPECT_EQ(s.routes.parse_budget().in_use(), 0u);
  // Below it: served.
  EXPECT_EQ(s.post_raw("/tokenize", tokenize_body(1000))->status, 200);
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
  EXPECT_EQ(s.post("/v1/chat/completions", kChat)->status, 200);
  EXPECT_EQ(s.routes.parse_budget().in_use(), 0u);

  // The values of a tool call's arguments string count too: a small body whose arguments hold
  // 3,000 values is refused before the template parses them.
  std::string args = "[0";
  for (int i = 1; i < 3000; ++i) args += ",0";
  args += "]";
  const json chat = {{"messages",
                      {{{"role", "user"}, {"content", "hi"}},
                       {{"role", "assistant"},
                        {"tool_calls",
                         {{{"id", "c1"},
                           {"type", "function"},
                           {"function", {{"name", "f"}, {"arguments", args}}}}}}},
                       {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}}},
                     {"max_tokens", 4}};
  res = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_EQ(s.generator.submitted(), 2);  // the two served above, not this one
  EXPECT_EQ(s.routes.parse_budget().in_use(), 0u);
}

TEST_F(ServerParseBudget, ABodyThatDoesNotFitNextToOthersIs503ServerBusy) {
  TestServer s(tiny_budget());
  // Other requests' parses hold all but 100 KB of the budget.
  server::ParseBudget::Hold others = s.routes.parse_budget().hold();
  ASSERT_EQ(others.grow((size_t{1} << 20) - 100'000), server::ParseBudget::Hold::Grow::kOk);
  // Bodies of 1,000 values (~512 KB) or 200 token ids do not fit next to them: 503 + Retry-After
  // on every parsing route.
  const std::string big = tokenize_body(1000);
  // 200 token ids (~100 KB estimated: past what is left, inside the fake model's 256 tokens).
  std::string prompt = "[1";
  for (int i = 1; i < 200; ++i) prompt += ",1";
  prompt += "]";
  const std::string big_completion = R"({"max_tokens": 2, "prompt": )" + prompt + "}";
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/tokenize", big},
           {"/v1/chat/completions", big},
           {"/v1/completions", big_completion},
           {"/v1/responses",
            R"({"max_output_tokens": 2, "input": [{"role": "user", "content": "hi",)"
            R"( "x": )" +
                prompt + "}]}"},
           {"/detokenize", R"({"tokens": )" + prompt + "}"}}) {
    auto res = s.post_raw(path, body);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 503) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Retry-After"), "1") << path;
    const json err = json::parse(res->body)["error"];
    EXPECT_EQ(err["code"], "server_busy") << path;
    EXPECT_EQ(err["type"], "server_error") << path;
    EXPECT_TRUE(err["param"].is_null()) << path;
    EXPECT_NE(err["message"].get<std::string>().find("--max-parse-memory-mb"), std::string::npos);
  }
  EXPECT_EQ(s.generator.submitted(), 0);
  // Small bodies still fit, and nothing they held stays held.
  EXPECT_EQ(s.post("/v1/completions", kCompletion)->status, 200);
  EXPECT_EQ(s.post_raw("/tokenize", tokenize_body(10))->status, 200);
  EXPECT_EQ(s.routes.parse_budget().in_use(), (size_t{1} << 20) - 100'000);
  // Once the others are done, the same request is served.
  others.release();
  EXPECT_EQ(s.post_raw("/tokenize", big)->status, 200);
  EXPECT_EQ(s.post_raw("/v1/completions", big_completion)->status, 200);
  EXPECT_EQ(s.routes.parse_budget().in_use(), 0u);
}

TEST_F(ServerParseBudget, EveryPathGivesTheEstimateBack) {
  TestServer s(tiny_budget());
  auto& budget = s.routes.parse_budget();
  // 400s: invalid JSON, a bad field after the parse, a template error.
  EXPECT_EQ(s.post_raw("/v1/chat/completions", R"({"messages": [)")->status, 400);
  EXPECT_EQ(s.post("/v1/chat/completions", {{"messages", kChat["messages"]}, {"top_p", 7}})->status,
            400);
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1 << 30}})->status, 400);
  EXPECT_EQ(budget.in_use(), 0u);
  // A stream: the parse is released before generation, and nothing is left after it.
  json streamed = kChat;
  streamed["stream"] = true;
  auto res = s.post("/v1/chat/completions", streamed);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(budget.in_use(), 0u);
  // /v1/responses, streamed and not.
  EXPECT_EQ(s.post("/v1/responses", {{"input", "hi"}, {"max_output_tokens", 2}})->status, 200);
  EXPECT_EQ(s.post("/v1/responses", {{"input", "hi"}, {"max_output_tokens", 2}, {"stream", true}})
                ->status,
            200);
  EXPECT_EQ(budget.in_use(), 0u);
  // A client that leaves before its answer.
  {
    httplib::Client quick("127.0.0.1", s.transport->port());
    quick.set_read_timeout(0, 50'000);  // 50 ms: gone before a long generation ends
    json long_chat = kChat;
    long_chat["max_tokens"] = 200;
    (void)quick.Post("/v1/chat/completions", {{"Authorization", std::string("Bearer ") + kKey}},
                     long_chat.dump(), "application/json");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((budget.in_use() > 0 || s.routes.active_requests() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_EQ(s.get("/health")->status, 200);
}

}  // namespace
}  // namespace syv::testing
