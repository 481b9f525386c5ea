#include "engine/mtp_drafter.h"

#include <algorithm>

#include "core/check.h"
#include "engine/drafter_batch.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace syv {

MtpDrafter::MtpDrafter(Model& model, PagePool& pool, int32_t page_size,
                       int32_t num_speculative_tokens, int32_t max_model_len)
    : model_(model),
      pool_(pool),
      k_(num_speculative_tokens),
      max_model_len_(max_model_len),
      page_size_(page_size) {
  SYV_CHECK(model.has_mtp()) << "MtpDrafter on a model without an MTP head";
  SYV_CHECK(k_ >= 1 && page_size_ >= 1) << "MtpDrafter: k " << k_ << ", page size " << page_size_;
}

MtpDrafter::~MtpDrafter() {
  if (graphs_ == nullptr) return;
  for (int id : graphs_->ids)
    if (id >= 0) model_.backend().destroy_graph(id);
  model_.reserve_mtp(0, 0);
}

void MtpDrafter::enable_graphs(const GraphConfig& config, int64_t max_tokens, int64_t max_rows) {
  SYV_CHECK(graphs_ == nullptr) << "MtpDrafter::enable_graphs twice";
  SYV_CHECK(model_.supports_mtp_graphs())
      << "MtpDrafter::enable_graphs: the model cannot capture its MTP head's forwards";
  SYV_CHECK(config.page_size == page_size_ && config.pages_per_seq > 0 && config.dummy_page >= 0)
      << "MtpDrafter::enable_graphs: page size " << config.page_size << ", width "
      << config.pages_per_seq << ", dummy page " << config.dummy_page;
  auto g = std::make_unique<HeadGraphs>();
  g->config = config;
  // Rows up to the largest decode bucket: every chain forward fits (a row per sequence), and the
  // head's logits reservation stays what its eager forwards took (a row per sequence); a larger
  // catch-up runs eagerly.
  g->buckets = graph_buckets(config.max_batch);
  g->ids.assign(g->buckets.size(), -1);
  g->outputs.resize(g->buckets.size());
  const int64_t largest = g->buckets.back();
  model_.reserve_mtp(std::max(max_tokens, largest), std::max(max_rows, largest));
  // The hidden input buffer at its final size (a captured graph reads it), zeroed so the
  // captures' dummy rows compute on numbers.
  Backend& b = model_.backend();
  const size_t bytes = static_cast<size_t>(std::max(max_tokens, largest)) *
                       static_cast<size_t>(model_.config().hidden_size) *
                       dtype_size(b.activation_dtype());
  if (hidden_.bytes() < bytes) hidden_ = b.allocate(bytes);
  b.fill_zero(hidden_.data(), hidden_.bytes());
  graphs_ = std::move(g);
}

void MtpDrafter::run_head(const Tensor& src, int32_t rows, Model::Outputs& head) {
  Tensor hidden = gather_hidden(src, rows);
  const Batch& real = batch_;
  const int32_t bi = graphs_ ? bucket_index(graphs_->buckets, rows) : -1;
  const bool decode_shaped = real.num_seqs() == rows &&
                             static_cast<int32_t>(real.logit_rows.size()) == rows &&
                             real.max_pages_per_seq == table_width();
  if (bi < 0 || !decode_shaped) {
    model_.mtp_forward(real, hidden, head);
    return;
  }
  HeadGraphs& g = *graphs_;
  const size_t i = static_cast<size_t>(bi);
  const int32_t B = g.buckets[i];
  const int64_t H = model_.config().hidden_size;
  Backend& backend = model_.backend();
  const DType act = backend.activation_dtype();
  Batch& pad = g.padded;
  if (g.ids[i] < 0) {  // every row a dummy: the warm-up writes only the dummy page
    dummy_decode_batch(B, 1, g.config.pages_per_seq, g.config.dummy_page, false, false, pad);
    const Tensor input(hidden_.data(), act, {B, H});
    g.ids[i] = backend.capture_graph(
        [this, i, input] { model_.mtp_forward(graphs_->padded, input, graphs_->outputs[i]); });
  }
  pad_decode_batch(real, B, g.config.dummy_page, pad);
  backend.stage_batch(pad, page_size_);
  backend.replay_graph(g.ids[i]);
  ++head_graph_runs_;
  const Model::Outputs& all = g.outputs[i];
  head.logits = all.logits.rows(0, rows);
  head.hidden = all.hidden.rows(0, rows);
  head.token_hidden = Tensor();
}

