#include "backend/host_batch_meta.h"

#include <algorithm>

#include "backend/backend.h"
#include "core/check.h"

namespace syv {

namespace {

void pack_state_saves(const Batch& batch, std::vector<int32_t>& out) {
  out.clear();
  const int32_t n = batch.num_state_saves();
  SYV_CHECK_EQ(batch.state_save_dests.size(), batch.state_save_after.size())
      << "state_save_dests vs state_save_after";
  if (n == 0) {
    SYV_CHECK(batch.state_save_starts.empty() || batch.state_save_starts.back() == 0)
        << "state_save_starts without saves";
    return;
  }
  const int32_t S = batch.num_seqs();
  SYV_CHECK_EQ(static_cast<int32_t>(batch.state_save_starts.size()), S + 1) << "state_save_starts";
  SYV_CHECK(batch.state_save_starts.front() == 0 && batch.state_save_starts.back() == n)
      << "state_save_starts must run from 0 to " << n;
  SYV_CHECK_EQ(static_cast<int32_t>(batch.state_slots.size()), S) << "state saves need state_slots";
  // A padding sequence (slot -1) may carry saves: a verify graph's dummy sequences keep the
  // captured shape that way (engine/graph_runner.h). Every backend skips a slot -1 sequence, its
  // saves included, so they are never written.
  for (int32_t s = 0; s < S; ++s) {
    int32_t prev = 0;
    for (int32_t i = batch.state_save_starts[s]; i < batch.state_save_starts[s + 1]; ++i) {
      const int32_t after = batch.state_save_after[static_cast<size_t>(i)];
      SYV_CHECK(after > prev && after <= batch.seq_len(s))
          << "sequence " << s << ": state save after " << after << " of " << batch.seq_len(s)
          << " new tokens (ascending, from 1)";
      SYV_CHECK(batch.state_save_dests[static_cast<size_t>(i)] >= 0) << "state save dest";
      prev = after;
    }
  }
  out.reserve(static_cast<size_t>(S + 1 + 2 * n));
  out.insert(out.end(), batch.state_save_starts.begin(), batch.state_save_starts.end());
  out.insert(out.end(), batch.state_save_after.begin(), batch.state_save_after.end());
  out.insert(out.end(), batch.state_save_dests.begin(), batch.state_save_dests.end());
}

}  // namespace

HostBatchMeta build_host_batch_meta(const Batch& batch, int32_t page_size) {
  SYV_CHECK(page_size > 0) << "page_size " << page_size;
  const int32_t num_tokens = batch.num_tokens();
  const int32_t num_seqs = batch.num_seqs();
  SYV_CHECK_EQ(batch.positions.size(), batch.token_ids.size()) << "positions vs token_ids";
  SYV_CHECK(num_seqs > 0 || num_tokens == 0) << "tokens without sequences";
  SYV_CHECK_EQ(static_cast<int32_t>(batch.context_lens.size()), num_seqs) << "context_lens";
  if (num_seqs > 0) {
    SYV_CHECK_EQ(batch.seq_starts.front(), 0) << "seq_starts[0]";
    SYV_CHECK_EQ(batch.seq_starts.back(), num_tokens) << "seq_starts[S]";
  }

  HostBatchMeta meta;
  meta.max_pages_per_seq = batch.max_pages_per_seq;
  SYV_CHECK_EQ(static_cast<int64_t>(batch.page_table.size()),
               static_cast<int64_t>(num_seqs) * batch.max_pages_per_seq)
      << "page_table is [num_seqs, max_pages_per_seq]";
  meta.page_table = batch.page_table;
  if (meta.page_table.empty()) {  // keep the tensor non-empty so views stay valid
    meta.page_table.assign(std::max(num_seqs, 1), -1);
    meta.max_pages_per_seq = 1;
  }
  meta.context_lens = batch.context_lens;
  meta.slot_mapping.resize(num_tokens);
  meta.token_seq.resize(num_tokens);
  meta.state_slots = batch.state_slots;
  if (meta.state_slots.empty()) meta.state_slots.assign(num_seqs, -1);
  SYV_CHECK_EQ(static_cast<int32_t>(meta.state_slots.size()), num_seqs) << "state_slots";
  pack_state_saves(batch, meta.state_saves);

  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t begin = batch.seq_starts[s];
    const int32_t end = batch.seq_starts[s + 1];
    const int32_t context = batch.context_lens[s];
    SYV_CHECK(begin <= end) << "seq_starts not ascending at " << s;
    SYV_CHECK(end - begin <= context)
        << "sequence " << s << ": " << end - begin << " new tokens but context_len " << context;
    const bool paged = !batch.page_table.empty();
    SYV_CHECK(!paged || static_cast<int64_t>(context) <=
                            static_cast<int64_t>(batch.max_pages_per_seq) * page_size)
        << "sequence " << s << ": context " << context << " exceeds " << batch.max_pages_per_seq
        << " pages of " << page_size;
    if (paged) {  // attention reads every position < context through the page table
      for (int32_t j = 0; j * page_size < context; ++j) {
        SYV_CHECK(batch.page_table[static_cast<size_t>(s) * batch.max_pages_per_seq + j] >= 0)
            << "sequence " << s << ": page " << j << " of its context " << context
            << " is unmapped";
      }
    }
    meta.max_seq_len = std::max(meta.max_seq_len, end - begin);
    meta.max_context_len = std::max(meta.max_context_len, context);
    for (int32_t t = begin; t < end; ++t) {
      const int32_t pos = batch.positions[t];
      SYV_CHECK_EQ(pos, context - (end - t))
          << "sequence " << s << " token " << t << ": new tokens must be the tail of the context";
      meta.token_seq[t] = s;
      if (!paged) {  // a batch for a model without paged layers
        meta.slot_mapping[t] = -1;
        continue;
      }
      const int32_t page =
          batch.page_table[static_cast<size_t>(s) * batch.max_pages_per_seq + pos / page_size];
      SYV_CHECK(page >= 0) << "sequence " << s << ": position " << pos << " has no page";
      meta.slot_mapping[t] = page * page_size + pos % page_size;
    }
  }
  for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
    SYV_CHECK(batch.logit_rows[r] >= 0 && batch.logit_rows[r] < num_tokens)
        << "logit_rows[" << r << "] = " << batch.logit_rows[r] << " of " << num_tokens;
    SYV_CHECK(r == 0 || batch.logit_rows[r] > batch.logit_rows[r - 1]) << "logit_rows ascending";
  }
  return meta;
}

StateSaves StateSaves::of(const BatchMeta& meta, const Tensor& save_to) {
  StateSaves v;
  v.count = meta.num_state_saves;
  if (v.count == 0) return v;
  SYV_CHECK(meta.host != nullptr) << "state saves need the host batch";
  const int64_t S = meta.seq_starts.numel() - 1;
  SYV_CHECK_EQ(meta.state_saves.numel(), S + 1 + 2 * int64_t{v.count}) << "meta.state_saves";
  SYV_CHECK(!save_to.empty()) << "the batch saves state but the op was given no checkpoints";
  for (int32_t d : meta.host->state_save_dests) {
    SYV_CHECK(d >= 0 && d < save_to.dim(0))
        << "state save into checkpoint " << d << " of " << save_to.dim(0);
  }
  v.starts = meta.state_saves.as<const int32_t>();
  v.after = v.starts + S + 1;
  v.dests = v.after + v.count;
  return v;
}

}  // namespace syv
