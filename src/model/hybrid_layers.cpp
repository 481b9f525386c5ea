#include "model/hybrid_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/log.h"
#include "model/config_checks.h"
#include "model/decoder.h"

namespace syv {

bool hybrid_layer_is_moe(const ModelConfig& c, int64_t l) {
  if (c.num_experts <= 0) return false;
  if (std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), l) != c.mlp_only_layers.end())
    return false;
  const int64_t step = std::max<int64_t>(c.decoder_sparse_step, 1);
  return (l + 1) % step == 0;
}

std::vector<WeightSpec> hybrid_weight_specs(const ModelConfig& c, bool fused_gdn_inputs) {
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const GdnShape g = gdn_shape(c);
  const int64_t Hv = g.num_v_heads, C = g.conv_dim(), Vd = g.value_dim();
  std::vector<WeightSpec> specs;
  auto dense_mlp = [&](const std::string& p, int64_t width) {
    specs.push_back({p + "gate_proj.weight", {width, H}});
    specs.push_back({p + "up_proj.weight", {width, H}});
    specs.push_back({p + "down_proj.weight", {H, width}});
  };
  specs.push_back({"model.embed_tokens.weight", {V, H}, WeightInit::kEmbedding});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {H}, WeightInit::kZero});
    if (c.layer_types[static_cast<size_t>(l)] == LayerType::kLinearAttention) {
      const std::string a = p + "linear_attn.";
      if (fused_gdn_inputs) {
        specs.push_back({a + "in_proj_qkvz.weight", {C + Vd, H}});
        specs.push_back({a + "in_proj_ba.weight", {2 * Hv, H}});
      } else {
        specs.push_back({a + "in_proj_qkv.weight", {C, H}});
        specs.push_back({a + "in_proj_z.weight", {Vd, H}});
        specs.push_back({a + "in_proj_b.weight", {Hv, H}});
        specs.push_back({a + "in_proj_a.weight", {Hv, H}});
      }
      specs.push_back({a + "conv1d.weight", {C, 1, c.linear_conv_kernel_dim}});
      specs.push_back({a + "A_log", {Hv}, WeightInit::kZero});
      specs.push_back({a + "dt_bias", {Hv}, WeightInit::kZero});
      specs.push_back({a + "norm.weight", {g.v_head_dim}, WeightInit::kNorm});
      specs.push_back({a + "out_proj.weight", {H, Vd}});
    } else {
      const std::string a = p + "self_attn.";
      specs.push_back({a + "q_proj.weight", {2 * Hq * D, H}});  // per head: query, then gate
      specs.push_back({a + "k_proj.weight", {Hk * D, H}});
      specs.push_back({a + "v_proj.weight", {Hk * D, H}});
      specs.push_back({a + "o_proj.weight", {H, Hq * D}});
      specs.push_back({a + "q_norm.weight", {D}, WeightInit::kZero});
      specs.push_back({a + "k_norm.weight", {D}, WeightInit::kZero});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {H}, WeightInit::kZero});
    if (hybrid_layer_is_moe(c, l)) {
      const std::string m = p + "mlp.";
      specs.push_back({m + "gate.weight", {c.num_experts, H}});
      for (int64_t e = 0; e < c.num_experts; ++e)
        dense_mlp(m + "experts." + std::to_string(e) + ".", c.moe_intermediate_size);
      dense_mlp(m + "shared_expert.", c.shared_expert_intermediate_size);
      specs.push_back({m + "shared_expert_gate.weight", {1, H}});
    } else {
      dense_mlp(p + "mlp.", I);
    }
  }
  specs.push_back({"model.norm.weight", {H}, WeightInit::kZero});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {V, H}});
  return specs;
}

