#include "model/tensor_parallel.h"

#include <barrier>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/log.h"
#include "model/hybrid_layers.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "model/qwen3_next.h"

namespace syv {

// ---- HostTpGroup ------------------------------------------------------------------------------

struct HostTpGroup::Shared {
  explicit Shared(int n) : size(n), sync(n), partials(static_cast<size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<std::vector<float>> partials;  // [rank] the rank's t, on the host
};

class HostTpGroup::Comm final : public TpComm {
 public:
  Comm(Shared& shared, int rank) : s_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.size; }
  void all_reduce_sum(Backend& backend, Tensor& t) override {
    SYV_CHECK(t.dtype == DType::F32) << "HostTpGroup: all_reduce_sum of " << dtype_name(t.dtype)
                                     << " (the simulated ranks reduce f32 activations)";
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<float>& mine = s_.partials[static_cast<size_t>(rank_)];
    mine.resize(n);
    backend.download(mine.data(), t.data, n * sizeof(float));
    s_.sync.arrive_and_wait();  // every rank's partial is on the host
    std::vector<float> sum(n, 0.f);
    for (const std::vector<float>& p : s_.partials) {  // rank order: the same bits everywhere
      SYV_CHECK_EQ(p.size(), n) << "HostTpGroup: ranks reduce tensors of different sizes";
      for (size_t i = 0; i < n; ++i) sum[i] += p[i];
    }
    s_.sync.arrive_and_wait();  // every rank has read every partial
    backend.upload(t.data, sum.data(), n * sizeof(float));
  }

