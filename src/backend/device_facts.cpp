#include "backend/device_facts.h"

#include <fstream>
#include <sstream>

#include "backend/available_memory.h"

namespace syv {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

std::optional<std::string> parse_cpuinfo_model_name(std::string_view cpuinfo) {
  size_t line_start = 0;
  while (line_start < cpuinfo.size()) {
    size_t line_end = cpuinfo.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = cpuinfo.size();
    const std::string_view line = cpuinfo.substr(line_start, line_end - line_start);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && trim(line.substr(0, colon)) == "model name") {
      const std::string_view value = trim(line.substr(colon + 1));
      if (!value.empty()) return std::string(value);
    }
    line_start = line_end + 1;
  }
  return std::nullopt;
}

DeviceFacts host_device_facts() {
  DeviceFacts out;
  if (auto name = parse_cpuinfo_model_name(read_text("/proc/cpuinfo"))) out.name = *name;
  if (auto total = parse_meminfo_field(read_text("/proc/meminfo"), "MemTotal"))
    out.memory_bytes = *total;
  return out;
}

}  // namespace syv
