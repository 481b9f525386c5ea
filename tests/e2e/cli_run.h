// Runs a shell command (the syv binary, in the e2e tests) and captures its standard output, and
// its standard error too when asked; the exit status as pclose() returns it.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace syv::testing {

inline std::pair<int, std::string> run_command(const std::string& cmd, bool with_stderr = false) {
  std::string out;
  FILE* pipe = popen((cmd + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!pipe) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  return {pclose(pipe), out};
}

// The JSON lines of `text` (`syv generate --prompts-file` output); log lines, when stderr is
// mixed in, are skipped.
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace syv::testing
