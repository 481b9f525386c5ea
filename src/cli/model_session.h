// Shared by the model commands (`syv logits`, `generate`, `eval-ppl`, `bench offline`; `serve` for
// --device): picking the backend (--device), loading a model from CLI options, parsing --tokens,
// and running ONE sequence through Model::forward with a private page pool (SingleSequence: `syv
// logits`, `syv eval-ppl` and single-prompt `syv generate`, which samples with the engine's
// Sampler; --prompts-file runs the engine itself).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/model.h"

namespace syv::cli {

// --model DIR, --random-weights, --weight-seed.
struct ModelArgs {
  std::string model_dir;
  bool random_weights = false;
  uint64_t weight_seed = 0;
  bool batch_invariant = false;  // Backend::set_batch_invariant (commands that offer the flag)
  std::string device = "cpu";    // --device (commands that offer it; see add_device_arg)
  bool mtp = false;  // also load the MTP head (LoadOptions::mtp): --speculative-method mtp
  int tensor_parallel_size = 1;                // --tensor-parallel-size (cli/tensor_parallel_cli.h)
  bool host_embeddings = false;                // --host-embeddings (LoadOptions::host_embeddings)
  std::string quantized_activations = "auto";  // --quantized-activations (Backend::set_...)
};
void add_model_args(CLI::App& app, ModelArgs& args);
// --host-embeddings (LoadOptions::host_embeddings), for every command that loads a model.
void add_host_embeddings_arg(CLI::App& app, bool& host_embeddings);

// --quantized-activations auto|off|fp8 (Backend::set_quantized_activations), and
// --int8-activations, which is refused naming what runs instead (W4A8 here is fp8 activations).
void add_quantized_activations_arg(CLI::App& app, std::string& mode);
// Parses `mode` (as the flag takes it) and sets it on `backend`; errors name
// --quantized-activations. With `log`, the start-up line says what each weight format multiplies.
Status apply_quantized_activations(Backend& backend, const std::string& mode, bool log = true);
// The same on each tensor-parallel rank's backend (ranks 1..; no log line).
Status apply_quantized_activations(const std::vector<std::unique_ptr<Backend>>& ranks,
                                   const std::string& mode);

// --device auto|cpu|cuda, parsed by make_cli_backend(); `device` keeps its value as the default
// shown in --help (serve: auto; logits, generate: cpu, the fp32 reference).
void add_device_arg(CLI::App& app, std::string& device);
// The backend --device names: cpu; cuda (device 0; an error when the build has no CUDA backend or
// the machine no device); auto = cuda when this build has it and a device is present, else cpu.
// Errors name --device and the value.
Result<std::unique_ptr<Backend>> make_cli_backend(const std::string& device);

struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::vector<std::unique_ptr<Backend>> rank_backends;  // tensor parallel ranks 1..; outlive model
  std::unique_ptr<Model> model;
};
// On the backend args.device names (rank 0 of args.tensor_parallel_size ranks). Errors are
// prefixed with "--model": the folder, and what is wrong with it (or name --device or
// --tensor-parallel-size).
Result<LoadedModel> load_cli_model(const ModelArgs& args);
// The hint a model command prints after load_cli_model() fails: what --model takes when the
// error is about the folder ("--model: ..."), nothing for the other flags' errors (--device,
// --quantized-activations, ...), whose messages say what to do.
std::string model_load_hint(const std::string& message);

// --speculative-method draft: loads `dir` (the --draft-model folder) on `backend`, the target's.
// An empty dir is an error naming --draft-model; errors are prefixed with "--draft-model".
Result<std::unique_ptr<Model>> load_draft_model(const std::string& dir, Backend& backend);

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
  // Builds a cache store with pages for up to max_tokens positions (and one state slot), K/V in
  // kv_dtype (nullopt: the model's declared cache; see resolve_kv_cache_dtype), and binds the model
  // to it. Each forward() binds it again, so two sequences of one model may take turns (eval-ppl's
  // --kl-reference); nothing else may run the model in between.
  static Result<SingleSequence> create(Model& model, int64_t max_tokens,
                                       std::optional<DType> kv_dtype = std::nullopt);

  // Runs `tokens` as the next positions. Returns logits [tokens.size(), vocab] when all_rows, else
  // [1, vocab] for the last token, in the backend's memory (valid until the next forward). Tokens
  // must fit in max_tokens (checked).
  Tensor forward(const std::vector<int32_t>& tokens, bool all_rows);
  // forward(), downloaded to the host.
  std::vector<float> append(const std::vector<int32_t>& tokens, bool all_rows);
  // Starts over as an empty sequence (the pages are reused, the recurrent state slot is zeroed);
  // between forwards only.
  void restart();
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
