// Turns a scheduled step into the model's Batch: packed token ids and positions, per-sequence
// starts, context lengths and page tables, and the rows whose logits are needed. Reuses its
// vectors from step to step (no allocation in the steady state).
//
// A verify step (speculative decoding) feeds a sequence's drafts after its pending tokens and
// wants num_drafts + 1 consecutive logits rows for it, then a row per filler position of a padded
// verify step (engine/verify_padding.h); a chunk with prompt rows (prompt logprobs)
// wants a row at each of those positions, before its sampling rows. row_owner() maps each logits
// row back to its scheduled sequence; rows are ascending.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/batch.h"
#include "engine/scheduler.h"

namespace syv {

class Runner {
 public:
  // Fills batch() from `step`. Each sequence's pages must cover its new tokens. The page table is
  // at least `min_pages_per_seq` wide (CUDA graph steps use one fixed width).
  const Batch& build(const SchedulerOutput& step, int32_t min_pages_per_seq = 0);
  const Batch& batch() const { return batch_; }
  // Index into step.seqs of each logits row (same order as batch().logit_rows).
  const std::vector<int32_t>& row_owner() const { return row_owner_; }

 private:
  Batch batch_;
  std::vector<int32_t> row_owner_;
};

}  // namespace syv
