#include "model/qwen3.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/log.h"
#include "model/config_checks.h"

namespace syv {

namespace {

std::string layer_prefix(int64_t l) {
  return "model.layers." + std::to_string(l) + ".";
}

struct LayerWeights {
  DeviceWeight input_norm, post_norm;  // [H]
  DeviceWeight qkv_proj;               // [(Hq + 2 Hk) * D, H]: q_proj, k_proj, v_proj rows
  DeviceWeight o_proj;                 // [H, Hq*D]
  DeviceWeight qkv_bias, o_bias;       // empty unless attention_bias; qkv_bias concatenated too
  DeviceWeight q_norm, k_norm;         // [D]
  DeviceWeight gate_up;                // [2I, H]: gate_proj rows, then up_proj rows
  DeviceWeight down_proj;              // [H, I]
};

// Which fused ops forward() uses (all by default). Each can be switched off through the
// environment for A/B timing (SYV_FUSED_QKV=0 etc.), read once when the model is built (not on
// the forward path). Off runs the plain op sequence the fused op stands for.
struct Fusions {
  bool qkv = true;       // one q|k|v linear + qkv_norm_rope_write (off: 3 linears, 2 ops)
  bool norm_qkv = true;  // residual add + RMSNorm fused into the q|k|v linear (add_rmsnorm_linear)
  bool norm_mlp = true;  // ... into the gate_up linear (SYV_FUSED_NORM=0|qkv|mlp|1)
  bool silu = true;      // SiLU·mul fused into the gate_up linear (linear_silu_mul)
};

Fusions fusions_from_env() {
  auto value = [](const char* name) {
    const char* e = std::getenv(name);
    return std::string(e != nullptr ? e : "1");
  };
  Fusions f;
  f.qkv = value("SYV_FUSED_QKV") != "0";
  const std::string norm = value("SYV_FUSED_NORM");
  f.norm_qkv = norm != "0" && norm != "mlp";
  f.norm_mlp = norm != "0" && norm != "qkv";
  f.silu = value("SYV_FUSED_SILU") != "0";
  return f;
}

// Activation buffers of one forward, grown to the largest batch seen.
struct Workspace {
  int64_t tokens = 0, rows = 0;
  bool reserved = false;  // reserve() was called: forward() must not grow (CUDA graphs)
  DeviceBuffer h, h2, x, qkv, q, k, v, attn, o, gate_up, act, x_rows, logits;
};

class Qwen3Model final : public Model {
 public:
  Qwen3Model(const ModelConfig& config, Backend& backend) : config_(config), backend_(backend) {
    H_ = config.hidden_size;
    Hq_ = config.num_attention_heads;
    Hk_ = config.num_key_value_heads;
    D_ = config.head_dim;
    I_ = config.intermediate_size;
    V_ = config.vocab_size;
    eps_ = static_cast<float>(config.rms_norm_eps);
    rope_.theta = config.rope_theta;
    rope_.rotary_dim = static_cast<int32_t>(D_);
  }

