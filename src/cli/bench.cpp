// `syv bench`: a parent command whose sub-commands come from bench_registry() (see bench.h).
#include "cli/bench.h"

#include <algorithm>
#include <map>
#include <memory>

namespace syv::cli {

std::vector<Command>& bench_registry() {
  static std::vector<Command> registry;
  return registry;
}

namespace {

CommandRegistration reg{
    "bench", "Benchmarks: `syv bench <kind> --help` (offline, ...)", [](CLI::App& app) {
      app.require_subcommand(1);
      auto& registry = bench_registry();
      std::sort(registry.begin(), registry.end(),
                [](const Command& a, const Command& b) { return a.name < b.name; });
      auto runners = std::make_shared<std::map<CLI::App*, CommandRunner>>();
      for (auto& command : registry) {
        CLI::App* sub = app.add_subcommand(command.name, command.description);
        (*runners)[sub] = command.setup(*sub);
      }
      return [runners]() -> int {
        for (auto& [sub, runner] : *runners) {
          if (sub->parsed()) return runner();
        }
        return fail("no benchmark chosen", "run `syv bench --help` for the list");
      };
    }};

}  // namespace
}  // namespace syv::cli
