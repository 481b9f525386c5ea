// Decode and verify steps as CUDA graphs, one graph per (batch-size bucket, tokens per sequence)
// (vLLM buckets decode batches the same way).
//
// A step whose S scheduled sequences each feed exactly q tokens, their pending token then q - 1
// drafts and filler positions (q = 1: a plain decode step; q > 1: a speculative verify step, its
// uneven draft counts padded to q - 1 first when the engine pads them: engine/verify_padding.h),
// all wanting logits, with S <= the largest bucket and q <= max_query, runs as the
// graph of (the smallest bucket B >= S, q): the batch is padded to B sequences with dummy ones (q
// tokens 0 at positions 0..q-1, context q) whose K/V land in the *dummy page*, a page the model's
// cache has beyond the scheduler's pool (so padding rows read and write valid memory that no
// sequence maps, and the pool's accounting and check_integrity() never see it). Only the first
// S * q logits rows are sampled (a filler position's row is computed and never read). Every other
// step (prefill chunks, mixed prefill + decode, a verify step whose padding the pool cannot hold,
// S > the largest bucket) runs eagerly.
//
// What a capture bakes in, and how each is held fixed for the replays:
//  * token / sequence / logit-row counts: B * q, B, B * q;
//  * hybrids' in-pass state saves of a verify step (HybridState::plan_verify_saves): q - 1 per
//    sequence, the dummy sequences' included (they have no state slot, so the recurrent kernels
//    skip them and their saves);
//  * page-table width: pages_per_seq = ceil(max_model_len / page_size) for every graph batch;
//  * activation buffers: Model::reserve() at full size before the first capture;
//  * decode attention's split count: on CUDA it follows the batch shape only (each block finds
//    its key range from its token's context on the device), so one graph serves every context;
//    Model::set_fixed_max_context(max_model_len) fixes it where it would follow the context
//    (batch-invariant mode), for eager steps too, so a step gives the same bits either way;
//  * batch metadata: re-read from each graph's own staging (Model::stage_graph_batch()).
// Captures, replays and the rest go through the model's graph hooks (model.h), so a model over
// several backends (tensor_parallel.h) captures and replays every one in step.
// A replay returns the forward's Outputs (logits, and the per-token final hidden states an MTP
// drafter reads), views of the captured buffers, valid until the next forward or replay.
// With padding, real rows share the batch with dummy ones: their bits equal an eager step of the
// same S only where the kernels are batch-invariant (Backend::set_batch_invariant()).
//
// Not thread-safe: owned by the engine thread (EngineCore).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/batch.h"
#include "backend/tensor.h"
#include "core/status.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace syv {

enum class GraphMode : uint8_t {
  kOff,    // every step eager
  kLazy,   // a bucket's graph is captured the first time a step needs it
  kEager,  // every bucket is captured at start-up (largest first)
};
// "off" | "lazy" | "eager"; the error names the engine option cuda_graphs and the choices.
Result<GraphMode> parse_graph_mode(const std::string& text);
const char* to_string(GraphMode mode);

// Bucket sizes up to max_batch (>= 1), ascending: 1, 2, 4, 8, then each power of two from 16 on
// and its midpoint (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, ...), with max_batch itself last
// when it is not one of them. For S > 16 a padded step has fewer than 1.5 S rows.
std::vector<int32_t> graph_buckets(int32_t max_batch);

// Index of the smallest bucket >= n in ascending `buckets`, or -1 when n > buckets.back().
int32_t bucket_index(const std::vector<int32_t>& buckets, int32_t n);

// Tokens per sequence q when `step` can run as a graph, else 0: 1..max_batch sequences, each
// feeding its one pending token then q - 1 <= max_query - 1 drafts and filler positions, wanting
// their logits and no prompt-logprob rows, and with `saves_per_draft` * (q - 1) in-pass state
// saves each (hybrids: 1, the verify saves; dense models: 0).
int32_t graph_step_query(const SchedulerOutput& step, int32_t max_batch, int32_t max_query,
                         int32_t saves_per_draft);
// graph_step_query(step, max_batch, 1, 0) > 0: a plain decode step.
bool is_graph_step(const SchedulerOutput& step, int32_t max_batch);

