#include "engine/draft_model_drafter.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "engine/drafter_batch.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace syv {

Result<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::create(
    Model& draft, int64_t target_vocab, int32_t page_size, int32_t num_pages,
    int32_t num_speculative_tokens, int32_t max_model_len, int32_t catchup_tokens) {
  const CacheSpec spec = draft.cache_spec();
  if (spec.has_recurrent_state()) {
    return Status::Error("draft model: " + draft.config().model_type +
                         " has recurrent (linear-attention) layers; a draft model must be a "
                         "dense model such as qwen3 (use --speculative-method mtp for the "
                         "hybrid's own MTP head)");
  }
  if (draft.config().vocab_size != target_vocab) {
    return Status::Error("draft model: vocab_size " + std::to_string(draft.config().vocab_size) +
                         " differs from the target's " + std::to_string(target_vocab) +
                         "; the draft must share the target's tokenizer");
  }
  if (num_speculative_tokens < 1 || num_pages < 1 || page_size < 1 || catchup_tokens < 1) {
    return Status::Error("draft model: needs num_speculative_tokens >= 1 and a KV pool, found " +
                         std::to_string(num_speculative_tokens) + " and " +
                         std::to_string(num_pages) + " pages");
  }
  CacheConfig config;
  config.page_size = page_size;
  config.num_pages = num_pages;
  SYV_ASSIGN_OR_RETURN(std::unique_ptr<CacheStore> store, make_cache_store(draft, config));
  return std::unique_ptr<DraftModelDrafter>(
      new DraftModelDrafter(draft, std::move(store), page_size, num_pages, num_speculative_tokens,
                            max_model_len, catchup_tokens));
}

DraftModelDrafter::DraftModelDrafter(Model& draft, std::unique_ptr<CacheStore> store,
                                     int32_t page_size, int32_t num_pages, int32_t k,
                                     int32_t max_model_len, int32_t catchup_tokens)
    : draft_(draft),
      store_(std::move(store)),
      pool_(num_pages),
      page_size_(page_size),
      k_(k),
      max_model_len_(max_model_len),
      catchup_tokens_(catchup_tokens) {}

std::string DraftModelDrafter::describe() const {
  std::ostringstream s;
  s << draft_.config().model_type << " (" << draft_.config().num_hidden_layers << " layers, hidden "
    << draft_.config().hidden_size << "), its own KV pool of " << pool_.num_pages() << " pages of "
    << page_size_ << " tokens (" << (store_->total_bytes() >> 20) << " MiB)";
  return s.str();
}

void DraftModelDrafter::propose(const Sequence& seq, int32_t max_tokens,
                                std::vector<int32_t>& out) {
  auto it = ready_.find(seq.id());
  if (it == ready_.end() || it->second.length != seq.length()) return;
  const std::vector<int32_t>& d = it->second.drafts;
  out.insert(out.end(), d.begin(), d.begin() + std::min<int64_t>(max_tokens, d.size()));
}

void DraftModelDrafter::forget(const Sequence& seq) {
  auto it = seqs_.find(seq.id());
  if (it == seqs_.end()) return;
  for (auto p = it->second.pages.rbegin(); p != it->second.pages.rend(); ++p) pool_.release(*p);
  seqs_.erase(it);
  ready_.erase(seq.id());
}

bool DraftModelDrafter::grow(SeqState& st, int32_t end) {
  const int32_t need = (end + page_size_ - 1) / page_size_ - static_cast<int32_t>(st.pages.size());
  if (need <= 0) return true;
  if (need > pool_.num_free()) return false;
  for (int32_t i = 0; i < need; ++i) st.pages.push_back(pool_.allocate());
  return true;
}

void DraftModelDrafter::observe(const SchedulerOutput& step, const Batch& batch,
                                const Model::Outputs& outputs) {
  (void)batch;
  (void)outputs;
  ready_.clear();
  chains_.clear();
  clear_batch(batch_);
  Batch& b = batch_;
  std::vector<const std::vector<int32_t>*> pages;
  // 1. Catch-up of every sequence that decodes next: [computed, L), logits at L - 1.
  for (const ScheduledSeq& s : step.seqs) {
    const Sequence& seq = *s.seq;
    if (!s.wants_logits || seq.state != SequenceState::kDecoding) continue;
    const int32_t L = seq.length();
    const int32_t room = draft_room(seq, k_, max_model_len_);  // the adaptive policy's budget too
    if (room <= 0) continue;
    SeqState& st = seqs_[seq.id()];
    // The last chain's positions whose drafted token the sequence kept are still valid.
    int32_t valid = std::min(st.computed, st.chain_start);
    if (st.computed > st.chain_start) {
      for (size_t i = 0; i < st.chain.size(); ++i) {
        const int32_t p = st.chain_start + static_cast<int32_t>(i);
        if (p >= L || seq.tokens[static_cast<size_t>(p)] != st.chain[i]) break;
        valid = p + 1;
      }
    }
    st.computed = std::min(valid, L - 1);  // the last token is always fed: its logits are draft 1
    st.chain.clear();
    st.chain_start = L;
    // Pages for the catch-up and the whole chain (positions up to L - 1 + room - 1).
    if (!grow(st, L + room - 1)) continue;
    const int32_t left = catchup_tokens_ - b.num_tokens();
    if (left <= 0) continue;
    const int32_t end = std::min(L, st.computed + left);  // a partial catch-up has no drafts yet
    for (int32_t p = st.computed; p < end; ++p) {
      b.token_ids.push_back(seq.tokens[static_cast<size_t>(p)]);
      b.positions.push_back(p);
    }
    b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(end);
    st.computed = end;
    pages.push_back(&st.pages);
    if (end < L) continue;
    b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
    Chain c;
    c.seq = &seq;
    c.state = &st;
    c.room = room;
    c.row = static_cast<int32_t>(b.logit_rows.size()) - 1;
    chains_.push_back(std::move(c));
  }
  if (b.token_ids.empty()) return;
  set_page_table(batch_, pages);
  Model::Outputs out;
  draft_.forward(b, out);
  draft_rows_ += b.num_tokens();
  greedy_ids(draft_.backend(), out.logits, host_logits_, ids_);
  for (Chain& c : chains_) c.drafts.push_back(ids_[static_cast<size_t>(c.row)]);
  // 2. Chain: draft j at position L - 1 + j gives draft j + 1.
  for (;;) {
    clear_batch(batch_);
    pages.clear();
    for (Chain& c : chains_) {
      const int32_t have = static_cast<int32_t>(c.drafts.size());
      c.fed = have < c.room;
      if (!c.fed) continue;
      const int32_t pos = c.seq->length() - 1 + have;
      b.token_ids.push_back(c.drafts.back());
      b.positions.push_back(pos);
      b.seq_starts.push_back(static_cast<int32_t>(b.token_ids.size()));
      b.context_lens.push_back(pos + 1);
      b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
      c.row = static_cast<int32_t>(b.logit_rows.size()) - 1;
      c.state->chain.push_back(c.drafts.back());
      c.state->computed = pos + 1;
      pages.push_back(&c.state->pages);
    }
    if (b.token_ids.empty()) break;
    set_page_table(batch_, pages);
    draft_.forward(b, out);
    draft_rows_ += b.num_tokens();
    greedy_ids(draft_.backend(), out.logits, host_logits_, ids_);
    for (Chain& c : chains_)
      if (c.fed) c.drafts.push_back(ids_[static_cast<size_t>(c.row)]);
  }
  for (Chain& c : chains_) ready_[c.seq->id()] = Ready{c.seq->length(), std::move(c.drafts)};
}

}  // namespace syv