 private:
  Shared& s_;
  int rank_;
};

HostTpGroup::HostTpGroup(int size) : shared_(std::make_unique<Shared>(size)) {
  SYV_CHECK_GE(size, 1) << "HostTpGroup of " << size << " ranks";
  for (int r = 0; r < size; ++r) comms_.push_back(std::make_unique<Comm>(*shared_, r));
}
HostTpGroup::~HostTpGroup() = default;
int HostTpGroup::size() const {
  return shared_->size;
}
TpComm& HostTpGroup::comm(int rank) {
  SYV_CHECK(rank >= 0 && rank < shared_->size) << "HostTpGroup: rank " << rank;
  return *comms_[static_cast<size_t>(rank)];
}
std::string HostTpGroup::describe() const {
  return std::to_string(shared_->size) +
         " ranks simulated in this process (a barrier and a sum in rank order on the host)";
}

// ---- the split --------------------------------------------------------------------------------

Status check_tensor_parallel(const ModelConfig& c, int n) {
  const std::string size = std::to_string(n);
  if (n < 1) return Status::Error("tensor parallel size: expected >= 1, found " + size);
  if (c.quant.method != QuantMethod::kNone) {
    return Status::Error(
        "tensor parallelism: pre-quantized weights (quantization_config) are not split yet");
  }
  auto divides = [&](int64_t value, const char* field) -> Status {
    if (value % n == 0) return Status::Ok();
    return Status::Error("config.json: " + std::string(field) + " = " + std::to_string(value) +
                         " is not divisible by the tensor parallel size " + size);
  };
  SYV_RETURN_IF_ERROR(divides(c.num_attention_heads, "num_attention_heads"));
  SYV_RETURN_IF_ERROR(divides(c.intermediate_size, "intermediate_size"));
  if (c.is_moe()) {  // every expert (and the shared one) split by its intermediate size
    SYV_RETURN_IF_ERROR(divides(c.moe_intermediate_size, "moe_intermediate_size"));
    SYV_RETURN_IF_ERROR(
        divides(c.shared_expert_intermediate_size, "shared_expert_intermediate_size"));
  }
  auto split_or_replicated = [&](int64_t value, const char* field) -> Status {
    if (value > 0 && (value % n == 0 || n % value == 0)) return Status::Ok();
    return Status::Error("config.json: " + std::string(field) + " = " + std::to_string(value) +
                         " and the tensor parallel size " + size +
                         ": one must divide the other (the heads are split, or replicated when "
                         "fewer than the ranks)");
  };
  SYV_RETURN_IF_ERROR(split_or_replicated(c.num_key_value_heads, "num_key_value_heads"));
  if (c.is_hybrid()) {  // Gated DeltaNet: value heads split, key heads split or replicated
    SYV_RETURN_IF_ERROR(divides(c.linear_num_value_heads, "linear_num_value_heads"));
    SYV_RETURN_IF_ERROR(split_or_replicated(c.linear_num_key_heads, "linear_num_key_heads"));
  }
  return Status::Ok();
}

ModelConfig tensor_parallel_rank_config(const ModelConfig& c, int n) {
  ModelConfig r = c;
  r.num_attention_heads = c.num_attention_heads / n;
  r.num_key_value_heads = std::max<int64_t>(1, c.num_key_value_heads / n);
  r.intermediate_size = c.intermediate_size / n;
  r.moe_intermediate_size = c.moe_intermediate_size / n;
  r.shared_expert_intermediate_size = c.shared_expert_intermediate_size / n;
  if (c.is_hybrid()) {
    r.linear_num_key_heads = std::max<int64_t>(1, c.linear_num_key_heads / n);
    r.linear_num_value_heads = c.linear_num_value_heads / n;
  }
  return r;
}

namespace {

// A copy of rows [r0, r0 + rows) x columns [c0, c0 + cols) of `t` (1-D: elements [c0, c0 +
// cols), rows must be 1), from `src` into a new buffer of `dst`.
DeviceWeight copy_block(const Tensor& t, Backend& src, int64_t r0, int64_t rows, int64_t c0,
                        int64_t cols, Backend& dst) {
  const size_t es = dtype_size(t.dtype);
  const int64_t width = t.ndim >= 2 ? t.dim(-1) : t.numel();
  std::vector<unsigned char> host(t.bytes());
  src.download(host.data(), t.data, host.size());
  std::vector<unsigned char> part(static_cast<size_t>(rows * cols) * es);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(part.data() + static_cast<size_t>(r * cols) * es,
                host.data() + static_cast<size_t>((r0 + r) * width + c0) * es,
                static_cast<size_t>(cols) * es);
  }
  DeviceWeight w;
  w.buffer = dst.allocate(part.size());
  dst.upload(w.buffer.data(), part.data(), part.size());
  w.set_dense(t.ndim >= 2 ? w.buffer.view(t.dtype, {rows, cols}) : w.buffer.view(t.dtype, {cols}));
  return w;
}
DeviceWeight copy_all(const DeviceWeight& w, Backend& src, Backend& dst) {
  if (w.empty()) return DeviceWeight();
  const Tensor& t = w.tensor;
  SYV_CHECK_LE(t.ndim, 2) << "copy_all: a " << t.ndim << "-D weight (expert stacks: shard_moe)";
  return t.ndim >= 2 ? copy_block(t, src, 0, t.dim(0), 0, t.dim(1), dst)
                     : copy_block(t, src, 0, 1, 0, t.numel(), dst);
}
// Rows `ranges` (begin, count) of a 2-D weight (or elements of a 1-D one), stacked.
DeviceWeight copy_rows(const DeviceWeight& w, Backend& src,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges, Backend& dst) {
  if (w.empty()) return DeviceWeight();
  const Tensor& t = w.tensor;
  SYV_CHECK_LE(t.ndim, 2) << "copy_rows: a " << t.ndim << "-D weight (view it as 2-D first)";
  const size_t es = dtype_size(t.dtype);
  const int64_t width = t.ndim >= 2 ? t.dim(1) : 1;
  std::vector<unsigned char> host(t.bytes());
  src.download(host.data(), t.data, host.size());
  std::vector<unsigned char> part;
  int64_t rows = 0;
  for (const auto& [begin, count] : ranges) {
    const unsigned char* from = host.data() + static_cast<size_t>(begin * width) * es;
    part.insert(part.end(), from, from + static_cast<size_t>(count * width) * es);
    rows += count;
  }
  DeviceWeight out;
  out.buffer = dst.allocate(part.size());
  dst.upload(out.buffer.data(), part.data(), part.size());
  out.set_dense(t.ndim >= 2 ? out.buffer.view(t.dtype, {rows, width})
                            : out.buffer.view(t.dtype, {rows}));
  return out;
}

// A MoE MLP split by the experts' intermediate size: every rank holds every expert (and the shared
// expert) with its slice of their gate / up rows and down columns; the router and the shared
// expert's gate are replicated, so every rank routes alike and its output is a partial sum.
Result<MlpWeights> shard_moe(const MlpWeights& m, Backend& src, const ModelConfig& c, int rank,
                             int n, Backend& dst) {
  for (const DeviceWeight* w : {&m.router, &m.experts_gate_up, &m.experts_down, &m.shared_gate_up,
                                &m.shared_down, &m.shared_gate}) {
    if (!w->dense()) return Status::Error("tensor parallelism: quantized weights are not split");
  }
  const Tensor& gu = m.experts_gate_up.tensor;  // [E, 2 Im, H]
  const Tensor& dn = m.experts_down.tensor;     // [E, H, Im]
  const int64_t E = gu.dim(0), Im = gu.dim(1) / 2, H = gu.dim(2), im = Im / n;
  MlpWeights out;
  out.moe = true;
  out.router = copy_all(m.router, src, dst);
  out.shared_gate = copy_all(m.shared_gate, src, dst);
  std::vector<std::pair<int64_t, int64_t>> rows;  // of gate_up viewed [E * 2 Im, H]
  for (int64_t e = 0; e < E; ++e) {
    rows.push_back({e * 2 * Im + rank * im, im});
    rows.push_back({e * 2 * Im + Im + rank * im, im});
  }
  DeviceWeight flat;
  flat.set_dense(Tensor(gu.data, gu.dtype, {E * 2 * Im, H}));
  out.experts_gate_up = copy_rows(flat, src, rows, dst);
  out.experts_gate_up.set_dense(out.experts_gate_up.buffer.view(gu.dtype, {E, 2 * im, H}));
  out.experts_down =
      copy_block(Tensor(dn.data, dn.dtype, {E * H, Im}), src, 0, E * H, rank * im, im, dst);
  out.experts_down.set_dense(out.experts_down.buffer.view(dn.dtype, {E, H, im}));
  const int64_t Is = c.shared_expert_intermediate_size, is = Is / n;
  if (!m.shared_gate_up.empty()) {
    out.shared_gate_up =
        copy_rows(m.shared_gate_up, src, {{rank * is, is}, {Is + rank * is, is}}, dst);
    const Tensor& sd = m.shared_down.tensor;  // [H, Is]
    out.shared_down = copy_block(sd, src, 0, sd.dim(0), rank * is, is, dst);
  }
  return out;
}

}  // namespace