// `out` = `real` (S sequences of q tokens each, every row a logits row in order, state saves
// q - 1 per sequence or none) followed by bucket - S dummy sequences: tokens 0 at positions
// 0..q-1, context q, page table row [dummy_page, -1, ...], state slot -1 (hybrids), and as many
// state saves as a real sequence (after 1..q-1, into checkpoint 0: never written, the slot being
// -1). The page-table width stays real.max_pages_per_seq. Reuses
// out's vectors. q <= the page size (the dummy sequence's positions fit the dummy page).
void pad_decode_batch(const Batch& real, int32_t bucket, int32_t dummy_page, Batch& out);
// `out` = `bucket` dummy sequences of q tokens (as pad_decode_batch() appends them), page-table
// width `width`; `state_slots`: each with slot -1; `saves`: each with q - 1 verify saves. The batch
// a graph is captured on (GraphRunner, the MTP head's graphs).
void dummy_decode_batch(int32_t bucket, int32_t q, int32_t width, int32_t dummy_page,
                        bool state_slots, bool saves, Batch& out);

struct GraphConfig {
  GraphMode mode = GraphMode::kOff;
  int32_t max_batch = 0;       // largest bucket
  int32_t max_query = 1;       // tokens per sequence at most: 1 + the verify steps' drafts
  int32_t page_size = 0;       // of the KV pages
  int32_t pages_per_seq = 0;   // page-table width of every graph batch
  int32_t dummy_page = -1;     // page id the padding rows write (outside the scheduler's pool)
  int64_t max_context = 0;     // Model::set_fixed_max_context()
  int64_t max_tokens = 0;      // Model::reserve(): the largest forward() of any step
  int64_t max_logit_rows = 0;  //   and its most logits rows (both >= max_batch * max_query)
};

class GraphRunner {
 public:
  // Reserves the model's buffers and fixes the backend's context-dependent choices (the model
  // must support graphs). Captures nothing yet: see capture_all() and run().
  GraphRunner(Model& model, const GraphConfig& config);
  // Destroys the graphs, ends the model's reservation and unfixes the backend's context.
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  const GraphConfig& config() const { return config_; }
  const std::vector<int32_t>& buckets() const { return buckets_; }
  int32_t num_captured() const;
  // The bucket a step of `num_seqs` sequences runs as (-1: more than the largest bucket).
  int32_t bucket_for(int32_t num_seqs) const {
    const int32_t i = bucket_index(buckets_, num_seqs);
    return i < 0 ? -1 : buckets_[static_cast<size_t>(i)];
  }

  // Captures every plain decode bucket (q = 1) not captured yet, largest first, then the verify
  // graphs (q = 2..max_query) of the buckets of at most `verify_max_batch` sequences. The other
  // verify graphs are captured on first use.
  void capture_all(int32_t verify_max_batch = 0);
  // Whether run() can take this step.
  bool accepts(const SchedulerOutput& step) const { return query_of(step) > 0; }
  // The q (>= 2) to pad a verify step of uneven draft counts to (Scheduler::pad_verify) so that
  // run() takes it, or 0 (engine/verify_padding.h).
  int32_t padded_query(const SchedulerOutput& step) const;
  // Runs `batch` (Runner::build() of an accepted step, page-table width pages_per_seq) padded to
  // its bucket, capturing its graph first when needed. Returns the forward's outputs for the real
  // rows: logits f32 [S * q, V], hidden and token_hidden [S * q, H] (empty where the model has
  // none), in backend memory, valid until the next forward or replay.
  Model::Outputs run(const Batch& batch);

 private:
  int32_t query_of(const SchedulerOutput& step) const {
    return graph_step_query(step, config_.max_batch, config_.max_query, saves_per_draft_);
  }
  size_t graph_index(size_t bucket, int32_t q) const {
    return bucket * static_cast<size_t>(config_.max_query) + static_cast<size_t>(q - 1);
  }
  void capture(size_t bucket, int32_t q);

  Model& model_;
  GraphConfig config_;
  int32_t saves_per_draft_;  // 1 for a model with recurrent state (its verify saves), else 0
  std::vector<int32_t> buckets_;
  // Per (bucket, q), at graph_index(): graph id (-1 until captured) and the outputs the captured
  // forward returned (logits [B * q, V], hidden states [B * q, H]).
  std::vector<int> ids_;
  std::vector<Model::Outputs> outputs_;
  Batch padded_;  // the batch every captured forward reads, refilled each step
};

}  // namespace syv
