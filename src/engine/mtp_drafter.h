// MTP speculative decoding: the checkpoint's multi-token-prediction head (model/mtp_head.h,
// WAVE2-SPECS B.2) proposes each decoding sequence's next k tokens, greedily (the argmax of its
// logits), for the engine's verify step (drafter.h).
//
// The head attends over its own K/V of every earlier position, computed from the target's final
// hidden state there and the token after it. It lives in the head's paged-KV layer (the last
// layer of the model's CacheSpec): every page of a sequence holds the head's K/V of its positions
// beside the target's, so pages, the prefix cache and preemption carry it with no bookkeeping of
// their own. Invariant after each step: the head's K/V is valid for a running sequence's
// positions [0, num_computed). observe() keeps it:
//
//  1. catch-up: for every scheduled sequence, the positions p it committed this step run through
//     the head with the target's hidden row of p (Outputs::token_hidden) and token p + 1 (always
//     known after commit: the next prompt token or the token just sampled), writing their K/V.
//     The row of a decoding sequence's last position t gives draft 1.
//  2. chain: draft j + 1 is the head run again on (draft j, its own `out`) at position t + j. Its
//     K/V goes to the sequence's pages beyond what it computed, or to free pages of the pool
//     borrowed for the chain and returned right after (never evicting a cached page: a sequence
//     whose chain would need one gets fewer drafts). Those slots are rewritten by step 1 once the
//     positions are really computed.
//
// Prefix reuse: the head's K/V at a page's last position depends on the token after the page, so
// with MTP the prefix cache keys a page on its tokens plus the next one (PrefixCache lookahead
// 1); a hit then holds valid head K/V for all its positions, and a preempted sequence re-admitted
// on its own cached pages likewise. A hybrid sequence whose draft was rejected commits its
// pending token and the accepted drafts like a dense one (the verify pass kept the state after
// each position: HybridState).
//
// Not thread-safe: the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/batch.h"
#include "engine/drafter.h"
#include "engine/graph_runner.h"
#include "kv/page_pool.h"
#include "model/model.h"

namespace syv {

class MtpDrafter : public Drafter {
 public:
  // model.has_mtp() and bound to the engine's cache; `pool` the engine's page pool of pages of
  // `page_size` tokens (ids are the
  // store's page ids); up to `num_speculative_tokens` drafts per sequence, none beyond
  // max_model_len or a request's max_tokens.
  MtpDrafter(Model& model, PagePool& pool, int32_t page_size, int32_t num_speculative_tokens,
             int32_t max_model_len);
  // Destroys the head's graphs and ends its workspace reservation.
  ~MtpDrafter() override;

  // CUDA graphs for the head's forwards (the engine's GraphRunner is on, with `config`; the model
  // supports_mtp_graphs(): they are captured and replayed on its backend()). The head's batches
  // are then built decode-shaped: every row its own one-token sequence (a catch-up row at
  // position p attends over [0, p], its own chunk's keys written by the same forward first, as
  // before) and every row a logits row, so a forward of R rows replays the graph of the smallest
  // bucket of rows >= R (graph_buckets(max_batch)), padded with dummy rows on config.dummy_page;
  // more rows run eagerly. `max_tokens` / `max_rows`: the largest eager head forward (the step's
  // token budget; one logits row per sequence), reserved with the graphs' so no buffer moves.
  void enable_graphs(const GraphConfig& config, int64_t max_tokens, int64_t max_rows);
  // Builds the head's batches decode-shaped without graphs too (tests: the CPU backend has none,
  // and the drafts must not change).
  void set_decode_shaped(bool on) { decode_shaped_ = on; }

  void observe(const SchedulerOutput& step, const Batch& batch,
               const Model::Outputs& outputs) override;
  // The drafts observe() prepared for this sequence at its current length (none otherwise).
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override;

  // Head rows run so far (catch-up and chain), for tests and logs.
  int64_t head_rows() const { return head_rows_; }
  // Head forwards replayed as graphs.
  int64_t head_graph_runs() const { return head_graph_runs_; }

 private:
  struct Chain {
    Sequence* seq = nullptr;
    int32_t room = 0;            // drafts wanted
    int32_t row = 0;             // its row among the last head run's logits rows
    std::vector<int32_t> pages;  // the sequence's pages, then borrowed ones
    std::vector<int32_t> drafts;
  };
  // Runs the head again for every chain still short of its drafts, from the previous run's `out`
  // rows (`last_out`, row Chain::row each), until each has them or no free page to go on.
  void extend_chains(Tensor last_out);
  // Copies rows runs_ name from `src` [*, H] into hidden_ [rows, H]; returns that view.
  Tensor gather_hidden(const Tensor& src, int32_t rows);
  // Runs the head on batch_, its hidden input the rows runs_ name in `src`: as a graph when
  // graphs are on, the batch is decode-shaped and a bucket holds it; else eagerly.
  void run_head(const Tensor& src, int32_t rows, Model::Outputs& head);
  // The page-table width of the head's batches (graphs: the graphs' fixed width).
  int32_t table_width() const { return graphs_ ? graphs_->config.pages_per_seq : 1; }

  struct HeadGraphs {
    GraphConfig config;
    std::vector<int32_t> buckets;         // rows
    std::vector<int> ids;                 // graph id per bucket, -1 until captured
    std::vector<Model::Outputs> outputs;  // per bucket, as the captured forward returned them
    Batch padded;                         // the batch the captured forwards read
  };

  struct Run {
    int32_t src = 0, dst = 0, count = 0;  // rows
  };
  struct Ready {
    int32_t length = 0;  // the sequence's length the drafts follow
    std::vector<int32_t> drafts;
  };

  Model& model_;
  PagePool& pool_;
  int32_t k_;
  int32_t max_model_len_;
  int32_t page_size_;
  Batch batch_;  // the head's batch, reused
  std::vector<Run> runs_;
  std::vector<Chain> chains_;
  std::vector<int32_t> borrowed_;
  DeviceBuffer hidden_;  // the head's hidden input rows
  std::vector<float> host_logits_;
  std::vector<int32_t> ids_;
  std::unordered_map<uint64_t, Ready> ready_;  // by Sequence::id(), for the next step only
  int64_t head_rows_ = 0;
  std::unique_ptr<HeadGraphs> graphs_;  // null: every head forward eager
  bool decode_shaped_ = false;          // set_decode_shaped()
  int64_t head_graph_runs_ = 0;
};

}  // namespace syv
