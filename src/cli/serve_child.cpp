#include "cli/serve_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "server/auth.h"

namespace syv::cli {

namespace {

// The URL of syv serve's "listening on http://127.0.0.1:PORT" line in `log`, or "" before it.
// (Parsed by hand: GCC 12's std::regex trips -Wmaybe-uninitialized in the sanitized build.)
std::string listening_url(const std::string& log) {
  static const std::string kPrefix = "listening on http://127.0.0.1:";
  const size_t at = log.find(kPrefix);
  if (at == std::string::npos) return "";
  size_t end = at + kPrefix.size();
  while (end < log.size() && log[end] >= '0' && log[end] <= '9') ++end;
  if (end == at + kPrefix.size()) return "";
  return log.substr(at + std::string("listening on ").size(),
                    end - at - std::string("listening on ").size());
}

}  // namespace

ServeChild::~ServeChild() {
  if (pid_ > 0 && running()) stop(std::chrono::seconds(10));
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

bool ServeChild::running() const {
  if (pid_ <= 0 || exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return false;
  }
  return true;
}

std::string ServeChild::log_tail(int lines) const {
  std::ifstream in(log_path_);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i)
    out += "  | " + all[i] + "\n";
  return out;
}

Status ServeChild::start(const std::string& model_dir, const std::vector<std::string>& args,
                         std::chrono::seconds timeout) {
  Result<std::string> key = server::generate_api_key();
  if (!key.ok()) return key.status();
  key_ = *key;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return Status::Error("cannot find this program (/proc/self/exe) to run syv serve");
  exe[n] = '\0';
  char log_template[] = "/tmp/syv-verify-serve-XXXXXX";
  const int log_fd = mkstemp(log_template);
  if (log_fd < 0) return Status::Error("cannot create a log file in /tmp for syv serve");
  log_path_ = log_template;
  std::vector<std::string> argv_s = {exe,         "serve",  "--model", model_dir,   "--host",
                                     "127.0.0.1", "--port", "0",       "--api-key", key_};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return Status::Error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(exe, argv.data());
    _exit(127);
  }
  close(log_fd);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (std::string url = listening_url(text); !url.empty()) {
      url_ = url;
      return Status::Ok();
    }
    if (!running())
      return Status::Error("syv serve exited with status " + std::to_string(exit_status_) +
                           " before listening:\n" + log_tail(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Error("syv serve did not listen within " + std::to_string(timeout.count()) +
                       " s:\n" + log_tail(20));
}

int ServeChild::stop(std::chrono::seconds timeout) {
  if (!running()) return exit_status_;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return exit_status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  exited_ = true;
  exit_status_ = -1;
  return -1;
}

}  // namespace syv::cli
