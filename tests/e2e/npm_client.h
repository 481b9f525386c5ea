// The Node.js scripts of the end-to-end tests (tests/e2e/<folder>/*.mjs, with the system node,
// their npm packages installed by `make build-test`): running one with its environment, and the
// npm client tests (client_test.mjs, whose checks come from tests/e2e/client_checks.mjs) run
// against a `syv serve` and expected to pass, all of them.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace syv::testing {

using EnvVars = std::vector<std::pair<std::string, std::string>>;  // NAME, value (no ' in it)

struct NodeRun {
  int status = -1;     // pclose's status: 0 when node exited 0
  std::string output;  // stdout and stderr together
};

// Runs `node <script>` in tests/e2e/<folder> with `vars` added to the environment.
inline NodeRun run_node(const std::string& folder, const std::string& script, const EnvVars& vars) {
  std::string cmd = "cd '" + std::string(SYV_SOURCE_DIR) + "/tests/e2e/" + folder + "' &&";
  for (const auto& [name, value] : vars) cmd += " " + name + "='" + value + "'";
  cmd += " node " + script + " 2>&1";
  NodeRun run;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) run.output += buf;
  run.status = pclose(p);
  return run;
}

// What a client test is told through its environment: SYV_URL (http://127.0.0.1:port), SYV_KEY,
// SYV_MODEL (the served name), and any further variables the client reads.
struct NpmClientEnv {
  int port = 0;
  std::string key;
  std::string model;
  EnvVars extra;
};

// Runs tests/e2e/<client>/client_test.mjs. `package` is one of the client's npm packages: without
// it in node_modules the test fails with the command that installs them. Expects exit 0 and
// exactly `checks` passed checks, none failed.
inline void run_npm_client(const std::string& client, const std::string& package, int checks,
                           const NpmClientEnv& env) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/e2e/" + client;
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/" + package))
      << "run `cd tests/e2e/" << client << " && npm ci` (make build-test does)";
  EnvVars vars = {{"SYV_URL", "http://127.0.0.1:" + std::to_string(env.port)},
                  {"SYV_KEY", env.key},
                  {"SYV_MODEL", env.model}};
  vars.insert(vars.end(), env.extra.begin(), env.extra.end());
  const NodeRun run = run_node(client, "client_test.mjs", vars);
  std::cout << run.output;
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find(std::to_string(checks) + " passed, 0 failed"), std::string::npos)
      << run.output;
}

}  // namespace syv::testing
