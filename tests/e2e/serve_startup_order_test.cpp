// Issue 23.5, "every start-up error comes before `listening on`", through the real binary:
// `syv serve` binds its port before the weights load (so a port in use fails at once) but prints
// `listening on` and accepts connections only once the model is loaded, the engine started and
// the warm-up done. A failure after the start-up checks (a KV pool that holds no page, a draft
// model folder that does not load) exits 1 with its message and never prints the line; a good
// start prints it after the load and engine lines, and the server answers /health 200 at once.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "serve_process.h"

namespace syv::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(SYV_SOURCE_DIR) + "/models/tiny-dense";
constexpr const char* kKey = "sk-e2e-startup-order-0123456789abcdef";
constexpr const char* kListening = R"(listening on http://127\.0\.0\.1:(\d+))";

// `syv serve` on the trained tiny model (stdout read line by line, stderr, the log, in a file).
ServerProcess serve(const std::vector<std::string>& extra, const std::string& name) {
  std::vector<std::string> args = {"serve",    "--model", kModel,      "--port", "0",
                                   "--device", "cpu",     "--api-key", kKey};
  args.insert(args.end(), extra.begin(), extra.end());
  return ServerProcess(args, "e2e_startup_order_" + name + ".log");
}

// A failure after the start-up checks: exit 1, the message, and never `listening on` (stdout is
// read to its end before the exit status).
void expect_refused_after_checks(const std::vector<std::string>& extra, const std::string& name,
                                 const std::vector<std::string>& expected) {
  ServerProcess server = serve(extra, name);
  EXPECT_EQ(server.wait_for_line(kListening, std::chrono::seconds(120)), "") << server.log();
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(120)), 1) << server.log();
  const std::string log = server.log();
  EXPECT_EQ(log.find("listening on"), std::string::npos) << log;
  EXPECT_NE(log.find("] load: "), std::string::npos) << "the weights loaded first:\n" << log;
  for (const std::string& part : expected) {
    EXPECT_NE(log.find(part), std::string::npos) << log << "\n   lacks: " << part;
  }
}

TEST(ServeStartupOrder, AKvPoolWithoutAPageExitsBeforeListening) {
  // --kv-cache-mb 0: the engine's memory plan finds no page for the pool, after the load.
  expect_refused_after_checks(
      {"--kv-cache-mb", "0"}, "no_page",
      {"error: engine: engine option kv_cache_bytes: 0 bytes hold no page"});
}

TEST(ServeStartupOrder, ADraftModelThatDoesNotLoadExitsBeforeListening) {
  const fs::path empty =
      fs::temp_directory_path() / ("syv_startup_order_draft_" + std::to_string(getpid()));
  fs::remove_all(empty);
  fs::create_directories(empty);
  expect_refused_after_checks({"--speculative-method", "draft", "--num-speculative-tokens", "2",
                               "--draft-model", empty.string(), "--kv-cache-mb", "16"},
                              "bad_draft", {"error: ", empty.string()});
  fs::remove_all(empty);
}

TEST(ServeStartupOrder, ListeningComesAfterTheLoadAndTheServerAnswersAtOnce) {
  ServerProcess server = serve(
      {"--kv-cache-mb", "16", "--max-model-len", "256", "--max-parse-memory-mb", "1"}, "good");
  const std::string port_text = server.wait_for_line(kListening, std::chrono::seconds(120));
  ASSERT_FALSE(port_text.empty()) << server.log();
  const int port = std::stoi(port_text);
  // Everything the start-up logs (stderr, unbuffered) before it prints the line is in the log
  // file once the line is read: the load, the engine and the warm-up came first.
  const std::string before_listening = server.log();
  for (const char* before : {"tokenizer: vocab", "http: bound port", "model: loaded in",
                             "engine: plan + KV pool", "warm-up: done in"}) {
    EXPECT_NE(before_listening.find(before), std::string::npos)
        << "\"" << before << "\" not logged before `listening on`:\n"
        << before_listening;
  }
  // Ready when the line is there: no 503 while loading, no wait.
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(5);
  auto res = cli.Get("/health", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_TRUE(res) << server.log();
  EXPECT_EQ(res->status, 200) << res->body;
  // --max-parse-memory-mb reaches the routes: a body estimated past 1 MiB is refused, and the
  // server answers the next one.
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  std::string x = "[0";
  for (int i = 1; i < 3000; ++i) x += ",0";
  res = cli.Post("/tokenize", auth, R"({"prompt": "hi", "x": )" + x + "]}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_NE(res->body.find("parse_budget_exceeded"), std::string::npos) << res->body;
  res = cli.Post("/tokenize", auth, R"({"prompt": "hi"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  // The ready line follows it on stdout.
  EXPECT_NE(server.wait_for_line("syv: ready: model", std::chrono::seconds(10)), "")
      << server.log();
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(60)), 0) << server.log();
  EXPECT_NE(server.log().find("1 MiB of request parses at once"), std::string::npos)
      << server.log();
}

}  // namespace
}  // namespace syv::testing
