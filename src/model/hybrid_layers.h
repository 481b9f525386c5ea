// What Qwen3.5 (qwen3_5_text / qwen3_5) and Qwen3-Next (qwen3_next) share: the weight layout after
// load-time reordering, and one forward over backend ops. The family files (qwen3_5.cpp,
// qwen3_next.cpp) only read their checkpoint's tensors into HybridWeights; see
// /work/shared/reference/MODELS.md and docs/hybrid-models.md.
//
// Layer stack: h = embed[ids]; per layer: h += mixer(norm1(h)); h += mlp(norm2(h)); logits =
// lm_head(norm(h)). All norms are zero-centred (x̂ · (1 + w)) except the GDN output norm (x̂ · w).
//   mixer = Gated DeltaNet (layer_types[i] == linear_attention) or gated full attention.
//   mlp   = SwiGLU, or MoE (top-k routed experts + sigmoid-gated shared expert) on Qwen3-Next.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// Gated DeltaNet weights in syv's layout (Qwen3-Next's fused per-key-head-group projections are
// reordered into this at load):
struct GdnWeights {
  DeviceWeight qkv;      // [2*Hk*dk + Hv*dv, H]: all q heads, all k heads, all v heads
  DeviceWeight z;        // [Hv*dv, H]
  DeviceWeight ba;       // [2*Hv, H]: b of every value head, then a
  DeviceWeight conv;     // [conv_dim, K] (checkpoint: [conv_dim, 1, K])
  DeviceWeight a_log;    // [Hv]
  DeviceWeight dt_bias;  // [Hv]
  DeviceWeight norm;     // [dv], plain weight
  DeviceWeight out;      // [H, Hv*dv]
};

// Gated full attention; q_proj's per-head [query | gate] interleave is split at load.
struct GatedAttnWeights {
  DeviceWeight q, gate;         // [Hq*D, H] each
  DeviceWeight k, v;            // [Hk*D, H]
  DeviceWeight o;               // [H, Hq*D]
  DeviceWeight q_norm, k_norm;  // [D], zero-centred
};

struct MlpWeights {
  bool moe = false;
  DeviceWeight gate_up;  // dense: [2I, H] (gate rows, then up rows)
  DeviceWeight down;     // dense: [H, I]
  // MoE
  DeviceWeight router;           // [E, H]
  DeviceWeight experts_gate_up;  // [E, 2Im, H]
  DeviceWeight experts_down;     // [E, H, Im]
  DeviceWeight shared_gate_up;   // [2Is, H]
  DeviceWeight shared_down;      // [H, Is]
  DeviceWeight shared_gate;      // [1, H]
};

struct HybridLayer {
  LayerType type = LayerType::kLinearAttention;
  DeviceWeight input_norm, post_norm;  // [H], zero-centred
  GdnWeights gdn;                      // linear-attention layers
  GatedAttnWeights attn;               // full-attention layers
  MlpWeights mlp;
};

struct HybridWeights {
  DeviceWeight embed;       // [V, H]
  DeviceWeight final_norm;  // [H], zero-centred
  DeviceWeight lm_head;     // [V, H]; empty when tied to embed
  std::vector<HybridLayer> layers;
  int64_t parameters = 0;
  int64_t device_bytes = 0;
};

// True when layer `l` of a MoE config uses the sparse MLP (transformers' rule).
bool hybrid_layer_is_moe(const ModelConfig& c, int64_t l);

// Config checks shared by both families (heads divide, rotary dim even, conv kernel >= 2...).
Status validate_hybrid_config(const ModelConfig& c);

// Paged KV for full-attention layers, fixed-size fp32 state (conv + delta-rule) for the others.
CacheSpec hybrid_cache_spec(const ModelConfig& c, DType kv_dtype);

// The model over loaded weights. `name` is used in log lines ("qwen3_5", "qwen3_next").
std::unique_ptr<Model> make_hybrid_model(const ModelConfig& config, Backend& backend,
                                         HybridWeights weights, const std::string& name);

// Shared loading helpers for the family files ------------------------------------------------

// Splits q_proj [Hq * 2D, H] (per head: D query rows, then D gate rows) into q and gate.
Status load_gated_attention(WeightLoader& loader, const ModelConfig& c, const std::string& prefix,
                            GatedAttnWeights* out);
// Dense SwiGLU MLP: gate_proj + up_proj fused into [2I, H], down_proj.
Status load_dense_mlp(WeightLoader& loader, int64_t H, int64_t I, const std::string& prefix,
                      MlpWeights* out);
// The GDN tensors both families store alike: conv1d.weight, A_log, dt_bias, norm.weight,
// out_proj.weight (prefix = "...layers.N.linear_attn.").
Status load_gdn_common(WeightLoader& loader, const ModelConfig& c, const std::string& prefix,
                       GdnWeights* out);
// Loads a weight and reinterprets it with another shape of the same element count.
Result<DeviceWeight> load_reshaped(WeightLoader& loader, const WeightSpec& spec,
                                   std::initializer_list<int64_t> dims);

}  // namespace syv
