#include "model/decoder.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace syv {

GdnShape gdn_shape(const ModelConfig& c) {
  return {
      static_cast<int32_t>(c.linear_num_key_heads), static_cast<int32_t>(c.linear_num_value_heads),
      static_cast<int32_t>(c.linear_key_head_dim), static_cast<int32_t>(c.linear_value_head_dim)};
}

namespace {

class DecoderModel final : public Model {
 public:
  DecoderModel(const ModelConfig& config, Backend& backend, DecoderWeights weights,
               DecoderOptions options)
      : config_(config),
        backend_(backend),
        w_(std::move(weights)),
        o_(std::move(options)),
        ws_(backend, o_.name) {
    H_ = config.hidden_size;
    V_ = config.vocab_size;
    eps_ = static_cast<float>(config.rms_norm_eps);
    attn_.q_heads = config.num_attention_heads;
    attn_.kv_heads = config.num_key_value_heads;
    attn_.head_dim = config.head_dim;
    attn_.gated = o_.gated_attention;
    attn_.rope.theta = config.rope_theta;
    attn_.rope.rotary_dim =
        o_.rotary_dim > 0 ? o_.rotary_dim : static_cast<int32_t>(config.head_dim);
    routing_.top_k = static_cast<int32_t>(config.num_experts_per_tok);
    routing_.renormalize = config.norm_topk_prob;
    SYV_CHECK_EQ(o_.cache.layer_kinds.size(), w_.layers.size() + (w_.mtp ? 1 : 0))
        << o_.name << ": the cache spec and the weights disagree on the layer count";
    int64_t full = 0, linear = 0, moe = 0;
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      const bool attention = w_.layers[l].type == LayerType::kFullAttention;
      SYV_CHECK(attention == (o_.cache.layer_kinds[l] == LayerCacheKind::kPagedKV))
          << o_.name << ": layer " << l << " has the other cache kind in the spec";
      full += attention;
      linear += !attention;
      moe += w_.layers[l].mlp.moe;
    }
    if (linear > 0) gdn_ = gdn_shape(config);
    if (w_.mtp) {
      SYV_CHECK(o_.cache.layer_kinds.back() == LayerCacheKind::kPagedKV && o_.gated_attention)
          << o_.name << ": the MTP head needs a last paged-KV layer and gated attention";
      MtpShape shape{H_, V_, eps_, attn_, routing_};
      mtp_ = std::make_unique<MtpHead>(backend_, *w_.mtp, w_.embed,
                                       w_.lm_head.empty() ? w_.embed : w_.lm_head, shape, o_.tp);
    }
    SYV_LOG(INFO) << o_.name << ": " << w_.layers.size() << " layers (" << full << " "
                  << (o_.gated_attention ? "gated " : "") << "attention, " << linear
                  << " Gated DeltaNet, " << moe << " MoE), hidden " << H_ << ", heads "
                  << attn_.q_heads << "/" << attn_.kv_heads << " x " << attn_.head_dim << ", vocab "
                  << V_ << ", " << w_.parameters / 1e6 << "M parameters, " << w_.device_bytes / 1e6
                  << " MB on " << backend_.name()
                  << (w_.lm_head.tensor.empty() ? " (tied embeddings)" : "")
                  << (w_.mtp ? std::string(", MTP head (") +
                                   (w_.mtp->layer.mlp.moe ? "MoE" : "dense") +
                                   " MLP, its K/V in cache layer " +
                                   std::to_string(w_.layers.size()) + ")"
                             : std::string());
  }

  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override { return o_.cache; }
  Backend& backend() override { return backend_; }

  void bind_cache(CacheStore& store) override {
    const CacheSpec& s = store.spec();
    // The store may keep K/V and the delta-rule state in other dtypes (CacheConfig::kv_dtype,
    // state_dtype): compare the shapes in the declared ones.
    const DType kv_declared =
        o_.cache.kv_layers.empty() ? DType::F32 : o_.cache.kv_layers.front().dtype;
    const CacheSpec declared = s.with_kv_dtype(kv_declared).with_state_dtype(DType::F32);
    SYV_CHECK(s.layer_kinds == o_.cache.layer_kinds &&
              declared.kv_bytes_per_token == o_.cache.kv_bytes_per_token &&
              declared.state_bytes_per_seq == o_.cache.state_bytes_per_seq)
        << o_.name << ": bind_cache() with a store built from another model's cache spec";
    SYV_CHECK(&store.backend() == &backend_)
        << o_.name << ": bind_cache() with a store on another backend";
    store_ = &store;
  }

  bool supports_graphs() const override {
    return backend_.supports_graphs() &&
           (!o_.cache.has_recurrent_state() || backend_.supports_hybrid_ops());
  }
  void reserve(int64_t max_tokens, int64_t max_logit_rows) override {
    if (max_tokens == 0 && max_logit_rows == 0) {
      ws_.reserve(0);  // ends the reservation
      return;
    }
    tokens_ = std::max(tokens_, max_tokens);
    rows_ = std::max(rows_, max_logit_rows);
    ws_.reserve(workspace_bytes(tokens_, rows_));
  }

  bool has_mtp() const override { return mtp_ != nullptr; }
  void reserve_mtp(int64_t max_tokens, int64_t max_logit_rows) override {
    if (mtp_ != nullptr) mtp_->reserve(max_tokens, max_logit_rows);
  }
  void mtp_forward(const Batch& batch, const Tensor& hidden, Outputs& out) override {
    SYV_CHECK(mtp_ != nullptr) << o_.name << ": mtp_forward() without an MTP head";
    SYV_CHECK(store_ != nullptr) << o_.name << ": bind_cache() must be called before mtp_forward()";
    check_tokens(batch);
    const int32_t layer = static_cast<int32_t>(w_.layers.size());
    mtp_->forward(batch, store_->config().page_size, hidden, store_->kv_view(layer), out.logits,
                  out.hidden);
    out.token_hidden = Tensor();
  }

