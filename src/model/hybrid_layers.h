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

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {

// The hybrid families' layers are the kit's (model/decoder.h): a Gated DeltaNet or a gated
// attention mixer, then a dense or MoE MLP.
using HybridLayer = DecoderLayer;
using HybridWeights = DecoderWeights;

// True when layer `l` of a MoE config uses the sparse MLP (transformers' rule).
bool hybrid_layer_is_moe(const ModelConfig& c, int64_t l);

// The tensors of a hybrid checkpoint's text model (model.* names, the layer types of the config;
// no mtp.* head): Qwen3.5's separate linear-attention projections (in_proj_qkv, in_proj_z,
// in_proj_b, in_proj_a) or, `fused_gdn_inputs`, Qwen3-Next's (in_proj_qkvz, in_proj_ba); each MLP
// dense or sparse (hybrid_layer_is_moe: the router `mlp.gate`, per-expert gate / up / down, the
// shared expert and its gate), as the published checkpoints store them.
std::vector<WeightSpec> hybrid_weight_specs(const ModelConfig& c, bool fused_gdn_inputs);

// Config checks shared by both families (heads divide, rotary dim even, conv kernel >= 2...).
Status validate_hybrid_config(const ModelConfig& c);

// Paged KV for full-attention layers, fixed-size fp32 state (conv + delta-rule) for the others.
CacheSpec hybrid_cache_spec(const ModelConfig& c, DType kv_dtype);

// The model over loaded weights (the kit's decoder with zero-centred norms and gated attention).
// `name` is used in log lines ("qwen3_5", "qwen3_next").
// `tp`: tensor parallelism's all-reduce of this rank (model/tensor_parallel.h), or null.
std::unique_ptr<Model> make_hybrid_model(const ModelConfig& config, Backend& backend,
                                         HybridWeights weights, const std::string& name,
                                         TpComm* tp = nullptr);

// Shared loading helpers for the family files ------------------------------------------------

// Reads a family's checkpoint tensors into the kit's layout (load_qwen3_5_weights, ...).
using HybridWeightsReader = Status (*)(const ModelConfig& c, const WeightStore* store,
                                       WeightLoader& loader, const LoadOptions& options,
                                       DecoderWeights* out);
// A hybrid family's load(): validate_hybrid_config, the MTP head's checks (options.mtp), the
// weights through `read`, then make_hybrid_model(name).
Result<std::unique_ptr<Model>> load_hybrid(const ModelConfig& c, const WeightStore* store,
                                           Backend& backend, const LoadOptions& options,
                                           HybridWeightsReader read, const std::string& name);

// Splits q_proj [Hq * 2D, H] (per head: D query rows, then D gate rows) into q and gate, and
// fuses q, k_proj and v_proj into the kit's one q|k|v matrix.
Status load_gated_attention(WeightLoader& loader, const ModelConfig& c, const std::string& prefix,
                            AttentionWeights* out);
// Qwen3-Next's sparse MLP (prefix = "...mlp."): router, routed experts (per-expert tensors or
// the fused gate_up_proj / down_proj layout), shared expert and its gate.
Status load_moe(WeightLoader& loader, const WeightStore* store, const ModelConfig& c,
                const std::string& prefix, MlpWeights* out);
// What the MTP drafter needs before anything is loaded: config.json's mtp_num_hidden_layers = 1
// and (store != nullptr) mtp.fc.weight among the checkpoint's tensors.
Status check_mtp_config(const ModelConfig& c, const WeightStore* store);
// The MTP head (mtp.* tensors, model/mtp_head.h): fc split into its embedding and hidden halves,
// the three norms, and mtp.layers.0 (gated attention + the MLP layer 0 of the model would have:
// dense for Qwen3.5, MoE for Qwen3-Next).
Result<MtpWeights> load_mtp_weights(WeightLoader& loader, const WeightStore* store,
                                    const ModelConfig& c);
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
