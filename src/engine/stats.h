// Engine counters for /metrics and logs. The engine thread owns the live copy and publishes a
// snapshot after every step; Engine::stats() returns that snapshot (thread-safe).
#pragma once

#include <array>
#include <cstdint>

namespace syv {

// Draft positions the speculation counters track (= kMaxSpeculativeTokens, engine.h).
inline constexpr int32_t kSpecPositions = 16;

struct EngineStats {
  // Monotonic counters (since start) -------------------------------------------------------------
  uint64_t steps = 0;             // forward passes run
  uint64_t prompt_tokens = 0;     // prompt tokens of admitted requests (once per request)
  uint64_t generated_tokens = 0;  // tokens sampled, all samples
  uint64_t prefix_query_tokens =
      0;                           // prompt tokens looked up in the prefix cache (first admission)
  uint64_t prefix_hit_tokens = 0;  // of those, tokens served from cached pages
  // Tokens fed through the model (prefill + decode + drafts + recompute; a padded verify step's
  // filler positions are counted apart, in verify_padding_tokens).
  uint64_t computed_tokens = 0;
  uint64_t preemptions = 0;        // sequences preempted (recompute)
  uint64_t requests_finished = 0;  // requests whose every sample ended by stop/length
  uint64_t requests_aborted = 0;   // requests cancelled (or aborted by stop(drain=false))
  // Speculative decoding (engine/drafter.h; 0 without a drafter)
  uint64_t draft_tokens = 0;     // drafts fed to the model in verify steps
  uint64_t accepted_tokens = 0;  // of those, drafts kept (each one a generated token)
  // Sequence-steps where a decoding sequence with room for drafts asked for none: the adaptive
  // policy (engine/spec_policy.h) found they would not pay, or the batch-size cutoff.
  uint64_t draft_skipped = 0;
  // Steps whose drafts (all but probes) the adaptive policy dropped because, with CUDA graphs,
  // their uneven draft counts would cost the whole batch more than they bring (spec_policy.h).
  uint64_t spec_steps_dropped = 0;
  // By draft position i (0 = the first draft after the sequence's last token): drafts fed there,
  // and of those, kept. accepted_at[i] / drafts_at[i] is the acceptance rate at depth i + 1.
  std::array<uint64_t, kSpecPositions> drafts_at{}, accepted_at{};
  // tokens_per_verify[n]: times a sequence's verify step (one with drafts) produced n tokens (its
  // kept drafts + the target's own next token; 1..k + 1). The mean is the tokens per step.
  std::array<uint64_t, kSpecPositions + 2> tokens_per_verify{};
  // Where the engine thread's time goes in the steps that ran a forward (wall seconds; issue 19's
  // "GPU idle between steps"): the three add up to the steps' time. The GPU runs only inside
  // forward_seconds (launch, the forward, sampling, until the sampled ids or logits are on the
  // host); schedule and output are host work the GPU waits for, as steps are not overlapped.
  double schedule_seconds = 0;  // drafts proposed, scheduler, batch built
  double forward_seconds = 0;   // forward (graph or eager) + sampling, ids/logits downloaded
  double output_seconds = 0;    // sampled tokens checked, committed, emitted (detokenized)
  // Of those steps, the plain decode steps (one token per sequence, no drafts) and the others
  // (prefill chunks, verify steps, mixed): their forward time, apart, so a benchmark can set the
  // decode steps against their bandwidth floor (weights + the K/V of decode_context_tokens).
  uint64_t decode_steps = 0;
  uint64_t decode_rows = 0;            // sequences in them (sum over the steps)
  uint64_t decode_context_tokens = 0;  // K/V positions they attend over (sum over the rows)
  double decode_forward_seconds = 0;
  uint64_t other_steps = 0;
  uint64_t other_tokens = 0;  // tokens fed in them (prefill chunks, decode rows, drafts; no filler)
  double other_forward_seconds = 0;
  // Gauges (after the last step) -----------------------------------------------------------------
  int32_t pages_total = 0;
  int32_t pages_used = 0;    // referenced by a live sequence
  int32_t pages_cached = 0;  // unreferenced but holding a cached prefix (reusable, evictable)
  int32_t pages_free = 0;    // empty
  int32_t running = 0;       // sequences holding pages
  int32_t waiting = 0;       // sequences queued for admission (incl. preempted)
  // Hybrid models (0 otherwise): recurrent-state slots and checkpoints (docs/hybrid-cache.md).
  int32_t state_slots_used = 0;
  int32_t state_slots_total = 0;    // one per max_num_seqs
  int32_t checkpoints_total = 0;    // pool capacity, in checkpoints
  int64_t checkpoint_bytes = 0;     // pool capacity, in bytes (checkpoints_total x state bytes/seq)
  int32_t checkpoints_held = 0;     // claimed by live sequences
  int32_t checkpoints_cached = 0;   // kept by the retention policy, reusable, evictable
  uint64_t checkpoints_saved = 0;   // counter: checkpoints written
  uint64_t checkpoints_shared = 0;  // counter: boundaries whose checkpoint already existed
  uint64_t checkpoints_skipped = 0;  // counter: boundaries not saved (every entry held)
  uint64_t checkpoints_loaded = 0;   // counter: prefix hits restored from a checkpoint

