#include "engine/graph_runner.h"

#include <algorithm>

#include "core/check.h"
#include "model/model.h"

namespace syv {

Result<GraphMode> parse_graph_mode(const std::string& text) {
  if (text == "off") return GraphMode::kOff;
  if (text == "lazy") return GraphMode::kLazy;
  if (text == "eager") return GraphMode::kEager;
  return Status::Error("engine option cuda_graphs: expected eager, lazy or off, found \"" + text +
                       "\"");
}

const char* to_string(GraphMode mode) {
  switch (mode) {
    case GraphMode::kOff:
      return "off";
    case GraphMode::kLazy:
      return "lazy";
    case GraphMode::kEager:
      return "eager";
  }
  return "?";
}

std::vector<int32_t> graph_buckets(int32_t max_batch) {
  SYV_CHECK_GE(max_batch, 1) << "graph_buckets";
  std::vector<int32_t> out;
  for (int32_t b : {1, 2, 4, 8}) out.push_back(b);
  for (int64_t p = 16; p <= max_batch; p *= 2) {
    out.push_back(static_cast<int32_t>(p));
    out.push_back(static_cast<int32_t>(p + p / 2));
  }
  out.erase(std::remove_if(out.begin(), out.end(), [&](int32_t b) { return b > max_batch; }),
            out.end());
  if (out.back() != max_batch) out.push_back(max_batch);
  return out;
}

int32_t bucket_index(const std::vector<int32_t>& buckets, int32_t n) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? -1 : static_cast<int32_t>(it - buckets.begin());
}

bool is_graph_step(const SchedulerOutput& step, int32_t max_batch) {
  const size_t n = step.seqs.size();
  if (n == 0 || n > static_cast<size_t>(max_batch)) return false;
  for (const ScheduledSeq& s : step.seqs)
    if (s.num_new_tokens != 1 || !s.wants_logits || s.num_prompt_rows > 0) return false;
  return true;
}

void pad_decode_batch(const Batch& real, int32_t bucket, int32_t dummy_page, Batch& out) {
  const int32_t S = real.num_seqs();
  const int32_t W = real.max_pages_per_seq;
  SYV_CHECK(S >= 1 && S <= bucket) << "pad_decode_batch: " << S << " sequences into " << bucket;
  SYV_CHECK(real.num_tokens() == S && static_cast<int32_t>(real.logit_rows.size()) == S)
      << "pad_decode_batch: not a decode batch (" << real.num_tokens() << " tokens, "
      << real.logit_rows.size() << " logits rows, " << S << " sequences)";
  SYV_CHECK(real.state_slots.empty() || real.state_slots.size() == static_cast<size_t>(S))
      << "pad_decode_batch: " << real.state_slots.size() << " state slots for " << S
      << " sequences";
  SYV_CHECK(W >= 1 && real.page_table.size() == static_cast<size_t>(S) * W)
      << "pad_decode_batch: page table of " << real.page_table.size() << " for " << S << " x " << W;
  const size_t B = static_cast<size_t>(bucket);
  out.token_ids.assign(real.token_ids.begin(), real.token_ids.end());
  out.token_ids.resize(B, 0);
  out.positions.assign(real.positions.begin(), real.positions.end());
  out.positions.resize(B, 0);
  out.context_lens.assign(real.context_lens.begin(), real.context_lens.end());
  out.context_lens.resize(B, 1);
  out.seq_starts.resize(B + 1);
  out.logit_rows.resize(B);
  for (int32_t s = 0; s < bucket; ++s) {
    out.seq_starts[static_cast<size_t>(s)] = s;
    out.logit_rows[static_cast<size_t>(s)] = s;
  }
  out.seq_starts[B] = bucket;
  for (int32_t s = 0; s < S; ++s) {
    SYV_CHECK(real.seq_starts[static_cast<size_t>(s)] == s &&
              real.logit_rows[static_cast<size_t>(s)] == s)
        << "pad_decode_batch: row " << s << " is not sequence " << s << "'s one token";
  }
  out.max_pages_per_seq = W;
  out.page_table.assign(real.page_table.begin(), real.page_table.end());
  out.page_table.resize(B * static_cast<size_t>(W), -1);
  for (size_t s = static_cast<size_t>(S); s < B; ++s)
    out.page_table[s * static_cast<size_t>(W)] = dummy_page;
  // Hybrids: the padding sequences have no state slot (-1: the recurrent ops skip them).
  out.state_slots.assign(real.state_slots.begin(), real.state_slots.end());
  if (!real.state_slots.empty()) out.state_slots.resize(B, -1);
}

