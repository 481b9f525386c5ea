#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace syv {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::INFO)};
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::DEBUG:
      return "debug";
    case LogLevel::INFO:
      return "info";
    case LogLevel::WARN:
      return "warn";
    case LogLevel::ERROR:
      return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel log_level() {
  return static_cast<LogLevel>(g_level.load());
}

detail::LogLine::~LogLine() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  std::string text = stream_.str();
  std::fprintf(stderr, "[%s %s] %s\n", stamp, level_name(level_), text.c_str());
}

}  // namespace syv
