// The typed form of a Hugging Face config.json (+ generation_config.json), for every family syv
// serves. Parsed and validated by io/hf_config; consumed by model/ and the memory planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/quant_config.h"

namespace syv {

enum class ModelFamily : uint8_t {
  kQwen3,      // model_type "qwen3": dense attention + SwiGLU
  kQwen3_5,    // "qwen3_5_text" (or "qwen3_5" with text_config): hybrid GDN + gated attention
  kQwen3Next,  // "qwen3_next": hybrid + MoE, fused projections
  // Note: "qwen3_5_moe" / "qwen3_5_moe_text" map to kQwen3_5 (Qwen3.5 weight layout) with
  // num_experts > 0; use is_moe() / layer_is_moe(i) to pick the MLP.
};

enum class LayerType : uint8_t { kFullAttention, kLinearAttention };

struct ModelConfig {
  ModelFamily family = ModelFamily::kQwen3;
  std::string model_type;  // as written in config.json
  std::string torch_dtype = "bfloat16";

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // from config; not always hidden / heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  double partial_rotary_factor = 1.0;  // hybrids rotate only the first head_dim * factor lanes
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;

  // Hybrid models (empty/zero for dense qwen3) -------------------------------------------------
  std::vector<LayerType> layer_types;  // [num_hidden_layers]; all full attention for qwen3
  int64_t linear_num_key_heads = 0;    // Hk
  int64_t linear_num_value_heads = 0;  // Hv
  int64_t linear_key_head_dim = 0;     // dk
  int64_t linear_value_head_dim = 0;   // dv
  int64_t linear_conv_kernel_dim = 0;  // K (4)
  int64_t mtp_num_hidden_layers = 0;   // MTP decoder layers shipped as mtp.* tensors (0: none)
  std::vector<int64_t> mrope_section;  // M-RoPE sections (Qwen3.5); text-only input = plain RoPE

  // MoE (qwen3_next, qwen3_5_moe) -----------------------------------------------------------
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  // quantization_config: the layout of a pre-quantized checkpoint (method kNone: float weights).
  QuantConfig quant;

  // generation_config.json / config.json -----------------------------------------------------
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;

  // Whether any layer is linear attention (recurrent state beside the KV pages). What a model
  // needs from a backend is the model registry's business (model/registry.h), not the family's.
  bool is_hybrid() const {
    for (LayerType t : layer_types) {
      if (t == LayerType::kLinearAttention) return true;
    }
    return false;
  }
  bool is_moe() const { return num_experts > 0; }
  // Whether layer i uses the sparse MoE block (transformers' rule: not in mlp_only_layers and
  // (i + 1) % decoder_sparse_step == 0); otherwise a dense SwiGLU MLP of intermediate_size.
  bool layer_is_moe(int64_t i) const {
    if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
    for (int64_t l : mlp_only_layers) {
      if (l == i) return false;
    }
    return (i + 1) % decoder_sparse_step == 0;
  }
  // Lanes of each full-attention head that RoPE rotates: head_dim * partial_rotary_factor (even).
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor + 0.5);
  }
  int64_t num_full_attention_layers() const {
    int64_t n = 0;
    for (auto t : layer_types) n += (t == LayerType::kFullAttention);
    return n;
  }
};

}  // namespace syv
