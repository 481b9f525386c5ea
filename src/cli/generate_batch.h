// `syv generate --prompts-file F.jsonl`: many prompts through the engine at once, one JSON result
// per input line (in input order). Called from generate.cpp.
#pragma once

#include <string>

#include "cli/engine_args.h"
#include "cli/model_session.h"

namespace syv::cli {

struct BatchArgs {
  std::string prompts_file;
  bool one_by_one = false;  // submit each prompt after the previous one finished
  EngineArgs engine;
};
void add_batch_args(CLI::App& app, BatchArgs& args);

// Defaults for lines that do not set them: max_tokens, temperature, seed.
int run_prompts_file(const ModelArgs& model, const BatchArgs& args, int64_t max_tokens,
                     double temperature, uint64_t seed);

}  // namespace syv::cli
