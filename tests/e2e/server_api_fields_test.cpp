// The API surface clients probe, in-process over loopback (test_server.h): GET /v1/models/{id},
// the 501 of /v1/embeddings, the request-field policy through the live routes (refused and
// unknown fields named; logit_bias, min_tokens, include_stop_str_in_output reaching the engine's
// request), truncate_prompt_tokens (the engine gets the prompt's tail), and CORS
// (--allowed-origins): preflights before auth, headers on answers, nothing for other origins or
// when off; prompt logprobs in their shapes, streamed and whole.
#include <gtest/gtest.h>
#include <httplib.h>

#include "e2e/http_test_util.h"
#include "e2e/test_server.h"

namespace syv::testing {
namespace {

using nlohmann::json;

const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 4}};

json error_of(const httplib::Result& res) {
  EXPECT_TRUE(is_openai_error(res->body)) << res->body;
  return json::parse(res->body)["error"];
}

TEST_F(ServerHttp, ModelById) {
  TestServer s;
  auto ok = s.get("/v1/models/fake");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  const json card = json::parse(ok->body);
  EXPECT_EQ(card["id"], "fake");
  EXPECT_EQ(card["object"], "model");
  EXPECT_EQ(card["owned_by"], "syv");
  EXPECT_EQ(card["max_model_len"], 256);
  EXPECT_EQ(card, json::parse(s.get("/v1/models")->body)["data"][0]);

  // Unknown ids, one with a '/' sent escaped: 404 naming the id.
  for (const auto& [path, id] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/models/gpt-4o", "gpt-4o"}, {"/v1/models/org%2Fother", "org/other"}}) {
    auto res = s.get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << path;
    const json e = error_of(res);
    EXPECT_EQ(e["code"], "model_not_found");
    EXPECT_EQ(e["param"], "model");
    EXPECT_NE(e["message"].get<std::string>().find("`" + id + "`"), std::string::npos) << e;
  }
  // Auth as /v1/models: a key, unless /v1/models is public.
  EXPECT_EQ(s.get("/v1/models/fake", "")->status, 401);
  EXPECT_EQ(s.get("/v1/models/fake", "sk-wrong")->status, 401);
  TestServer open({}, {}, "/v1/models");
  EXPECT_EQ(open.get("/v1/models/fake", "")->status, 200);
  EXPECT_EQ(open.get("/v1/models/nope", "")->status, 404);
}

TEST_F(ServerHttp, EmbeddingsAre501AfterAuth) {
  TestServer s;
  auto res = s.post("/v1/embeddings", {{"model", "fake"}, {"input", "hello"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 501);
  const json e = error_of(res);
  EXPECT_EQ(e["code"], "unsupported_endpoint");
  EXPECT_NE(e["message"].get<std::string>().find("generation models"), std::string::npos);
  EXPECT_EQ(s.post("/v1/embeddings", {{"input", "hello"}}, "")->status, 401);
  EXPECT_EQ(s.post("/v1/embeddings", {{"input", "hello"}}, "sk-wrong")->status, 401);
}

TEST_F(ServerHttp, RequestFieldPolicyOnTheLiveRoutes) {
  TestServer s;
  struct Case {
    std::string path, field;
    json value;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions",
       "guided_json",
       {{"type", "string"}, {"format", "email"}},
       400,
       "unsupported_parameter"},
      {"/v1/completions", "grammar", "root ::= root \"a\"", 400, "invalid_value"},
      {"/v1/completions", "grammar", "root ::= \"a\"", 200, ""},
      {"/v1/chat/completions", "functions", json::array(), 400, "unsupported_parameter"},
      {"/v1/chat/completions", "frobnicate", 1, 400, "unknown_parameter"},
      {"/v1/completions", "messages", json::array(), 400, "unknown_parameter"},
      {"/v1/chat/completions", "user", "u-1", 200, ""},
      {"/v1/chat/completions", "store", false, 200, ""},
      {"/v1/chat/completions", "metadata", {{"k", "v"}}, 200, ""},
      {"/v1/completions", "user", "u-1", 200, ""},
      {"/v1/chat/completions", "guided_json", nullptr, 200, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.field);
    json body = c.path == "/v1/completions" ? json{{"prompt", "Hello"}, {"max_tokens", 2}} : kChat;
    body[c.field] = c.value;
    auto res = s.post(c.path, body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status) << res->body;
    if (c.status != 200) {
      const json e = error_of(res);
      EXPECT_EQ(e["param"], c.field);
      EXPECT_EQ(e["code"], c.code);
    }
  }

  // The vLLM fields reach the engine's request.
  json body = kChat;
  body["logit_bias"] = {{"9707", 5}, {"11", -100}};
  body["min_tokens"] = 2;
  body["include_stop_str_in_output"] = true;
  ASSERT_EQ(s.post("/v1/chat/completions", body)->status, 200);
  const Request got = s.generator.last_request();
  const std::vector<std::pair<int32_t, float>> bias = {{11, -100.0f}, {9707, 5.0f}};
  EXPECT_EQ(got.params.logit_bias, bias);
  EXPECT_EQ(got.params.min_tokens, 2);
  EXPECT_TRUE(got.params.include_stop_str_in_output);

  // min_tokens beyond what the context leaves (no max_tokens given): 400 naming it.
  body = {{"prompt", "Hello"}, {"min_tokens", 1000}};
  auto res = s.post("/v1/completions", body);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "min_tokens");
  body["logit_bias"] = {{"999999", 1}};
  body.erase("min_tokens");
  res = s.post("/v1/completions", body);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["param"], "logit_bias");
}

