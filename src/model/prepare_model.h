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
// vision tower or an MTP head the model does not load): a module stored quantized at its
// canonical bytes where the loader keeps it quantized, else (an embedding table, the modules the
// hybrid loaders re-lay on the host: in_proj_a / in_proj_b, mtp.fc) as if dequantized, its scales
// as nothing; MoE experts at their canonical bytes where the backend keeps them quantized
// (keeps_moe_experts_quantized: fp8 scales per row where the experts' stacking needs it, as
// concat_quantized lays them out), else dequantized; with random weights they are not known
// (nullopt). The backend's own scratch is not in it (quantized_load_shapes below).
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

// The weights the loader keeps quantized, [n, k] each as it lays the modules out on the backend
// (WeightLoader announces each: Backend::reserve_quantized_scratch): gate_proj|up_proj as one
// weight; qwen3's q|k|v as one; the hybrids' gated attention (load_gated_attention) as q|k|v of
// q_proj's query rows and a gate of its gate rows; qwen3_next's in_proj_qkvz as its q|k|v rows
// and its z rows; a MoE layer's experts stacked (gate|up [E x 2I, H], down [E x H, I]) where the
// backend keeps them quantized; every other module as it is. A fused weight with a part stored in
// float loads dense, as do the modules the loader dequantizes (an embedding table, in_proj_a /
// in_proj_b, mtp.fc). In no particular order.
struct WeightShape2d {
  int64_t n = 0, k = 0;
  QuantWeightRole role = QuantWeightRole::kLinear;  // as the loader announces it
  bool int4 = false;                                // an int4 format (else fp8)
  bool operator==(const WeightShape2d&) const = default;
};
// Of a tensor list: `quantized(spec)` says which of them the checkpoint stores quantized, `int4`
// whether its format is an int4 one.
std::vector<WeightShape2d> quantized_load_shapes(
    const ModelArch& arch, const ModelConfig& config, const std::vector<WeightSpec>& specs,
    const std::function<bool(const WeightSpec&)>& quantized, bool moe_experts_quantized, bool int4);
// Of a checkpoint: the architecture's list, or without one every module of its files that the
// text model loads (not an MTP head, which only --speculative-method mtp loads, nor a vision
// tower). The format is the config's quantization_config.
std::vector<WeightShape2d> quantized_load_shapes(const ModelArch& arch, const ModelConfig& config,
                                                 const WeightStore& store,
                                                 bool moe_experts_quantized);
// A weight's share of CUDA's dequantization scratch (backend/cuda_choices.h
// cuda_dequant_scratch_bytes; int4 weights with bf16 activations, --quantized-activations auto),
// and the one of them that sizes it (the largest share, of equal shares the largest weight; {0,
// 0} for none).
int64_t dequant_scratch_bytes(const WeightShape2d& w);
WeightShape2d largest_weight(const std::vector<WeightShape2d>& shapes);

// The tensors of a qwen3 (dense), qwen3_5_text, qwen3_5_moe_text or qwen3_next checkpoint of
// `config` (no mtp.* head, no vision tower), for what writes or counts a model without its files
// (`syv demo-model`, which writes the dense ones, `syv inspect --config`). `config` must have
// passed its architecture's checks; other model types (and qwen3 with experts) are refused by
// name.
Result<std::vector<WeightSpec>> config_weight_specs(const ModelConfig& config);

}  // namespace syv