void MtpDrafter::propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) {
  auto it = ready_.find(seq.id());
  if (it == ready_.end() || it->second.length != seq.length()) return;
  const std::vector<int32_t>& d = it->second.drafts;
  out.insert(out.end(), d.begin(), d.begin() + std::min<int64_t>(max_tokens, d.size()));
}

Tensor MtpDrafter::gather_hidden(const Tensor& src, int32_t rows) {
  Backend& b = model_.backend();
  const int64_t H = model_.config().hidden_size;
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(src.dtype);
  SYV_CHECK(src.ndim == 2 && src.dim(1) == H) << "mtp drafter: hidden rows of width " << src.dim(1);
  const size_t need = std::max<size_t>(1, static_cast<size_t>(rows)) * row_bytes;
  if (hidden_.bytes() < need) {
    SYV_CHECK(graphs_ == nullptr) << "mtp drafter: " << rows
                                  << " hidden rows outgrow the buffer its graphs read";
    hidden_ = b.allocate(std::max(need, 2 * hidden_.bytes()));
  }
  auto* dst = static_cast<uint8_t*>(hidden_.data());
  const auto* from = static_cast<const uint8_t*>(src.data);
  for (size_t i = 0; i < runs_.size();) {  // adjacent runs in one copy
    Run r = runs_[i++];
    while (i < runs_.size() && runs_[i].src == r.src + r.count && runs_[i].dst == r.dst + r.count)
      r.count += runs_[i++].count;
    SYV_CHECK(r.src + r.count <= src.dim(0))
        << "mtp drafter: row " << r.src + r.count - 1 << " of " << src.dim(0) << " hidden rows";
    b.copy(dst + r.dst * row_bytes, from + r.src * row_bytes, r.count * row_bytes);
  }
  return Tensor(hidden_.data(), src.dtype, {rows, H});
}

