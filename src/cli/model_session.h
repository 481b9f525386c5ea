// Shared by `syv logits` and `syv generate`: loading a model on the CPU backend from CLI options,
// parsing --tokens, and running ONE sequence through Model::forward with a private page pool.
// This is the simple path until the engine drives these commands (it will replace SingleSequence).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/model.h"

namespace syv::cli {

// --model DIR, --random-weights, --seed-weights.
struct ModelArgs {
  std::string model_dir;
  bool random_weights = false;
  uint64_t weight_seed = 0;
  bool batch_invariant = false;  // Backend::set_batch_invariant (commands that offer the flag)
};
void add_model_args(CLI::App& app, ModelArgs& args);

struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};
// Errors are prefixed with "--model": the folder, and what is wrong with it.
Result<LoadedModel> load_cli_model(const ModelArgs& args);

// Backend::set_batch_invariant(on), and the start-up log line that says which mode runs and why.
void apply_batch_invariant(Backend& backend, bool on);
// Just config.json (+ generation_config.json), to validate arguments before the (slow) load.
Result<ModelConfig> read_cli_config(const ModelArgs& args);

// "1,2,3" -> {1, 2, 3}. Every id must be in [0, vocab). Messages name --tokens, the index, the
// value, and the valid range.
Result<std::vector<int32_t>> parse_token_list(const std::string& text, int64_t vocab,
                                              const std::string& arg = "--tokens");

// One sequence with its own pages: append tokens, get fp32 logits back on the host.
class SingleSequence {
 public:
  static constexpr int32_t kPageSize = 64;
  // Builds a cache store with pages for up to max_tokens positions (and one state slot) and binds
  // the model to it; the model must not run another sequence while this one is used.
  static Result<SingleSequence> create(Model& model, int64_t max_tokens);

  // Runs `tokens` as the next positions. Returns logits [tokens.size(), vocab] when all_rows, else
  // [1, vocab] for the last token. Tokens must fit in max_tokens (checked).
  std::vector<float> append(const std::vector<int32_t>& tokens, bool all_rows);
  int64_t length() const { return length_; }

 private:
  explicit SingleSequence(Model& model) : model_(&model) {}
  Model* model_;
  int64_t length_ = 0;
  int64_t capacity_ = 0;
  std::vector<int32_t> pages_;
  std::unique_ptr<CacheStore> store_;  // bound to *model_
};

}  // namespace syv::cli