  Status load_weights(const WeightStore* store, uint64_t seed) {
    WeightLoader loader(backend_, store, seed);
    std::vector<WeightSpec> specs = qwen3_weight_specs(config_);
    size_t next = 0;
    auto load_next = [&](const std::string& name, DeviceWeight* out) -> Status {
      SYV_CHECK(next < specs.size() && specs[next].name == name) << "spec order at " << name;
      SYV_ASSIGN_OR_RETURN(*out, loader.load(specs[next++]));
      return Status::Ok();
    };
    SYV_RETURN_IF_ERROR(load_next("model.embed_tokens.weight", &embed_));
    layers_.resize(static_cast<size_t>(config_.num_hidden_layers));
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      LayerWeights& w = layers_[static_cast<size_t>(l)];
      const std::string p = layer_prefix(l);
      SYV_RETURN_IF_ERROR(load_next(p + "input_layernorm.weight", &w.input_norm));
      // q_proj, k_proj and v_proj are fused into one [(Hq + 2 Hk) * D, H] matrix (and their
      // biases into one vector) so the attention input is one linear.
      auto load_concat3 = [&](const char* a, const char* b, const char* c,
                              DeviceWeight* out) -> Status {
        SYV_CHECK(next + 2 < specs.size() && specs[next].name == p + a &&
                  specs[next + 1].name == p + b && specs[next + 2].name == p + c)
            << "spec order at " << p + a;
        next += 3;
        SYV_ASSIGN_OR_RETURN(
            *out, loader.load_concat({specs[next - 3], specs[next - 2], specs[next - 1]}));
        return Status::Ok();
      };
      SYV_RETURN_IF_ERROR(load_concat3("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                       "self_attn.v_proj.weight", &w.qkv_proj));
      SYV_RETURN_IF_ERROR(load_next(p + "self_attn.o_proj.weight", &w.o_proj));
      if (config_.attention_bias) {
        SYV_RETURN_IF_ERROR(load_concat3("self_attn.q_proj.bias", "self_attn.k_proj.bias",
                                         "self_attn.v_proj.bias", &w.qkv_bias));
        SYV_RETURN_IF_ERROR(load_next(p + "self_attn.o_proj.bias", &w.o_bias));
      }
      SYV_RETURN_IF_ERROR(load_next(p + "self_attn.q_norm.weight", &w.q_norm));
      SYV_RETURN_IF_ERROR(load_next(p + "self_attn.k_norm.weight", &w.k_norm));
      SYV_RETURN_IF_ERROR(load_next(p + "post_attention_layernorm.weight", &w.post_norm));
      // gate_proj and up_proj are fused into one [2I, H] matrix so the MLP is one linear.
      SYV_CHECK(specs[next].name == p + "mlp.gate_proj.weight") << "spec order";
      SYV_CHECK(specs[next + 1].name == p + "mlp.up_proj.weight") << "spec order";
      SYV_ASSIGN_OR_RETURN(w.gate_up, loader.load_concat({specs[next], specs[next + 1]}));
      next += 2;
      SYV_RETURN_IF_ERROR(load_next(p + "mlp.down_proj.weight", &w.down_proj));
    }
    SYV_RETURN_IF_ERROR(load_next("model.norm.weight", &final_norm_));
    if (!config_.tie_word_embeddings) SYV_RETURN_IF_ERROR(load_next("lm_head.weight", &lm_head_));
    SYV_CHECK_EQ(next, specs.size()) << "unused weight specs";
    loader.finish();
    parameters_ = loader.parameters_loaded();
    SYV_LOG(INFO) << "qwen3: " << config_.num_hidden_layers << " layers, hidden " << H_
                  << ", heads " << Hq_ << "/" << Hk_ << " x " << D_ << ", vocab " << V_ << ", "
                  << parameters_ / 1e6 << "M parameters, " << loader.device_bytes() / 1e6
                  << " MB on " << backend_.name()
                  << (config_.tie_word_embeddings ? " (tied embeddings)" : "");
    return Status::Ok();
  }

  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override {
    return qwen3_cache_spec(config_, backend_.activation_dtype());
  }
  Backend& backend() override { return backend_; }
  const CacheConfig& cache_config() const override { return cache_config_; }

  Status allocate_cache(const CacheConfig& cache) override {
    if (cache.page_size <= 0 || cache.num_pages <= 0) {
      return Status::Error("cache config: page_size and num_pages must be positive, found " +
                           std::to_string(cache.page_size) + " and " +
                           std::to_string(cache.num_pages));
    }
    const DType dtype = backend_.activation_dtype();
    const size_t bytes =
        static_cast<size_t>(cache.num_pages) * cache.page_size * Hk_ * D_ * dtype_size(dtype);
    k_cache_.clear();
    v_cache_.clear();
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      k_cache_.push_back(backend_.allocate(bytes));
      v_cache_.push_back(backend_.allocate(bytes));
    }
    cache_config_ = cache;
    SYV_LOG(INFO) << "qwen3 KV cache: " << cache.num_pages << " pages x " << cache.page_size
                  << " tokens, " << 2.0 * bytes * config_.num_hidden_layers / 1e6 << " MB ("
                  << dtype_name(dtype) << ")";
    return Status::Ok();
  }

