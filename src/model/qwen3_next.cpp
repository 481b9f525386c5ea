#include "model/qwen3_next.h"

#include <algorithm>
#include <string>

#include "core/log.h"
#include "model/hybrid_layers.h"

namespace syv {

namespace {

// in_proj_qkvz [Hk * (2 dk + 2 r dv), H] holds, per key-head group g: q_g (dk rows), k_g (dk),
// v of value heads g*r .. g*r+r-1 (r dv), z of the same heads (r dv). syv wants
// qkv = [all q | all k | all v] and z = [all z]; in_proj_ba [Hk * 2r, H] holds per group b (r rows)
// then a (r rows), syv wants [all b | all a].
struct Reordered {
  std::vector<float> qkv, z, ba;
};

Reordered reorder_fused(const std::vector<float>& qkvz, const std::vector<float>& ba_in,
                        const ModelConfig& c) {
  const int64_t H = c.hidden_size, Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, r = Hv / Hk;
  const int64_t key_dim = Hk * dk, value_dim = Hv * dv;
  const int64_t group = 2 * dk + 2 * r * dv;  // rows per group in qkvz
  Reordered out;
  out.qkv.resize(static_cast<size_t>((2 * key_dim + value_dim) * H));
  out.z.resize(static_cast<size_t>(value_dim * H));
  out.ba.resize(static_cast<size_t>(2 * Hv * H));
  auto rows = [&](const std::vector<float>& src, int64_t src_row, std::vector<float>& dst,
                  int64_t dst_row, int64_t n) {
    std::copy_n(src.data() + src_row * H, n * H, dst.data() + dst_row * H);
  };
  for (int64_t g = 0; g < Hk; ++g) {
    const int64_t base = g * group;
    rows(qkvz, base, out.qkv, g * dk, dk);                                 // q
    rows(qkvz, base + dk, out.qkv, key_dim + g * dk, dk);                  // k
    rows(qkvz, base + 2 * dk, out.qkv, 2 * key_dim + g * r * dv, r * dv);  // v
    rows(qkvz, base + 2 * dk + r * dv, out.z, g * r * dv, r * dv);         // z
    rows(ba_in, g * 2 * r, out.ba, g * r, r);                              // b
    rows(ba_in, g * 2 * r + r, out.ba, Hv + g * r, r);                     // a
  }
  return out;
}

// The same re-arrangement as rows of the checkpoint's tensors, for WeightLoader::load_rows.
struct FusedRows {
  std::vector<WeightLoader::RowRange> qkv, z, ba;
};

FusedRows fused_rows(const ModelConfig& c) {
  const int64_t Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, r = Hv / Hk;
  const int64_t group = 2 * dk + 2 * r * dv;
  FusedRows f;
  for (int64_t g = 0; g < Hk; ++g) f.qkv.push_back({0, g * group, dk});               // q
  for (int64_t g = 0; g < Hk; ++g) f.qkv.push_back({0, g * group + dk, dk});          // k
  for (int64_t g = 0; g < Hk; ++g) f.qkv.push_back({0, g * group + 2 * dk, r * dv});  // v
  for (int64_t g = 0; g < Hk; ++g) f.z.push_back({0, g * group + 2 * dk + r * dv, r * dv});
  for (int64_t g = 0; g < Hk; ++g) f.ba.push_back({0, g * 2 * r, r});      // b
  for (int64_t g = 0; g < Hk; ++g) f.ba.push_back({0, g * 2 * r + r, r});  // a
  return f;
}

}  // namespace

std::vector<WeightSpec> qwen3_next_weight_specs(const ModelConfig& c) {
  return hybrid_weight_specs(c, /*fused_gdn_inputs=*/true);
}

Status load_qwen3_next_weights(const ModelConfig& c, const WeightStore* store, WeightLoader& loader,
                               const LoadOptions& options, DecoderWeights* out) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t Hv = c.linear_num_value_heads, Hk = c.linear_num_key_heads;
  const int64_t key_dim = Hk * c.linear_key_head_dim, value_dim = Hv * c.linear_value_head_dim;
  HybridWeights& w = *out;
  SYV_ASSIGN_OR_RETURN(w.embed,
                       loader.load({"model.embed_tokens.weight", {V, H}, WeightInit::kEmbedding}));
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    HybridLayer& layer = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    layer.type = c.layer_types[static_cast<size_t>(l)];
    SYV_ASSIGN_OR_RETURN(layer.input_norm,
                         loader.load({p + "input_layernorm.weight", {H}, WeightInit::kZero}));
    if (layer.type == LayerType::kLinearAttention) {
      const std::string a = p + "linear_attn.";
      const WeightSpec qkvz_spec{a + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, H}};
      const WeightSpec ba_spec{a + "in_proj_ba.weight", {2 * Hv, H}};
      if (loader.slices_rows({qkvz_spec}) && loader.slices_rows({ba_spec})) {
        // Straight from the files (quantized rows stay quantized): reorder_fused's rows.
        const FusedRows f = fused_rows(c);
        SYV_ASSIGN_OR_RETURN(layer.gdn.qkv, loader.load_rows({qkvz_spec}, f.qkv));
        SYV_ASSIGN_OR_RETURN(layer.gdn.z, loader.load_rows({qkvz_spec}, f.z));
        SYV_ASSIGN_OR_RETURN(layer.gdn.ba, loader.load_rows({ba_spec}, f.ba));
      } else {  // random weights: drawn, then re-arranged on the host
        DType qd = DType::BF16, bd = DType::BF16;
        SYV_ASSIGN_OR_RETURN(std::vector<float> qkvz, loader.read_f32(qkvz_spec, &qd));
        SYV_ASSIGN_OR_RETURN(std::vector<float> ba, loader.read_f32(ba_spec, &bd));
        Reordered r = reorder_fused(qkvz, ba, c);
        layer.gdn.qkv = loader.upload({2 * key_dim + value_dim, H}, qd, r.qkv.data());
        layer.gdn.z = loader.upload({value_dim, H}, qd, r.z.data());
        loader.note_sources(layer.gdn.qkv, {qkvz_spec.name});
        loader.note_sources(layer.gdn.z, {qkvz_spec.name});
        layer.gdn.ba = loader.upload({2 * Hv, H}, bd, r.ba.data());
      }
      SYV_RETURN_IF_ERROR(load_gdn_common(loader, c, a, &layer.gdn));
    } else {
      SYV_RETURN_IF_ERROR(load_gated_attention(loader, c, p, &layer.attn));
    }
    SYV_ASSIGN_OR_RETURN(
        layer.post_norm,
        loader.load({p + "post_attention_layernorm.weight", {H}, WeightInit::kZero}));
    if (hybrid_layer_is_moe(c, l)) {
      SYV_RETURN_IF_ERROR(load_moe(loader, store, c, p + "mlp.", &layer.mlp));
    } else {
      SYV_RETURN_IF_ERROR(load_dense_mlp(loader, H, I, p + "mlp.", &layer.mlp));
    }
  }
  SYV_ASSIGN_OR_RETURN(w.final_norm, loader.load({"model.norm.weight", {H}, WeightInit::kZero}));
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

Result<std::unique_ptr<Model>> load_qwen3_next(const ModelConfig& c, const WeightStore* store,
                                               Backend& backend, const LoadOptions& options) {
  return load_hybrid(c, store, backend, options, load_qwen3_next_weights, "qwen3_next");
}

}  // namespace syv
