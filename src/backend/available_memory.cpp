#include "backend/available_memory.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace syv {

std::optional<int64_t> parse_meminfo_field(std::string_view meminfo, std::string_view field) {
  const std::string key = std::string(field) + ":";
  size_t at = 0;
  while ((at = meminfo.find(key, at)) != std::string_view::npos) {
    if (at == 0 || meminfo[at - 1] == '\n') break;
    at += key.size();
  }
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + key.size();
  while (i < meminfo.size() && meminfo[i] == ' ') ++i;
  int64_t kb = 0;
  size_t digits = 0;
  for (; i < meminfo.size() && meminfo[i] >= '0' && meminfo[i] <= '9'; ++i, ++digits) {
    if (kb > (INT64_MAX / 1024 - 9) / 10) return std::nullopt;  // kB * 1024 must fit
    kb = kb * 10 + (meminfo[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  while (i < meminfo.size() && meminfo[i] == ' ') ++i;
  if (meminfo.substr(i, 2) != "kB") return std::nullopt;
  return kb * 1024;
}

AvailableMemory host_available_memory() {
  AvailableMemory out;
  out.where = "host memory (MemAvailable in /proc/meminfo)";
  std::ifstream in("/proc/meminfo");
  if (!in) return out;
  std::stringstream ss;
  ss << in.rdbuf();
  if (auto bytes = parse_meminfo_available(ss.str())) out.bytes = *bytes;
  return out;
}

std::string format_bytes(int64_t bytes) {
  char text[64];
  if (bytes >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1'000'000) {
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

Status check_weights_fit(int64_t weight_bytes, const AvailableMemory& available,
                         const std::string& what) {
  if (weight_bytes < 0 || available.bytes < 0 || weight_bytes <= available.bytes) {
    return Status::Ok();
  }
  // "16.38 GB (16380000000 bytes)": rounded for people, exact for scripts and tests.
  auto both = [](int64_t b) {
    return b < 1'000'000 ? format_bytes(b) : format_bytes(b) + " (" + std::to_string(b) + " bytes)";
  };
  return Status::Error(what + " need " + both(weight_bytes) + ", but " + available.where + " is " +
                       both(available.bytes) +
                       "; nothing was loaded. Use a smaller model, or another device (--device) "
                       "with more free memory, or free memory and start again");
}

}  // namespace syv
