#include "model/hybrid_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/log.h"
#include "model/config_checks.h"

namespace syv {

bool hybrid_layer_is_moe(const ModelConfig& c, int64_t l) {
  if (c.num_experts <= 0) return false;
  if (std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), l) != c.mlp_only_layers.end())
    return false;
  const int64_t step = std::max<int64_t>(c.decoder_sparse_step, 1);
  return (l + 1) % step == 0;
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

namespace {

GdnShape gdn_shape(const ModelConfig& c) {
  return {
      static_cast<int32_t>(c.linear_num_key_heads), static_cast<int32_t>(c.linear_num_value_heads),
      static_cast<int32_t>(c.linear_key_head_dim), static_cast<int32_t>(c.linear_value_head_dim)};
}

int64_t conv_state_floats(const ModelConfig& c) {
  return (c.linear_conv_kernel_dim - 1) * gdn_shape(c).conv_dim();
}
int64_t ssm_state_floats(const ModelConfig& c) {
  return c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim;
}

}  // namespace

CacheSpec hybrid_cache_spec(const ModelConfig& c, DType kv_dtype) {
  CacheSpec spec;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool full = c.layer_types[static_cast<size_t>(l)] == LayerType::kFullAttention;
    spec.layer_kinds.push_back(full ? LayerCacheKind::kPagedKV : LayerCacheKind::kRecurrentState);
    if (full) {
      spec.kv_bytes_per_token +=
          2 * c.num_key_value_heads * c.head_dim * static_cast<int64_t>(dtype_size(kv_dtype));
    } else {
      spec.state_bytes_per_seq += (conv_state_floats(c) + ssm_state_floats(c)) * 4;
    }
  }
  return spec;
}

namespace {

class HybridModel final : public Model {
 public:
  HybridModel(const ModelConfig& config, Backend& backend, HybridWeights weights, std::string name)
      : config_(config), backend_(backend), w_(std::move(weights)), name_(std::move(name)) {
    H_ = config.hidden_size;
    V_ = config.vocab_size;
    eps_ = static_cast<float>(config.rms_norm_eps);
    Hq_ = config.num_attention_heads;
    Hk_ = config.num_key_value_heads;
    D_ = config.head_dim;
    rope_.theta = config.rope_theta;
    rope_.rotary_dim = static_cast<int32_t>(config.head_dim * config.partial_rotary_factor);
    gdn_ = gdn_shape(config);
    K_ = config.linear_conv_kernel_dim;
    for (const HybridLayer& l : w_.layers) {
      if (l.type == LayerType::kFullAttention) {
        cache_index_.push_back(num_full_++);
      } else {
        cache_index_.push_back(num_linear_++);
      }
    }
    int64_t moe_layers = 0;
    for (const HybridLayer& l : w_.layers) moe_layers += l.mlp.moe;
    SYV_LOG(INFO) << name_ << ": " << w_.layers.size() << " layers (" << num_linear_
                  << " Gated DeltaNet, " << num_full_ << " gated attention, " << moe_layers
                  << " MoE), hidden " << H_ << ", vocab " << V_ << ", " << w_.parameters / 1e6
                  << "M parameters, " << w_.device_bytes / 1e6 << " MB on " << backend_.name()
                  << ", rotary dim " << rope_.rotary_dim << " of " << D_;
  }

  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override {
    return hybrid_cache_spec(config_, backend_.activation_dtype());
  }
  Backend& backend() override { return backend_; }
  const CacheConfig& cache_config() const override { return cache_; }

