#include "model/qwen3_5.h"

#include <string>

#include "core/log.h"
#include "model/decoder.h"
#include "model/hybrid_layers.h"

namespace syv {

std::vector<WeightSpec> qwen3_5_weight_specs(const ModelConfig& c) {
  return hybrid_weight_specs(c, /*fused_gdn_inputs=*/false);
}

Status load_qwen3_5_weights(const ModelConfig& c, const WeightStore* store, WeightLoader& loader,
                            const LoadOptions& options, DecoderWeights* out) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t Hv = c.linear_num_value_heads, Hk = c.linear_num_key_heads;
  const int64_t key_dim = Hk * c.linear_key_head_dim, value_dim = Hv * c.linear_value_head_dim;
  // A qwen3_5 (vision-language) checkpoint keeps the text model under model.language_model.
  std::string prefix = "model.";
  if (store && store->find("model.language_model.embed_tokens.weight")) {
    prefix = "model.language_model.";
  }
  HybridWeights& w = *out;
  SYV_ASSIGN_OR_RETURN(
      w.embed, loader.load({prefix + "embed_tokens.weight", {V, H}, WeightInit::kEmbedding}));
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    HybridLayer& layer = w.layers[static_cast<size_t>(l)];
    const std::string p = prefix + "layers." + std::to_string(l) + ".";
    layer.type = c.layer_types[static_cast<size_t>(l)];
    SYV_ASSIGN_OR_RETURN(layer.input_norm,
                         loader.load({p + "input_layernorm.weight", {H}, WeightInit::kZero}));
    if (layer.type == LayerType::kLinearAttention) {
      const std::string a = p + "linear_attn.";
      GdnWeights& g = layer.gdn;
      SYV_ASSIGN_OR_RETURN(g.qkv,
                           loader.load({a + "in_proj_qkv.weight", {2 * key_dim + value_dim, H}}));
      SYV_ASSIGN_OR_RETURN(g.z, loader.load({a + "in_proj_z.weight", {value_dim, H}}));
      DType bd = DType::BF16, ad = DType::BF16;
      SYV_ASSIGN_OR_RETURN(std::vector<float> ba,
                           loader.read_f32({a + "in_proj_b.weight", {Hv, H}}, &bd));
      SYV_ASSIGN_OR_RETURN(std::vector<float> av,
                           loader.read_f32({a + "in_proj_a.weight", {Hv, H}}, &ad));
      ba.insert(ba.end(), av.begin(), av.end());
      g.ba = loader.upload({2 * Hv, H}, bd, ba.data());
      SYV_RETURN_IF_ERROR(load_gdn_common(loader, c, a, &g));
    } else {
      SYV_RETURN_IF_ERROR(load_gated_attention(loader, c, p, &layer.attn));
    }
    SYV_ASSIGN_OR_RETURN(
        layer.post_norm,
        loader.load({p + "post_attention_layernorm.weight", {H}, WeightInit::kZero}));
    // qwen3_5_moe: the sparse MLP (router, experts, gated shared expert) where the config's rule
    // says so (every layer by default), as Qwen3-Next's.
    if (hybrid_layer_is_moe(c, l)) {
      SYV_RETURN_IF_ERROR(load_moe(loader, store, c, p + "mlp.", &layer.mlp));
    } else {
      SYV_RETURN_IF_ERROR(load_dense_mlp(loader, H, I, p + "mlp.", &layer.mlp));
    }
  }
  SYV_ASSIGN_OR_RETURN(w.final_norm, loader.load({prefix + "norm.weight", {H}, WeightInit::kZero}));
  if (!c.tie_word_embeddings) {
    SYV_ASSIGN_OR_RETURN(w.lm_head, loader.load({"lm_head.weight", {V, H}}));
  }
  if (options.mtp) {
    Result<MtpWeights> mtp = load_mtp_weights(loader, store, c);
    if (!mtp.ok()) return mtp.status().with_context("the MTP head (--speculative-method mtp)");
    w.mtp = std::move(mtp.value());
  }
  return Status::Ok();
}

Result<std::unique_ptr<Model>> load_qwen3_5(const ModelConfig& c, const WeightStore* store,
                                            Backend& backend, const LoadOptions& options) {
  return load_hybrid(c, store, backend, options, load_qwen3_5_weights, c.model_type);
}

}  // namespace syv
