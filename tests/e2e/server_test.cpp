// `syv serve` as a subprocess on a loopback ephemeral port with the tiny demo model (random
// weights, real Qwen3 tokenizer): the npm clients (tests/e2e/*_client/: the official openai
// package, LangChain, the AI SDK), batching exactness (8 concurrent greedy requests ==
// sequential ones), prefix-cache reporting, disconnect freeing every page, the generated key, the
// loopback rule and the SIGTERM drain.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "e2e/cli_run.h"
#include "e2e/http_test_util.h"
#include "e2e/npm_client.h"
#include "e2e/serve_process.h"

namespace syv::testing {
namespace {

using nlohmann::json;

constexpr const char* kKey = "sk-e2e-test-key-0123456789abcdef";

class ServerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    ASSERT_TRUE(std::filesystem::exists(kTokenizerDir + "/tokenizer.json"))
        << kTokenizerDir << " is missing: run tools/setup/fetch-tokenizer.sh (make test does)";
    ensure_demo_model();
    server_ = new ServerProcess({"serve",
                                 "--model",
                                 kDemoDir,
                                 "--port",
                                 "0",
                                 "--api-key",
                                 kKey,
                                 "--served-model-name",
                                 "tiny",
                                 "--max-model-len",
                                 "1024",
                                 "--page-size",
                                 "16",
                                 "--kv-cache-mb",
                                 "64",
                                 "--max-num-seqs",
                                 "16",
                                 "--device",
                                 "cpu",
                                 "--allowed-origins",
                                 "http://localhost:5173"},
                                "e2e_server.log");
    const std::string port = server_->wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))",
                                                    std::chrono::seconds(300));
    ASSERT_FALSE(port.empty()) << server_->log();
    port_ = std::stoi(port);
    ASSERT_TRUE(wait_ready(port_, kKey, std::chrono::seconds(300))) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static httplib::Result post(const std::string& path, const json& body) {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(300, 0);
    return cli.Post(path.c_str(), {{"Authorization", std::string("Bearer ") + kKey}}, body.dump(),
                    "application/json");
  }
  static std::string metrics() {
    httplib::Client cli("127.0.0.1", port_);
    auto res = cli.Get("/metrics", {{"Authorization", std::string("Bearer ") + kKey}});
    return res ? res->body : "";
  }

  static ServerProcess* server_;
  static int port_;
};
ServerProcess* ServerE2E::server_ = nullptr;
int ServerE2E::port_ = 0;

TEST_F(ServerE2E, OfficialOpenAiNpmClient) {
  run_npm_client("openai_client", "openai", 18, {port_, kKey, "tiny", {}});
}

// LangChain's ChatOpenAI, on chat completions and the Responses API.
TEST_F(ServerE2E, LangChainClient) {
  run_npm_client("langchain_client", "@langchain/openai", 10, {port_, kKey, "tiny", {}});
}

// The Vercel AI SDK through @ai-sdk/openai (Responses API and chat) and
// @ai-sdk/openai-compatible.
TEST_F(ServerE2E, AiSdkClient) {
  run_npm_client("ai_sdk_client", "@ai-sdk/openai-compatible", 12, {port_, kKey, "tiny", {}});
}