  Status allocate_cache(const CacheConfig& cache) override {
    if (num_full_ > 0 && (cache.page_size <= 0 || cache.num_pages <= 0)) {
      return Status::Error("cache config: page_size and num_pages must be positive, found " +
                           std::to_string(cache.page_size) + " and " +
                           std::to_string(cache.num_pages));
    }
    if (num_linear_ > 0 && cache.num_state_slots <= 0) {
      return Status::Error(
          "cache config: a hybrid model needs num_state_slots > 0 (one per "
          "running sequence), found " +
          std::to_string(cache.num_state_slots));
    }
    if (cache.num_checkpoints < 0) {
      return Status::Error("cache config: num_checkpoints must be >= 0, found " +
                           std::to_string(cache.num_checkpoints));
    }
    const DType act = backend_.activation_dtype();
    const size_t kv_bytes = static_cast<size_t>(std::max(cache.num_pages, 0)) *
                            std::max(cache.page_size, 0) * Hk_ * D_ * dtype_size(act);
    k_cache_.clear();
    v_cache_.clear();
    for (int64_t i = 0; i < num_full_; ++i) {
      k_cache_.push_back(backend_.allocate(kv_bytes));
      v_cache_.push_back(backend_.allocate(kv_bytes));
    }
    const size_t conv_bytes = static_cast<size_t>(conv_state_floats(config_)) * 4;
    const size_t ssm_bytes = static_cast<size_t>(ssm_state_floats(config_)) * 4;
    conv_.clear();
    ssm_.clear();
    conv_ckpt_.clear();
    ssm_ckpt_.clear();
    for (int64_t i = 0; i < num_linear_; ++i) {
      conv_.push_back(backend_.allocate(conv_bytes * cache.num_state_slots));
      ssm_.push_back(backend_.allocate(ssm_bytes * cache.num_state_slots));
      backend_.fill_zero(conv_.back().data(), conv_.back().bytes());
      backend_.fill_zero(ssm_.back().data(), ssm_.back().bytes());
      if (cache.num_checkpoints > 0) {
        conv_ckpt_.push_back(backend_.allocate(conv_bytes * cache.num_checkpoints));
        ssm_ckpt_.push_back(backend_.allocate(ssm_bytes * cache.num_checkpoints));
      }
    }
    cache_ = cache;
    allocated_ = true;
    SYV_LOG(INFO) << name_ << " cache: " << cache.num_pages << " pages x " << cache.page_size
                  << " tokens for " << num_full_ << " attention layers ("
                  << 2.0 * kv_bytes * num_full_ / 1e6 << " MB), " << cache.num_state_slots
                  << " state slots + " << cache.num_checkpoints << " checkpoints of "
                  << (conv_bytes + ssm_bytes) * num_linear_ / 1e3 << " kB each";
    return Status::Ok();
  }

  void reset_state(int32_t slot) override {
    check_slot(slot, cache_.num_state_slots, "state slot");
    const size_t cb = static_cast<size_t>(conv_state_floats(config_)) * 4;
    const size_t sb = static_cast<size_t>(ssm_state_floats(config_)) * 4;
    for (int64_t i = 0; i < num_linear_; ++i) {
      backend_.fill_zero(static_cast<char*>(conv_[i].data()) + slot * cb, cb);
      backend_.fill_zero(static_cast<char*>(ssm_[i].data()) + slot * sb, sb);
    }
  }
  void save_checkpoint(int32_t slot, int32_t checkpoint) override {
    check_slot(slot, cache_.num_state_slots, "state slot");
    check_slot(checkpoint, cache_.num_checkpoints, "checkpoint");
    copy_state(conv_, slot, conv_ckpt_, checkpoint, ssm_, ssm_ckpt_);
  }
  void load_checkpoint(int32_t checkpoint, int32_t slot) override {
    check_slot(slot, cache_.num_state_slots, "state slot");
    check_slot(checkpoint, cache_.num_checkpoints, "checkpoint");
    copy_state(conv_ckpt_, checkpoint, conv_, slot, ssm_ckpt_, ssm_);
  }

