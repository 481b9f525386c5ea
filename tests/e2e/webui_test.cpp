// The chat page (GET / and /ui/*): served from the binary without a key, with its content types
// and security headers, byte for byte the files under src/server/webui/; /v1/* still needs the
// key; --no-webui (HttpOptions::webui = false) leaves the paths unrouted. Then the page itself in
// Debian's headless chromium against `syv serve` on the demo model (tests/e2e/webui_browser/):
// skipped only when chromium is not installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "e2e/npm_client.h"
#include "e2e/serve_process.h"
#include "e2e/test_server.h"
#include "server/webui_assets.h"

namespace syv::testing {
namespace {

const std::string kWebUiDir = std::string(SYV_SOURCE_DIR) + "/src/server/webui";

std::string read_source(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class WebUi : public ServerHttp {};

TEST_F(WebUi, EmbeddedAssetsAreTheSourceFiles) {
  std::set<std::string> routes;
  for (const server::WebUiAsset& a : server::webui_assets()) routes.insert(std::string(a.path));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kWebUiDir)) {
    const std::string name = entry.path().filename().string();
    const std::string route = name == "index.html" ? "/" : "/ui/" + name;
    ++files;
    ASSERT_TRUE(routes.count(route)) << name << " is not embedded (re-run cmake?)";
    for (const server::WebUiAsset& a : server::webui_assets()) {
      if (a.path == route) {
        EXPECT_EQ(a.body, read_source(entry.path().string())) << name;
      }
    }
  }
  EXPECT_EQ(files, server::webui_assets().size());
  EXPECT_TRUE(routes.count("/"));
  EXPECT_TRUE(routes.count("/ui/app.js"));
}

TEST_F(WebUi, PageAndAssetsArePublicWithTypesAndHeaders) {
  TestServer s;
  const std::pair<const char*, const char*> expected[] = {
      {"/", "text/html; charset=utf-8"},
      {"/ui/app.js", "text/javascript; charset=utf-8"},
      {"/ui/markdown.js", "text/javascript; charset=utf-8"},
      {"/ui/style.css", "text/css; charset=utf-8"}};
  for (const auto& [path, type] : expected) {
    auto res = s.get(path, /*key=*/"");
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_NE(res->get_header_value("Content-Security-Policy").find("script-src 'self'"),
              std::string::npos)
        << path;
    EXPECT_FALSE(res->body.empty()) << path;
  }
  // The page loads its assets from these routes.
  const std::string html = s.get("/", "")->body;
  EXPECT_NE(html.find("src=\"/ui/app.js\""), std::string::npos);
  EXPECT_NE(html.find("href=\"/ui/style.css\""), std::string::npos);
  // Not every path is public: an unknown asset, the API, metrics.
  EXPECT_EQ(s.get("/ui/nope.js", "")->status, 401);
  EXPECT_EQ(s.get("/ui/nope.js")->status, 404);
  EXPECT_EQ(s.get("/index.html", "")->status, 401);
  EXPECT_EQ(s.get("/v1/models", "")->status, 401);
  EXPECT_EQ(s.get("/v1/models", "sk-wrong")->status, 401);
  EXPECT_EQ(s.get("/v1/models")->status, 200);
  EXPECT_EQ(s.get("/metrics", "")->status, 401);
  EXPECT_EQ(
      s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, "")
          ->status,
      401);
}

TEST_F(WebUi, PageLoadsWhileTheModelLoads) {
  TestServer s({}, {}, "", /*ready=*/false);
  EXPECT_EQ(s.get("/", "")->status, 200);
  EXPECT_EQ(s.get("/v1/models")->status, 503);
}

TEST_F(WebUi, NoWebUiLeavesThePathsUnrouted) {
  server::HttpOptions http;
  http.webui = false;
  TestServer s({}, http);
  EXPECT_EQ(s.get("/", "")->status, 401);
  EXPECT_EQ(s.get("/")->status, 404);
  EXPECT_EQ(s.get("/ui/app.js", "")->status, 401);
  EXPECT_EQ(s.get("/ui/app.js")->status, 404);
  EXPECT_EQ(s.get("/v1/models")->status, 200);
}