void MtpDrafter::observe(const SchedulerOutput& step, const Batch& batch,
                         const Model::Outputs& outputs) {
  ready_.clear();
  chains_.clear();
  runs_.clear();
  Batch& b = batch_;
  clear_batch(b);
  std::vector<const std::vector<int32_t>*> pages;
  // Positions committed this step, per scheduled sequence.
  auto committed = [&](size_t i) {
    const Sequence& seq = *step.seqs[i].seq;
    const int32_t c0 = batch.positions[static_cast<size_t>(batch.seq_starts[i])];
    const int32_t n = seq.num_computed - c0;
    SYV_CHECK(n >= 0 && n <= batch.seq_len(static_cast<int32_t>(i)))
        << "seq " << seq.id() << ": " << n << " committed of " << batch.seq_len(i) << " fed";
    return n;
  };
  // With graphs, a catch-up a bucket holds is built decode-shaped (enable_graphs()).
  bool per_row = decode_shaped_;
  if (graphs_ != nullptr) {
    int32_t total = 0;
    for (size_t i = 0; i < step.seqs.size(); ++i) total += committed(i);
    per_row = total <= graphs_->buckets.back();
  }
  int32_t row = 0;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const ScheduledSeq& s = step.seqs[i];
    Sequence& seq = *s.seq;
    const int32_t first_row = batch.seq_starts[i];
    const int32_t c0 = batch.positions[static_cast<size_t>(first_row)];
    const int32_t n = committed(i);
    if (n == 0) continue;  // nothing of it committed (a preempted sequence)
    SYV_CHECK_LT(seq.num_computed, seq.length()) << "seq " << seq.id();
    for (int32_t p = c0; p < c0 + n; ++p) {
      b.token_ids.push_back(seq.tokens[static_cast<size_t>(p) + 1]);
      b.positions.push_back(p);
      if (per_row) {  // its own one-token sequence, and a logits row
        b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
        b.context_lens.push_back(p + 1);
        b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
        pages.push_back(&seq.pages);
      }
    }
    runs_.push_back({first_row, row, n});
    row += n;
    if (!per_row) {
      b.seq_starts.push_back(row);
      b.context_lens.push_back(c0 + n);
      pages.push_back(&seq.pages);
    }
    if (!s.wants_logits || seq.state != SequenceState::kDecoding) continue;
    const int32_t room = draft_room(seq, k_, max_model_len_);  // the adaptive policy's budget too
    if (room <= 0) continue;
    if (!per_row) b.logit_rows.push_back(row - 1);
    Chain c;
    c.seq = &seq;
    c.room = room;
    // Its row among the head's logits rows: the last committed position's.
    c.row = per_row ? row - 1 : static_cast<int32_t>(b.logit_rows.size()) - 1;
    c.pages = seq.pages;
    chains_.push_back(std::move(c));
  }
  if (row == 0) return;
  SYV_CHECK(!outputs.token_hidden.empty())
      << "mtp drafter: the target returned no per-token hidden states";
  set_page_table(batch_, pages, per_row ? table_width() : 1);
  Model::Outputs head;
  run_head(outputs.token_hidden, row, head);
  head_rows_ += row;
  if (chains_.empty()) return;
  greedy_ids(model_.backend(), head.logits, host_logits_, ids_);
  for (Chain& c : chains_) c.drafts.push_back(ids_[static_cast<size_t>(c.row)]);
  extend_chains(head.hidden);
  for (Chain& c : chains_) ready_[c.seq->id()] = Ready{c.seq->length(), std::move(c.drafts)};
}

void MtpDrafter::extend_chains(Tensor last_out) {
  Model::Outputs head;
  Batch& b = batch_;
  for (;;) {
    runs_.clear();
    clear_batch(b);
    std::vector<const std::vector<int32_t>*> pages;
    int32_t row = 0;
    for (Chain& c : chains_) {
      const int32_t have = static_cast<int32_t>(c.drafts.size());
      if (have >= c.room) continue;
      // Draft `have` at position t + have, t = the sequence's last computed position.
      const int32_t pos = c.seq->num_computed - 1 + have;
      bool mapped = true;
      while (static_cast<int32_t>(c.pages.size()) * page_size_ <= pos) {
        if (pool_.num_free() == 0) {  // borrow only free pages: never evict a cached prefix
          mapped = false;
          break;
        }
        const int32_t page = pool_.allocate();
        borrowed_.push_back(page);
        c.pages.push_back(page);
      }
      if (!mapped) {
        c.room = have;
        continue;
      }
      b.token_ids.push_back(c.drafts.back());
      b.positions.push_back(pos);
      runs_.push_back({c.row, row, 1});
      c.row = row++;
      b.seq_starts.push_back(row);
      b.context_lens.push_back(pos + 1);
      b.logit_rows.push_back(c.row);
      pages.push_back(&c.pages);
    }
    if (row == 0) break;
    set_page_table(batch_, pages, table_width());
    // Copied out of the head's workspace before the next run reuses it.
    run_head(last_out, row, head);
    head_rows_ += row;
    last_out = head.hidden;
    greedy_ids(model_.backend(), head.logits, host_logits_, ids_);
    for (Chain& c : chains_) {
      if (static_cast<int32_t>(c.drafts.size()) < c.room)
        c.drafts.push_back(ids_[static_cast<size_t>(c.row)]);
    }
  }
  for (int32_t page : borrowed_) pool_.release(page);
  borrowed_.clear();
}

}  // namespace syv
