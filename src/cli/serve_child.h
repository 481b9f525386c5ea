// `syv serve` started as a child of this process (syv verify --model): on a free loopback port
// (--port 0, the port read back from its `listening on` line) with a random API key, its output
// in a log file; stopped with SIGTERM (SIGKILL after the timeout). The child gets SIGTERM if
// this process dies first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace syv::cli {

class ServeChild {
 public:
  ServeChild() = default;
  ~ServeChild();  // stops the child if it still runs
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  // Starts `syv serve --model DIR --host 127.0.0.1 --port 0 --api-key KEY ARGS...` and waits for
  // its `listening on` line (not for readiness: poll /health for that). The error holds the
  // log's last lines.
  Status start(const std::string& model_dir, const std::vector<std::string>& args,
               std::chrono::seconds timeout);
  // SIGTERM, then waits; SIGKILL after `timeout`. Returns the exit status (-1: killed / signal).
  int stop(std::chrono::seconds timeout);
  bool running() const;  // false once it has exited

  const std::string& url() const { return url_; }
  const std::string& api_key() const { return key_; }
  std::string log_tail(int lines) const;  // the child's stdout + stderr, last lines

 private:
  pid_t pid_ = -1;
  std::string url_, key_, log_path_;
  mutable int exit_status_ = -1;
  mutable bool exited_ = false;
};

}  // namespace syv::cli
