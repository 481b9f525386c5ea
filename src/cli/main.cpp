// syv: one binary, sub-commands registered by src/cli/*.cpp (see command.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/build_info.h"
#include "cli/command.h"
#include "cli/tensor_parallel_cli.h"

namespace syv::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

int fail(const std::string& message, const std::string& hint) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  if (!hint.empty()) std::fprintf(stderr, "hint: %s\n", hint.c_str());
  return 1;
}

}  // namespace syv::cli

int main(int argc, char** argv) {
  using namespace syv::cli;
  CLI::App app{
      "syv: a native inference server for Qwen-family models.\n"
      "Start with `syv serve --model DIR` (a Hugging Face model folder), or `syv <command> "
      "--help`."};
  app.require_subcommand(1);
  const BuildInfo& build = build_info();
  app.set_version_flag("--version", "syv " + build.version + " (commit " + build.git_commit + ", " +
                                        build.build_type + ", " + build.compiler + ", CUDA " +
                                        build.cuda + ")");

  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::map<CLI::App*, CommandRunner> runners;
  for (auto& command : registry) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runners[sub] = command.setup(*sub);
  }
  // -tp N, vLLM's short form of --tensor-parallel-size (CLI11 takes one-letter short options).
  const std::vector<std::string> args = expand_tensor_parallel_alias(argc, argv);
  std::vector<const char*> arg_ptrs;
  for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, runner] : runners) {
    if (sub->parsed()) return runner();
  }
  return 1;
}