Result<DecoderWeights> shard_decoder_weights(const DecoderWeights& full, Backend& src,
                                             const ModelConfig& c, int rank, int n, Backend& dst) {
  SYV_RETURN_IF_ERROR(check_tensor_parallel(c, n));
  const int64_t D = c.head_dim, Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const int64_t hq = Hq / n, hk = std::max<int64_t>(1, Hk / n), I = c.intermediate_size / n;
  const int64_t q0 = rank * hq;                              // first query head
  const int64_t k0 = Hk >= n ? rank * hk : rank / (n / Hk);  // first KV head
  const std::vector<std::pair<int64_t, int64_t>> qkv_rows = {
      {q0 * D, hq * D}, {Hq * D + k0 * D, hk * D}, {(Hq + Hk) * D + k0 * D, hk * D}};
  // Gated DeltaNet: this rank's value heads and the key heads they read (split or replicated).
  const int64_t LK = c.linear_num_key_heads, LV = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t lk = std::max<int64_t>(1, LK / n), lv = c.is_hybrid() ? LV / n : 0;
  const int64_t lk0 = LK >= n ? rank * lk : (LK > 0 ? rank / (n / LK) : 0), lv0 = rank * lv;
  const std::vector<std::pair<int64_t, int64_t>> gdn_channels = {// q | k | v rows, conv rows
                                                                 {lk0 * dk, lk * dk},
                                                                 {LK * dk + lk0 * dk, lk * dk},
                                                                 {2 * LK * dk + lv0 * dv, lv * dv}};
  // A full-attention block (gated or not): this rank's heads.
  auto shard_attention = [&](const AttentionWeights& a, AttentionWeights& r) -> Status {
    if (!a.qkv.dense() || !a.o.dense())
      return Status::Error("tensor parallelism: quantized weights are not split");
    r.gate = copy_rows(a.gate, src, {{q0 * D, hq * D}}, dst);  // gated attention
    r.q_norm = copy_all(a.q_norm, src, dst);
    r.k_norm = copy_all(a.k_norm, src, dst);
    r.qkv = copy_rows(a.qkv, src, qkv_rows, dst);
    r.qkv_bias = copy_rows(a.qkv_bias, src, qkv_rows, dst);
    const Tensor& o = a.o.tensor;  // [H, Hq D]: this rank's columns
    r.o = copy_block(o, src, 0, o.dim(0), q0 * D, hq * D, dst);
    if (rank == 0) r.o_bias = copy_all(a.o_bias, src, dst);  // added once
    return Status::Ok();
  };
  // A dense MLP or MoE block: its slice of the intermediate size.
  auto shard_mlp = [&](const MlpWeights& m, MlpWeights& r) -> Status {
    if (m.moe) {
      SYV_ASSIGN_OR_RETURN(r, shard_moe(m, src, c, rank, n, dst));
      return Status::Ok();
    }
    if (!m.gate_up.dense() || !m.down.dense())
      return Status::Error("tensor parallelism: quantized weights are not split");
    const int64_t I_full = c.intermediate_size;
    r.gate_up = copy_rows(m.gate_up, src, {{rank * I, I}, {I_full + rank * I, I}}, dst);
    const Tensor& down = m.down.tensor;  // [H, I]
    r.down = copy_block(down, src, 0, down.dim(0), rank * I, I, dst);
    return Status::Ok();
  };
  DecoderWeights out;
  out.embed = copy_all(full.embed, src, dst);
  out.final_norm = copy_all(full.final_norm, src, dst);
  out.lm_head = copy_all(full.lm_head, src, dst);
  for (const DecoderLayer& l : full.layers) {
    DecoderLayer& r = out.layers.emplace_back();
    r.type = l.type;
    r.input_norm = copy_all(l.input_norm, src, dst);
    r.post_norm = copy_all(l.post_norm, src, dst);
    if (l.type == LayerType::kLinearAttention) {
      const GdnWeights& g = l.gdn;
      if (!g.qkv.dense() || !g.z.dense() || !g.out.dense())
        return Status::Error("tensor parallelism: quantized weights are not split");
      GdnWeights& s = r.gdn;
      s.qkv = copy_rows(g.qkv, src, gdn_channels, dst);
      s.conv = copy_rows(g.conv, src, gdn_channels, dst);
      s.z = copy_rows(g.z, src, {{lv0 * dv, lv * dv}}, dst);
      s.ba = copy_rows(g.ba, src, {{lv0, lv}, {LV + lv0, lv}}, dst);  // b rows, then a rows
      s.a_log = copy_rows(g.a_log, src, {{lv0, lv}}, dst);
      s.dt_bias = copy_rows(g.dt_bias, src, {{lv0, lv}}, dst);
      s.norm = copy_all(g.norm, src, dst);
      s.out = copy_block(g.out.tensor, src, 0, g.out.tensor.dim(0), lv0 * dv, lv * dv, dst);
    } else {
      SYV_RETURN_IF_ERROR(shard_attention(l.attn, r.attn));
    }
    SYV_RETURN_IF_ERROR(shard_mlp(l.mlp, r.mlp));
  }
  // The MTP head: fc and its norms replicated (every rank computes the whole residual stream),
  // its layer split like the model's full-attention layers; its K/V is the rank's last KV layer.
  if (full.mtp) {
    const MtpWeights& m = *full.mtp;
    if (!m.fc_embed.dense() || !m.fc_hidden.dense())
      return Status::Error("tensor parallelism: quantized weights are not split");
    MtpWeights& h = out.mtp.emplace();
    h.fc_embed = copy_all(m.fc_embed, src, dst);
    h.fc_hidden = copy_all(m.fc_hidden, src, dst);
    h.norm_embed = copy_all(m.norm_embed, src, dst);
    h.norm_hidden = copy_all(m.norm_hidden, src, dst);
    h.norm = copy_all(m.norm, src, dst);
    h.layer.input_norm = copy_all(m.layer.input_norm, src, dst);
    h.layer.post_norm = copy_all(m.layer.post_norm, src, dst);
    SYV_RETURN_IF_ERROR(shard_attention(m.layer.attn, h.layer.attn));
    SYV_RETURN_IF_ERROR(shard_mlp(m.layer.mlp, h.layer.mlp));
  }
  auto count = [&out](std::initializer_list<const DeviceWeight*> weights) {
    for (const DeviceWeight* w : weights) {
      out.parameters += w->tensor.numel();
      out.device_bytes += static_cast<int64_t>(w->bytes());
    }
  };
  auto count_blocks = [&count](const AttentionWeights& a, const MlpWeights& m) {
    count({&a.q_norm, &a.k_norm, &a.qkv, &a.gate, &a.o, &m.gate_up, &m.down, &m.router,
           &m.experts_gate_up, &m.experts_down, &m.shared_gate_up, &m.shared_down, &m.shared_gate});
  };
  for (const DecoderLayer& l : out.layers) {
    count({&l.input_norm, &l.post_norm, &l.gdn.qkv, &l.gdn.z, &l.gdn.ba, &l.gdn.conv, &l.gdn.a_log,
           &l.gdn.dt_bias, &l.gdn.norm, &l.gdn.out});
    count_blocks(l.attn, l.mlp);
  }
  count({&out.embed, &out.final_norm, &out.lm_head});
  if (out.mtp) {
    const MtpWeights& h = *out.mtp;
    count({&h.fc_embed, &h.fc_hidden, &h.norm_embed, &h.norm_hidden, &h.norm, &h.layer.input_norm,
           &h.layer.post_norm});
    count_blocks(h.layer.attn, h.layer.mlp);
  }
  return out;
}

