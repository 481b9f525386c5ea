// Decode steps as CUDA graphs, one graph per batch-size bucket (as vLLM does).
//
// A step whose scheduled sequences all feed exactly one token and want its logits (a plain decode
// step), S of them with S <= the largest bucket, runs as the graph of the smallest bucket B >= S:
// the batch is padded to B sequences with dummy ones (token 0 at position 0, context 1) whose K/V
// land in the *dummy page*, a page the model's cache has beyond the scheduler's pool (so padding
// rows read and write valid memory that no sequence maps, and the pool's accounting and
// check_integrity() never see it). Only the first S logits rows are sampled. Every other step
// (prefill chunks, mixed prefill + decode, S > the largest bucket) runs eagerly.
//
// What a capture bakes in, and how each is held fixed for the replays:
//  * token / sequence / logit-row counts: the bucket B;
//  * page-table width: pages_per_seq = ceil(max_model_len / page_size) for every graph batch;
//  * activation buffers: Model::reserve() at full size before the first capture;
//  * decode attention's split count: on CUDA it follows the batch shape only (each block finds
//    its key range from its token's context on the device), so one graph serves every context;
//    Backend::set_fixed_max_context(max_model_len) fixes it where it would follow the context
//    (batch-invariant mode), for eager steps too, so a step gives the same bits either way;
//  * batch metadata: re-read from each graph's own staging (Backend::stage_batch()).
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

namespace syv {

class Model;

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

// Whether `step` is a plain decode step of 1..max_batch sequences: each feeds exactly one token
// and wants its logits.
bool is_graph_step(const SchedulerOutput& step, int32_t max_batch);

// `out` = `real` (a decode batch: S sequences of one token each, every row a logits row, no state
// slots) followed by bucket - S dummy sequences: token 0 at position 0, context 1, page table row
// [dummy_page, -1, ...]. The page-table width stays real.max_pages_per_seq. Reuses out's vectors.
void pad_decode_batch(const Batch& real, int32_t bucket, int32_t dummy_page, Batch& out);

struct GraphConfig {
  GraphMode mode = GraphMode::kOff;
  int32_t max_batch = 0;       // largest bucket
  int32_t page_size = 0;       // of the KV pages
  int32_t pages_per_seq = 0;   // page-table width of every graph batch
  int32_t dummy_page = -1;     // page id the padding rows write (outside the scheduler's pool)
  int64_t max_context = 0;     // Backend::set_fixed_max_context()
  int64_t max_tokens = 0;      // Model::reserve(): the largest forward() of any step
  int64_t max_logit_rows = 0;  //   and its most logits rows
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

  // Captures every bucket not captured yet, largest first.
  void capture_all();
  // Whether run() can take this step.
  bool accepts(const SchedulerOutput& step) const { return is_graph_step(step, config_.max_batch); }
  // Runs `batch` (Runner::build() of an accepted step, page-table width pages_per_seq) padded to
  // its bucket, capturing the bucket first when needed; returns its logits rows: f32 [S, V] in
  // backend memory, valid until the next forward or replay.
  Tensor run(const Batch& batch);

 private:
  void capture(size_t bucket);

  Model& model_;
  GraphConfig config_;
  std::vector<int32_t> buckets_;
  std::vector<int> ids_;        // graph id per bucket; -1 until captured
  std::vector<Tensor> logits_;  // per bucket: logits [B, V] as the captured forward returned them
  Batch padded_;                // the batch every captured forward reads, refilled each step
};

}  // namespace syv
