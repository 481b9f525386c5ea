// `syv serve` as a child process for the end-to-end tests: the demo model (written once per build
// folder), the process with its stdout read line by line, readiness, and one Prometheus value.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace syv::testing {

inline const std::string kDemoDir = std::string(SYV_BINARY_DIR) + "/e2e-demo-model";
inline const std::string kTokenizerDir =
    std::string(SYV_SOURCE_DIR) + "/third_party/qwen3-tokenizer";

// A `syv serve` child process; stdout is read line by line, stderr goes to a log file.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args, const std::string& log_name) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    // One log per test process: ctest runs a fixture's tests as separate processes, in parallel,
    // and two servers writing one file gave a log of both (and NUL bytes where one truncated it).
    const size_t dot = log_name.rfind('.');
    log_path_ = std::string(SYV_BINARY_DIR) + "/" + log_name.substr(0, dot) + "." +
                std::to_string(getpid()) + (dot == std::string::npos ? "" : log_name.substr(dot));
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      const int err = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, 2);
      close(out[0]);
      std::vector<char*> argv;
      std::string bin = SYV_BIN;
      argv.push_back(bin.data());
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  // Reads stdout until a line matches `pattern` (first group returned) or the timeout passes.
  std::string wait_for_line(const std::string& pattern, std::chrono::seconds timeout) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      size_t nl;
      while ((nl = buffer_.find('\n')) != std::string::npos) {
        const std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        output_ += line + "\n";
        std::smatch m;
        if (std::regex_search(line, m, re)) return m.size() > 1 ? m[1].str() : line;
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 200) > 0) {
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof(buf));
        if (n <= 0) break;
        buffer_.append(buf, static_cast<size_t>(n));
      }
    }
    return "";
  }
  // Waits for exit; returns the exit status (or -1 on timeout / signal).
  int wait_exit(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  void signal(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  // The process's threads (tids) in the order they were created, the main thread first.
  std::vector<pid_t> threads() const {
    std::vector<pid_t> tids;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task")) {
      tids.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
    }
    // Creation order: the kernel hands out ids in increasing order and wraps at pid_max, so a
    // thread made after the wrap has a smaller id than the process; count each id's distance
    // from the process's own (the main thread's) modulo pid_max.
    int64_t pid_max = 4194304;
    std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
    auto order = [&](pid_t tid) { return ((int64_t{tid} - pid_) % pid_max + pid_max) % pid_max; };
    std::sort(tids.begin(), tids.end(), [&](pid_t a, pid_t b) { return order(a) < order(b); });
    return tids;
  }
  // Sends `sig` to one thread of the process, which then runs (or blocks) it itself.
  void signal_thread(pid_t tid, int sig) { syscall(SYS_tgkill, pid_, tid, sig); }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return output_ + ss.str();
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string buffer_, output_, log_path_;
};

// Tests run in parallel (ctest -j): each writes the model to its own folder and renames it into
// place, so no test ever reads a half-written model.
inline void ensure_demo_model() {
  if (std::filesystem::exists(kDemoDir + "/config.json")) return;
  const std::string tmp = kDemoDir + ".tmp." + std::to_string(getpid());
  const std::string cmd = std::string(SYV_BIN) + " demo-model --tokenizer " + kTokenizerDir +
                          " --out " + tmp + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::error_code ec;
  std::filesystem::rename(tmp, kDemoDir, ec);
  if (ec) std::filesystem::remove_all(tmp);  // another test got there first
  ASSERT_TRUE(std::filesystem::exists(kDemoDir + "/config.json"));
}

// Waits until GET /health answers 200 with `key`.
inline bool wait_ready(int port, const std::string& key, std::chrono::seconds timeout) {
  httplib::Client cli("127.0.0.1", port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto res = cli.Get("/health", {{"Authorization", "Bearer " + key}});
    if (res && res->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

inline int64_t metric(const std::string& text, const std::string& name) {
  std::regex re("(^|\n)" + name + " ([0-9.e+-]+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return -1;
  return static_cast<int64_t>(std::stod(m[2].str()));
}

}  // namespace syv::testing
