// Sub-command registry. Each src/cli/<name>.cpp registers one sub-command with a static
// `CommandRegistration`, so adding a command never edits main.cpp.
//
//   static syv::cli::CommandRegistration reg{"logits", "Write fp32 logits of a token sequence",
//     [](CLI::App& app) {
//       auto opts = std::make_shared<Options>();
//       app.add_option("--model", opts->model_dir, "...")->required();
//       return [opts]() -> int { ...; return 0; };   // runs when this command is chosen
//     }};
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace syv::cli {

using CommandRunner = std::function<int()>;  // returns the process exit code
using CommandSetup = std::function<CommandRunner(CLI::App&)>;

struct Command {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<Command>& command_registry();

struct CommandRegistration {
  CommandRegistration(std::string name, std::string description, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

// Prints "error: <message>" (and a hint, if any) to stderr; returns exit code 1.
int fail(const std::string& message, const std::string& hint = "");

}  // namespace syv::cli
