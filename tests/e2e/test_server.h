// The in-process server of the HTTP tests: routes + a scripted generator (fake_generator.h) +
// the transport on an ephemeral loopback port, with the real Qwen3 tokenizer and chat template
// (loaded once per suite by the ServerHttp fixture).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>

#include "e2e/fake_generator.h"
#include "server/http_server.h"
#include "server/openai_routes.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace syv::testing {

using nlohmann::json;

inline constexpr const char* kKey = "sk-test-right-key-0123456789";
inline constexpr const char* kKey2 = "sk-test-second-key-987654321";

struct Shared {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
};
inline Shared* shared = nullptr;

// One server: routes + fake generator + transport, on an ephemeral loopback port.
struct TestServer {
  explicit TestServer(server::RouteOptions route_options = {}, server::HttpOptions http = {},
                      std::string public_routes = "", bool ready = true, int32_t max_len = 256)
      : generator(max_len), routes(metrics, route_options) {
    server::ApiKeys keys;
    EXPECT_TRUE(keys.add(kKey).ok());
    EXPECT_TRUE(keys.add(kKey2).ok());
    if (!public_routes.empty()) {
      EXPECT_TRUE(keys.add_public_routes(public_routes).ok());
    }
    http.host = "127.0.0.1";
    http.port = 0;
    server::ModelContext ctx;
    ctx.tokenizer = shared->tokenizer.get();
    ctx.chat_template = shared->chat_template.get();
    ctx.generator = &generator;
    ctx.model_name = "fake";
    routes.set_model(ctx);
    transport = std::make_unique<server::HttpServer>(http, keys, routes, metrics);
    EXPECT_TRUE(transport->bind().ok());
    transport->start();
    transport->set_ready(ready);
    client = std::make_unique<httplib::Client>("127.0.0.1", transport->port());
    client->set_read_timeout(30, 0);
  }
  ~TestServer() { transport->stop(); }

  httplib::Result post(const std::string& path, const json& body, const std::string& key = kKey) {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    return client->Post(path.c_str(), h, body.dump(), "application/json");
  }
  httplib::Result post_raw(const std::string& path, const std::string& body) {
    httplib::Headers h{{"Authorization", std::string("Bearer ") + kKey}};
    return client->Post(path.c_str(), h, body, "application/json");
  }
  httplib::Result get(const std::string& path, const std::string& key = kKey) {
    httplib::Headers h;
    if (!key.empty()) h.emplace("X-Api-Key", key);
    return client->Get(path.c_str(), h);
  }
  httplib::Result del(const std::string& path, const std::string& key = kKey) {
    httplib::Headers h;
    if (!key.empty()) h.emplace("X-Api-Key", key);
    return client->Delete(path.c_str(), h);
  }

  FakeGenerator generator;
  server::Metrics metrics;
  server::OpenAiRoutes routes;
  std::unique_ptr<server::HttpServer> transport;
  std::unique_ptr<httplib::Client> client;
};

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    const std::string dir = std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";
    ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json"))
        << dir << " is missing: run tools/setup/fetch-tokenizer.sh (make test does)";
    shared = new Shared;
    auto tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.ok()) << tok.message();
    shared->tokenizer = std::move(tok.value());
    auto tmpl = ChatTemplate::parse(shared->tokenizer->chat_template());
    ASSERT_TRUE(tmpl.ok()) << tmpl.message();
    shared->chat_template = std::make_unique<ChatTemplate>(std::move(tmpl.value()));
  }
  static void TearDownTestSuite() {
    delete shared;
    shared = nullptr;
  }
};

}  // namespace syv::testing
