// How the chunked gated delta rule cuts a sequence's new tokens into chunks, shared by CUDA's
// chunk table (gated_delta_phases.cu) and the host's bound on their count, which sizes that
// table's scratch (CudaBackend::gated_delta_rule): a chunk ends every kGdnChunkTokens tokens from
// the sequence's start or its last state save, and at each save, so that the state after a save's
// token count is the state after a chunk.
#pragma once

#include <cstdint>

#include "backend/batch.h"

#if defined(__CUDACC__)
#define SYV_GDN_HOST_DEVICE __host__ __device__
#else
#define SYV_GDN_HOST_DEVICE
#endif

namespace syv {

constexpr int kGdnChunkTokens = 64;

// Calls emit(first token, length, save) for each chunk of a sequence of `len` new tokens whose
// state saves fall after after[0 .. n) tokens (strictly ascending, in [1, len]: Batch's contract,
// host_batch_meta.cpp checks it), in order; `save` is the index into after[] of the save that
// ends the chunk, or -1.
template <typename Emit>
SYV_GDN_HOST_DEVICE inline void for_each_gdn_chunk(int32_t len, const int32_t* after, int32_t n,
                                                   Emit&& emit) {
  int32_t next = 0;
  int32_t segment_end = next < n ? after[next] : len;
  for (int32_t c0 = 0; c0 < len;) {
    const int32_t left = segment_end - c0;
    const int32_t L = left < kGdnChunkTokens ? left : kGdnChunkTokens;
    int32_t save = -1;
    if (c0 + L == segment_end && next < n) {
      save = next++;
      segment_end = next < n ? after[next] : len;
    }
    emit(c0, L, save);
    c0 += L;
  }
}

// At least the number of chunks of `batch`'s sequences of chunked_from new tokens or more:
// ceil(len / kGdnChunkTokens) each, plus one for each of its saves (each ends at most one chunk
// early).
inline int64_t gdn_chunk_bound(const Batch& batch, int32_t chunked_from) {
  int64_t chunks = 0;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t len = batch.seq_len(s);
    if (len < chunked_from || len == 0) continue;
    chunks += (len + kGdnChunkTokens - 1) / kGdnChunkTokens;
    if (!batch.state_save_starts.empty())
      chunks += batch.state_save_starts[s + 1] - batch.state_save_starts[s];
  }
  return chunks;
}

}  // namespace syv