  using Model::forward;
  void forward(const Batch& batch, Outputs& out) override {
    SYV_CHECK(store_ != nullptr) << o_.name << ": bind_cache() must be called before forward()";
    const int64_t T = batch.num_tokens();
    const int64_t R = static_cast<int64_t>(batch.logit_rows.size());
    check_tokens(batch);
    if (o_.cache.has_recurrent_state()) {
      SYV_CHECK_EQ(static_cast<int32_t>(batch.state_slots.size()), batch.num_seqs())
          << "a hybrid model needs Batch::state_slots, one per sequence";
      const int32_t slots = store_->config().num_state_slots;
      for (int32_t slot : batch.state_slots) {
        SYV_CHECK(slot >= -1 && slot < slots)  // -1: a padding sequence (batch.h)
            << "Batch::state_slots " << slot << " outside [0, " << slots << ")";
      }
    }
    const CacheConfig& cache = store_->config();
    BatchMeta meta = backend_.prepare_batch(batch, cache.page_size);
    SYV_CHECK(!ws_.reserved() || (T <= tokens_ && R <= rows_))
        << o_.name << " forward of " << T << " tokens / " << R << " logits rows exceeds reserve("
        << tokens_ << ", " << rows_ << "): buffers a captured CUDA graph uses would move";
    tokens_ = std::max(tokens_, T);
    rows_ = std::max(rows_, R);
    ws_.begin(workspace_bytes(T, R));
    const DType act = backend_.activation_dtype();
    Tensor logits = ws_.take(DType::F32, {std::max<int64_t>(R, 1), V_}).rows(0, R);
    Tensor x_rows = ws_.take(act, {std::max<int64_t>(R, 1), H_}).rows(0, R);
    out.logits = logits;
    out.hidden = x_rows;
    out.token_hidden = Tensor();
    if (T == 0) return;
    Tensor h_a = ws_.take(act, {T, H_});
    Tensor h_b = ws_.take(act, {T, H_});
    Tensor x = ws_.take(act, {T, H_});
    out.token_hidden = x;
    Tensor o = ws_.take(act, {T, H_});

    BlockContext c{backend_, ws_, meta, act, eps_, o_.norm, fusions_, o_.tp};
    Residual res{&h_a, &h_b, Tensor()};
    backend_.embedding(w_.embed.tensor, meta.token_ids, *res.h);
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      const DecoderLayer& layer = w_.layers[l];
      const int32_t li = static_cast<int32_t>(l);
      const int64_t mark = ws_.mark();
      if (layer.type == LayerType::kFullAttention) {
        attention_block(c, res, layer.input_norm.tensor, layer.attn, attn_, store_->kv_view(li), x,
                        o);
      } else {
        gdn_block(c, res, layer.input_norm.tensor, layer.gdn, gdn_, store_->state_view(li), x, o);
      }
      res.pending = o;
      ws_.release(mark);
      mlp_block(c, res, layer.post_norm.tensor, layer.mlp, routing_, x, o);
      res.pending = o;
      ws_.release(mark);
    }
    add_norm(c, res, w_.final_norm.tensor, x);
    if (R == 0) return;
    backend_.gather_rows(x, meta, x_rows);
    const Weight& head = w_.lm_head.empty() ? w_.embed : w_.lm_head;
    backend_.linear(x_rows, head, Tensor(), logits);
  }

 private:
  void check_tokens(const Batch& batch) const {
    for (int32_t t = 0; t < batch.num_tokens(); ++t) {
      SYV_CHECK(batch.token_ids[t] >= 0 && batch.token_ids[t] < V_)
          << "token id " << batch.token_ids[t] << " at row " << t << " outside [0, " << V_ << ")";
    }
  }

  // Bytes forward() takes from the workspace at T tokens / R logits rows: the persistent tensors,
  // then the largest block's scratch (each block's scratch is released when it ends).
  int64_t workspace_bytes(int64_t T, int64_t R) const {
    const DType act = backend_.activation_dtype();
    const int64_t rows = std::max<int64_t>(R, 1);
    int64_t bytes = Workspace::bytes(DType::F32, rows * V_) + Workspace::bytes(act, rows * H_);
    if (T == 0) return bytes;
    bytes += 4 * Workspace::bytes(act, T * H_);  // h, h_alt, x, o
    int64_t block = 0;
    for (const DecoderLayer& layer : w_.layers) {
      block =
          std::max(block, layer.type == LayerType::kFullAttention ? attention_bytes(attn_, act, T)
                                                                  : gdn_bytes(gdn_, act, T));
      block = std::max(block, mlp_bytes(layer.mlp, routing_, act, T, H_));
    }
    return bytes + block;
  }

  ModelConfig config_;
  Backend& backend_;
  DecoderWeights w_;
  DecoderOptions o_;
  int64_t H_ = 0, V_ = 0;
  float eps_ = 1e-6f;
  AttentionShape attn_;
  GdnShape gdn_;
  MoeRouting routing_;
  Fusions fusions_ = fusions_from_env();
  Workspace ws_;
  int64_t tokens_ = 0, rows_ = 0;  // the largest forward (or reserve) seen: reserve() covers it
  CacheStore* store_ = nullptr;
  std::unique_ptr<MtpHead> mtp_;  // when w_.mtp
};

}  // namespace

std::unique_ptr<Model> make_decoder_model(const ModelConfig& config, Backend& backend,
                                          DecoderWeights weights, DecoderOptions options) {
  return std::make_unique<DecoderModel>(config, backend, std::move(weights), std::move(options));
}

}  // namespace syv
