// Request validation: typed values for good requests, a 4xx naming the field for bad ones.
#include <gtest/gtest.h>

#include <random>

#include "server/openai_schema.h"

namespace syv::server {
namespace {

using nlohmann::json;

SchemaLimits limits() {
  SchemaLimits l;
  l.served_model_name = "tiny";
  l.vocab_size = 1000;
  return l;
}

json chat(json extra = json::object()) {
  json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// Expects a 400-class error whose param and message name `param`.
void expect_error(const ApiResult<ChatRequest>& r, const std::string& param, int status = 400) {
  ASSERT_FALSE(r.ok()) << "expected an error for " << param;
  EXPECT_EQ(r.error().status, status);
  EXPECT_EQ(r.error().param, param);
  EXPECT_NE(r.error().message.find(param), std::string::npos) << r.error().message;
  json shape = r.error().to_json();
  ASSERT_TRUE(shape.contains("error"));
  for (const char* key : {"message", "type", "param", "code"}) {
    EXPECT_TRUE(shape["error"].contains(key)) << key;
  }
}

TEST(ServerSchema, FullChatRequestIsTyped) {
  auto r = parse_chat_request(
      chat({{"n", 2},
            {"max_completion_tokens", 7},
            {"temperature", 0.5},
            {"top_p", 0.9},
            {"top_k", 40},
            {"min_p", 0.05},
            {"presence_penalty", 0.5},
            {"frequency_penalty", -0.5},
            {"repetition_penalty", 1.1},
            {"seed", 42},
            {"stop", {"\n\n", "END"}},
            {"logprobs", true},
            {"top_logprobs", 3},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"tools",
             {{{"type", "function"},
               {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}}},
            {"tool_choice", "auto"},
            {"chat_template_kwargs", {{"enable_thinking", false}}},
            {"logit_bias", {{"7", 2.5}, {"999", -100}}},
            {"min_tokens", 3},
            {"include_stop_str_in_output", true},
            {"reasoning_effort", "low"}}),
      limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.n, 2);
  EXPECT_EQ(r->sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_EQ(r->sampling.top_k, 40);
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_EQ(r->sampling.stop.size(), 2u);
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 3);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->parse_tool_calls);
  EXPECT_EQ(r->chat_template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r->chat_template_kwargs["reasoning_effort"], "low");
  const std::vector<std::pair<int32_t, float>> bias = {{7, 2.5f}, {999, -100.0f}};
  EXPECT_EQ(r->sampling.logit_bias, bias);
  EXPECT_EQ(r->sampling.min_tokens, 3);
  EXPECT_TRUE(r->sampling.include_stop_str_in_output);
}

TEST(ServerSchema, ContentPartsAreJoinedAndDeveloperIsSystem) {
  json body = chat();
  body["messages"] = {
      {{"role", "developer"}, {"content", "be brief"}},
      {{"role", "user"},
       {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}};
  auto r = parse_chat_request(body, limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages[0]["role"], "system");
  EXPECT_EQ(r->messages[1]["content"], "ab");
}

TEST(ServerSchema, AssistantToolCallArgumentsBecomeObjects) {
  json body = chat();
  body["messages"].push_back({{"role", "assistant"},
                              {"content", nullptr},
                              {"tool_calls",
                               {{{"id", "call_1"},
                                 {"type", "function"},
                                 {"function", {{"name", "f"}, {"arguments", "{\"x\": 1}"}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_1"}});
  auto r = parse_chat_request(body, limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages[1]["tool_calls"][0]["function"]["arguments"], json({{"x", 1}}));
}

TEST(ServerSchema, EachBadFieldIsNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"n", 0}}, "n"},
      {{{"n", 1000}}, "n"},
      {{{"n", 1.5}}, "n"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", "10"}}, "max_tokens"},
      {{{"max_completion_tokens", -3}}, "max_completion_tokens"},
      {{{"temperature", -0.1}}, "temperature"},
      {{{"temperature", 2.5}}, "temperature"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"top_p", 1.5}}, "top_p"},
      {{{"top_k", -2}}, "top_k"},
      {{{"top_k", 2.5}}, "top_k"},
      {{{"min_p", 1.5}}, "min_p"},
      {{{"presence_penalty", 3}}, "presence_penalty"},
      {{{"frequency_penalty", -3}}, "frequency_penalty"},
      {{{"repetition_penalty", 0}}, "repetition_penalty"},
      // In range as a double, 0 as the float the engine keeps (openai_request_fuzz's find), and
      // a divisor that would turn logits into infinities.
      {{{"top_p", 1e-200}}, "top_p"},
      {{{"repetition_penalty", 1e-200}}, "repetition_penalty"},
      {{{"repetition_penalty", 0.009}}, "repetition_penalty"},
      {{{"seed", "x"}}, "seed"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", {""}}}, "stop"},
      {{{"stop", json::array({"a", 1})}}, "stop"},
      {{{"stream", "yes"}}, "stream"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"stream", true}, {"stream_options", {{"include_usage", 1}}}},
       "stream_options.include_usage"},
      {{{"logprobs", 1}}, "logprobs"},
      {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"tools", "f"}}, "tools"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}},
       "tools[0].function.name"},
      {{{"tools", {{{"type", "other"}}}}}, "tools[0].type"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}}, "tool_choice"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       "tool_choice.function.name"},
      {{{"tool_choice", {{"type", "function"}}}}, "tool_choice.function.name"},
      {{{"tool_choice", "required"},
        {"tools",
         {{{"type", "function"},
           {"function",
            {{"name", "f"},
             {"parameters", {{"type", "object"}, {"properties", {{"x", {{"not", {}}}}}}}}}}}}}},
       "tools"},
      {{{"tool_choice", "required"},
        {"guided_regex", "a"},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       "tool_choice"},
      {{{"chat_template_kwargs", "x"}}, "chat_template_kwargs"},
      {{{"chat_template_kwargs", {{"messages", 1}}}}, "chat_template_kwargs"},
      {{{"logit_bias", 5}}, "logit_bias"},
      {{{"logit_bias", {{"abc", 5}}}}, "logit_bias"},
      {{{"logit_bias", {{"-1", 5}}}}, "logit_bias"},
      {{{"logit_bias", {{"1.5", 5}}}}, "logit_bias"},
      {{{"logit_bias", {{"1000", 5}}}}, "logit_bias"},
      {{{"logit_bias", {{"99999999999", 5}}}}, "logit_bias"},
      {{{"logit_bias", {{"1", 100.5}}}}, "logit_bias"},
      {{{"logit_bias", {{"1", "5"}}}}, "logit_bias"},
      {{{"min_tokens", -1}}, "min_tokens"},
      {{{"min_tokens", 1.5}}, "min_tokens"},
      {{{"min_tokens", 5}, {"max_tokens", 4}}, "min_tokens"},
      {{{"include_stop_str_in_output", 1}}, "include_stop_str_in_output"},
      {{{"reasoning_effort", "extreme"}}, "reasoning_effort"},
      {{{"modalities", {"text", "audio"}}}, "modalities"},
      {{{"modalities", "text"}}, "modalities"},
      {{{"parallel_tool_calls", "yes"}}, "parallel_tool_calls"},
      {{{"user", 5}}, "user"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.json_schema.schema"},
      {{{"guided_choice", json::array()}}, "guided_choice"},
      {{{"guided_choice", {"a", 1}}}, "guided_choice[1]"},
      {{{"guided_regex", 5}}, "guided_regex"},
      {{{"grammar", "root ::= missing"}}, "grammar"},
      {{{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}, "structured_outputs"},
      {{{"structured_outputs", json::object()}}, "structured_outputs"},
      {{{"guided_json", "{not json"}}, "guided_json"},
      {{{"guided_regex", "a"}, {"grammar", "root ::= \"a\""}}, "grammar"},
      {{{"guided_regex", "a"}, {"ignore_eos", true}}, "ignore_eos"},
      {{{"guided_regex", "a"}, {"min_tokens", 1}}, "min_tokens"},
      {{{"stop_token_ids", {5000}}}, "stop_token_ids"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", {1}}}, "messages[0]"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
       "messages[0].content[0].type"},
      {{{"model", 7}}, "model"},
  };
  for (const auto& [extra, param] : cases) {
    SCOPED_TRACE(extra.dump());
    expect_error(parse_chat_request(chat(extra), limits()), param);
  }
}

TEST(ServerSchema, LogitBiasEntriesAreBounded) {
  SchemaLimits big = limits();
  big.vocab_size = 5000;
  json bias = json::object();
  for (int i = 0; i < big.max_logit_bias; ++i) bias[std::to_string(i)] = 1;
  auto r = parse_chat_request(chat({{"logit_bias", bias}}), big);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(static_cast<int>(r->sampling.logit_bias.size()), big.max_logit_bias);
  bias[std::to_string(big.max_logit_bias)] = 1;
  auto e = parse_chat_request(chat({{"logit_bias", bias}}), big);
  expect_error(e, "logit_bias");
  EXPECT_NE(e.error().message.find("at most 1024 entries"), std::string::npos) << e.error().message;
}

// Ranges hold for the 32-bit floats the engine keeps: the smallest values that stay in range pass.
TEST(ServerSchema, NumberBoundsHoldAsStored) {
  auto r = parse_chat_request(chat({{"top_p", 1e-30}, {"repetition_penalty", 0.01}}), limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->sampling.top_p, 0.0f);
  EXPECT_FLOAT_EQ(r->sampling.repetition_penalty, 0.01f);
  auto tiny = parse_chat_request(chat({{"top_p", 1e-200}}), limits());
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("32-bit float"), std::string::npos) << tiny.error().message;
}

