// `--preset NAME` (syv serve, syv inspect): a named set of engine flags for one kind of use, each
// resolved to concrete flags for the model folder and printed ("preset throughput: --max-num-seqs
// 512 ..."). A flag given on the command line wins over the preset's value for it.
//
//   interactive  low latency: few sequences, speculation (mtp when the folder has an MTP head,
//                else ngram prompt lookup)
//   long         the longest context memory allows: few sequences, so the pool goes to one
//                context, a larger share of GPU memory, and fp8 KV (~2x bf16's tokens)
//   throughput   the largest batch: many sequences, a large step budget, graphs up to that batch
//
// docs/configuration.md "Presets" has the table; tests/e2e/preset_test.cpp checks it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace syv::cli {

inline constexpr const char* kPresetNames = "interactive, long, throughput";

struct PresetFlag {
  std::string flag;   // "--max-num-seqs"
  std::string value;  // "512"
};

struct Preset {
  std::string name;
  std::vector<PresetFlag> flags;
  std::string why;  // what decided the model-dependent part ("the folder has an MTP head")
};

// The flags of preset `name` for the model folder `model_dir` (config.json and the safetensors
// headers are read: interactive's speculation depends on them). An unknown name is an error
// naming the choices.
Result<Preset> resolve_preset(const std::string& name, const std::string& model_dir);

// Sets every preset flag that `app` has and the command line did not give, through the option's
// own conversion and checks (as if typed); flags `app` does not have are skipped (syv inspect has
// no --max-waiting). Returns the start-up line: "preset throughput: --max-num-seqs 512 ...; given
// on the command line: --max-num-seqs 8".
Result<std::string> apply_preset(CLI::App& app, const Preset& preset);

// The value the preset gives `flag`, or "" when it gives none.
std::string preset_value(const Preset& preset, const std::string& flag);

}  // namespace syv::cli