Status validate_hybrid_config(const ModelConfig& c) {
  SYV_RETURN_IF_ERROR(check_positive_field(c.vocab_size, "vocab_size"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.hidden_size, "hidden_size"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.num_hidden_layers, "num_hidden_layers"));
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    return Status::Error("config.json: layer_types has " + std::to_string(c.layer_types.size()) +
                         " entries, num_hidden_layers is " + std::to_string(c.num_hidden_layers));
  }
  if (c.attention_bias) {
    return Status::Error("config.json: attention_bias = true is not supported for " + c.model_type +
                         " (the hybrid attention loader reads no q/k/v/o biases)");
  }
  const bool any_full = c.num_full_attention_layers() > 0;
  const bool any_linear = c.num_full_attention_layers() < c.num_hidden_layers;
  if (any_full) {
    SYV_RETURN_IF_ERROR(check_attention_heads(c));
    const int64_t rot = static_cast<int64_t>(c.head_dim * c.partial_rotary_factor);
    if (rot <= 0 || rot % 2 != 0) {
      return Status::Error("config.json: head_dim * partial_rotary_factor = " +
                           std::to_string(rot) + " must be a positive even number");
    }
  }
  if (any_linear) {
    SYV_RETURN_IF_ERROR(check_positive_field(c.linear_num_key_heads, "linear_num_key_heads"));
    SYV_RETURN_IF_ERROR(check_positive_field(c.linear_num_value_heads, "linear_num_value_heads"));
    SYV_RETURN_IF_ERROR(check_positive_field(c.linear_key_head_dim, "linear_key_head_dim"));
    SYV_RETURN_IF_ERROR(check_positive_field(c.linear_value_head_dim, "linear_value_head_dim"));
    SYV_RETURN_IF_ERROR(check_multiple_of(c.linear_num_value_heads, "linear_num_value_heads",
                                          c.linear_num_key_heads, "linear_num_key_heads"));
    if (c.linear_conv_kernel_dim < 2) {
      return Status::Error("config.json: field \"linear_conv_kernel_dim\": expected >= 2, found " +
                           std::to_string(c.linear_conv_kernel_dim));
    }
  }
  if (c.num_experts > 0) {
    SYV_RETURN_IF_ERROR(check_positive_field(c.num_experts_per_tok, "num_experts_per_tok"));
    SYV_RETURN_IF_ERROR(check_positive_field(c.moe_intermediate_size, "moe_intermediate_size"));
    if (c.num_experts_per_tok > c.num_experts) {
      return Status::Error("config.json: num_experts_per_tok (" +
                           std::to_string(c.num_experts_per_tok) + ") exceeds num_experts (" +
                           std::to_string(c.num_experts) + ")");
    }
  }
  return Status::Ok();
}

CacheSpec hybrid_cache_spec(const ModelConfig& c, DType kv_dtype) {
  CacheSpec spec;
  const GdnShape g = gdn_shape(c);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention) {
      spec.add_kv_layer({c.num_key_value_heads, c.head_dim, kv_dtype});
    } else {
      spec.add_state_layer(
          {c.linear_conv_kernel_dim - 1, g.conv_dim(), g.num_v_heads, g.k_head_dim, g.v_head_dim});
    }
  }
  return spec;
}

std::unique_ptr<Model> make_hybrid_model(const ModelConfig& config, Backend& backend,
                                         HybridWeights weights, const std::string& name,
                                         TpComm* tp) {
  DecoderOptions o;
  o.name = name;
  o.tp = tp;
  o.norm = NormKind::kOnePlus;
  o.gated_attention = true;
  o.rotary_dim = static_cast<int32_t>(config.head_dim * config.partial_rotary_factor);
  o.cache = hybrid_cache_spec(config, backend.activation_dtype());
  // The MTP head's K/V: one more paged-KV layer, after the model's (model/mtp_head.h).
  if (weights.mtp)
    o.cache.add_kv_layer({config.num_key_value_heads, config.head_dim, backend.activation_dtype()});
  return make_decoder_model(config, backend, std::move(weights), std::move(o));
}

Result<std::unique_ptr<Model>> load_hybrid(const ModelConfig& c, const WeightStore* store,
                                           Backend& backend, const LoadOptions& options,
                                           HybridWeightsReader read, const std::string& name) {
  SYV_RETURN_IF_ERROR(validate_hybrid_config(c));
  if (options.mtp) {
    SYV_RETURN_IF_ERROR(
        check_mtp_config(c, store).with_context("the MTP head (--speculative-method mtp)"));
  }
  WeightLoader loader(backend, store, options.seed, c.quant);
  loader.keep_embeddings_on_host(options.host_embeddings);
  loader.record_sources(options.weight_sources);
  HybridWeights w;
  SYV_RETURN_IF_ERROR(read(c, store, loader, options, &w));
  w.parameters = loader.parameters_loaded();
  w.device_bytes = loader.device_bytes();
  return make_hybrid_model(c, backend, std::move(w), name);
}

Result<DeviceWeight> load_reshaped(WeightLoader& loader, const WeightSpec& spec,
                                   std::initializer_list<int64_t> dims) {
  // WeightLoader uploads 1-D / 2-D weights: upload as [numel / last, last], then view as `dims`.
  DType dtype = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> values, loader.read_f32(spec, &dtype));
  const int64_t last = spec.shape.back();
  DeviceWeight w = loader.upload({spec.numel() / last, last}, dtype, values.data());
  w.set_dense(w.tensor.reshape(dims));
  return w;
}

