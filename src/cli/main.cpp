// syv: one binary, sub-commands registered by src/cli/*.cpp (see command.h).
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/build_info.h"
#include "cli/command.h"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, runner] : runners) {
    if (sub->parsed()) return runner();
  }
  return 1;
}