// vLLM's truncate_prompt_tokens on the fake generator's 256-token context: the engine gets the
// prompt's last k tokens (chat: of the rendered prompt); -1 keeps what max_tokens leaves room for;
// an echoed prompt is the text of the tokens kept; 0 and more than the context are 400s naming it.
TEST_F(ServerHttp, TruncatePromptTokensKeepsThePromptsLastTokens) {
  TestServer s;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 300; ++i) ids.push_back(1000 + i);
  const std::vector<int32_t> last10(ids.end() - 10, ids.end());

  // 300 tokens do not fit; the last 10 do, and usage counts them.
  json body = {{"prompt", ids}, {"max_tokens", 2}};
  auto res = s.post("/v1/completions", body);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(error_of(res)["code"], "context_length_exceeded");
  body["truncate_prompt_tokens"] = 10;
  res = s.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(s.generator.last_request().prompt_ids, last10);
  EXPECT_EQ(json::parse(res->body)["usage"]["prompt_tokens"], 10);

  // -1: the context less max_tokens (6), or less 1 token without max_tokens.
  body["truncate_prompt_tokens"] = -1;
  body["max_tokens"] = 6;
  ASSERT_EQ(s.post("/v1/completions", body)->status, 200);
  EXPECT_EQ(s.generator.last_request().prompt_ids,
            std::vector<int32_t>(ids.end() - 250, ids.end()));
  body.erase("max_tokens");
  ASSERT_EQ(s.post("/v1/completions", body)->status, 200);
  EXPECT_EQ(s.generator.last_request().prompt_ids.size(), 255u);

  // A prompt shorter than k is untouched.
  body = {{"prompt", last10}, {"max_tokens", 2}, {"truncate_prompt_tokens", 200}};
  ASSERT_EQ(s.post("/v1/completions", body)->status, 200);
  EXPECT_EQ(s.generator.last_request().prompt_ids, last10);

  // echo returns the text of the tokens kept.
  body = {{"prompt", ids}, {"max_tokens", 1}, {"echo", true}, {"truncate_prompt_tokens", 3}};
  res = s.post("/v1/completions", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const std::vector<int32_t> last3(ids.end() - 3, ids.end());
  auto detok = s.post("/detokenize", {{"tokens", last3}});
  ASSERT_EQ(detok->status, 200) << detok->body;
  const std::string kept = json::parse(detok->body)["prompt"].get<std::string>();
  const std::string text = json::parse(res->body)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text.substr(0, kept.size()), kept) << text;
  EXPECT_EQ(s.generator.last_request().prompt_ids, last3);

  // Chat: the rendered prompt's tail.
  ASSERT_EQ(s.post("/v1/chat/completions", kChat)->status, 200);
  const std::vector<int32_t> full = s.generator.last_request().prompt_ids;
  ASSERT_GT(full.size(), 5u);
  json chat = kChat;
  chat["truncate_prompt_tokens"] = 5;
  ASSERT_EQ(s.post("/v1/chat/completions", chat)->status, 200);
  EXPECT_EQ(s.generator.last_request().prompt_ids,
            std::vector<int32_t>(full.end() - 5, full.end()));

  // Refusals name the field.
  for (const json& bad : {json(0), json(257), json(-2), json("5")}) {
    chat["truncate_prompt_tokens"] = bad;
    res = s.post("/v1/chat/completions", chat);
    EXPECT_EQ(res->status, 400) << bad;
    EXPECT_EQ(error_of(res)["param"], "truncate_prompt_tokens") << bad;
  }
}