  Tensor forward(const Batch& batch) override {
    SYV_CHECK(allocated_) << "allocate_cache() must be called before forward()";
    const int64_t T = batch.num_tokens();
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    for (int64_t t = 0; t < T; ++t) {
      SYV_CHECK(batch.token_ids[t] >= 0 && batch.token_ids[t] < V_)
          << "token id " << batch.token_ids[t] << " at row " << t << " outside [0, " << V_ << ")";
    }
    if (num_linear_ > 0) {
      SYV_CHECK_EQ(static_cast<int32_t>(batch.state_slots.size()), batch.num_seqs())
          << "a hybrid model needs Batch::state_slots, one per sequence";
      // A sequence whose new tokens start at position 0 has an empty prefix: its state is zero.
      for (int32_t s = 0; s < batch.num_seqs(); ++s) {
        check_slot(batch.state_slots[s], cache_.num_state_slots, "Batch::state_slots");
        if (batch.seq_len(s) > 0 && batch.positions[batch.seq_starts[s]] == 0) {
          reset_state(batch.state_slots[s]);
        }
      }
    }
    BatchMeta meta = backend_.prepare_batch(batch, cache_.page_size);
    next_scratch_ = 0;
    Tensor logits = scratch(DType::F32, {std::max<int64_t>(R, 1), V_})
                        .rows(0, R);  // R may be 0 (a chunk without logits)
    if (T == 0) return logits;
    const DType act = backend_.activation_dtype();
    Tensor h = scratch(act, {T, H_});
    Tensor x = scratch(act, {T, H_});
    Tensor o = scratch(act, {T, H_});

    backend_.embedding(w_.embed.tensor, meta.token_ids, h);
    backend_.rmsnorm(h, w_.layers[0].input_norm.tensor, eps_, NormKind::kOnePlus, x);
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      const HybridLayer& layer = w_.layers[l];
      const size_t mark = next_scratch_;
      if (layer.type == LayerType::kLinearAttention) {
        gdn_forward(layer.gdn, cache_index_[l], x, meta, o);
      } else {
        attention_forward(layer.attn, cache_index_[l], x, meta, o);
      }
      backend_.add_rmsnorm(h, o, layer.post_norm.tensor, eps_, NormKind::kOnePlus, x);
      if (layer.mlp.moe) {
        moe_forward(layer.mlp, x, o);
      } else {
        dense_mlp(layer.mlp.gate_up.tensor, layer.mlp.down.tensor, x, o);
      }
      const Tensor& next_norm =
          l + 1 < w_.layers.size() ? w_.layers[l + 1].input_norm.tensor : w_.final_norm.tensor;
      backend_.add_rmsnorm(h, o, next_norm, eps_, NormKind::kOnePlus, x);
      next_scratch_ = mark;  // per-layer buffers are reused by the next layer
    }
    if (R == 0) return logits;
    Tensor x_rows = scratch(act, {R, H_});
    backend_.gather_rows(x, meta, x_rows);
    const Tensor& head = w_.lm_head.tensor.empty() ? w_.embed.tensor : w_.lm_head.tensor;
    backend_.linear(x_rows, head, Tensor(), logits);
    return logits;
  }

 private:
  // One Gated DeltaNet layer: x [T, H] -> out [T, H].
  void gdn_forward(const GdnWeights& w, int64_t li, const Tensor& x, const BatchMeta& meta,
                   Tensor& out) {
    const DType act = backend_.activation_dtype();
    const int64_t T = x.dim(0), C = gdn_.conv_dim(), Vd = gdn_.value_dim();
    const int64_t Hv = gdn_.num_v_heads, dv = gdn_.v_head_dim;
    Tensor qkv = scratch(act, {T, C});
    Tensor z = scratch(act, {T, Vd});
    Tensor ba = scratch(act, {T, 2 * Hv});
    Tensor mixed = scratch(act, {T, C});
    Tensor core = scratch(act, {T, Vd});
    Tensor normed = scratch(act, {T, Vd});
    backend_.linear(x, w.qkv.tensor, Tensor(), qkv);
    backend_.linear(x, w.z.tensor, Tensor(), z);
    backend_.linear(x, w.ba.tensor, Tensor(), ba);
    const int64_t slots = cache_.num_state_slots;
    Tensor conv_state = conv_[li].view(DType::F32, {slots, K_ - 1, C});
    Tensor ssm_state = ssm_[li].view(DType::F32, {slots, Hv, gdn_.k_head_dim, dv});
    backend_.causal_conv1d_silu(qkv, w.conv.tensor, conv_state, meta, mixed);
    backend_.gated_delta_rule(mixed, ba, w.a_log.tensor, w.dt_bias.tensor, gdn_, ssm_state, meta,
                              core);
    Tensor core_rows = core.reshape({T * Hv, dv});
    Tensor z_rows = z.reshape({T * Hv, dv});
    Tensor normed_rows = normed.reshape({T * Hv, dv});
    backend_.gated_rmsnorm(core_rows, z_rows, w.norm.tensor, eps_, normed_rows);
    backend_.linear(normed, w.out.tensor, Tensor(), out);
  }

