// What the model-backed drafters (mtp_drafter.h, draft_model_drafter.h) share: the greedy ids of
// their logits rows and the page table of their own batches.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/batch.h"

namespace syv {

class Sequence;

// The drafts a decoding sequence may take next step: at most k, none past its max_tokens (every
// draft kept is a generated token, and one more is sampled after them) or max_model_len, and
// (with_budget) at most what the adaptive policy allowed it (Sequence::draft_budget). <= 0: none.
int32_t draft_room(const Sequence& seq, int32_t k, int32_t max_model_len, bool with_budget = true);

// The argmax of each logits row (lowest id on ties): on the device when the backend samples there
// (only the ids cross to the host), else on the host. logits f32 [R, V] in `backend` memory; ids
// gets R entries. host_scratch: reused host buffer.
void greedy_ids(Backend& backend, const Tensor& logits, std::vector<float>& host_scratch,
                std::vector<int32_t>& ids);

// Empties b's per-token and per-sequence fields for a new batch (seq_starts = {0}).
void clear_batch(Batch& b);

// b.page_table / max_pages_per_seq from each batch sequence's page list (padded with -1), at
// least `min_width` pages wide.
void set_page_table(Batch& b, const std::vector<const std::vector<int32_t>*>& pages,
                    int32_t min_width = 1);

}  // namespace syv
