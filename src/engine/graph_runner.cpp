#include "engine/graph_runner.h"

#include <algorithm>

#include "core/check.h"
#include "engine/verify_padding.h"
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

namespace {

// Appends `count` dummy sequences to `b` (pad_decode_batch()): q tokens 0 at positions 0..q-1,
// context q, page table row [dummy_page, -1, ...] of b's width, every row a logits row; with
// `state_slots` slot -1, with `saves` q - 1 verify saves (after 1..q-1 tokens, into checkpoint 0:
// never written, the slot being -1).
void append_dummy_sequences(int32_t count, int32_t q, int32_t dummy_page, bool state_slots,
                            bool saves, Batch& b) {
  const int32_t W = b.max_pages_per_seq;
  for (int32_t s = 0; s < count; ++s) {
    for (int32_t p = 0; p < q; ++p) {
      b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()));
      b.token_ids.push_back(0);
      b.positions.push_back(p);
    }
    b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(q);
    b.page_table.push_back(dummy_page);
    b.page_table.insert(b.page_table.end(), static_cast<size_t>(W - 1), -1);
    if (state_slots) b.state_slots.push_back(-1);
    if (saves) {
      for (int32_t j = 1; j < q; ++j) {
        b.state_save_after.push_back(j);
        b.state_save_dests.push_back(0);
      }
      b.state_save_starts.push_back(static_cast<int32_t>(b.state_save_after.size()));
    }
  }
}

}  // namespace

int32_t graph_step_query(const SchedulerOutput& step, int32_t max_batch, int32_t max_query,
                         int32_t saves_per_draft) {
  const size_t n = step.seqs.size();
  if (n == 0 || n > static_cast<size_t>(max_batch)) return 0;
  const int32_t q = step.seqs.front().num_fed();
  if (q < 1 || q > max_query) return 0;
  for (const ScheduledSeq& s : step.seqs) {
    if (s.num_fed() != q || s.num_drafts + s.num_padding != q - 1 || !s.wants_logits ||
        s.num_prompt_rows > 0)
      return 0;
  }
  // In-pass state saves: exactly saves_per_draft * (q - 1) for every sequence, grouped by
  // sequence in batch order (as Runner::build() lays them out).
  const size_t per_seq = static_cast<size_t>(saves_per_draft) * static_cast<size_t>(q - 1);
  if (step.state_saves.size() != n * per_seq) return 0;
  for (size_t i = 0; i < step.state_saves.size(); ++i)
    if (static_cast<size_t>(step.state_saves[i].seq_index) != i / per_seq) return 0;
  return q;
}

bool is_graph_step(const SchedulerOutput& step, int32_t max_batch) {
  return graph_step_query(step, max_batch, 1, 0) > 0;
}

void pad_decode_batch(const Batch& real, int32_t bucket, int32_t dummy_page, Batch& out) {
  const int32_t S = real.num_seqs();
  const int32_t W = real.max_pages_per_seq;
  SYV_CHECK(S >= 1 && S <= bucket) << "pad_decode_batch: " << S << " sequences into " << bucket;
  const int32_t T = real.num_tokens();
  const int32_t q = T / S;
  SYV_CHECK(q >= 1 && T == S * q && static_cast<int32_t>(real.logit_rows.size()) == T)
      << "pad_decode_batch: not a decode or verify batch (" << T << " tokens, "
      << real.logit_rows.size() << " logits rows, " << S << " sequences)";
  SYV_CHECK(real.state_slots.empty() || real.state_slots.size() == static_cast<size_t>(S))
      << "pad_decode_batch: " << real.state_slots.size() << " state slots for " << S
      << " sequences";
  SYV_CHECK(W >= 1 && real.page_table.size() == static_cast<size_t>(S) * W)
      << "pad_decode_batch: page table of " << real.page_table.size() << " for " << S << " x " << W;
  const int32_t saves = real.num_state_saves();
  SYV_CHECK(saves == 0 || saves == S * (q - 1))
      << "pad_decode_batch: " << saves << " state saves for " << S << " sequences of " << q
      << " tokens";
  for (int32_t s = 0; s < S; ++s) {
    SYV_CHECK(real.seq_starts[static_cast<size_t>(s)] == s * q)
        << "pad_decode_batch: sequence " << s << " does not start at row " << s * q;
  }
  for (int32_t r = 0; r < T; ++r) {
    SYV_CHECK(real.logit_rows[static_cast<size_t>(r)] == r)
        << "pad_decode_batch: logits row " << r << " is row " << real.logit_rows[r];
  }
  out.token_ids.assign(real.token_ids.begin(), real.token_ids.end());
  out.positions.assign(real.positions.begin(), real.positions.end());
  out.context_lens.assign(real.context_lens.begin(), real.context_lens.end());
  out.seq_starts.assign(real.seq_starts.begin(), real.seq_starts.end());
  out.logit_rows.assign(real.logit_rows.begin(), real.logit_rows.end());
  out.max_pages_per_seq = W;
  out.page_table.assign(real.page_table.begin(), real.page_table.end());
  out.state_slots.assign(real.state_slots.begin(), real.state_slots.end());
  out.state_save_starts.assign(real.state_save_starts.begin(), real.state_save_starts.end());
  out.state_save_after.assign(real.state_save_after.begin(), real.state_save_after.end());
  out.state_save_dests.assign(real.state_save_dests.begin(), real.state_save_dests.end());
  append_dummy_sequences(bucket - S, q, dummy_page, !real.state_slots.empty(), saves > 0, out);
}