  // One gated full-attention layer: x [T, H] -> out [T, H].
  void attention_forward(const GatedAttnWeights& w, int64_t ai, const Tensor& x,
                         const BatchMeta& meta, Tensor& out) {
    const DType act = backend_.activation_dtype();
    const int64_t T = x.dim(0);
    Tensor q = scratch(act, {T, Hq_ * D_});
    Tensor gate = scratch(act, {T, Hq_ * D_});
    Tensor k = scratch(act, {T, Hk_ * D_});
    Tensor v = scratch(act, {T, Hk_ * D_});
    Tensor attn = scratch(act, {T, Hq_ * D_});
    Tensor gated = scratch(act, {T, Hq_ * D_});
    backend_.linear(x, w.q.tensor, Tensor(), q);
    backend_.linear(x, w.gate.tensor, Tensor(), gate);
    backend_.linear(x, w.k.tensor, Tensor(), k);
    backend_.linear(x, w.v.tensor, Tensor(), v);
    Tensor q3 = q.reshape({T, Hq_, D_});
    Tensor k3 = k.reshape({T, Hk_, D_});
    Tensor v3 = v.reshape({T, Hk_, D_});
    Tensor attn3 = attn.reshape({T, Hq_, D_});
    backend_.qk_norm_rope(q3, k3, w.q_norm.tensor, w.k_norm.tensor, eps_, NormKind::kOnePlus, rope_,
                          meta);
    Tensor kc = k_cache_[ai].view(act, {cache_.num_pages, cache_.page_size, Hk_, D_});
    Tensor vc = v_cache_[ai].view(act, {cache_.num_pages, cache_.page_size, Hk_, D_});
    backend_.kv_write(k3, v3, kc, vc, meta);
    backend_.paged_attention(q3, kc, vc, 1.0f / std::sqrt(static_cast<float>(D_)), meta, attn3);
    backend_.sigmoid_mul(attn, gate, gated);
    backend_.linear(gated, w.o.tensor, Tensor(), out);
  }

  void dense_mlp(const Tensor& gate_up_w, const Tensor& down_w, const Tensor& x, Tensor& out) {
    const DType act = backend_.activation_dtype();
    const int64_t T = x.dim(0), I = down_w.dim(1);
    Tensor gate_up = scratch(act, {T, 2 * I});
    Tensor a = scratch(act, {T, I});
    backend_.linear(x, gate_up_w, Tensor(), gate_up);
    backend_.silu_mul(gate_up, a);
    backend_.linear(a, down_w, Tensor(), out);
  }

  // Routed experts + sigmoid-gated shared expert: out = moe(x) + sigmoid(g · x) * shared(x).
  void moe_forward(const MlpWeights& w, const Tensor& x, Tensor& out) {
    const DType act = backend_.activation_dtype();
    const int64_t T = x.dim(0), E = w.router.tensor.dim(0);
    const int32_t k = static_cast<int32_t>(config_.num_experts_per_tok);
    Tensor router_logits = scratch(DType::F32, {T, E});
    Tensor ids = scratch(DType::I32, {T, k});
    Tensor weights = scratch(DType::F32, {T, k});
    backend_.linear(x, w.router.tensor, Tensor(), router_logits);
    backend_.moe_topk(router_logits, k, config_.norm_topk_prob, ids, weights);
    backend_.moe_experts(x, ids, weights, w.experts_gate_up.tensor, w.experts_down.tensor, out);
    Tensor shared = scratch(act, {T, H_});
    dense_mlp(w.shared_gate_up.tensor, w.shared_down.tensor, x, shared);
    Tensor g = scratch(act, {T, 1});
    backend_.linear(x, w.shared_gate.tensor, Tensor(), g);
    backend_.sigmoid_mul(shared, g, shared);
    backend_.add(out, shared, out);
  }

  // Scratch buffers: the i-th request of a forward gets buffer i, grown when too small.
  Tensor scratch(DType dtype, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const size_t bytes = std::max<size_t>(static_cast<size_t>(n) * dtype_size(dtype), 64);
    if (next_scratch_ == scratch_.size()) scratch_.emplace_back();
    DeviceBuffer& buf = scratch_[next_scratch_++];
    if (buf.bytes() < bytes) buf = backend_.allocate(bytes);
    return Tensor(buf.data(), dtype, dims);
  }

  static void check_slot(int32_t i, int32_t n, const char* what) {
    SYV_CHECK(i >= 0 && i < n) << what << " " << i << " outside [0, " << n << ")";
  }

  void copy_state(std::vector<DeviceBuffer>& conv_src, int32_t src,
                  std::vector<DeviceBuffer>& conv_dst, int32_t dst,
                  std::vector<DeviceBuffer>& ssm_src, std::vector<DeviceBuffer>& ssm_dst) {
    const size_t cb = static_cast<size_t>(conv_state_floats(config_)) * 4;
    const size_t sb = static_cast<size_t>(ssm_state_floats(config_)) * 4;
    for (int64_t i = 0; i < num_linear_; ++i) {
      backend_.copy(static_cast<char*>(conv_dst[i].data()) + dst * cb,
                    static_cast<const char*>(conv_src[i].data()) + src * cb, cb);
      backend_.copy(static_cast<char*>(ssm_dst[i].data()) + dst * sb,
                    static_cast<const char*>(ssm_src[i].data()) + src * sb, sb);
    }
  }

