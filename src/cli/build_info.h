// What this binary is: its version and what it was built from, for `syv --version` and the
// server's syv_build_info series (docs/server.md "Metrics"). The commit is read at every build
// (tools/git_commit.cmake), the rest when the build is configured (CMakeLists.txt).
#pragma once

#include <string>

namespace syv::cli {

struct BuildInfo {
  std::string version;     // "0.1.0"
  std::string git_commit;  // 12 hex digits, "-dirty" when built from edited files; "unknown"
  std::string build_type;  // CMAKE_BUILD_TYPE: "Release", "Debug" ...
  std::string compiler;    // "GNU 12.2.0"
  std::string cuda;        // "12.8.93 (sm 90a)": the CUDA toolkit and archs; "none" without
};

const BuildInfo& build_info();

// Defined in the generated git_commit.cpp.
extern const char kGitCommit[];

}  // namespace syv::cli