  // Host tier (kv/host_tier.h; 0 when off) ------------------------------------------------------
  int32_t host_pages_total = 0;  // gauge: capacity in pages
  int32_t host_pages_used = 0;   // gauge: pages resident
  int32_t host_pages_kept =
      0;  // gauge: of those, kept for preempted sequences (HostTier::want_pages)
  int32_t host_checkpoints_total = 0;     // gauge: capacity in checkpoints (hybrids)
  int32_t host_checkpoints_used = 0;      // gauge: checkpoints resident
  uint64_t prefix_host_hit_tokens = 0;    // counter: of prefix_hit_tokens, served from the host
  uint64_t host_page_hits = 0;            // counter: pages copied back to the device
  uint64_t host_checkpoint_hits = 0;      // counter: checkpoints copied back into a state slot
  uint64_t host_pages_stored = 0;         // counter: evicted pages written to the host
  uint64_t host_pages_written_ahead = 0;  // counter: pages written to the host before eviction
  uint64_t host_write_ahead_waits = 0;   // counter: evictions that followed a write-ahead in flight
  uint64_t host_checkpoints_stored = 0;  // counter: evicted checkpoints written to the host
  uint64_t host_bytes_to_host = 0;       // counter: bytes copied device -> host
  uint64_t host_bytes_from_host = 0;     // counter: bytes copied host -> device
  double host_copy_seconds = 0;     // counter: host time issuing those copies (CPU: the copies)
  int64_t host_pinned_bytes = 0;    // gauge: host tier memory pinned so far
  uint64_t host_pieces_pinned = 0;  // counter: pieces pinned (between steps)
  double host_pin_seconds = 0;      // counter: engine-thread time pinning them
  uint64_t host_stores_short = 0;   // counter: evictions not written back: reserve ran dry
  bool host_idle_pinning = false;   // gauge: idle, the engine would still pin (the whole tier)

  // CUDA graphs of the decode buckets (engine/graph_runner.h; 0 when off) ------------------------
  uint64_t graph_steps = 0;         // counter: steps replayed as their bucket's graph
  uint64_t graph_verify_steps = 0;  // counter: of those, speculative verify steps (q > 1 tokens)
  uint64_t graph_padding_rows = 0;  // counter: dummy sequences those steps carried (bucket - S)
  // Verify steps of uneven draft counts padded to one count (engine/verify_padding.h): the steps,
  // the filler positions they fed (computed, never kept), and the steps left unpadded because the
  // pool's free pages could not hold the filler positions (those ran eagerly), and the steps left
  // unpadded because the filler would cost more than a replay saves (verify_padding_pays()).
  uint64_t verify_padded_steps = 0;
  uint64_t verify_padding_tokens = 0;
  uint64_t verify_padding_refused = 0;
  uint64_t verify_padding_skipped = 0;
  int32_t graphs_captured = 0;  // gauge: graphs captured so far (decode and verify)
};

}  // namespace syv