  ModelConfig config_;
  Backend& backend_;
  HybridWeights w_;
  std::string name_;
  int64_t H_ = 0, V_ = 0, Hq_ = 0, Hk_ = 0, D_ = 0, K_ = 0;
  float eps_ = 1e-6f;
  RopeParams rope_;
  GdnShape gdn_;
  std::vector<int64_t> cache_index_;  // per layer: index among its kind (KV or state buffers)
  int64_t num_full_ = 0, num_linear_ = 0;

  CacheConfig cache_;
  bool allocated_ = false;
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // per attention layer [pages, page, Hk, D]
  std::vector<DeviceBuffer> conv_, ssm_;  // per GDN layer, [slots, K-1, C] / [slots, Hv, dk, dv]
  std::vector<DeviceBuffer> conv_ckpt_, ssm_ckpt_;  // same, [checkpoints, ...]
  std::vector<DeviceBuffer> scratch_;
  size_t next_scratch_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_hybrid_model(const ModelConfig& config, Backend& backend,
                                         HybridWeights weights, const std::string& name) {
  return std::make_unique<HybridModel>(config, backend, std::move(weights), name);
}

Result<DeviceWeight> load_reshaped(WeightLoader& loader, const WeightSpec& spec,
                                   std::initializer_list<int64_t> dims) {
  // WeightLoader uploads 1-D / 2-D weights: upload as [numel / last, last], then view as `dims`.
  DType dtype = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> values, loader.read_f32(spec, &dtype));
  const int64_t last = spec.shape.back();
  DeviceWeight w = loader.upload({spec.numel() / last, last}, dtype, values.data());
  w.tensor = w.tensor.reshape(dims);
  return w;
}

Status load_gated_attention(WeightLoader& loader, const ModelConfig& c, const std::string& p,
                            GatedAttnWeights* out) {
  const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const int64_t D = c.head_dim;
  DType dtype = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> qg,
                       loader.read_f32({p + "self_attn.q_proj.weight", {2 * Hq * D, H}}, &dtype));
  std::vector<float> q(static_cast<size_t>(Hq * D * H)), gate(q.size());
  for (int64_t h = 0; h < Hq; ++h) {
    const float* src = qg.data() + h * 2 * D * H;
    std::copy_n(src, D * H, q.data() + h * D * H);
    std::copy_n(src + D * H, D * H, gate.data() + h * D * H);
  }
  out->q = loader.upload({Hq * D, H}, dtype, q.data());
  out->gate = loader.upload({Hq * D, H}, dtype, gate.data());
  SYV_ASSIGN_OR_RETURN(out->k, loader.load({p + "self_attn.k_proj.weight", {Hk * D, H}}));
  SYV_ASSIGN_OR_RETURN(out->v, loader.load({p + "self_attn.v_proj.weight", {Hk * D, H}}));
  SYV_ASSIGN_OR_RETURN(out->o, loader.load({p + "self_attn.o_proj.weight", {H, Hq * D}}));
  SYV_ASSIGN_OR_RETURN(out->q_norm,
                       loader.load({p + "self_attn.q_norm.weight", {D}, WeightInit::kZero}));
  SYV_ASSIGN_OR_RETURN(out->k_norm,
                       loader.load({p + "self_attn.k_norm.weight", {D}, WeightInit::kZero}));
  return Status::Ok();
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

Status load_dense_mlp(WeightLoader& loader, int64_t H, int64_t I, const std::string& p,
                      MlpWeights* out) {
  DType gd = DType::BF16, ud = DType::BF16;
  SYV_ASSIGN_OR_RETURN(std::vector<float> gate,
                       loader.read_f32({p + "gate_proj.weight", {I, H}}, &gd));
  SYV_ASSIGN_OR_RETURN(std::vector<float> up, loader.read_f32({p + "up_proj.weight", {I, H}}, &ud));
  gate.insert(gate.end(), up.begin(), up.end());
  out->gate_up = loader.upload({2 * I, H}, gd, gate.data());
  SYV_ASSIGN_OR_RETURN(out->down, loader.load({p + "down_proj.weight", {H, I}}));
  return Status::Ok();
}

}  // namespace syv
