// Runs a shell command (the syv binary, in the e2e tests) and captures its standard output, and
// its standard error too when asked; the exit status as pclose() returns it.
#pragma once

#include <cstdio>
#include <string>
#include <utility>

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

}  // namespace syv::testing
