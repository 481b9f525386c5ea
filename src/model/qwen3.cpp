#include "model/qwen3.h"

#include <string>
#include <utility>

#include "core/log.h"
#include "model/config_checks.h"
#include "model/decoder.h"

namespace syv {

namespace {

std::string layer_prefix(int64_t l) {
  return "model.layers." + std::to_string(l) + ".";
}

}  // namespace

Status load_qwen3_weights(const ModelConfig& config, WeightLoader& loader, DecoderWeights* out) {
  std::vector<WeightSpec> specs = qwen3_weight_specs(config);
  size_t next = 0;
  auto load_next = [&](const std::string& name, DeviceWeight* w) -> Status {
    SYV_CHECK(next < specs.size() && specs[next].name == name) << "spec order at " << name;
    SYV_ASSIGN_OR_RETURN(*w, loader.load(specs[next++]));
    return Status::Ok();
  };
  // Several consecutive specs concatenated along dim 0.
  auto load_concat = [&](const std::string& p, std::initializer_list<const char*> names,
                         DeviceWeight* w) -> Status {
    std::vector<WeightSpec> parts;
    for (const char* n : names) {
      SYV_CHECK(next < specs.size() && specs[next].name == p + n) << "spec order at " << p + n;
      parts.push_back(specs[next++]);
    }
    SYV_ASSIGN_OR_RETURN(*w, loader.load_concat(parts));
    return Status::Ok();
  };
  SYV_RETURN_IF_ERROR(load_next("model.embed_tokens.weight", &out->embed));
  out->layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    DecoderLayer& w = out->layers[static_cast<size_t>(l)];
    w.type = LayerType::kFullAttention;
    const std::string p = layer_prefix(l);
    SYV_RETURN_IF_ERROR(load_next(p + "input_layernorm.weight", &w.input_norm));
    SYV_RETURN_IF_ERROR(load_concat(
        p, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
        &w.attn.qkv));
    SYV_RETURN_IF_ERROR(load_next(p + "self_attn.o_proj.weight", &w.attn.o));
    if (config.attention_bias) {
      SYV_RETURN_IF_ERROR(load_concat(
          p, {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"},
          &w.attn.qkv_bias));
      SYV_RETURN_IF_ERROR(load_next(p + "self_attn.o_proj.bias", &w.attn.o_bias));
    }
    SYV_RETURN_IF_ERROR(load_next(p + "self_attn.q_norm.weight", &w.attn.q_norm));
    SYV_RETURN_IF_ERROR(load_next(p + "self_attn.k_norm.weight", &w.attn.k_norm));
    SYV_RETURN_IF_ERROR(load_next(p + "post_attention_layernorm.weight", &w.post_norm));
    SYV_RETURN_IF_ERROR(
        load_concat(p, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}, &w.mlp.gate_up));
    SYV_RETURN_IF_ERROR(load_next(p + "mlp.down_proj.weight", &w.mlp.down));
  }
  SYV_RETURN_IF_ERROR(load_next("model.norm.weight", &out->final_norm));
  if (!config.tie_word_embeddings) SYV_RETURN_IF_ERROR(load_next("lm_head.weight", &out->lm_head));
  SYV_CHECK_EQ(next, specs.size()) << "unused weight specs";
  return Status::Ok();
}

Status validate_qwen3_config(const ModelConfig& c) {
  SYV_RETURN_IF_ERROR(check_positive_field(c.vocab_size, "vocab_size"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.hidden_size, "hidden_size"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.intermediate_size, "intermediate_size"));
  SYV_RETURN_IF_ERROR(check_positive_field(c.num_hidden_layers, "num_hidden_layers"));
  SYV_RETURN_IF_ERROR(check_attention_heads(c));
  if (c.head_dim % 2 != 0) {
    return Status::Error("config.json: head_dim must be even for RoPE, found " +
                         std::to_string(c.head_dim));
  }
  if (!(c.rope_theta > 0)) {
    return Status::Error("config.json: rope_theta must be positive, found " +
                         std::to_string(c.rope_theta));
  }
  return Status::Ok();
}

std::vector<WeightSpec> qwen3_weight_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_out = c.num_attention_heads * D, kv_out = c.num_key_value_heads * D;
  std::vector<WeightSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {V, H}, WeightInit::kEmbedding});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(l);
    specs.push_back({p + "input_layernorm.weight", {H}, WeightInit::kNorm});
    specs.push_back({p + "self_attn.q_proj.weight", {q_out, H}, WeightInit::kProjection});
    specs.push_back({p + "self_attn.k_proj.weight", {kv_out, H}, WeightInit::kProjection});
    specs.push_back({p + "self_attn.v_proj.weight", {kv_out, H}, WeightInit::kProjection});
    specs.push_back({p + "self_attn.o_proj.weight", {H, q_out}, WeightInit::kProjection});
    if (c.attention_bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {q_out}, WeightInit::kZero});
      specs.push_back({p + "self_attn.k_proj.bias", {kv_out}, WeightInit::kZero});
      specs.push_back({p + "self_attn.v_proj.bias", {kv_out}, WeightInit::kZero});
      specs.push_back({p + "self_attn.o_proj.bias", {H}, WeightInit::kZero});
    }
    specs.push_back({p + "self_attn.q_norm.weight", {D}, WeightInit::kNorm});
    specs.push_back({p + "self_attn.k_norm.weight", {D}, WeightInit::kNorm});
    specs.push_back({p + "post_attention_layernorm.weight", {H}, WeightInit::kNorm});
    specs.push_back({p + "mlp.gate_proj.weight", {I, H}, WeightInit::kProjection});
    specs.push_back({p + "mlp.up_proj.weight", {I, H}, WeightInit::kProjection});
    specs.push_back({p + "mlp.down_proj.weight", {H, I}, WeightInit::kProjection});
  }
  specs.push_back({"model.norm.weight", {H}, WeightInit::kNorm});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {V, H}, WeightInit::kProjection});
  return specs;
}

CacheSpec qwen3_cache_spec(const ModelConfig& c, DType kv_dtype) {
  CacheSpec spec;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    spec.add_kv_layer({c.num_key_value_heads, c.head_dim, kv_dtype});
  return spec;
}

Result<std::unique_ptr<Model>> load_qwen3(const ModelConfig& config, const WeightStore* store,
                                          Backend& backend, const LoadOptions& options) {
  SYV_RETURN_IF_ERROR(validate_qwen3_config(config));
  if (options.mtp) {
    return Status::Error("config.json: model_type \"" + config.model_type +
                         "\" has no MTP head (mtp.* tensors); --speculative-method mtp needs a "
                         "qwen3_5, qwen3_5_text or qwen3_next checkpoint");
  }
  DecoderWeights weights;
  {
    WeightLoader loader(backend, store, options.seed, config.quant);
    loader.keep_embeddings_on_host(options.host_embeddings);
    loader.record_sources(options.weight_sources);
    SYV_RETURN_IF_ERROR(load_qwen3_weights(config, loader, &weights));
    loader.finish();
    weights.parameters = loader.parameters_loaded();
    weights.device_bytes = loader.device_bytes();
  }
  DecoderOptions o;
  o.name = "qwen3";
  o.norm = NormKind::kPlain;
  o.cache = qwen3_cache_spec(config, backend.activation_dtype());
  return make_decoder_model(config, backend, std::move(weights), std::move(o));
}

}  // namespace syv