namespace {

// Ranks 1.. of a group, one thread each for the model's life (a thread started per step cost
// every step its creation): run(job) calls job(r) on rank r's thread for every r >= 1, and job(0)
// on the caller's, and returns when all have. Each thread makes its rank's device current once.
class RankThreads {
 public:
  explicit RankThreads(std::vector<Backend*> backends) : backends_(std::move(backends)) {
    for (size_t r = 1; r < backends_.size(); ++r) threads_.emplace_back([this, r] { loop(r); });
  }
  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  void run(const std::function<void(size_t)>& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      pending_ = threads_.size();
      ++generation_;
    }
    wake_.notify_all();
    backends_[0]->make_current();
    job(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop(size_t rank) {
    backends_[rank]->make_current();
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(rank);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<Backend*> backends_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* job_ = nullptr;  // the current run's, under mu_
  uint64_t generation_ = 0;                           // runs started, under mu_
  size_t pending_ = 0;                                // threads still in the run, under mu_
  bool stop_ = false;
};

// N rank models driven as one (see load_tensor_parallel()).
class TensorParallelModel final : public Model {
 public:
  TensorParallelModel(const ModelConfig& config, std::unique_ptr<TpGroup> group,
                      std::vector<Backend*> backends, std::vector<std::unique_ptr<Model>> ranks)
      : config_(config),
        group_(std::move(group)),
        backends_(std::move(backends)),
        ranks_(std::move(ranks)),
        others_(ranks_.size()),
        threads_(backends_) {}

  const ModelConfig& config() const override { return config_; }
  CacheSpec cache_spec() const override { return ranks_[0]->cache_spec(); }
  Backend& backend() override { return *backends_[0]; }

  // The same store again (SingleSequence binds before every forward) keeps its mirrors; another
  // store gets new ones (the previous store's mirrors are freed: it may not be bound again).
  void bind_cache(CacheStore& store) override {
    ranks_[0]->bind_cache(store);
    if (&store == bound_ && store.has_mirrors()) {
      for (size_t r = 1; r < ranks_.size(); ++r) ranks_[r]->bind_cache(*stores_[r - 1]);
      return;
    }
    SYV_CHECK(!store.has_mirrors())
        << "tensor parallel: bind_cache() with a store bound before another (its rank mirrors "
           "are gone)";
    stores_.clear();
    for (size_t r = 1; r < ranks_.size(); ++r) {
      auto own = CacheStore::create(store.spec(), store.config(), *backends_[r]);
      SYV_CHECK(own.ok()) << "tensor parallel rank " << r << ": its cache store: " << own.message();
      stores_.push_back(std::move(own).value());
      ranks_[r]->bind_cache(*stores_.back());
      store.add_mirror(*stores_.back());  // the engine's cache operations reach every rank
    }
    bound_ = &store;
  }
  // CUDA graphs: every rank captures and replays its own, in step (load_tensor_parallel()).
  bool supports_graphs() const override {
    for (const auto& m : ranks_)
      if (!m->supports_graphs()) return false;
    return true;
  }
  // mtp_forward() copies its hidden input through the host (a synchronisation no graph holds).
  bool supports_mtp_graphs() const override { return false; }
  // Every rank captures its own forward at once, on its thread: the capture's eager warm-up runs
  // the all-reduces, which must meet. Rank 0's graph appends `then`.
  int capture_forward(const Batch& batch, Outputs& out,
                      const std::function<void()>& then) override {
    std::vector<int> ids(ranks_.size(), -1);
    threads_.run([&](size_t r) {
      Outputs& o = r == 0 ? out : others_[r];
      const std::function<void()> after = r == 0 ? then : nullptr;
      ids[r] = backends_[r]->capture_graph([this, r, &batch, &o, after] {
        ranks_[r]->forward(batch, o);
        if (after) after();
      });
    });
    graphs_.push_back(std::move(ids));
    return static_cast<int>(graphs_.size()) - 1;
  }
  void stage_graph_batch(const Batch& batch, int32_t page_size) override {
    threads_.run([&](size_t r) { backends_[r]->stage_batch(batch, page_size); });
  }
  void replay_graph(int id) override {
    const std::vector<int>& ids = rank_graphs(id, "replay_graph");
    threads_.run([&](size_t r) { backends_[r]->replay_graph(ids[r]); });
  }
  void destroy_graph(int id) override {
    std::vector<int>& ids = rank_graphs(id, "destroy_graph");
    threads_.run([&](size_t r) { backends_[r]->destroy_graph(ids[r]); });
    ids.clear();
  }
  void set_fixed_max_context(int64_t max_context) override {
    for (Backend* b : backends_) b->set_fixed_max_context(max_context);
  }
  void reserve(int64_t max_tokens, int64_t max_logit_rows) override {
    for (auto& m : ranks_) m->reserve(max_tokens, max_logit_rows);
  }

  using Model::forward;
  // Rank r on its own thread (threads_), with backends_[r]'s device current.
  void forward(const Batch& batch, Outputs& out) override {
    threads_.run([&](size_t r) { ranks_[r]->forward(batch, r == 0 ? out : others_[r]); });
  }

  // The MTP head, split like the model's layers on every rank (shard_decoder_weights).
  bool has_mtp() const override { return ranks_[0]->has_mtp(); }
  void reserve_mtp(int64_t max_tokens, int64_t max_logit_rows) override {
    for (auto& m : ranks_) m->reserve_mtp(max_tokens, max_logit_rows);
  }
  // `hidden` is rank 0's (the drafter gathers it there); every rank computed the same rows, so
  // ranks 1.. get a copy of it on their own device, through the host (a [T, H] activation: a
  // row per draft).
  void mtp_forward(const Batch& batch, const Tensor& hidden, Outputs& out) override {
    const size_t bytes = hidden.bytes();
    host_hidden_.resize(bytes);
    if (bytes > 0) backends_[0]->download(host_hidden_.data(), hidden.data, bytes);
    rank_hidden_.resize(ranks_.size());
    threads_.run([&](size_t r) {
      if (r == 0) return ranks_[0]->mtp_forward(batch, hidden, out);
      DeviceBuffer& buf = rank_hidden_[r];
      if (buf.bytes() < bytes) buf = backends_[r]->allocate(bytes);
      if (bytes > 0) backends_[r]->upload(buf.data(), host_hidden_.data(), bytes);
      const Tensor local(buf.data(), hidden.dtype, {hidden.dim(0), hidden.dim(1)});
      ranks_[r]->mtp_forward(batch, local, others_[r]);
    });
  }

 private:
  // The rank graphs of live graph `id`.
  std::vector<int>& rank_graphs(int id, const char* call) {
    SYV_CHECK(id >= 0 && id < static_cast<int>(graphs_.size()) &&
              !graphs_[static_cast<size_t>(id)].empty())
        << "tensor parallel " << call << "(" << id << "): no such graph";
    return graphs_[static_cast<size_t>(id)];
  }

  ModelConfig config_;
  std::unique_ptr<TpGroup> group_;
  std::vector<Backend*> backends_;
  std::vector<std::unique_ptr<Model>> ranks_;
  std::vector<std::unique_ptr<CacheStore>> stores_;  // ranks 1..: built like the engine's
  const CacheStore* bound_ = nullptr;                // the store stores_ mirror
  // [rank] ranks 1..'s outputs (unused; at fixed addresses: graphs write them)
  std::vector<Outputs> others_;
  std::vector<std::vector<int>> graphs_;    // [graph id][rank] rank graph ids; empty: destroyed
  std::vector<unsigned char> host_hidden_;  // mtp_forward's hidden on its way
  std::vector<DeviceBuffer> rank_hidden_;   // ... and on ranks 1..'s devices
  RankThreads threads_;                     // last: joined before the ranks go
};

}  // namespace

Result<std::unique_ptr<Model>> load_tensor_parallel(const PreparedModel& prepared,
                                                    const std::vector<Backend*>& backends,
                                                    const LoadOptions& options,
                                                    std::unique_ptr<TpGroup> group) {
  const ModelConfig& config = prepared.config;
  const int n = static_cast<int>(backends.size());
  if (group == nullptr) group = std::make_unique<HostTpGroup>(n);
  if (group->size() != n) {
    return Status::Error("tensor parallelism: a group of " + std::to_string(group->size()) +
                         " ranks for " + std::to_string(n) + " backends");
  }
  const bool hybrid = config.family != ModelFamily::kQwen3;
  if (options.host_embeddings) {
    return Status::Error("--host-embeddings: not supported with tensor parallelism yet");
  }
  SYV_RETURN_IF_ERROR(check_tensor_parallel(config, n));
  SYV_RETURN_IF_ERROR(hybrid ? validate_hybrid_config(config) : validate_qwen3_config(config));
  Backend& first = *backends[0];
  first.make_current();
  struct Current {  // rank 0's device is current again however this returns
    Backend& backend;
    ~Current() { backend.make_current(); }
  } current{first};
  const WeightStore* store = prepared.store ? &*prepared.store : nullptr;
  DecoderWeights full;
  {
    WeightLoader loader(first, store, options.seed, config.quant);
    if (config.family == ModelFamily::kQwen3_5) {
      SYV_RETURN_IF_ERROR(load_qwen3_5_weights(config, store, loader, options, &full));
    } else if (config.family == ModelFamily::kQwen3Next) {
      SYV_RETURN_IF_ERROR(load_qwen3_next_weights(config, store, loader, options, &full));
    } else {
      SYV_RETURN_IF_ERROR(load_qwen3_weights(config, loader, &full));
    }
    loader.finish();
  }
  const ModelConfig rank_config = tensor_parallel_rank_config(config, n);
  std::vector<std::unique_ptr<Model>> ranks;
  for (int r = 0; r < n; ++r) {
    backends[r]->make_current();  // the rank's allocations and uploads on its own device
    SYV_ASSIGN_OR_RETURN(DecoderWeights w,
                         shard_decoder_weights(full, first, config, r, n, *backends[r]));
    const std::string name =
        config.model_type + " rank " + std::to_string(r) + "/" + std::to_string(n);
    if (hybrid) {
      ranks.push_back(
          make_hybrid_model(rank_config, *backends[r], std::move(w), name, &group->comm(r)));
      continue;
    }
    DecoderOptions o;
    o.name = name;
    o.norm = NormKind::kPlain;
    o.cache = qwen3_cache_spec(rank_config, backends[r]->activation_dtype());
    o.tp = &group->comm(r);
    ranks.push_back(make_decoder_model(rank_config, *backends[r], std::move(w), std::move(o)));
  }
  SYV_LOG(INFO) << "tensor parallel: " << group->describe();
  SYV_LOG(INFO) << "tensor parallel: " << n << " ranks, each " << rank_config.num_attention_heads
                << " query heads, " << rank_config.num_key_value_heads << " KV heads ("
                << (config.num_key_value_heads >= n ? "split" : "replicated") << "), "
                << rank_config.intermediate_size << " of the MLP's " << config.intermediate_size
                << " intermediate rows";
  return std::unique_ptr<Model>(
      std::make_unique<TensorParallelModel>(config, std::move(group), backends, std::move(ranks)));
}

}  // namespace syv
