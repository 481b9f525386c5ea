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
  if (hidden_.bytes() < need) hidden_ = b.allocate(std::max(need, 2 * hidden_.bytes()));
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
  int32_t row = 0;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const ScheduledSeq& s = step.seqs[i];
    Sequence& seq = *s.seq;
    const int32_t first_row = batch.seq_starts[i];
    const int32_t c0 = batch.positions[static_cast<size_t>(first_row)];
    const int32_t n = seq.num_computed - c0;  // positions committed this step
    SYV_CHECK(n >= 0 && n <= batch.seq_len(static_cast<int32_t>(i)))
        << "seq " << seq.id() << ": " << n << " committed of " << batch.seq_len(i) << " fed";
    if (n == 0) continue;  // nothing of it committed (a preempted sequence)
    SYV_CHECK_LT(seq.num_computed, seq.length()) << "seq " << seq.id();
    for (int32_t p = c0; p < c0 + n; ++p) {
      b.token_ids.push_back(seq.tokens[static_cast<size_t>(p) + 1]);
      b.positions.push_back(p);
    }
    runs_.push_back({first_row, row, n});
    row += n;
    b.seq_starts.push_back(row);
    b.context_lens.push_back(c0 + n);
    pages.push_back(&seq.pages);
    if (!s.wants_logits || seq.state != SequenceState::kDecoding) continue;
    const int32_t room = draft_room(seq, k_, max_model_len_);  // the adaptive policy's budget too
    if (room <= 0) continue;
    b.logit_rows.push_back(row - 1);
    Chain c;
    c.seq = &seq;
    c.room = room;
    c.row = static_cast<int32_t>(b.logit_rows.size()) - 1;
    c.pages = seq.pages;
    chains_.push_back(std::move(c));
  }
  if (row == 0) return;
  SYV_CHECK(!outputs.token_hidden.empty())
      << "mtp drafter: the target returned no per-token hidden states";
  set_page_table(batch_, pages);
  Model::Outputs head;
  model_.mtp_forward(b, gather_hidden(outputs.token_hidden, row), head);
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
    set_page_table(batch_, pages);
    // Copied out of the head's workspace before the next run reuses it.
    model_.mtp_forward(b, gather_hidden(last_out, row), head);
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
