#include "backend/host_batch_meta.h"

#include <algorithm>

#include "core/check.h"

namespace syv {

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

}  // namespace syv
