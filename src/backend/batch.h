// The one thing the engine hands the model each step: several sequences packed back to back.
// It lives in backend/ (below model/ and engine/) because backend ops and their batch metadata
// read it too.
// The model never sees the scheduler; it sees this.
#pragma once

#include <cstdint>
#include <vector>

namespace syv {

struct Batch {
  // Per token --------------------------------------------------------------------------------
  std::vector<int32_t> token_ids;  // [num_tokens], all sequences packed back to back
  std::vector<int32_t> positions;  // [num_tokens], position of each token in its sequence

  // Per sequence -----------------------------------------------------------------------------
  std::vector<int32_t> seq_starts;    // [num_seqs + 1], offsets into token_ids
  std::vector<int32_t> context_lens;  // [num_seqs], tokens in the cache after this step
                                      // (= last position + 1); the new tokens are the tail
  // Paged KV: page ids of each sequence, row-major [num_seqs, max_pages_per_seq], padded with -1.
  // Page j of a sequence holds positions [j * page_size, (j + 1) * page_size).
  std::vector<int32_t> page_table;
  int32_t max_pages_per_seq = 0;
  // Recurrent state (hybrid models): slot holding each sequence's live state, or -1.
  // The state in the slot must correspond to exactly positions [0, first new position).
  // [num_seqs] (empty for models without recurrent layers). -1 marks a padding sequence (a CUDA
  // graph's bucket filler): its tokens go through the layers, its recurrent state is neither read
  // nor written, and its outputs mean nothing.
  std::vector<int32_t> state_slots;
  // In-pass state saves (hybrid models): the recurrent state of every linear-attention layer
  // (conv window and delta-rule state) as it stands after the first `state_save_after[i]` new
  // tokens of its sequence is also written to checkpoint `state_save_dests[i]` (an index into the
  // store's checkpoints), so a prefill leaves checkpoints inside its chunk without stopping there.
  // CSR per sequence: saves of sequence s are [state_save_starts[s], state_save_starts[s + 1]),
  // their `after` ascending in [1, seq_len(s)]. All three empty when the batch saves nothing.
  std::vector<int32_t> state_save_starts;  // [num_seqs + 1] or empty
  std::vector<int32_t> state_save_after;   // [num_saves]
  std::vector<int32_t> state_save_dests;   // [num_saves]

  // Outputs ----------------------------------------------------------------------------------
  // Rows of token_ids whose logits are wanted (e.g. the last token of each sequence), ascending.
  std::vector<int32_t> logit_rows;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const {
    return static_cast<int32_t>(seq_starts.empty() ? 0 : seq_starts.size() - 1);
  }
  int32_t seq_len(int32_t s) const { return seq_starts[s + 1] - seq_starts[s]; }
  int32_t num_state_saves() const { return static_cast<int32_t>(state_save_after.size()); }
};

}  // namespace syv
