// The engine's side of hybrid models (recurrent-state layers beside paged attention): a state slot
// per running sequence, checkpoints saved on checkpoint boundaries and matched with the pages, and
// the retention policy applied when a sequence ends. The Scheduler calls these hooks when it has a
// HybridState (EngineCore creates one for a model whose cache_spec() has recurrent state).
//
// Rules (docs/hybrid-cache.md has the reasoning and the reuse formulas):
//  * admission needs a free slot; a prefix hit is the longest cached page prefix (at most
//    length - 1 tokens) that ends on a stored checkpoint; that checkpoint is loaded into the slot
//    (no hit: the slot is zeroed, CacheStore::reset_slot(); the model never resets a slot itself);
//  * boundaries strictly inside a scheduled chunk are saved by the forward pass (plan_saves(),
//    Batch::state_save_*); after a step, a sequence whose computed length is a boundary saves (or
//    shares) a checkpoint there; either way it holds the checkpoint until it ends;
//  * preemption frees the slot but keeps the holds (the recompute resumes from them);
//  * finish and abort free the slot and release every hold, retained as the policy says;
//  * verify steps (speculative decoding) feed drafts that may be rejected, and a recurrent state
//    cannot be stepped back: the verify pass saves the state after each position that could be
//    the last accepted one (in-pass saves into k *verify entries* per slot, beyond the pool:
//    state_bytes_per_seq x k x max_num_seqs of extra memory, reserved only when speculation is
//    on); when a draft is rejected the entry of the last accepted position is copied into the
//    slot (accept_verified()), so the state covers exactly the accepted tokens and nothing is fed
//    again.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "kv/checkpoint_pool.h"
#include "kv/prefix_cache.h"

namespace syv {

class CacheStore;
class Sequence;

struct HybridCounters {
  uint64_t checkpoints_saved = 0;      // fresh checkpoints written (CacheStore::save_checkpoint)
  uint64_t checkpoints_shared = 0;     // boundaries whose checkpoint already existed
  uint64_t checkpoints_skipped = 0;    // boundaries with no entry to spare (every one held)
  uint64_t checkpoints_loaded = 0;     // prefix hits restored into a slot (either tier)
  uint64_t checkpoints_from_host = 0;  // of those, restored from the host tier
};

class HybridState {
 public:
  // `verify_entries`: k, the store's verify entries per slot after the pool's checkpoints
  // (checkpoint id num_checkpoints + slot * k + j holds the state after j + 1 of a verify chunk's
  // tokens); 0 without speculation.
  HybridState(CacheStore& store, CheckpointGeometry geometry, RetentionPolicy policy,
              int32_t num_slots, int32_t num_checkpoints, int32_t verify_entries = 0);

  const CheckpointGeometry& geometry() const { return geometry_; }
  const RetentionPolicy& policy() const { return policy_; }
  const CheckpointPool& pool() const { return pool_; }
  const HybridCounters& counters() const { return counters_; }

  // The host tier (kv/host_tier.h; null: none): evicted cached checkpoints are written back to it,
  // and trim_hit() also finds checkpoints there. Set once, before the first step.
  void set_host_tier(HostTier* host);

  bool has_free_slot() const { return pool_.num_free_slots() > 0; }
  // Shortens `hit` (device pages, then host pages) to the longest prefix ending on a stored
  // checkpoint, a device one (hit.checkpoint) or else a host-tier one (hit.host_checkpoint); an
  // empty hit when there is none. When the pages went further, their end becomes the sequence's
  // shared boundary (once): a checkpoint boundary, kept by every policy.
  void trim_hit(Sequence* seq, PrefixHit& hit) const;
  // Tokens of a chunk starting at `begin` of at most n tokens that end on a checkpoint boundary
  // when one lies inside (verify steps stop their drafts there: a state after a draft that may be
  // rejected cannot be saved).
  int32_t snap_chunk(const Sequence& seq, int32_t begin, int32_t n) const;
  // The sequence is admitted with the (trimmed, acquired) hit, num_computed == hit.length: takes a
  // slot and restores the hit's checkpoint into it, or zeroes it when there is no hit. A host
  // checkpoint is unpinned and its copy enqueued, not waited for: returns that load (recorded in
  // the host tier's loads(); the empty ticket otherwise), which the slot must not be read or
  // written before it settles.
  LoadTicket admit(Sequence* seq, const PrefixHit& hit);
  // A chunk feeding tokens [begin, end) of the sequence is scheduled: the checkpoint boundaries
  // strictly inside it (its prompt's R and E, its shared boundary, the last multiple of the
  // interval) are saved by the forward pass itself (Batch::state_save_*), so the chunk never stops
  // on them. For each one without a checkpoint yet, takes a hold on a fresh entry and appends
  // {after = boundary - begin, entry} to `saves`; an existing one is held again. `key_of(length)`:
  // the chain key of the sequence's first `length` tokens (length page-aligned, <= end). Entries
  // taken here are invisible to trim_hit() until end_step(): their content is written by this
  // step's forward.
  struct Save {
    int32_t after = 0, checkpoint = -1;
  };
  void plan_saves(Sequence* seq, int32_t begin, int32_t end,
                  const std::function<uint64_t(int32_t)>& key_of, std::vector<Save>& saves);
  // After the step's forward (its in-pass saves are written): makes their entries usable.
  void end_step() { pending_.clear(); }
  // After the step advanced seq->num_computed and registered its full pages: saves a checkpoint if
  // the computed length is a checkpoint boundary.
  void after_step(Sequence* seq);
  // Verify steps. plan_verify_saves: a chunk of `pending` tokens then `drafts` (<= k) drafts is
  // scheduled; appends the saves after pending + a tokens (a = 0 .. drafts - 1 drafts accepted)
  // into the slot's verify entries. accept_verified: after the step, `accepted` < drafts of them
  // were kept: the slot gets the state after pending + accepted tokens back.
  int32_t verify_entries() const { return verify_entries_; }
  void plan_verify_saves(const Sequence& seq, int32_t pending, int32_t drafts,
                         std::vector<Save>& saves) const;
  void accept_verified(const Sequence& seq, int32_t accepted);
  void preempt(Sequence* seq);  // frees the slot, keeps the holds
  void finish(Sequence* seq);   // frees the slot, releases the holds by the retention policy

  // Pool integrity plus: each running sequence holds one slot, no other does, no two share one;
  // each checkpoint's refcount equals the holds of live sequences; holds sit on boundaries, in
  // increasing order, and name a checkpoint of that length. "" when sound.
  std::string check_integrity(const std::vector<Sequence*>& running,
                              const std::deque<Sequence*>& waiting) const;

 private:
  bool is_boundary(const Sequence& seq, int32_t length) const;
  // Takes a hold on the checkpoint of seq's first `length` tokens (chain key `key`) unless the
  // sequence holds it already. Returns the entry to fill now, or -1 (held already, shared, or no
  // entry to spare).
  int32_t hold(Sequence* seq, int32_t length, uint64_t key);

  CacheStore& store_;  // the engine's; the state slots and checkpoints live there
  CheckpointGeometry geometry_;
  RetentionPolicy policy_;
  CheckpointPool pool_;
  int32_t verify_entries_;
  HybridCounters counters_;
  HostTier* host_ = nullptr;
  std::vector<int32_t> pending_;  // entries this step's forward is writing (plan_saves)
};

}  // namespace syv
