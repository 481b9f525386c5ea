// The memory planner: how many KV pages fit on the device after the weights and the activation
// peak, under --gpu-memory-utilization. Pure arithmetic (no device calls), so `syv inspect` and the
// tests can print the same plan the server uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/gdn_chunks.h"
#include "core/status.h"

namespace syv {

// Reserved beside weights, activations and KV: the CUDA context and libraries (1 GiB) and the
// backend's scratch (cuBLASLt workspace, batch metadata, attention partials).
constexpr size_t kRuntimeReserveBytes = (size_t{1} << 30) + (size_t{96} << 20);
// The reserve of a backend holding `scratch_bytes` of scratch (CUDA: the cuBLASLt workspace, the
// load's dequantization buffer, attention partials): 1 GiB for the context and libraries beside
// it, at least kRuntimeReserveBytes. What serve, bench and inspect all plan with.
inline size_t runtime_reserve_bytes(size_t scratch_bytes) {
  return std::max(kRuntimeReserveBytes, scratch_bytes + (size_t{1} << 30));
}

struct MemoryPlanInput {
  size_t total_bytes = 0;            // device memory (cudaMemGetInfo total)
  double utilization = 0.90;         // --gpu-memory-utilization, in (0, 1]
  size_t weight_bytes = 0;           // weights as stored on the device
  size_t activation_peak_bytes = 0;  // measured (or estimated) peak of one step's activations
  size_t other_bytes = 0;            // runtime reservations: CUDA context, cuBLAS workspace...
  int64_t kv_bytes_per_token = 0;    // K and V of every attention layer for one token
  int64_t state_bytes_per_slot = 0;  // hybrids: one sequence's recurrent state (conv + delta rule)
  int64_t state_slots = 0;           // live slots + checkpoints + verify states
  int32_t page_size = 64;
  int64_t max_position = 0;  // max_position_embeddings (0: unknown)
};

struct MemoryPlan {
  int64_t pages = 0;
  int64_t tokens = 0;    // pages * page_size
  int64_t kv_bytes = 0;  // tokens * kv_bytes_per_token
  int64_t bytes_per_token = 0;
  int64_t max_context = 0;  // min(tokens, max_position)
  int32_t page_size = 0;
  size_t budget_bytes = 0;  // total * utilization
  int64_t state_slots = 0;  // recurrent-state slots reserved before the pool (hybrids)
  int64_t state_bytes = 0;  // their bytes

  // "KV pool: N tokens (P pages of 64), B bytes/token, max context M" and, for hybrids,
  // "; recurrent state: S slots x B MB = G GB"
  std::string summary() const;
};

// Fails (with the numbers) when the utilization is out of range or nothing is left for one page.
Result<MemoryPlan> plan_memory(const MemoryPlanInput& in);

// Activation bytes of one Qwen3 step of `tokens` tokens in bf16 (the model's workspace), used when
// no measurement exists yet (syv inspect): h, x, q, k, v, attn, o, gate_up, act rows.
size_t estimate_qwen3_activation_bytes(int64_t tokens, int64_t hidden, int64_t q_dim,
                                       int64_t kv_dim, int64_t intermediate, int64_t vocab,
                                       int64_t logit_rows);

// Chunks a step's chunked gated delta rule may have beyond ceil(tokens / 64) and still take the
// three phases (CUDA gated_delta_phases.cu); a batch with more (many short sequences, state saves
// inside chunks) takes the one-kernel walk, which needs no scratch.
constexpr int64_t kGdnPhasesSpareChunks = 32;
// The most chunks a step of `tokens` tokens may have and take the three phases (`spare`: what
// the memory plan counts beyond ceil(tokens / 64), gdn_phases_spare_chunks() below; at most
// kGdnPhasesSpareChunks, the backend's own limit).
inline int64_t gdn_phases_max_chunks(int64_t tokens, int64_t spare = kGdnPhasesSpareChunks) {
  return (tokens + kGdnChunkTokens - 1) / kGdnChunkTokens +
         std::clamp<int64_t>(spare, 0, kGdnPhasesSpareChunks);
}
// The most checkpoint saves HybridState::plan_saves puts in one sequence's chunk of a step (its
// resend, extension, shared and interval boundaries; engine/hybrid_state.cpp asserts it).
constexpr int64_t kMaxBoundarySavesPerChunk = 4;
// The chunks beyond ceil(tokens / 64) that a step of an engine running at most `max_num_seqs`
// sequences, each with at most `speculative_tokens` drafts, can have (gdn_chunk_bound): each
// sequence of the step adds at most one partial chunk and one chunk a state save (its boundary
// saves and one verify save a draft); at most kGdnPhasesSpareChunks, past which a batch takes the
// one kernel. So the scratch the phases grow to stays within what the memory plan counts for it.
inline int64_t gdn_phases_spare_chunks(int64_t max_num_seqs, int64_t speculative_tokens) {
  const int64_t per_seq = 1 + kMaxBoundarySavesPerChunk + std::max<int64_t>(speculative_tokens, 0);
  return std::min(kGdnPhasesSpareChunks, std::max<int64_t>(max_num_seqs, 1) * per_seq);
}
// The three phases' scratch for a step of `tokens` tokens with at most `spare_chunks` chunks beyond
// ceil(tokens / 64) (hybrids; 0 without linear-attention value heads): per chunk and value head
// U/Δ and Oq [64][dv] and W, Γq, Λk [64][128] f32, the chunk table and Γ_last. The CUDA test
// GdnPhasesScratchWithinThePlan checks it bounds cuda::gdn_phases_scratch_bytes().
size_t estimate_gdn_phases_scratch_bytes(int64_t tokens, int64_t value_heads,
                                         int64_t value_head_dim,
                                         int64_t spare_chunks = kGdnPhasesSpareChunks);
// The CUDA backend's MoE tiled-path scratch for a step of `tokens` tokens (backend/moe_scratch.h:
// one pass's routing lists and act and y rows; 0 for a dense model, experts <= 0), which the
// backend allocates at a MoE model's first step of more than kMoeGemvMaxTokens tokens, after the
// plan: counted with the step's activations.
size_t estimate_moe_scratch_bytes(int64_t tokens, int64_t top_k, int64_t experts, int64_t hidden,
                                  int64_t moe_inter);

}  // namespace syv