void dummy_decode_batch(int32_t bucket, int32_t q, int32_t width, int32_t dummy_page,
                        bool state_slots, bool saves, Batch& out) {
  out.token_ids.clear();
  out.positions.clear();
  out.context_lens.clear();
  out.seq_starts.assign(1, 0);
  out.logit_rows.clear();
  out.max_pages_per_seq = width;
  out.page_table.clear();
  out.state_slots.clear();
  out.state_save_starts.clear();
  if (saves) out.state_save_starts.push_back(0);
  out.state_save_after.clear();
  out.state_save_dests.clear();
  append_dummy_sequences(bucket, q, dummy_page, state_slots, saves, out);
}

GraphRunner::GraphRunner(Model& model, const GraphConfig& config)
    : model_(model),
      config_(config),
      saves_per_draft_(model.cache_spec().has_recurrent_state() ? 1 : 0),
      buckets_(graph_buckets(config.max_batch)) {
  SYV_CHECK(config_.mode != GraphMode::kOff && model_.supports_graphs())
      << "GraphRunner: graphs " << to_string(config_.mode) << ", model supports them "
      << model_.supports_graphs();
  SYV_CHECK(config_.page_size > 0 && config_.pages_per_seq > 0 && config_.dummy_page >= 0)
      << "GraphRunner: page size " << config_.page_size << ", width " << config_.pages_per_seq
      << ", dummy page " << config_.dummy_page;
  SYV_CHECK(config_.max_query >= 1 && config_.max_query <= config_.page_size)
      << "GraphRunner: " << config_.max_query << " tokens per sequence, page size "
      << config_.page_size;
  const int64_t largest = int64_t{config_.max_batch} * config_.max_query;
  SYV_CHECK(config_.max_tokens >= largest && config_.max_logit_rows >= largest)
      << "GraphRunner: reservation (" << config_.max_tokens << " tokens, " << config_.max_logit_rows
      << " rows) below the largest graph step, " << config_.max_batch << " x " << config_.max_query;
  ids_.assign(buckets_.size() * static_cast<size_t>(config_.max_query), -1);
  outputs_.resize(ids_.size());
  model_.reserve(config_.max_tokens, config_.max_logit_rows);
  model_.set_fixed_max_context(config_.max_context);
}

GraphRunner::~GraphRunner() {
  for (int id : ids_)
    if (id >= 0) model_.destroy_graph(id);
  model_.reserve(0, 0);
  model_.set_fixed_max_context(0);
}

int32_t GraphRunner::num_captured() const {
  return static_cast<int32_t>(
      std::count_if(ids_.begin(), ids_.end(), [](int id) { return id >= 0; }));
}

int32_t GraphRunner::padded_query(const SchedulerOutput& step) const {
  return padded_verify_query(step, config_.max_batch, config_.max_query, saves_per_draft_,
                             static_cast<int32_t>(config_.max_context));
}

void GraphRunner::capture_all(int32_t verify_max_batch) {
  for (size_t i = buckets_.size(); i-- > 0;)
    if (ids_[graph_index(i, 1)] < 0) capture(i, 1);
  for (size_t i = 0; i < buckets_.size() && buckets_[i] <= verify_max_batch; ++i) {
    for (int32_t q = 2; q <= config_.max_query; ++q)
      if (ids_[graph_index(i, q)] < 0) capture(i, q);
  }
}

void GraphRunner::capture(size_t i, int32_t q) {
  // Every sequence a dummy: the warm-up run inside capture_forward() writes only the dummy page.
  const int32_t B = buckets_[i];
  const bool recurrent = model_.cache_spec().has_recurrent_state();
  dummy_decode_batch(B, q, config_.pages_per_seq, config_.dummy_page, recurrent,
                     recurrent && saves_per_draft_ > 0 && q > 1, padded_);
  const size_t BT = static_cast<size_t>(B) * static_cast<size_t>(q);
  // outputs_[g] holds what the forward returned: filled during the capture on CUDA (replays
  // write the same buffers), or at each replay on a backend that re-runs the step.
  const size_t g = graph_index(i, q);
  ids_[g] = model_.capture_forward(padded_, outputs_[g], nullptr);
  SYV_CHECK(outputs_[g].logits.ndim == 2 && outputs_[g].logits.dim(0) == static_cast<int64_t>(BT))
      << "GraphRunner: captured forward returned " << outputs_[g].logits.dim(0)
      << " logits rows for " << B << " x " << q;
}

Model::Outputs GraphRunner::run(const Batch& batch) {
  const int32_t S = batch.num_seqs();
  const int32_t i = bucket_index(buckets_, S);
  SYV_CHECK(i >= 0) << "GraphRunner::run: " << S << " sequences > largest bucket "
                    << buckets_.back();
  SYV_CHECK_EQ(batch.max_pages_per_seq, config_.pages_per_seq) << "GraphRunner::run: page table";
  const int32_t q = batch.num_tokens() / S;
  SYV_CHECK(q >= 1 && q <= config_.max_query)
      << "GraphRunner::run: " << q << " tokens per sequence, at most " << config_.max_query;
  const size_t bi = static_cast<size_t>(i);
  const size_t g = graph_index(bi, q);
  if (ids_[g] < 0) capture(bi, q);
  pad_decode_batch(batch, buckets_[bi], config_.dummy_page, padded_);
  model_.stage_graph_batch(padded_, config_.page_size);
  model_.replay_graph(ids_[g]);
  const Model::Outputs& all = outputs_[g];
  const int64_t rows = batch.num_tokens();
  auto head = [rows](const Tensor& t) { return t.empty() ? Tensor() : t.rows(0, rows); };
  Model::Outputs out;
  out.logits = head(all.logits);
  out.hidden = head(all.hidden);
  out.token_hidden = head(all.token_hidden);
  return out;
}

}  // namespace syv
