// Issue 23.5, "every start-up error comes before `listening on`", through the real binary:
// `syv serve` binds its port before the weights load (so a port in use fails at once) but prints
// `listening on` and accepts connections only once the model is loaded, the engine started and
// the warm-up done. A failure after the start-up checks (a KV pool that holds no page, a draft
// model folder that does not load) exits 1 with its message and never prints the line; a good
// start prints it after the load and engine lines, and the server answers /health 200 at once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace syv::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(SYV_SOURCE_DIR) + "/models/tiny-dense";
constexpr const char* kKey = "sk-e2e-startup-order-0123456789abcdef";

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `syv serve` with stdout and stderr in one file (so the order of log and printed lines is the
// order they were written in).
class Serve {
 public:
  Serve(const std::vector<std::string>& extra, const std::string& name)
      : log_(fs::path(SYV_BINARY_DIR) / ("e2e_startup_order_" + name + ".log")) {
    std::vector<std::string> args = {SYV_BIN, "serve",    "--model", kModel,      "--port",
                                     "0",     "--device", "cpu",     "--api-key", kKey};
    args.insert(args.end(), extra.begin(), extra.end());
    fs::remove(log_);  // a previous run's lines must not be read as this one's
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      if (fd < 0) _exit(126);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Serve() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The port of the `listening on` line once it is there; 0 if the process exits first or the
  // time passes.
  int wait_listening(std::chrono::seconds timeout) {
    const std::regex re(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, re)) return std::stoi(m[1].str());
      if (exited()) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }
  // The exit code, waiting for it (-1: killed by a signal or still running after `timeout`).
  int wait_exit(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exited() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return exited_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  void terminate() {
    if (!exited()) kill(pid_, SIGTERM);
  }
  std::string log() const { return read_file(log_); }

 private:
  bool exited() {
    if (!exited_ && waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return exited_;
  }
  fs::path log_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool exited_ = false;
};

// A failure after the start-up checks: exit 1, the message, and never `listening on`.
void expect_refused_after_checks(const std::vector<std::string>& extra, const std::string& name,
                                 const std::vector<std::string>& expected) {
  Serve serve(extra, name);
  EXPECT_EQ(serve.wait_exit(std::chrono::seconds(120)), 1) << serve.log();
  const std::string log = serve.log();
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
  Serve serve({"--kv-cache-mb", "16", "--max-model-len", "256", "--max-parse-memory-mb", "1"},
              "good");
  const int port = serve.wait_listening(std::chrono::seconds(120));
  ASSERT_GT(port, 0) << serve.log();
  // Ready when the line is there: no 503 while loading, no wait.
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(5);
  auto res = cli.Get("/health", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_TRUE(res) << serve.log();
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
  serve.terminate();
  EXPECT_EQ(serve.wait_exit(std::chrono::seconds(60)), 0) << serve.log();
  const std::string log = serve.log();
  const size_t listening = log.find("listening on");
  for (const char* before : {"tokenizer: vocab", "http: bound port", "model: loaded in",
                             "engine: plan + KV pool", "warm-up: done in"}) {
    const size_t at = log.find(before);
    EXPECT_NE(at, std::string::npos) << log << "\n   lacks: " << before;
    EXPECT_LT(at, listening) << "\"" << before << "\" after `listening on`:\n" << log;
  }
  EXPECT_NE(log.find("1 MiB of request parses at once"), std::string::npos) << log;
  // The ready line follows it.
  EXPECT_GT(log.find("syv: ready: model"), listening) << log;
}

}  // namespace
}  // namespace syv::testing
