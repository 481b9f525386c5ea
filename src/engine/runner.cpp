#include "engine/runner.h"

#include <algorithm>

#include "core/check.h"

namespace syv {

const Batch& Runner::build(const SchedulerOutput& step, int32_t min_pages_per_seq) {
  Batch& b = batch_;
  const size_t num_seqs = step.seqs.size();
  b.token_ids.resize(static_cast<size_t>(step.num_tokens));
  b.positions.resize(static_cast<size_t>(step.num_tokens));
  b.seq_starts.resize(num_seqs + 1);
  b.context_lens.resize(num_seqs);
  b.state_slots.clear();
  b.state_save_starts.clear();
  b.state_save_after.clear();
  b.state_save_dests.clear();
  b.logit_rows.clear();
  row_owner_.clear();

  int32_t max_pages = min_pages_per_seq;
  for (const ScheduledSeq& s : step.seqs)
    max_pages = std::max(max_pages, static_cast<int32_t>(s.seq->pages.size()));
  b.max_pages_per_seq = max_pages;
  b.page_table.assign(num_seqs * static_cast<size_t>(max_pages), -1);

  int32_t row = 0;
  for (size_t i = 0; i < num_seqs; ++i) {
    const ScheduledSeq& s = step.seqs[i];
    const Sequence& seq = *s.seq;
    const int32_t begin = seq.num_computed, fed_end = begin + s.num_pending();
    const int32_t end = fed_end + s.num_drafts + s.num_padding;
    SYV_CHECK(s.num_pending() > 0 && fed_end <= seq.length() &&
              s.num_drafts <= static_cast<int32_t>(seq.drafts.size()) &&
              (s.num_drafts + s.num_padding == 0 || (s.wants_logits && fed_end == seq.length())) &&
              (s.num_padding == 0 || s.num_prompt_rows == 0))
        << "seq " << seq.id() << " chunk " << begin << ".." << fed_end << " + " << s.num_drafts
        << " drafts + " << s.num_padding << " filler positions";
    b.seq_starts[i] = row;
    std::copy(seq.tokens.begin() + begin, seq.tokens.begin() + fed_end, b.token_ids.begin() + row);
    std::copy(seq.drafts.begin(), seq.drafts.begin() + s.num_drafts,
              b.token_ids.begin() + row + s.num_pending());
    // Filler positions repeat the last token fed before them (engine/verify_padding.h).
    const int32_t last_real = row + s.num_new_tokens - 1;
    std::fill_n(b.token_ids.begin() + last_real + 1, s.num_padding,
                b.token_ids[static_cast<size_t>(last_real)]);
    for (int32_t pos = begin; pos < end; ++pos)
      b.positions[static_cast<size_t>(row + pos - begin)] = pos;
    row += s.num_fed();
    b.context_lens[i] = end;
    std::copy(seq.pages.begin(), seq.pages.end(),
              b.page_table.begin() + static_cast<std::ptrdiff_t>(i * max_pages));
    if (seq.state_slot >= 0) b.state_slots.push_back(seq.state_slot);  // hybrid models
    if (s.num_prompt_rows > 0) {  // prompt logprobs: rows inside the chunk, before the last
      SYV_CHECK(s.prompt_rows_from >= begin && s.prompt_rows_from + s.num_prompt_rows <= fed_end &&
                s.prompt_rows_from + s.num_prompt_rows < seq.prompt_len())
          << "seq " << seq.id() << ": prompt rows " << s.prompt_rows_from << " + "
          << s.num_prompt_rows << " outside chunk " << begin << ".." << fed_end;
      for (int32_t p = s.prompt_rows_from; p < s.prompt_rows_from + s.num_prompt_rows; ++p) {
        b.logit_rows.push_back(b.seq_starts[i] + p - begin);
        row_owner_.push_back(static_cast<int32_t>(i));
      }
    }
    if (s.wants_logits) {  // the last token's row, each draft's, each filler position's
      for (int32_t r = row - 1 - s.num_drafts - s.num_padding; r < row; ++r) {
        b.logit_rows.push_back(r);
        row_owner_.push_back(static_cast<int32_t>(i));
      }
    }
  }
  b.seq_starts[num_seqs] = row;
  if (!step.state_saves.empty()) {  // CSR over the batch's sequences
    b.state_save_starts.assign(num_seqs + 1, 0);
    for (const SchedulerOutput::StateSave& v : step.state_saves) {
      SYV_CHECK(v.seq_index >= 0 && static_cast<size_t>(v.seq_index) < num_seqs)
          << "state save of batch sequence " << v.seq_index;
      ++b.state_save_starts[static_cast<size_t>(v.seq_index) + 1];
      b.state_save_after.push_back(v.after);
      b.state_save_dests.push_back(v.checkpoint);
    }
    for (size_t i = 0; i < num_seqs; ++i) b.state_save_starts[i + 1] += b.state_save_starts[i];
  }
  SYV_CHECK(b.state_slots.empty() || b.state_slots.size() == num_seqs)
      << "some scheduled sequences have a state slot and some do not";
  SYV_CHECK_EQ(row, step.num_tokens) << "scheduled token count";
  return b;
}

}  // namespace syv
