// The host-side arrays behind BatchMeta, derived from a Batch once per forward. Every backend's
// prepare_batch() builds these (and uploads them, on a device backend).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/batch.h"

namespace syv {

struct HostBatchMeta {
  std::vector<int32_t> context_lens;  // [S]
  std::vector<int32_t> page_table;    // [S, max_pages_per_seq] (-1 padded); [S, 1] of -1 when empty
  std::vector<int32_t> slot_mapping;  // [T]: page_id * page_size + offset of each new token
  std::vector<int32_t> token_seq;     // [T]: sequence index of each token
  std::vector<int32_t> state_slots;   // [S]: -1 when the batch has none
  // Batch::state_save_* packed: [S + 1 starts | N after | N dests]; empty when N = 0.
  std::vector<int32_t> state_saves;
  int32_t max_pages_per_seq = 0;
  int32_t max_seq_len = 0;
  int32_t max_context_len = 0;
};

// Validates the batch's internal consistency (aborts with context on a violated invariant: these
// are programmer errors of the engine, not user input) and derives the arrays above:
//  * seq_starts ascending from 0 to T; positions of sequence s are consecutive and end at
//    context_lens[s] - 1 (the new tokens are the tail of the context);
//  * every page a new token lands in is mapped (>= 0); logit_rows ascending and < T.
HostBatchMeta build_host_batch_meta(const Batch& batch, int32_t page_size);

}  // namespace syv
