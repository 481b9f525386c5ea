// config.json's "quantization_config" -> QuantConfig: which published layout a pre-quantized
// checkpoint uses (WAVE2-SPECS part C; docs/model-folder.md "Quantized checkpoints"). Only what
// decides how the tensors are read is kept; the loader (model/quant_weights.h) reads them.
//
// Accepted (anything else is refused naming the field and the value found):
//   quant_method "fp8"                 Qwen / DeepSeek-V3 / transformers FineGrainedFP8: fmt
//                                      "e4m3", activation_scheme "dynamic", weight_block_size
//                                      [bn, bk]; <m>.weight f8e4m3 + <m>.weight_scale_inv f32.
//   quant_method "awq"                 AutoAWQ GEMM: bits 4, version "gemm", zero_point true.
//   quant_method "gptq"                bits 4; sym; desc_act; checkpoint_format "gptq" (v1:
//                                      zeros stored minus one) or "gptq_v2".
//   quant_method "compressed-tensors"  format "pack-quantized" (int weights, 4 bits, strategy
//                                      group or channel) or "float-quantized" (fp8 e4m3 weights,
//                                      strategy tensor, channel or block; activations dynamic or
//                                      none), quantization_status "compressed".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace syv {

enum class QuantMethod : uint8_t {
  kNone,        // a float checkpoint
  kFp8,         // "fp8": block-scaled e4m3
  kAwq,         // "awq": int4, GEMM packing, zero points
  kGptq,        // "gptq": int4, packed along K
  kCtPackInt4,  // "compressed-tensors" / "pack-quantized": int4 packed along K
  kCtFloatFp8,  // "compressed-tensors" / "float-quantized": e4m3 + weight_scale
};

// Which tensors scale a compressed-tensors fp8 weight (weights.strategy).
enum class Fp8ScaleStrategy : uint8_t { kBlock, kChannel, kTensor };

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  // kFp8 (weight_block_size) and kCtFloatFp8 with strategy "block" (block_structure): the tile.
  int32_t block_n = 0, block_k = 0;
  Fp8ScaleStrategy fp8_strategy = Fp8ScaleStrategy::kBlock;  // kFp8 is always kBlock
  // int4 methods: K elements per scale; 0 = one group over all of K (GPTQ group_size -1,
  // compressed-tensors strategy "channel").
  int32_t group_size = 0;
  bool symmetric = true;   // GPTQ sym / compressed-tensors symmetric (AWQ: false, zero points)
  bool act_order = false;  // GPTQ desc_act / compressed-tensors actorder: g_idx tensors exist
  bool gptq_v2 = false;    // GPTQ checkpoint_format "gptq_v2": zeros stored exactly (v1: z - 1)
  // Module names kept in float (modules_to_not_convert / ignore), as written; informative: the
  // loader goes by which tensors each module has.
  std::vector<std::string> not_converted;

  bool quantized() const { return method != QuantMethod::kNone; }
};

// "fp8 (e4m3, 128x128 blocks)", "awq (int4, groups of 128, zero points)", "none".
std::string describe_quant_config(const QuantConfig& q);

// Parses the value of "quantization_config". `source` prefixes messages:
// `config.json: field "quantization_config.quant_method": "bitsandbytes" is not supported
// (supported: "fp8", "awq", "gptq", "compressed-tensors")`.
Result<QuantConfig> parse_quant_config(const nlohmann::json& q, const std::string& source);
// The same from JSON text (tests, and anything that holds only the block).
Result<QuantConfig> parse_quant_config_text(const std::string& text,
                                            const std::string& source = "config.json");

}  // namespace syv
