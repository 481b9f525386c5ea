// Draft-model speculative decoding: a second, smaller model with the target's vocabulary (e.g.
// Qwen3-0.6B for Qwen3-8B; models/tiny-draft for models/tiny-dense) proposes each decoding
// sequence's next k tokens greedily (the argmax of its logits), for the engine's verify step
// (drafter.h). vLLM's `--speculative-config '{"model": ...}'`, llama.cpp's `--model-draft`.
//
// The draft keeps its own paged KV cache (its own CacheStore and PagePool, made here), one page
// list per sequence, valid for the sequence's positions [0, computed). observe(), after each step,
// for every scheduled sequence that decodes next:
//  1. catch-up: positions [computed, L) (L = the sequence's length, its last token just sampled)
//     in one batched forward of every such sequence; the logits row of position L - 1 gives
//     draft 1;
//  2. chain: draft j is fed at position L - 1 + j and gives draft j + 1 (k - 1 batched forwards of
//     one token per sequence).
// The chain's positions hold drafted tokens: the next catch-up keeps the K/V of those the target
// accepted (they match seq.tokens) and feeds the rest again. A sequence whose pages cannot grow
// (the draft's pool is full) gets no drafts that step. forget() returns a finished or aborted
// sequence's pages; a preempted one keeps them (its tokens do not change).
//
// The draft must be a model without recurrent state (a dense Qwen3): a hybrid draft would need
// per-position states of its own, and is refused by create().
//
// Not thread-safe: the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/batch.h"
#include "core/status.h"
#include "engine/drafter.h"
#include "kv/cache_store.h"
#include "kv/page_pool.h"
#include "model/model.h"

namespace syv {

class DraftModelDrafter : public Drafter {
 public:
  // `draft` (not bound to any cache yet; same backend and vocabulary size as the target, whose
  // vocab_size is `target_vocab`) gets a KV store of `num_pages` pages of `page_size` tokens.
  // Up to `num_speculative_tokens` drafts per sequence, none beyond max_model_len. A catch-up
  // feeds at most `catchup_tokens` tokens in all (a sequence just out of a long prefill catches
  // up over several steps, without drafts until it has).
  static Result<std::unique_ptr<DraftModelDrafter>> create(Model& draft, int64_t target_vocab,
                                                           int32_t page_size, int32_t num_pages,
                                                           int32_t num_speculative_tokens,
                                                           int32_t max_model_len,
                                                           int32_t catchup_tokens);

  void observe(const SchedulerOutput& step, const Batch& batch,
               const Model::Outputs& outputs) override;
  // The drafts observe() prepared for this sequence at its current length (none otherwise).
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override;
  void forget(const Sequence& seq) override;

  // Draft tokens run so far (catch-up and chain) and pages in use, for tests and logs.
  int64_t draft_rows() const { return draft_rows_; }
  int32_t pages_in_use() const { return pool_.num_pages() - pool_.num_free(); }
  std::string describe() const;

 private:
  DraftModelDrafter(Model& draft, std::unique_ptr<CacheStore> store, int32_t page_size,
                    int32_t num_pages, int32_t k, int32_t max_model_len, int32_t catchup_tokens);

  struct SeqState {
    std::vector<int32_t> pages;
    int32_t computed = 0;        // draft K/V valid for positions [0, computed)
    int32_t chain_start = 0;     // first position the last chain fed drafts at
    std::vector<int32_t> chain;  // the drafts fed there, in order
  };
  struct Chain {
    const Sequence* seq = nullptr;
    SeqState* state = nullptr;
    int32_t room = 0;  // drafts wanted
    int32_t row = 0;   // its row among the last forward's logits rows
    bool fed = false;  // it has a row in the chain forward being run
    std::vector<int32_t> drafts;
  };
  // Pages for positions [0, end): false (and nothing allocated) when the pool is short.
  bool grow(SeqState& st, int32_t end);

  Model& draft_;
  std::unique_ptr<CacheStore> store_;
  PagePool pool_;
  int32_t page_size_, k_, max_model_len_, catchup_tokens_;
  Batch batch_;
  std::unordered_map<uint64_t, SeqState> seqs_;  // by Sequence::id()
  std::vector<Chain> chains_;
  std::vector<int32_t> ids_;
  std::vector<float> host_logits_;
  struct Ready {
    int32_t length = 0;
    std::vector<int32_t> drafts;
  };
  std::unordered_map<uint64_t, Ready> ready_;
  int64_t draft_rows_ = 0;
};

}  // namespace syv
