#include "engine/drafter_batch.h"

#include <algorithm>

#include "engine/sequence.h"

namespace syv {

int32_t draft_room(const Sequence& seq, int32_t k, int32_t max_model_len, bool with_budget) {
  const int32_t room = std::min(
      {k, seq.params().max_tokens - seq.num_generated() - 1, max_model_len - seq.length() - 1});
  return with_budget ? std::min(room, seq.draft_budget) : room;
}

void greedy_ids(Backend& backend, const Tensor& logits, std::vector<float>& host_scratch,
                std::vector<int32_t>& ids) {
  const int64_t R = logits.dim(0), V = logits.dim(1);
  ids.assign(static_cast<size_t>(R), 0);
  if (R == 0) return;
  if (backend.supports_sampling()) {  // temperature 0 rows: the argmax, lowest id on ties
    backend.sample(logits, std::vector<SampleRow>(static_cast<size_t>(R)), {}, ids.data());
    return;
  }
  host_scratch.resize(static_cast<size_t>(R * V));
  backend.download(host_scratch.data(), logits.data, host_scratch.size() * sizeof(float));
  for (int64_t r = 0; r < R; ++r) {
    const float* row = host_scratch.data() + r * V;
    ids[static_cast<size_t>(r)] = static_cast<int32_t>(std::max_element(row, row + V) - row);
  }
}

void clear_batch(Batch& b) {
  b.token_ids.clear();
  b.positions.clear();
  b.seq_starts.assign(1, 0);
  b.context_lens.clear();
  b.state_slots.clear();
  b.logit_rows.clear();
}

void set_page_table(Batch& b, const std::vector<const std::vector<int32_t>*>& pages,
                    int32_t min_width) {
  int32_t width = std::max(1, min_width);
  for (const auto* p : pages) width = std::max(width, static_cast<int32_t>(p->size()));
  b.max_pages_per_seq = width;
  b.page_table.assign(pages.size() * static_cast<size_t>(width), -1);
  for (size_t s = 0; s < pages.size(); ++s)
    std::copy(pages[s]->begin(), pages[s]->end(), b.page_table.begin() + s * width);
}

}  // namespace syv