httplib::Headers preflight(const std::string& origin) {
  return {{"Origin", origin},
          {"Access-Control-Request-Method", "POST"},
          {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}};
}

TEST_F(ServerHttp, CorsPreflightBeforeAuthAndHeadersOnAnswers) {
  server::HttpOptions http;
  auto policy = server::CorsPolicy::parse("https://app.example.com, http://localhost:3000");
  ASSERT_TRUE(policy.ok()) << policy.message();
  http.cors = policy.value();
  TestServer s({}, http);

  // An allowed origin's preflight: 204 without a key.
  for (const char* path : {"/v1/chat/completions", "/v1/models", "/v1/models/fake"}) {
    auto res = s.client->Options(path, preflight("http://localhost:3000"));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 204) << path;
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Methods"), "GET, POST, DELETE, OPTIONS");
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"),
              "authorization, content-type, x-stainless-os");
    EXPECT_EQ(res->get_header_value("Access-Control-Max-Age"), "600");
    EXPECT_EQ(res->get_header_value("Vary"), "Origin");
    EXPECT_TRUE(res->body.empty());
  }
  // Another origin: no CORS headers, answered as any OPTIONS (401 without a key).
  auto other = s.client->Options("/v1/chat/completions", preflight("https://evil.example"));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));

  // Answers to an allowed origin carry the header, errors included; others' do not.
  httplib::Headers h = {{"Origin", "https://APP.example.com"},
                        {"Authorization", std::string("Bearer ") + kKey}};
  auto ok = s.client->Post("/v1/chat/completions", h, kChat.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "https://APP.example.com");
  auto unauthorized = s.client->Get("/v1/models", {{"Origin", "https://app.example.com"}});
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("Access-Control-Allow-Origin"),
            "https://app.example.com");
  h = {{"Origin", "https://evil.example"}, {"Authorization", std::string("Bearer ") + kKey}};
  auto foreign = s.client->Get("/v1/models", h);
  EXPECT_EQ(foreign->status, 200);
  EXPECT_FALSE(foreign->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(s.get("/v1/models")->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServerHttp, CorsOffByDefaultAndStar) {
  TestServer off;
  auto res = off.client->Options("/v1/chat/completions", preflight("http://localhost:3000"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  auto get = off.client->Get("/v1/models", {{"Origin", "http://localhost:3000"},
                                            {"Authorization", std::string("Bearer ") + kKey}});
  EXPECT_EQ(get->status, 200);
  EXPECT_FALSE(get->has_header("Access-Control-Allow-Origin"));

  server::HttpOptions http;
  http.cors = server::CorsPolicy::parse("*").value();
  TestServer any({}, http);
  res = any.client->Options("/v1/completions", {{"Origin", "https://x.example"},
                                                {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "https://x.example");
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"),
            "Authorization, Content-Type, X-Api-Key");
}

TEST(CorsPolicy, ParsesOriginsAndRefusesOthersByName) {
  EXPECT_FALSE(server::CorsPolicy::parse("").value().enabled());
  auto p = server::CorsPolicy::parse("https://a.example:8443,http://b.example");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->allows("https://a.example:8443"));
  EXPECT_TRUE(p->allows("HTTP://B.EXAMPLE"));
  EXPECT_FALSE(p->allows("https://a.example"));
  EXPECT_FALSE(p->allows(""));
  EXPECT_TRUE(p->response_headers("null").empty());
  for (const char* bad : {"https://a.example/path", "a.example", "https://a.example,,x",
                          "https://a.example,", "https:// a.example"}) {
    auto r = server::CorsPolicy::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("--allowed-origins"), std::string::npos) << r.message();
  }
  // A requested header list that is not a plain list of names is not echoed.
  auto any = server::CorsPolicy::parse("*").value();
  const server::HeaderList h = any.preflight_headers("https://x.example", "a\r\nInjected: 1");
  for (const auto& [name, value] : h) EXPECT_EQ(value.find('\n'), std::string::npos);
}

// Prompt logprobs in the shapes clients read (the numbers are the fake generator's; the engine's
// exactness is unit_engine_prompt_logprobs_test and e2e_server_test's).
TEST_F(ServerHttp, PromptLogprobsShapes) {
  TestServer s;
  const std::vector<int32_t> prompt = shared->tokenizer->encode("The cat sat", false);
  ASSERT_EQ(prompt.size(), 3u);
  // lm-eval-harness's loglikelihood request: echo, logprobs, max_tokens 0.
  auto res =
      s.post("/v1/completions",
             {{"prompt", "The cat sat"}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}});
  ASSERT_EQ(res->status, 200) << res->body;
  json choice = json::parse(res->body)["choices"][0];
  EXPECT_EQ(choice["text"], "The cat sat");
  EXPECT_EQ(choice["finish_reason"], "length");
  const json& lp = choice["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"The", " cat", " sat"}));
  EXPECT_EQ(lp["token_logprobs"], json({nullptr, -0.25, -0.5}));
  EXPECT_EQ(lp["text_offset"], json({0, 3, 7}));
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u);
  EXPECT_EQ(json::parse(res->body)["usage"]["completion_tokens"], 0);
  EXPECT_FALSE(choice.contains("prompt_logprobs"));
  Request got = s.generator.last_request();
  EXPECT_EQ(got.params.prompt_logprobs, 2);
  EXPECT_EQ(got.params.max_tokens, 0);

  // Echo with logprobs and generated tokens: the prompt's entries, then the generated ones.
  res = s.post("/v1/completions",
               {{"prompt", "The cat sat"}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 2}});
  choice = json::parse(res->body)["choices"][0];
  EXPECT_EQ(choice["text"], "The cat satt0 t1 ");
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], json({nullptr, -0.25, -0.5, -0.5, -0.5}));
  EXPECT_EQ(choice["logprobs"]["text_offset"], json({0, 3, 7, 11, 14}));

  // vLLM's prompt_logprobs: per choice on completions, top level on chat.
  res = s.post("/v1/completions",
               {{"prompt", "The cat sat"}, {"prompt_logprobs", 1}, {"max_tokens", 1}});
  choice = json::parse(res->body)["choices"][0];
  ASSERT_EQ(choice["prompt_logprobs"].size(), 3u);
  EXPECT_TRUE(choice["prompt_logprobs"][0].is_null());
  const json& second = choice["prompt_logprobs"][1][std::to_string(prompt[1])];
  EXPECT_EQ(second["logprob"], -0.25);
  EXPECT_EQ(second["rank"], 1);
  EXPECT_EQ(second["decoded_token"], " cat");
  EXPECT_EQ(choice["prompt_logprobs"][1]["1000"]["rank"], 1);
  EXPECT_EQ(choice["prompt_logprobs"][2].size(), 2u);
  EXPECT_TRUE(choice["logprobs"].is_null());
  res = s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                        {"prompt_logprobs", 0},
                                        {"max_tokens", 1}});
  const json chat = json::parse(res->body);
  const size_t prompt_len = s.generator.last_request().prompt_ids.size();
  ASSERT_EQ(chat["prompt_logprobs"].size(), prompt_len);
  EXPECT_EQ(chat["prompt_logprobs"][prompt_len - 1].size(), 1u);

  // Refused: max_tokens 0 with nothing to return, 0 on chat, too many alternatives.
  struct Case {
    std::string path;
    json body;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens", "invalid_value"},
      {"/v1/completions",
       {{"prompt", "x"}, {"prompt_logprobs", 21}},
       "prompt_logprobs",
       "invalid_value"},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "x"}}}},
        {"max_tokens", 0},
        {"prompt_logprobs", 1}},
       "max_tokens",
       "invalid_value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    res = s.post(c.path, c.body);
    ASSERT_EQ(res->status, 400) << res->body;
    EXPECT_EQ(error_of(res)["param"], c.param);
    EXPECT_EQ(error_of(res)["code"], c.code);
  }
  // Echo without logprobs streams the prompt first.
  res = s.post("/v1/completions",
               {{"prompt", "x"}, {"echo", true}, {"max_tokens", 0}, {"stream", true}});
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->body.find("data: [DONE]"), std::string::npos);
}