// o_proj and the q / k norms of a gated attention layer.
static Status load_attention_rest(WeightLoader& loader, const ModelConfig& c, const std::string& p,
                                  AttentionWeights* out) {
  const int64_t H = c.hidden_size, Hq = c.num_attention_heads, D = c.head_dim;
  SYV_ASSIGN_OR_RETURN(out->o, loader.load({p + "self_attn.o_proj.weight", {H, Hq * D}}));
  SYV_ASSIGN_OR_RETURN(out->q_norm,
                       loader.load({p + "self_attn.q_norm.weight", {D}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(out->k_norm,
                       loader.load({p + "self_attn.k_norm.weight", {D}, WeightInit::kZero}));
  return Status::Ok();
}

Status load_gated_attention(WeightLoader& loader, const ModelConfig& c, const std::string& p,
                            AttentionWeights* out) {
  const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const int64_t D = c.head_dim;
  const std::vector<WeightSpec> specs = {{p + "self_attn.q_proj.weight", {2 * Hq * D, H}},
                                         {p + "self_attn.k_proj.weight", {Hk * D, H}},
                                         {p + "self_attn.v_proj.weight", {Hk * D, H}}};
  // qkv = [q heads | k | v] rows; gate = the gate half of each q_proj head.
  if (loader.slices_rows(specs)) {  // straight from the files
    std::vector<WeightLoader::RowRange> qkv_rows, gate_rows;
    for (int64_t h = 0; h < Hq; ++h) {
      qkv_rows.push_back({0, 2 * h * D, D});
      gate_rows.push_back({0, (2 * h + 1) * D, D});
    }
    qkv_rows.push_back({1, 0, Hk * D});
    qkv_rows.push_back({2, 0, Hk * D});
    SYV_ASSIGN_OR_RETURN(out->qkv, loader.load_rows(specs, qkv_rows));
    SYV_ASSIGN_OR_RETURN(out->gate, loader.load_rows({specs[0]}, gate_rows));
    return load_attention_rest(loader, c, p, out);
  }
  DType dtype = DType::BF16, kd = DType::BF16, vd = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> qg, loader.read_f32(specs[0], &dtype));
  SYV_ASSIGN_OR_RETURN(std::vector<float> k, loader.read_f32(specs[1], &kd));
  SYV_ASSIGN_OR_RETURN(std::vector<float> v, loader.read_f32(specs[2], &vd));
  std::vector<float> qkv(static_cast<size_t>((Hq + 2 * Hk) * D * H));
  std::vector<float> gate(static_cast<size_t>(Hq * D * H));
  for (int64_t h = 0; h < Hq; ++h) {
    const float* src = qg.data() + h * 2 * D * H;
    std::copy_n(src, D * H, qkv.data() + h * D * H);
    std::copy_n(src + D * H, D * H, gate.data() + h * D * H);
  }
  std::copy(k.begin(), k.end(), qkv.begin() + Hq * D * H);
  std::copy(v.begin(), v.end(), qkv.begin() + (Hq + Hk) * D * H);
  out->qkv = loader.upload({(Hq + 2 * Hk) * D, H}, dtype, qkv.data());
  out->gate = loader.upload({Hq * D, H}, dtype, gate.data());
  loader.note_sources(out->qkv, {specs[0].name, specs[1].name, specs[2].name});
  loader.note_sources(out->gate, {specs[0].name});
  return load_attention_rest(loader, c, p, out);
}

Status load_gdn_common(WeightLoader& loader, const ModelConfig& c, const std::string& p,
                       GdnWeights* out) {
  const GdnShape g = gdn_shape(c);
  const int64_t H = c.hidden_size, C = g.conv_dim(), K = c.linear_conv_kernel_dim;
  const int64_t Hv = g.num_v_heads;
  SYV_ASSIGN_OR_RETURN(out->conv, load_reshaped(loader, {p + "conv1d.weight", {C, 1, K}}, {C, K}));
  SYV_ASSIGN_OR_RETURN(out->a_log, loader.load({p + "A_log", {Hv}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(out->dt_bias, loader.load({p + "dt_bias", {Hv}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(out->norm,
                       loader.load({p + "norm.weight", {g.v_head_dim}, WeightInit::kNorm}));
  SYV_ASSIGN_OR_RETURN(out->out, loader.load({p + "out_proj.weight", {H, g.value_dim()}}));
  return Status::Ok();
}

// Whether the experts of the MoE MLP at prefix p stay quantized: the backend keeps MoE experts
// quantized and the checkpoint stores every one of them quantized.
static bool keeps_experts_quantized(const WeightLoader& loader, const ModelConfig& c,
                                    const std::string& p) {
  if (!loader.backend().keeps_moe_experts_quantized()) return false;
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    for (const WeightSpec& spec :
         {WeightSpec{q + "gate_proj.weight", {I, H}}, WeightSpec{q + "up_proj.weight", {I, H}},
          WeightSpec{q + "down_proj.weight", {H, I}}})
      if (!loader.quantized(spec)) return false;
  }
  return true;
}

Status load_moe(WeightLoader& loader, const WeightStore* store, const ModelConfig& c,
                const std::string& p, MlpWeights* out) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const int64_t Is = c.shared_expert_intermediate_size;
  out->moe = true;
  SYV_ASSIGN_OR_RETURN(out->router, loader.load({p + "gate.weight", {E, H}}));
  if (store && store->find(p + "experts.gate_up_proj")) {
    // transformers' in-memory fused layout, if a checkpoint was saved that way.
    SYV_ASSIGN_OR_RETURN(
        out->experts_gate_up,
        load_reshaped(loader, {p + "experts.gate_up_proj", {E, 2 * I, H}}, {E, 2 * I, H}));
    SYV_ASSIGN_OR_RETURN(out->experts_down,
                         load_reshaped(loader, {p + "experts.down_proj", {E, H, I}}, {E, H, I}));
  } else if (store == nullptr || keeps_experts_quantized(loader, c, p)) {
    // Random weights (`syv bench --random-weights`), drawn on the device (no host copy: a real
    // shape's experts are tens of GB); or quantized experts the backend keeps quantized. Each
    // expert's gate and up rows, then the next expert's, as the files' path below stacks them.
    // Quantized: gate_up [E * 2I, H] and down [E * H, I] (Backend::moe_experts); dense (random
    // weights, or quantized parts whose layouts differ): viewed [E, 2I, H] and [E, H, I].
    std::vector<WeightSpec> gate_up, down;
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      gate_up.push_back({q + "gate_proj.weight", {I, H}});
      gate_up.push_back({q + "up_proj.weight", {I, H}});
      down.push_back({q + "down_proj.weight", {H, I}});
    }
    SYV_ASSIGN_OR_RETURN(out->experts_gate_up, loader.load_concat(gate_up));
    SYV_ASSIGN_OR_RETURN(out->experts_down, loader.load_concat(down));
    if (out->experts_gate_up.dense() && out->experts_down.dense()) {
      out->experts_gate_up.set_dense(out->experts_gate_up.tensor.reshape({E, 2 * I, H}));
      out->experts_down.set_dense(out->experts_down.tensor.reshape({E, H, I}));
    }  // one dense and one quantized: moe_experts_quantized() takes the dense one as it is
  } else {
    std::vector<float> gate_up, down;
    gate_up.reserve(static_cast<size_t>(E * 2 * I * H));
    down.reserve(static_cast<size_t>(E * H * I));
    DType dtype = DType::BF16;
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      SYV_ASSIGN_OR_RETURN(std::vector<float> g,
                           loader.read_f32({q + "gate_proj.weight", {I, H}}, &dtype));
      SYV_ASSIGN_OR_RETURN(std::vector<float> u,
                           loader.read_f32({q + "up_proj.weight", {I, H}}, &dtype));
      SYV_ASSIGN_OR_RETURN(std::vector<float> d,
                           loader.read_f32({q + "down_proj.weight", {H, I}}, &dtype));
      gate_up.insert(gate_up.end(), g.begin(), g.end());
      gate_up.insert(gate_up.end(), u.begin(), u.end());
      down.insert(down.end(), d.begin(), d.end());
    }
    out->experts_gate_up = loader.upload({E * 2 * I, H}, dtype, gate_up.data());
    out->experts_gate_up.set_dense(out->experts_gate_up.tensor.reshape({E, 2 * I, H}));
    out->experts_down = loader.upload({E * H, I}, dtype, down.data());
    out->experts_down.set_dense(out->experts_down.tensor.reshape({E, H, I}));
    for (int64_t e = 0; e < E; ++e) {  // each expert by its slice, as the CPU backend reports it
      const std::string q = p + "experts." + std::to_string(e) + ".";
      loader.note_sources_from_row(out->experts_gate_up, e * 2 * I,
                                   {q + "gate_proj.weight", q + "up_proj.weight"});
      loader.note_sources_from_row(out->experts_down, e * H, {q + "down_proj.weight"});
    }
  }
  MlpWeights shared;
  SYV_RETURN_IF_ERROR(load_dense_mlp(loader, H, Is, p + "shared_expert.", &shared));
  out->shared_gate_up = std::move(shared.gate_up);
  out->shared_down = std::move(shared.down);
  SYV_ASSIGN_OR_RETURN(out->shared_gate, loader.load({p + "shared_expert_gate.weight", {1, H}}));
  return Status::Ok();
}

Status check_mtp_config(const ModelConfig& c, const WeightStore* store) {
  if (c.mtp_num_hidden_layers < 1) {
    return Status::Error(
        "config.json: mtp_num_hidden_layers is 0: this " + c.model_type +
        " checkpoint has no MTP head (mtp.* tensors), so --speculative-method mtp cannot run");
  }
  if (c.mtp_num_hidden_layers > 1) {
    return Status::Error("config.json: mtp_num_hidden_layers is " +
                         std::to_string(c.mtp_num_hidden_layers) +
                         "; syv's MTP drafter runs a head of 1 layer (every Qwen3.5 / Qwen3-Next "
                         "checkpoint has 1)");
  }
  if (store != nullptr && store->find("mtp.fc.weight") == nullptr) {
    return Status::Error(
        "the safetensors files hold no mtp.* tensors (mtp.fc.weight is missing) although "
        "config.json has mtp_num_hidden_layers = 1: a checkpoint re-saved by transformers loses "
        "its MTP head; --speculative-method mtp needs the original files");
  }
  return Status::Ok();
}

Result<MtpWeights> load_mtp_weights(WeightLoader& loader, const WeightStore* store,
                                    const ModelConfig& c) {
  SYV_RETURN_IF_ERROR(check_mtp_config(c, store));
  const int64_t H = c.hidden_size;
  MtpWeights w;
  DType dtype = DType::BF16;
  // mtp.fc.weight [H, 2H] multiplies [embedding ; hidden]: split its columns into the two halves.
  SYV_ASSIGN_OR_RETURN(std::vector<float> fc,
                       loader.read_f32({"mtp.fc.weight", {H, 2 * H}}, &dtype));
  std::vector<float> fe(static_cast<size_t>(H * H)), fh(static_cast<size_t>(H * H));
  for (int64_t r = 0; r < H; ++r) {
    std::copy_n(fc.data() + r * 2 * H, H, fe.data() + r * H);
    std::copy_n(fc.data() + r * 2 * H + H, H, fh.data() + r * H);
  }
  w.fc_embed = loader.upload({H, H}, dtype, fe.data());
  w.fc_hidden = loader.upload({H, H}, dtype, fh.data());
  SYV_ASSIGN_OR_RETURN(w.norm_embed,
                       loader.load({"mtp.pre_fc_norm_embedding.weight", {H}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(w.norm_hidden,
                       loader.load({"mtp.pre_fc_norm_hidden.weight", {H}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(w.norm, loader.load({"mtp.norm.weight", {H}, WeightInit::kZero}));
  const std::string p = "mtp.layers.0.";
  SYV_ASSIGN_OR_RETURN(w.layer.input_norm,
                       loader.load({p + "input_layernorm.weight", {H}, WeightInit::kZero}));
  SYV_RETURN_IF_ERROR(load_gated_attention(loader, c, p, &w.layer.attn));
  SYV_ASSIGN_OR_RETURN(
      w.layer.post_norm,
      loader.load({p + "post_attention_layernorm.weight", {H}, WeightInit::kZero}));
  // vLLM builds the head's layer with index 0: MoE by transformers' rule for layer 0.
  if (hybrid_layer_is_moe(c, 0)) {
    SYV_RETURN_IF_ERROR(load_moe(loader, store, c, p + "mlp.", &w.layer.mlp));
  } else {
    SYV_RETURN_IF_ERROR(load_dense_mlp(loader, H, c.intermediate_size, p + "mlp.", &w.layer.mlp));
  }
  return w;
}

Status load_dense_mlp(WeightLoader& loader, int64_t H, int64_t I, const std::string& p,
                      MlpWeights* out) {
  // Straight from the files into the fused [2I, H] weight, as Qwen3's (no f32 copy on the host:
  // this is most of a hybrid's bytes). With the gated attention's q_proj by row ranges too, a
  // 9B-class folder loads at ~37 GB/s on the H200 (docs/performance.md).
  SYV_ASSIGN_OR_RETURN(out->gate_up, loader.load_concat({{p + "gate_proj.weight", {I, H}},
                                                         {p + "up_proj.weight", {I, H}}}));
  SYV_ASSIGN_OR_RETURN(out->down, loader.load({p + "down_proj.weight", {H, I}}));
  return Status::Ok();
}

}  // namespace syv
