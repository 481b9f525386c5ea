#include "engine/verify_padding.h"

#include <algorithm>

namespace syv {

int32_t padded_verify_query(const SchedulerOutput& step, int32_t max_batch, int32_t max_query,
                            int32_t saves_per_draft, int32_t max_model_len) {
  const size_t n = step.seqs.size();
  if (n == 0 || n > static_cast<size_t>(max_batch)) return 0;
  int32_t most = 0, fewest = step.seqs.front().num_drafts;
  for (const ScheduledSeq& s : step.seqs) {
    if (s.num_pending() != 1 || !s.wants_logits || s.num_prompt_rows > 0 || s.num_padding > 0)
      return 0;
    most = std::max(most, s.num_drafts);
    fewest = std::min(fewest, s.num_drafts);
  }
  const int32_t q = 1 + most;
  if (most == fewest || q > max_query) return 0;
  // The in-pass saves: exactly saves_per_draft x drafts per sequence, grouped in batch order.
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const ScheduledSeq& s = step.seqs[i];
    const size_t count = static_cast<size_t>(saves_per_draft) * static_cast<size_t>(s.num_drafts);
    for (size_t j = 0; j < count; ++j, ++at)
      if (at >= step.state_saves.size() || static_cast<size_t>(step.state_saves[at].seq_index) != i)
        return 0;
    if (s.seq->num_computed + q > max_model_len) return 0;
  }
  return at == step.state_saves.size() ? q : 0;
}

bool verify_padding_pays(const SchedulerOutput& step, int32_t q, double knee) {
  const int64_t batch = static_cast<int64_t>(step.seqs.size());
  int64_t filler = 0;
  for (const ScheduledSeq& s : step.seqs) filler += q - 1 - s.num_drafts;
  return static_cast<double>(filler) <=
         kVerifyPaddingCostBound * (static_cast<double>(batch) + std::max(knee, 0.0));
}

}  // namespace syv