GraphRunner::GraphRunner(Model& model, const GraphConfig& config)
    : model_(model), config_(config), buckets_(graph_buckets(config.max_batch)) {
  SYV_CHECK(config_.mode != GraphMode::kOff && model_.supports_graphs())
      << "GraphRunner: graphs " << to_string(config_.mode) << ", model supports them "
      << model_.supports_graphs();
  SYV_CHECK(config_.page_size > 0 && config_.pages_per_seq > 0 && config_.dummy_page >= 0)
      << "GraphRunner: page size " << config_.page_size << ", width " << config_.pages_per_seq
      << ", dummy page " << config_.dummy_page;
  SYV_CHECK(config_.max_tokens >= config_.max_batch && config_.max_logit_rows >= config_.max_batch)
      << "GraphRunner: reservation below the largest bucket " << config_.max_batch;
  ids_.assign(buckets_.size(), -1);
  logits_.resize(buckets_.size());
  model_.reserve(config_.max_tokens, config_.max_logit_rows);
  model_.backend().set_fixed_max_context(config_.max_context);
}

GraphRunner::~GraphRunner() {
  for (int id : ids_)
    if (id >= 0) model_.backend().destroy_graph(id);
  model_.reserve(0, 0);
  model_.backend().set_fixed_max_context(0);
}

int32_t GraphRunner::num_captured() const {
  return static_cast<int32_t>(
      std::count_if(ids_.begin(), ids_.end(), [](int id) { return id >= 0; }));
}

void GraphRunner::capture_all() {
  for (size_t i = buckets_.size(); i-- > 0;)
    if (ids_[i] < 0) capture(i);
}

void GraphRunner::capture(size_t i) {
  // Every row a dummy: the warm-up run inside capture_graph() writes only the dummy page.
  Batch& b = padded_;
  const int32_t B = buckets_[i];
  const int32_t W = config_.pages_per_seq;
  b.token_ids.assign(static_cast<size_t>(B), 0);
  b.positions.assign(static_cast<size_t>(B), 0);
  b.context_lens.assign(static_cast<size_t>(B), 1);
  b.seq_starts.resize(static_cast<size_t>(B) + 1);
  b.logit_rows.resize(static_cast<size_t>(B));
  for (int32_t s = 0; s <= B; ++s) b.seq_starts[static_cast<size_t>(s)] = s;
  for (int32_t s = 0; s < B; ++s) b.logit_rows[static_cast<size_t>(s)] = s;
  b.max_pages_per_seq = W;
  b.page_table.assign(static_cast<size_t>(B) * W, -1);
  for (int32_t s = 0; s < B; ++s) b.page_table[static_cast<size_t>(s) * W] = config_.dummy_page;
  b.state_slots.clear();
  if (model_.cache_spec().has_recurrent_state()) b.state_slots.assign(static_cast<size_t>(B), -1);
  // The lambda stores where the forward put its logits: during the capture on CUDA (replays write
  // the same buffer), or at each replay on a backend that re-runs the step.
  ids_[i] = model_.backend().capture_graph([this, i] { logits_[i] = model_.forward(padded_); });
  SYV_CHECK(logits_[i].ndim == 2 && logits_[i].dim(0) == B)
      << "GraphRunner: captured forward returned " << logits_[i].dim(0) << " logits rows for " << B;
}

Tensor GraphRunner::run(const Batch& batch) {
  const int32_t S = batch.num_seqs();
  const int32_t i = bucket_index(buckets_, S);
  SYV_CHECK(i >= 0) << "GraphRunner::run: " << S << " sequences > largest bucket "
                    << buckets_.back();
  SYV_CHECK_EQ(batch.max_pages_per_seq, config_.pages_per_seq) << "GraphRunner::run: page table";
  const size_t bi = static_cast<size_t>(i);
  if (ids_[bi] < 0) capture(bi);
  pad_decode_batch(batch, buckets_[bi], config_.dummy_page, padded_);
  Backend& backend = model_.backend();
  backend.stage_batch(padded_, config_.page_size);
  backend.replay_graph(ids_[bi]);
  const Tensor& all = logits_[bi];
  return Tensor(all.data, all.dtype, {S, all.dim(1)});
}

}  // namespace syv