TEST(ServerSchema, UnknownModelIs404) {
  auto r = parse_chat_request(chat({{"model", "gpt-4"}}), limits());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 404);
  EXPECT_EQ(r.error().code, "model_not_found");
  EXPECT_EQ(r.error().param, "model");
}

TEST(ServerSchema, MissingMessages) {
  auto r = parse_chat_request(json{{"model", "tiny"}}, limits());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "messages");
}

TEST(ServerSchema, JsonBody) {
  EXPECT_FALSE(parse_json_body("").ok());
  EXPECT_FALSE(parse_json_body("{").ok());
  EXPECT_FALSE(parse_json_body("[1,2]").ok());
  EXPECT_FALSE(parse_json_body("\"str\"").ok());
  EXPECT_FALSE(parse_json_body("{\"a\": \"\xff\"}").ok());
  EXPECT_EQ(parse_json_body("{").error().code, "invalid_json");
  EXPECT_TRUE(parse_json_body("{\"a\": 1}").ok());
}

TEST(ServerSchema, CompletionPrompts) {
  auto r =
      parse_completion_request({{"prompt", "hello"}, {"logprobs", 2}, {"echo", true}}, limits());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompts[0].text, "hello");
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 2);
  r = parse_completion_request({{"prompt", {1, 2, 3}}}, limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  r = parse_completion_request({{"prompt", {"a", "b"}}}, limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompts.size(), 2u);
  r = parse_completion_request({{"prompt", {{1, 2}, {3}}}}, limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompts.size(), 2u);

  const std::vector<std::pair<json, std::string>> bad = {
      {json::object(), "prompt"},
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", {1, 5000}}}, "prompt[1]"},
      {{{"prompt", {1, -1}}}, "prompt[1]"},
      {{{"prompt", {"a", 3}}}, "prompt[1]"},
      {{{"prompt", {{1}, json::array()}}}, "prompt[1]"},
      {{{"prompt", "x"}, {"logprobs", true}}, "logprobs"},
      {{{"prompt", "x"}, {"logprobs", 99}}, "logprobs"},
      {{{"prompt", "x"}, {"suffix", "y"}}, "suffix"},
      {{{"prompt", "x"}, {"best_of", 3}}, "best_of"},
      {{{"prompt", "x"}, {"echo", "y"}}, "echo"},
  };
  for (const auto& [body, param] : bad) {
    SCOPED_TRACE(body.dump());
    auto e = parse_completion_request(body, limits());
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().param, param);
    EXPECT_EQ(e.error().status, 400);
  }
}

