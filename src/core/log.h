// Minimal leveled logging to stderr: SYV_LOG(INFO) << "KV pool: " << n << " tokens";
// One line per decision at start-up; counters belong in /metrics, not in logs.
#pragma once

#include <sstream>

namespace syv {

enum class LogLevel { DEBUG = 0, INFO = 1, WARN = 2, ERROR = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();

namespace detail {
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace syv

#define SYV_LOG(level)                               \
  if (::syv::LogLevel::level < ::syv::log_level()) { \
  } else                                             \
    ::syv::detail::LogLine(::syv::LogLevel::level)