TEST_F(ServerE2E, ConcurrentGreedyEqualsSequential) {
  std::vector<json> bodies;
  for (int i = 0; i < 8; ++i) {
    bodies.push_back({{"prompt", "Request number " + std::to_string(i) + " says"},
                      {"max_tokens", 12 + i},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  }
  std::vector<std::string> sequential;
  for (const json& b : bodies) {
    auto res = post("/v1/completions", b);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    sequential.push_back(json::parse(res->body)["choices"][0]["text"]);
  }
  std::vector<std::future<std::string>> futures;
  for (const json& b : bodies) {
    futures.push_back(std::async(std::launch::async, [b] {
      auto res = post("/v1/completions", b);
      if (!res || res->status != 200) return std::string("<error>");
      return json::parse(res->body)["choices"][0]["text"].get<std::string>();
    }));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    EXPECT_EQ(futures[i].get(), sequential[i]) << "request " << i;
  }
  // Chat through the template, streamed and not, agrees too.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi there"}}}},
               {"max_tokens", 10},
               {"temperature", 0}};
  auto whole = post("/v1/chat/completions", chat);
  ASSERT_EQ(whole->status, 200) << whole->body;
  chat["stream"] = true;
  auto streamed = post("/v1/chat/completions", chat);
  SseBody sse = parse_sse(streamed->body);
  ASSERT_TRUE(sse.ok);
  ASSERT_EQ(sse.events.back(), "[DONE]");
  std::string text, reasoning;
  for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
    const json chunk = json::parse(sse.events[i]);
    const json& d = chunk["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
  }
  const json msg = json::parse(whole->body)["choices"][0]["message"];
  EXPECT_EQ(text, msg["content"].is_null() ? "" : msg["content"].get<std::string>());
  EXPECT_EQ(reasoning, msg.value("reasoning_content", ""));
}

TEST_F(ServerE2E, ResentLongPromptReportsCachedTokens) {
  std::string prompt = "A unique long prompt for the cache test:";
  for (int i = 0; i < 60; ++i) prompt += " word" + std::to_string(i);
  const json body = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  auto first = post("/v1/completions", body);
  ASSERT_EQ(first->status, 200) << first->body;
  const json u1 = json::parse(first->body)["usage"];
  ASSERT_GT(u1["prompt_tokens"].get<int>(), 64);
  EXPECT_EQ(u1["prompt_tokens_details"]["cached_tokens"], 0);
  auto second = post("/v1/completions", body);
  ASSERT_EQ(second->status, 200);
  const json u2 = json::parse(second->body)["usage"];
  EXPECT_GE(u2["prompt_tokens_details"]["cached_tokens"].get<int>(), 48) << u2.dump();
  EXPECT_LT(u2["prompt_tokens_details"]["cached_tokens"].get<int>(),
            u2["prompt_tokens"].get<int>());
  EXPECT_EQ(json::parse(second->body)["choices"][0]["text"],
            json::parse(first->body)["choices"][0]["text"]);
  const std::string m = metrics();
  EXPECT_GT(metric(m, "syv_prefix_cache_hit_tokens_total"), 0) << m;
}

TEST_F(ServerE2E, DisconnectMidStreamFreesEveryPage) {
  const json body = {{"prompt", "Tell me a very long story"},
                     {"max_tokens", 900},
                     {"ignore_eos", true},
                     {"stream", true}};
  {
    RawConnection conn(port_);
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.send_post("/v1/completions", kKey, body.dump()));
    const std::string got = conn.read_until("data: ", 4);
    ASSERT_NE(got.find("200 OK"), std::string::npos) << got;
    const std::string during = metrics();
    EXPECT_GT(metric(during, "syv_kv_pages_used"), 0) << during;
    conn.close();
  }
  std::string m;
  for (int i = 0; i < 300; ++i) {
    m = metrics();
    if (metric(m, "syv_kv_pages_used") == 0 && metric(m, "syv_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metric(m, "syv_kv_pages_used"), 0) << m;
  EXPECT_EQ(metric(m, "syv_requests_running"), 0) << m;
  EXPECT_EQ(m.find("syv_request_success_total{finish_reason=\"abort\"} 0"), std::string::npos);
  EXPECT_NE(m.find("syv_time_to_first_token_seconds_bucket"), std::string::npos);
}

// Issue 23.6: a non-streaming request whose client left is cancelled too (it used to generate to
// its end), its pages freed within a moment.
TEST_F(ServerE2E, DisconnectWhileNonStreamingFreesEveryPage) {
  const json body = {
      {"prompt", "Tell me a very long story"}, {"max_tokens", 900}, {"ignore_eos", true}};
  const std::string kAborted = R"(syv_request_success_total\{finish_reason="abort"\})";
  const int64_t aborted_before = std::max<int64_t>(0, metric(metrics(), kAborted));  // -1: none
  {
    RawConnection conn(port_);
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.send_post("/v1/completions", kKey, body.dump()));
    std::string during;
    for (int i = 0; i < 300; ++i) {
      during = metrics();
      if (metric(during, "syv_kv_pages_used") > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GT(metric(during, "syv_kv_pages_used"), 0) << during;
    conn.close();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string m;
  for (int i = 0; i < 300; ++i) {
    m = metrics();
    if (metric(m, "syv_kv_pages_used") == 0 && metric(m, "syv_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(metric(m, "syv_kv_pages_used"), 0) << m;
  EXPECT_EQ(metric(m, "syv_requests_running"), 0) << m;
  // Well before the 900 tokens could have been generated.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(metric(m, kAborted), aborted_before + 1) << m;
}

// GET /v1/models/{id}, the 501 of /v1/embeddings, CORS from --allowed-origins, and logit_bias,
// include_stop_str_in_output and min_tokens on the demo model (greedy: its output is noise, but
// the same noise every time).
TEST_F(ServerE2E, ApiFieldsOnTheDemoModel) {
  httplib::Client cli("127.0.0.1", port_);
  cli.set_read_timeout(300, 0);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  auto card = cli.Get("/v1/models/tiny", auth);
  ASSERT_TRUE(card);
  EXPECT_EQ(card->status, 200);
  EXPECT_EQ(json::parse(card->body)["id"], "tiny");
  EXPECT_EQ(cli.Get("/v1/models/other", auth)->status, 404);
  auto emb = post("/v1/embeddings", {{"model", "tiny"}, {"input", "hi"}});
  EXPECT_EQ(emb->status, 501);
  EXPECT_TRUE(is_openai_error(emb->body));

  auto pre = cli.Options("/v1/chat/completions", {{"Origin", "http://localhost:5173"},
                                                  {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://localhost:5173");
  httplib::Headers with_origin = auth;
  with_origin.emplace("Origin", "http://localhost:5173");
  EXPECT_EQ(cli.Get("/v1/models", with_origin)->get_header_value("Access-Control-Allow-Origin"),
            "http://localhost:5173");

  // logit_bias: +100 on one token makes greedy decoding repeat it.
  auto tok = post("/tokenize", {{"prompt", " fox"}});
  ASSERT_EQ(tok->status, 200);
  const int32_t fox = json::parse(tok->body)["tokens"][0];
  json body = {{"prompt", "Hello"},
               {"max_tokens", 4},
               {"temperature", 0},
               {"logit_bias", {{std::to_string(fox), 100}}}};
  auto biased = post("/v1/completions", body);
  ASSERT_EQ(biased->status, 200) << biased->body;
  auto four = post("/detokenize", {{"tokens", {fox, fox, fox, fox}}});
  EXPECT_EQ(json::parse(biased->body)["choices"][0]["text"], json::parse(four->body)["prompt"]);

  // include_stop_str_in_output keeps the stop string; without it, it is cut.
  body = {{"prompt", "Hello"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string full = json::parse(post("/v1/completions", body)->body)["choices"][0]["text"];
  ASSERT_GE(full.size(), 6u);
  const std::string stop = full.substr(full.size() / 2, 2);
  body["stop"] = stop;
  for (bool include : {false, true}) {
    body["include_stop_str_in_output"] = include;
    const json r = json::parse(post("/v1/completions", body)->body);
    EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop) + (include ? 2 : 0)));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  }
  // min_tokens: the biased token made a stop token ends the choice at once, or, masked for the
  // first 3 tokens, as the 4th.
  body = {{"prompt", "Hello"},
          {"max_tokens", 8},
          {"temperature", 0},
          {"logit_bias", {{std::to_string(fox), 100}}},
          {"stop_token_ids", {fox}}};
  for (int min_tokens : {0, 3}) {
    body["min_tokens"] = min_tokens;
    const json r = json::parse(post("/v1/completions", body)->body);
    EXPECT_EQ(r["usage"]["completion_tokens"], min_tokens + 1) << r;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r;
  }
}

// Prompt logprobs (echo + logprobs + max_tokens 0, the lm-eval-harness scoring request, and
// vLLM's prompt_logprobs) equal the log-softmax of `syv logits` on the same tokens. The 200-token
// prompt takes two steps (128 prompt rows a step): chunked prefill; it is sent once before, so
// its pages are cached and the scoring request must not use them.
TEST_F(ServerE2E, PromptLogprobsEqualSyvLogits) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 200; ++i) ids.push_back(100 + (i * 7919) % 20000);
  std::string list;
  for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const std::string out = std::string(SYV_BINARY_DIR) + "/e2e_prompt_logprobs.bin";
  const auto [rc, text] = run_command(std::string(SYV_BIN) + " logits --model " + kDemoDir +
                                      " --tokens " + list + " --out " + out + " 2>&1");
  ASSERT_EQ(rc, 0) << text;
  std::ifstream in(out, std::ios::binary | std::ios::ate);
  const std::streamsize bytes = in.tellg();
  in.seekg(0);
  std::vector<float> all(static_cast<size_t>(bytes) / 4);  // [T, vocab]
  in.read(reinterpret_cast<char*>(all.data()), bytes);
  const size_t vocab = all.size() / ids.size();
  ASSERT_EQ(vocab * ids.size(), all.size());
  auto logprob = [&](size_t row, int32_t token) {
    const float* r = all.data() + row * vocab;
    double mx = r[0], sum = 0;
    for (size_t v = 0; v < vocab; ++v) mx = std::max<double>(mx, r[v]);
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(r[v] - mx);
    return r[token] - mx - std::log(sum);
  };

  ASSERT_EQ(post("/v1/completions", {{"prompt", ids}, {"max_tokens", 1}})->status, 200);
  auto res = post("/v1/completions",
                  {{"prompt", ids}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json r = json::parse(res->body);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  const json& lp = r["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(lp.size(), ids.size());
  EXPECT_TRUE(lp[0].is_null());
  double worst = 0;
  for (size_t p = 1; p < ids.size(); ++p) {
    worst = std::max(worst, std::fabs(lp[p].get<double>() - logprob(p - 1, ids[p])));
  }
  EXPECT_LT(worst, 1e-3) << "largest difference from syv logits";

  res = post("/v1/completions", {{"prompt", ids}, {"prompt_logprobs", 0}, {"max_tokens", 1}});
  ASSERT_EQ(res->status, 200) << res->body;
  const json scored = json::parse(res->body);
  const json& plp = scored["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(plp.size(), ids.size());
  for (size_t p = 1; p < ids.size(); ++p) {
    const json& e = plp[p][std::to_string(ids[p])];
    EXPECT_NEAR(e["logprob"].get<double>(), lp[p].get<double>(), 1e-6) << "position " << p;
  }
}

TEST(ServerCli, BadAllowedOriginsFailsAtStart) {
  ensure_demo_model();
  ServerProcess p({"serve", "--model", kDemoDir, "--port", "0", "--device", "cpu",
                   "--allowed-origins", "localhost:3000"},
                  "e2e_server_bad_origins.log");
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(30)), 1);
  EXPECT_NE(p.log().find("--allowed-origins: \"localhost:3000\" is not an origin"),
            std::string::npos)
      << p.log();
  EXPECT_EQ(p.log().find("listening on"), std::string::npos);
}

TEST(ServerCli, NonLoopbackWithoutKeyIsRefused) {
  ensure_demo_model();
  ServerProcess p({"serve", "--model", kDemoDir, "--host", "0.0.0.0", "--port", "0"},
                  "e2e_server_refused.log");
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(30)), 1);
  EXPECT_NE(p.log().find("not a loopback address"), std::string::npos) << p.log();
}

TEST(ServerCli, GeneratedKeyAndSigtermDrain) {
  signal(SIGPIPE, SIG_IGN);
  ensure_demo_model();
  ServerProcess p({"serve", "--model", kDemoDir, "--port", "0", "--max-model-len", "512",
                   "--kv-cache-mb", "32", "--device", "cpu"},
                  "e2e_server_sigterm.log");
  const std::string port_s =
      p.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  ASSERT_FALSE(port_s.empty()) << p.log();
  const std::string key =
      p.wait_for_line(R"(API key .*: (sk-syv-[0-9a-f]{40}))", std::chrono::seconds(10));
  ASSERT_FALSE(key.empty()) << p.log();
  const int port = std::stoi(port_s);
  // Closed: no key and a wrong key are refused.
  httplib::Client cli("127.0.0.1", port);
  EXPECT_EQ(cli.Get("/health")->status, 401);
  ASSERT_TRUE(wait_ready(port, key, std::chrono::seconds(300))) << p.log();
  EXPECT_EQ(cli.Get("/health", {{"Authorization", "Bearer sk-syv-wrong"}})->status, 401);

  // A long stream is running when SIGTERM arrives: it still completes.
  RawConnection conn(port);
  const json body = {
      {"prompt", "Count"}, {"max_tokens", 60}, {"ignore_eos", true}, {"stream", true}};
  ASSERT_TRUE(conn.send_post("/v1/completions", key, body.dump()));
  conn.read_until("data: ", 2);
  p.signal(SIGTERM);
  const std::string rest = conn.read_until("data: [DONE]", 1, std::chrono::seconds(120));
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  EXPECT_NE(rest.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(60)), 0) << p.log();
  size_t count = 0;
  const std::string all = p.log();
  for (size_t pos = all.find(key); pos != std::string::npos; pos = all.find(key, pos + 1)) ++count;
  EXPECT_EQ(count, 1u) << "the generated key is printed exactly once";
}

// Issue 23.5: a second SIGTERM during the drain aborts what is left at once; every stream still
// ends properly (finish_reason "abort", then [DONE]) and the process exits 1. The second signal
// follows the drain's log line while streams of 4000 tokens have just started (they take seconds
// on the demo model), so it always arrives during the drain. SYV_API_KEY from the environment is
// the key (issue 23.7).
// Which thread takes a signal does not matter (the handler only writes to a pipe, whatever thread
// runs it): the first is sent to the process's first thread after main's (OpenBLAS's pool,
// started by a constructor before main, with no signal blocked), the second to its newest thread
// (an HTTP worker), each with tgkill, so neither can be taken by a thread that blocks it.
TEST(ServerCli, SecondSignalDuringDrainAbortsStreamsCleanly) {
  signal(SIGPIPE, SIG_IGN);
  ensure_demo_model();
  setenv("SYV_API_KEY", kKey, 1);
  ServerProcess p({"serve", "--model", kDemoDir, "--port", "0", "--max-model-len", "4096",
                   "--kv-cache-mb", "64", "--device", "cpu", "--drain-timeout", "600"},
                  "e2e_server_second_signal.log");
  unsetenv("SYV_API_KEY");
  const std::string port_s =
      p.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  ASSERT_FALSE(port_s.empty()) << p.log();
  const int port = std::stoi(port_s);
  ASSERT_TRUE(wait_ready(port, kKey, std::chrono::seconds(300))) << p.log();
  EXPECT_EQ(p.log().find("generated for this run"), std::string::npos) << p.log();
  // The start-up line numbers the configured keys (masked) as the access log names them.
  EXPECT_FALSE(
      p.wait_for_line(R"(1 API key\(s\) configured: #1 sk-e\.\.\.cdef$)", std::chrono::seconds(10))
          .empty())
      << p.log();
  httplib::Client cli("127.0.0.1", port);
  EXPECT_EQ(cli.Get("/health", {{"Authorization", "Bearer sk-wrong-key-4242"}})->status, 401);

  RawConnection completion(port), chat(port);
  ASSERT_TRUE(completion.send_post(
      "/v1/completions", kKey,
      json{{"prompt", "Count"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}
          .dump()));
  ASSERT_TRUE(chat.send_post("/v1/chat/completions", kKey,
                             json{{"messages", {{{"role", "user"}, {"content", "Count"}}}},
                                  {"max_tokens", 4000},
                                  {"ignore_eos", true},
                                  {"stream", true}}
                                 .dump()));
  completion.read_until("data: ", 2);
  chat.read_until("data: ", 2);
  const std::vector<pid_t> threads = p.threads();
  ASSERT_GE(threads.size(), 3u);
  ASSERT_EQ(threads[0], p.pid());
  const auto t0 = std::chrono::steady_clock::now();
  p.signal_thread(threads[1], SIGTERM);
  // Standard signals do not queue: the second is sent once the first has started the drain.
  for (int i = 0; i < 200 && p.log().find("draining") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(p.log().find("draining"), std::string::npos) << p.log();
  p.signal_thread(threads.back(), SIGTERM);
  for (RawConnection* conn : {&completion, &chat}) {
    const std::string rest = conn->read_until("data: [DONE]", 1, std::chrono::seconds(60));
    EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
    EXPECT_NE(rest.find("\"finish_reason\":\"abort\""), std::string::npos) << rest.substr(0, 2000);
  }
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(60)), 1) << p.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_NE(p.log().find("during the drain: aborting"), std::string::npos) << p.log();
  // The access log has the streams' lines (with the key's number) and the refused key's; no key
  // appears in any log.
  EXPECT_TRUE(std::regex_search(p.log(), std::regex(R"(POST /v1/completions 200 [0-9.]+ ms, )"
                                                    R"(tokens [0-9]+ in / [0-9]+ out, key #1)")))
      << p.log();
  EXPECT_NE(p.log().find("auth: refused GET /health from 127.0.0.1:"), std::string::npos);
  EXPECT_EQ(p.log().find(kKey), std::string::npos);
  EXPECT_EQ(p.log().find("sk-wrong-key-4242"), std::string::npos);
}

// Issue 23.4: a port outside 0..65535 is refused by the CLI, and a second server on a port a syv
// server already listens on fails before "listening on", naming the address. The first server's
// key comes from SYV_API_KEY_FILE (issue 23.7).
TEST(ServerCli, BadPortOrPortInUseFailsAtStart) {
  ensure_demo_model();
  {
    ServerProcess p({"serve", "--model", kDemoDir, "--port", "99999", "--device", "cpu"},
                    "e2e_server_bad_port.log");
    EXPECT_NE(p.wait_exit(std::chrono::seconds(30)), 0);
    EXPECT_EQ(p.log().find("listening on"), std::string::npos) << p.log();
    EXPECT_NE(p.log().find("--port"), std::string::npos) << p.log();
  }
  // The first server takes its key from SYV_API_KEY_FILE.
  const std::string key_file = std::string(SYV_BINARY_DIR) + "/e2e_server_port_first.keys";
  {
    std::ofstream out(key_file);
    out << "# test key\nsk-e2e-key-from-file-0123456789\n";
  }
  setenv("SYV_API_KEY_FILE", key_file.c_str(), 1);
  ServerProcess first({"serve", "--model", kDemoDir, "--port", "0", "--device", "cpu",
                       "--kv-cache-mb", "16", "--skip-warmup"},
                      "e2e_server_port_first.log");
  unsetenv("SYV_API_KEY_FILE");
  const std::string port_s =
      first.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  ASSERT_FALSE(port_s.empty()) << first.log();
  ASSERT_TRUE(
      wait_ready(std::stoi(port_s), "sk-e2e-key-from-file-0123456789", std::chrono::seconds(120)))
      << first.log();
  ServerProcess second({"serve", "--model", kDemoDir, "--port", port_s, "--device", "cpu"},
                       "e2e_server_port_second.log");
  EXPECT_EQ(second.wait_exit(std::chrono::seconds(30)), 1) << second.log();
  EXPECT_EQ(second.log().find("listening on"), std::string::npos) << second.log();
  EXPECT_NE(second.log().find("cannot bind 127.0.0.1:" + port_s), std::string::npos)
      << second.log();
}

}  // namespace
}  // namespace syv::testing