  Tensor forward(const Batch& batch) override {
    SYV_CHECK(!k_cache_.empty()) << "allocate_cache() must be called before forward()";
    const int64_t T = batch.num_tokens();
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    for (int64_t t = 0; t < T; ++t) {
      SYV_CHECK(batch.token_ids[t] >= 0 && batch.token_ids[t] < V_)
          << "token id " << batch.token_ids[t] << " at row " << t << " outside [0, " << V_ << ")";
    }
    BatchMeta meta = backend_.prepare_batch(batch, cache_config_.page_size);
    ensure_workspace(T, R);
    const DType act = backend_.activation_dtype();
    Tensor logits = ws_.logits.view(DType::F32, {R, V_});
    if (T == 0) return logits;

    const Fusions& fuse = fusions_;
    Tensor h_a = ws_.h.view(act, {T, H_});
    Tensor h_b = ws_.h2.view(act, {T, H_});
    Tensor* h = &h_a;      // the residual stream
    Tensor* h_alt = &h_b;  // the fused norm ops write the new residual here, then the two swap
    Tensor x = ws_.x.view(act, {T, H_});
    Tensor qkv = ws_.qkv.view(act, {T, (Hq_ + 2 * Hk_) * D_});
    Tensor q = ws_.q.view(act, {T, Hq_ * D_});
    Tensor k = ws_.k.view(act, {T, Hk_ * D_});
    Tensor v = ws_.v.view(act, {T, Hk_ * D_});
    Tensor attn = ws_.attn.view(act, {T, Hq_ * D_});
    Tensor o = ws_.o.view(act, {T, H_});
    Tensor gate_up = ws_.gate_up.view(act, {T, 2 * I_});
    Tensor mlp_act = ws_.act.view(act, {T, I_});
    Tensor q3 = q.reshape({T, Hq_, D_});
    Tensor k3 = k.reshape({T, Hk_, D_});
    Tensor v3 = v.reshape({T, Hk_, D_});
    Tensor attn3 = attn.reshape({T, Hq_, D_});
    const float scale = 1.0f / std::sqrt(static_cast<float>(D_));
    const int64_t cache_dims = cache_config_.num_pages;
    const NormKind plain = NormKind::kPlain;

    backend_.embedding(embed_.tensor, meta.token_ids, *h);
    for (size_t l = 0; l < layers_.size(); ++l) {
      LayerWeights& w = layers_[l];
      Tensor kc = k_cache_[l].view(act, {cache_dims, cache_config_.page_size, Hk_, D_});
      Tensor vc = v_cache_[l].view(act, {cache_dims, cache_config_.page_size, Hk_, D_});
      // Attention: x = rmsnorm(h += o) (o: the previous layer's MLP output), q, k, v.
      if (l > 0 && fuse.qkv && fuse.norm_qkv) {
        backend_.add_rmsnorm_linear(*h, o, w.input_norm.tensor, eps_, plain, *h_alt, x,
                                    w.qkv_proj.tensor, w.qkv_bias.tensor, qkv);
        std::swap(h, h_alt);
      } else {
        if (l == 0) {
          backend_.rmsnorm(*h, w.input_norm.tensor, eps_, plain, x);
        } else {
          backend_.add_rmsnorm(*h, o, w.input_norm.tensor, eps_, plain, x);
        }
        if (fuse.qkv) backend_.linear(x, w.qkv_proj.tensor, w.qkv_bias.tensor, qkv);
      }
      if (fuse.qkv) {
        backend_.qkv_norm_rope_write(qkv, w.q_norm.tensor, w.k_norm.tensor, eps_, plain, rope_,
                                     meta, q3, k3, v3, kc, vc);
      } else {  // the same rows of the fused weight, one linear each
        const Tensor& wqkv = w.qkv_proj.tensor;
        const Tensor& bqkv = w.qkv_bias.tensor;
        auto part = [&](const Tensor& t, int64_t begin, int64_t count) {
          return t.empty() ? Tensor() : t.rows(begin, count);
        };
        backend_.linear(x, part(wqkv, 0, Hq_ * D_), part(bqkv, 0, Hq_ * D_), q);
        backend_.linear(x, part(wqkv, Hq_ * D_, Hk_ * D_), part(bqkv, Hq_ * D_, Hk_ * D_), k);
        backend_.linear(x, part(wqkv, (Hq_ + Hk_) * D_, Hk_ * D_),
                        part(bqkv, (Hq_ + Hk_) * D_, Hk_ * D_), v);
        backend_.qk_norm_rope(q3, k3, w.q_norm.tensor, w.k_norm.tensor, eps_, plain, rope_, meta);
        backend_.kv_write(k3, v3, kc, vc, meta);
      }
      backend_.paged_attention(q3, kc, vc, scale, meta, attn3);
      backend_.linear(attn, w.o_proj.tensor, w.o_bias.tensor, o);
      // MLP: x = rmsnorm(h += o), silu(x · gate) * (x · up), then down.
      if (fuse.norm_mlp && fuse.silu) {
        backend_.add_rmsnorm_linear_silu_mul(*h, o, w.post_norm.tensor, eps_, plain, *h_alt, x,
                                             w.gate_up.tensor, gate_up, mlp_act);
        std::swap(h, h_alt);
      } else if (fuse.norm_mlp) {
        backend_.add_rmsnorm_linear(*h, o, w.post_norm.tensor, eps_, plain, *h_alt, x,
                                    w.gate_up.tensor, Tensor(), gate_up);
        std::swap(h, h_alt);
        backend_.silu_mul(gate_up, mlp_act);
      } else {
        backend_.add_rmsnorm(*h, o, w.post_norm.tensor, eps_, plain, x);
        if (fuse.silu) {
          backend_.linear_silu_mul(x, w.gate_up.tensor, gate_up, mlp_act);
        } else {
          backend_.linear(x, w.gate_up.tensor, Tensor(), gate_up);
          backend_.silu_mul(gate_up, mlp_act);
        }
      }
      backend_.linear(mlp_act, w.down_proj.tensor, Tensor(), o);
    }
    backend_.add_rmsnorm(*h, o, final_norm_.tensor, eps_, plain, x);  // h += the last MLP
    if (R == 0) return logits;
    Tensor x_rows = ws_.x_rows.view(act, {R, H_});
    backend_.gather_rows(x, meta, x_rows);
    const Tensor& head = config_.tie_word_embeddings ? embed_.tensor : lm_head_.tensor;
    backend_.linear(x_rows, head, Tensor(), logits);
    return logits;
  }

