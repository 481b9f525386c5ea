// The first half of load_model(): everything that can be checked about a model folder before a
// byte is allocated, cheaply (headers only), so that `syv serve` can refuse a bad folder before it
// prints `listening on`, and every command says the same thing about the same folder.
//
// prepare_model() checks, in order: the path (io/model_folder.h: GGUF, a Hugging Face cache root,
// a file), config.json, the architecture (model/registry.h), its config checks and whether the
// backend runs it, the safetensors headers (and, for a quantized checkpoint, whether the backend
// computes quantized weights: Backend::supports_quantized_weights), that the weights fit in the
// backend's free memory (backend/available_memory.h), and every tensor the architecture lists
// against the headers (name, shape, dtype). Random weights (LoadOptions::random_weights) skip the
// files and count the bytes they will allocate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/status.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/registry.h"

namespace syv {

struct PreparedModel {
  std::string dir;
  ModelConfig config;
  const ModelArch* arch = nullptr;   // from the registry, never null once prepared
  std::optional<WeightStore> store;  // the opened checkpoint; absent with random weights
  int64_t weight_bytes = -1;         // what the backend will hold for the weights; -1: not known
};

Result<PreparedModel> prepare_model(const std::string& dir, Backend& backend,
                                    const LoadOptions& options = {});

// The second half: reads (or draws) the weights into the backend. `prepared` must come from
// prepare_model() with the same backend and options.
Result<std::unique_ptr<Model>> load_prepared_model(const PreparedModel& prepared, Backend& backend,
                                                   const LoadOptions& options = {});

// Bytes the backend will hold for the weights: every tensor the architecture lists
// (ModelArch::weight_specs), in backend.weight_dtype() of its file dtype (bf16 for random
// weights); a module the loader keeps quantized in its canonical layout (quantized_spec_bytes).
// Architectures without a list count every tensor of the checkpoint (an upper bound: e.g. a
// vision tower the model does not read; quantized modules as if loaded dequantized, their scales
// as nothing), except MoE experts the backend keeps quantized (keeps_moe_experts_quantized: each
// at its canonical bytes, fp8 scales per row where the experts' stacking needs it, as
// concat_quantized lays them out); with random weights they are not known (nullopt).
std::optional<int64_t> weight_backend_bytes(const ModelArch& arch, const ModelConfig& config,
                                            const WeightStore* store, const Backend& backend);
// The same for a backend that keeps a float file dtype as `kept(file dtype)` and MoE experts
// quantized or not (`syv inspect` plans for CUDA, which keeps bf16, without a CUDA backend at
// hand).
std::optional<int64_t> weight_backend_bytes(const ModelArch& arch, const ModelConfig& config,
                                            const WeightStore* store,
                                            const std::function<DType(DType)>& kept,
                                            bool moe_experts_quantized = false);

// The bytes keeping a quantized checkpoint's MoE experts quantized saves against dequantizing
// them at load (the two counts above agree on every other tensor; an MTP head's experts included);
// nullopt when either count is unknown.
std::optional<int64_t> moe_experts_quantized_saving(const ModelArch& arch,
                                                    const ModelConfig& config,
                                                    const WeightStore* store,
                                                    const std::function<DType(DType)>& kept);

// The tensors of a dense qwen3 or qwen3_5_text checkpoint of `config` (no mtp.* head, no vision
// tower), for what writes or counts a model without its files (`syv demo-model`, `syv inspect
// --config`). `config` must have passed its architecture's checks; other model types and MoE
// configs are refused by name.
Result<std::vector<WeightSpec>> config_weight_specs(const ModelConfig& config);

}  // namespace syv