// The chunks of a stream (not [DONE]) as JSON.
std::vector<json> stream_chunks(const httplib::Result& res) {
  std::vector<json> out;
  EXPECT_EQ(res->status, 200) << res->body;
  const SseBody sse = parse_sse(res->body);
  EXPECT_TRUE(sse.ok) << res->body;
  for (const std::string& e : sse.events) {
    if (e != "[DONE]") out.push_back(json::parse(e));
  }
  return out;
}

// A completions stream put back together per choice, as a client does: text concatenated,
// logprobs arrays appended, prompt_logprobs taken from the chunk that has them (counted).
json join_completion_stream(const std::vector<json>& chunks, int n) {
  json choices = json::array();
  for (int i = 0; i < n; ++i) {
    choices.push_back({{"text", ""}, {"finish_reason", nullptr}, {"prompt_logprobs_chunks", 0}});
  }
  for (const json& chunk : chunks) {
    for (const json& c : chunk["choices"]) {
      json& out = choices[c["index"].get<size_t>()];
      out["text"] = out["text"].get<std::string>() + c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) out["finish_reason"] = c["finish_reason"];
      if (!c["logprobs"].is_null()) {
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
          for (const json& v : c["logprobs"][key]) out["logprobs"][key].push_back(v);
        }
      }
      if (c.contains("prompt_logprobs")) {
        out["prompt_logprobs"] = c["prompt_logprobs"];
        out["prompt_logprobs_chunks"] = out["prompt_logprobs_chunks"].get<int>() + 1;
      }
    }
  }
  return choices;
}

