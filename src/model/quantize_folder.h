// `syv quantize`: a float (bf16 / f16 / f32) model folder -> the same model in a published
// pre-quantized layout (Qwen FP8, AutoAWQ GEMM, GPTQ v1) that syv and the usual tools load.
// Round-to-nearest with per-block / per-group scales (int4 groups: a least-squares clip of their
// range; model/quant_pack.h), or for int4 GPTQ's error feedback over calibration inputs
// (QuantizeOptions::gptq; gathered by cli/quantize_calibration.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "model/gptq.h"
#include "model/weight_spec.h"

namespace syv {

enum class QuantizeFormat : uint8_t { kFp8, kAwq, kGptq };

struct QuantizeOptions {
  std::string in_dir, out_dir;
  QuantizeFormat format = QuantizeFormat::kFp8;
  int32_t group_size = 128;  // awq / gptq: K elements per scale
  int32_t block = 128;       // fp8: the square scale tile (weight_block_size [block, block])
  // gptq: lm_head.weight quantized too, and "lm_head": true in quantization_config, as GPTQModel
  // writes it with lm_head=True (untied models: a tied one has no lm_head.weight and is refused).
  bool lm_head = false;
  // awq / gptq: the GPTQ factor (model/gptq.h) of each checkpoint tensor whose calibration inputs
  // were gathered, by tensor name ("model.layers.0.mlp.down_proj.weight"; tensors sharing an input
  // share one). A quantized tensor without one is rounded to nearest (the log names how many).
  // Null: every tensor rounded to nearest.
  const std::unordered_map<std::string, std::shared_ptr<const GptqFactor>>* gptq = nullptr;
  double gptq_damp = 0.01;  // written as quantization_config's damp_percent (gptq, with factors)
  // The factors quantized the columns in act-order with static groups: gptq writes
  // "desc_act": true and "static_groups": true (GPTQModel's fields; the layout keeps plain
  // groups, g_idx = k / group_size).
  bool gptq_act_order = false;
};

// Which checkpoint tensors are quantized: 2-D float "<...>.layers.<i>.<...>.<m>.weight" with <m>
// "*_proj" or "in_proj_*" (in_proj_qkv, in_proj_z, in_proj_qkvz), except
// the hybrids' small GDN projections (in_proj_a, in_proj_b, in_proj_ba); embeddings, lm_head,
// norms, conv1d, the MoE router (mlp.gate) and shared_expert_gate stay as they are (as in Qwen's
// own FP8 checkpoints, WAVE2-SPECS C.1). lm_head: "lm_head.weight" too (QuantizeOptions::lm_head).
bool quantize_tensor_name(const std::string& name, bool lm_head = false);

// Whether quantize_folder writes this tensor quantized: a 2-D module quantize_tensor_name picks,
// not an embedding table.
bool quantizes_spec(const WeightSpec& spec, bool lm_head = false);

// What a model of these tensors holds on a CUDA device once quantize_folder wrote it in
// options.format (group_size / block) and load_model read it back: the modules
// quantize_tensor_name picks (2-D, not an embedding table) in the format's canonical layout
// (quantized_weight_bytes: packed data, f32 scales, u8 zero points for awq), every other tensor
// in bf16. Refuses a module the format cannot pack, naming it, as quantize_folder does. For plans
// without a checkpoint (`syv inspect --config --weights-format`).
Result<int64_t> quantized_device_bytes(const std::vector<WeightSpec>& specs,
                                       const QuantizeOptions& options);

// Writes out_dir (created; its *.safetensors, index and config.json replaced): every input
// safetensors file again under its own name, quantized modules in the format's tensors, the
// index's weight_map renamed; config.json with "quantization_config" as the real tools write it;
// every other regular file (tokenizer, generation_config.json, ...) copied. Refuses a folder that
// is already quantized and a weight the format cannot pack (naming the tensor and the shape).
// Logs one line per file.
Status quantize_folder(const QuantizeOptions& options);

}  // namespace syv
