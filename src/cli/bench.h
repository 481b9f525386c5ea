// `syv bench <kind>`: benchmark sub-sub-commands register themselves here, like commands do in
// command.h, so adding one (bench_decode.cpp, bench_prefill.cpp...) never edits bench.cpp.
//
//   static syv::cli::BenchRegistration reg{"offline", "Throughput of the engine on random prompts",
//     [](CLI::App& app) {
//       auto opts = std::make_shared<Options>();
//       app.add_option("--num-prompts", opts->num_prompts, "...");
//       return [opts]() -> int { ...; return 0; };
//     }};
#pragma once

#include "cli/command.h"

namespace syv::cli {

std::vector<Command>& bench_registry();

struct BenchRegistration {
  BenchRegistration(std::string name, std::string description, CommandSetup setup) {
    bench_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace syv::cli