// ---- syv serve: the flag, the printed URL, and the page in a real browser ----------------------

constexpr const char* kServeKey = "sk-e2e-webui-key-0123456789abcdef";

std::vector<std::string> serve_args(bool webui) {
  std::vector<std::string> args = {"serve", "--model",         kDemoDir,  "--port",
                                   "0",     "--api-key",       kServeKey, "--served-model-name",
                                   "tiny",  "--max-model-len", "4096",    "--kv-cache-mb",
                                   "64",    "--device",        "cpu"};
  if (!webui) args.push_back("--no-webui");
  return args;
}

int start(ServerProcess& server) {
  const std::string port =
      server.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  return port.empty() ? 0 : std::stoi(port);
}

TEST(WebUiServe, PrintsThePageUrlAndNoWebUiTurnsItOff) {
  signal(SIGPIPE, SIG_IGN);
  ensure_demo_model();
  {
    ServerProcess server(serve_args(true), "e2e_webui_on.log");
    const int port = start(server);
    ASSERT_GT(port, 0) << server.log();
    const std::string url =
        server.wait_for_line(R"(chat page: (http://\S+))", std::chrono::seconds(10));
    EXPECT_EQ(url, "http://127.0.0.1:" + std::to_string(port) + "/") << server.log();
    httplib::Client cli("127.0.0.1", port);
    auto res = cli.Get("/");  // served while the model is still loading, and without a key
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  {
    ServerProcess server(serve_args(false), "e2e_webui_off.log");
    const int port = start(server);
    ASSERT_GT(port, 0) << server.log();
    ASSERT_TRUE(wait_ready(port, kServeKey, std::chrono::seconds(300))) << server.log();
    EXPECT_EQ(server.log().find("chat page"), std::string::npos) << server.log();
    httplib::Client cli("127.0.0.1", port);
    EXPECT_EQ(cli.Get("/")->status, 401);
    EXPECT_EQ(cli.Get("/", {{"Authorization", std::string("Bearer ") + kServeKey}})->status, 404);
  }
}

// The browser: $CHROMIUM when set (a path that does not exist: none, the test skips), else
// Debian's /usr/bin/chromium (tools/setup/install-deps.sh --test).
std::string find_chromium() {
  if (const char* env = std::getenv("CHROMIUM"); env != nullptr && *env != '\0') {
    return std::filesystem::exists(env) ? env : "";
  }
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

TEST(WebUiBrowser, ChatStopReloadAndMarkupInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (tools/setup/install-deps.sh --test installs it)";
  }
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/e2e/webui_browser";
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/puppeteer-core"))
      << "run `cd tests/e2e/webui_browser && npm ci` (make build-test does)";
  signal(SIGPIPE, SIG_IGN);
  ensure_demo_model();
  ServerProcess server(serve_args(true), "e2e_webui_browser.log");
  const int port = start(server);
  ASSERT_GT(port, 0) << server.log();
  ASSERT_TRUE(wait_ready(port, kServeKey, std::chrono::seconds(300))) << server.log();
  // Screenshots are test artifacts in the build folder.
  const std::string shots = std::string(SYV_BINARY_DIR) + "/webui-screenshots";
  const NodeRun run = run_node("webui_browser", "browser_test.mjs",
                               {{"SYV_URL", "http://127.0.0.1:" + std::to_string(port)},
                                {"SYV_KEY", kServeKey},
                                {"SYV_MODEL", "tiny"},
                                {"CHROMIUM", chromium},
                                {"SYV_SHOTS", shots}});
  std::cout << run.output;
  EXPECT_EQ(run.status, 0) << run.output << server.log();
  EXPECT_NE(run.output.find("11 passed, 0 failed"), std::string::npos) << run.output;
  EXPECT_TRUE(std::filesystem::exists(shots + "/webui.png"));
}

}  // namespace
}  // namespace syv::testing