// Streaming prompt logprobs (vLLM's wire format for echo: the prompt's text and logprobs lead
// the first chunk of each choice) give what the non-streaming request gives.
TEST_F(ServerHttp, PromptLogprobsStreamedEqualWhole) {
  TestServer s;
  const std::vector<json> bodies = {
      {{"prompt", "The cat sat"}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}},
      {{"prompt", "The cat sat"}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 2}, {"n", 2}},
      {{"prompt", "The cat sat"}, {"prompt_logprobs", 1}, {"max_tokens", 2}, {"n", 2}},
      {{"prompt", {"The cat sat", "A dog"}},
       {"prompt_logprobs", 0},
       {"echo", true},
       {"logprobs", 0},
       {"max_tokens", 0}},
  };
  for (const json& body : bodies) {
    SCOPED_TRACE(body.dump());
    auto whole = s.post("/v1/completions", body);
    ASSERT_EQ(whole->status, 200) << whole->body;
    const json expected = json::parse(whole->body)["choices"];
    json streamed_body = body;
    streamed_body["stream"] = true;
    const std::vector<json> chunks = stream_chunks(s.post("/v1/completions", streamed_body));
    const json got = join_completion_stream(chunks, static_cast<int>(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      SCOPED_TRACE("choice " + std::to_string(i));
      EXPECT_EQ(got[i]["text"], expected[i]["text"]);
      EXPECT_EQ(got[i]["finish_reason"], expected[i]["finish_reason"]);
      if (expected[i]["logprobs"].is_null()) {
        EXPECT_FALSE(got[i].contains("logprobs"));
      } else {
        EXPECT_EQ(got[i]["logprobs"], expected[i]["logprobs"]);
      }
      EXPECT_EQ(got[i].value("prompt_logprobs", json()),
                expected[i].value("prompt_logprobs", json()));
      EXPECT_EQ(got[i]["prompt_logprobs_chunks"], expected[i].contains("prompt_logprobs") ? 1 : 0);
    }
    // With echo and logprobs, no chunk before the one carrying the prompt (vLLM's order).
    if (body.contains("echo")) {
      ASSERT_FALSE(chunks.empty());
      const json& first = chunks[0]["choices"][0];
      EXPECT_FALSE(first["logprobs"].is_null()) << chunks[0].dump();
      EXPECT_EQ(first["logprobs"]["token_logprobs"][0], nullptr);
    }
  }

  // Chat: the top-level prompt_logprobs ride on one chunk, equal to the whole answer's.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                     {"prompt_logprobs", 1},
                     {"max_tokens", 2},
                     {"n", 2}};
  auto whole = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(whole->status, 200) << whole->body;
  json streamed_chat = chat;
  streamed_chat["stream"] = true;
  int carrying = 0;
  for (const json& chunk : stream_chunks(s.post("/v1/chat/completions", streamed_chat))) {
    if (!chunk.contains("prompt_logprobs")) continue;
    ++carrying;
    EXPECT_EQ(chunk["prompt_logprobs"], json::parse(whole->body)["prompt_logprobs"]);
  }
  EXPECT_EQ(carrying, 1);
}

}  // namespace
}  // namespace syv::testing