  void reset_state(int32_t) override {}
  void save_checkpoint(int32_t, int32_t) override {}
  void load_checkpoint(int32_t, int32_t) override {}

  bool supports_graphs() const override { return backend_.supports_graphs(); }
  void reserve(int64_t max_tokens, int64_t max_logit_rows) override {
    ws_.reserved = false;
    if (max_tokens == 0 && max_logit_rows == 0) return;  // ends the reservation
    ensure_workspace(max_tokens, max_logit_rows);
    ws_.reserved = true;
  }

 private:
  void ensure_workspace(int64_t T, int64_t R) {
    SYV_CHECK(!ws_.reserved || (T <= ws_.tokens && R <= ws_.rows))
        << "qwen3 forward of " << T << " tokens / " << R << " logits rows exceeds reserve("
        << ws_.tokens << ", " << ws_.rows << "): buffers a captured CUDA graph uses would move";
    const size_t a = dtype_size(backend_.activation_dtype());
    if (T > ws_.tokens) {
      const size_t t = static_cast<size_t>(T);
      ws_.h = backend_.allocate(t * H_ * a);
      ws_.h2 = backend_.allocate(t * H_ * a);
      ws_.qkv = backend_.allocate(t * (Hq_ + 2 * Hk_) * D_ * a);
      ws_.x = backend_.allocate(t * H_ * a);
      ws_.q = backend_.allocate(t * Hq_ * D_ * a);
      ws_.k = backend_.allocate(t * Hk_ * D_ * a);
      ws_.v = backend_.allocate(t * Hk_ * D_ * a);
      ws_.attn = backend_.allocate(t * Hq_ * D_ * a);
      ws_.o = backend_.allocate(t * H_ * a);
      ws_.gate_up = backend_.allocate(t * 2 * I_ * a);
      ws_.act = backend_.allocate(t * I_ * a);
      ws_.tokens = T;
    }
    if (R > ws_.rows || ws_.logits.data() == nullptr) {
      const size_t r = static_cast<size_t>(std::max<int64_t>(R, 1));
      ws_.x_rows = backend_.allocate(r * H_ * a);
      ws_.logits = backend_.allocate(r * V_ * sizeof(float));
      ws_.rows = static_cast<int64_t>(r);
    }
  }

  ModelConfig config_;
  Backend& backend_;
  int64_t H_ = 0, Hq_ = 0, Hk_ = 0, D_ = 0, I_ = 0, V_ = 0;
  float eps_ = 1e-6f;
  RopeParams rope_;
  Fusions fusions_ = fusions_from_env();
  int64_t parameters_ = 0;

  DeviceWeight embed_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  CacheConfig cache_config_;
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // per layer [num_pages, page_size, Hk, D]
  Workspace ws_;
};

}  // namespace

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
  spec.layer_kinds.assign(static_cast<size_t>(c.num_hidden_layers), LayerCacheKind::kPagedKV);
  spec.kv_bytes_per_token = c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim *
                            static_cast<int64_t>(dtype_size(kv_dtype));
  spec.state_bytes_per_seq = 0;
  return spec;
}

Result<std::unique_ptr<Model>> load_qwen3(const ModelConfig& config, const WeightStore* store,
                                          Backend& backend, const LoadOptions& options) {
  SYV_RETURN_IF_ERROR(validate_qwen3_config(config));
  auto model = std::make_unique<Qwen3Model>(config, backend);
  SYV_RETURN_IF_ERROR(model->load_weights(store, options.seed));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace syv