TEST(ServerSchema, TokenizeAndDetokenize) {
  auto t = parse_tokenize_request({{"prompt", "hi"}}, limits());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->prompt, "hi");
  EXPECT_FALSE(parse_tokenize_request(json::object(), limits()).ok());
  EXPECT_FALSE(parse_tokenize_request({{"prompt", 3}}, limits()).ok());
  auto d = parse_detokenize_request({{"tokens", {1, 2}}}, limits());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens.size(), 2u);
  auto bad = parse_detokenize_request({{"tokens", {1, 99999}}}, limits());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "tokens[1]");
}

// Random mutations of a valid request never crash the validator and always give either a value
// or a well-formed error.
TEST(ServerSchema, FuzzedBodiesNeverCrash) {
  std::mt19937 rng(1234);
  const std::string seed = chat({{"n", 2},
                                 {"max_tokens", 5},
                                 {"temperature", 0.7},
                                 {"stop", {"x"}},
                                 {"stream", true},
                                 {"stream_options", {{"include_usage", true}}},
                                 {"logprobs", true},
                                 {"top_logprobs", 2}})
                               .dump();
  const std::string alphabet = "{}[]\":,0123456789.-eE truefalsnul\\\xff\x00ab";
  int values = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string body = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(pos, 1 + rng() % 8);
          break;
        default:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    auto parsed = parse_json_body(body);
    if (!parsed.ok()) {
      ++errors;
      EXPECT_FALSE(parsed.error().body().empty());
      continue;
    }
    auto r = parse_chat_request(parsed.value(), limits());
    auto c = parse_completion_request(parsed.value(), limits());
    if (r.ok()) {
      ++values;
    } else {
      ++errors;
      EXPECT_GE(r.error().status, 400);
      EXPECT_LT(r.error().status, 500);
      EXPECT_TRUE(json::parse(r.error().body()).contains("error"));
    }
    if (!c.ok()) {
      EXPECT_TRUE(json::parse(c.error().body()).contains("error"));
    }
  }
  EXPECT_GT(values, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace syv::server
