// Padding a verify step whose sequences carry different draft counts up to one shape, so it can
// replay the CUDA graph of (bucket, q) (engine/graph_runner.h) instead of running eagerly.
//
// With n-gram or adaptive speculation the drafts per sequence differ (0..k each), and a graph
// bakes in q tokens per sequence. A padded step feeds every sequence q = 1 + (the step's most
// drafts) tokens: its pending token, its drafts, then num_padding *filler* positions
// (ScheduledSeq::num_padding; a sequence with no drafts becomes 1 + (q - 1) positions too). A
// filler position repeats the sequence's last fed token at the next position; its K/V is written
// into pages allocated like draft pages, its logits row is computed and never read, and it is
// never committed:
//  * acceptance (greedy or rejection sampling, EngineCore::sample_sequence) reads rows 0..drafts
//    of a sequence only; the device sampler takes a filler row as a greedy row whose id is dropped;
//  * commit() advances over the pending token and the accepted drafts only, so filler K/V lies
//    beyond the sequence's computed length: never registered in the prefix cache, overwritten by
//    the tokens fed there later, its pages beyond the length returned to the pool;
//  * hybrids: the verify pass saves the state after pending + a tokens for a = 0..q-2 (q - 1
//    saves, as the graph's shape wants), and commit() restores the save of the accepted count
//    whenever anything beyond it was fed (a rejected draft or any filler), so a filler position's
//    state is never selected and the live state covers exactly the kept tokens.
// Pages for filler positions come from the pool's free pages only (never evicting a cached prefix,
// never preempting); when they are short the step is not padded and runs as it was scheduled.
#pragma once

#include <cstdint>

#include "engine/scheduler.h"

namespace syv {

// Tokens per sequence q (>= 2) to pad `step` to, or 0 when it should not be padded. Padded only
// when every one of its 1..max_batch sequences is a decode row (one pending token, wants logits,
// no prompt-logprob rows, no padding yet) carrying 0..q-1 drafts with q = 1 + its most drafts <=
// max_query, the counts differ (one count everywhere is a graph step already), each sequence has
// exactly saves_per_draft x drafts in-pass state saves (the verify saves, grouped by sequence in
// batch order: no checkpoint save), and q positions fit under max_model_len from every sequence's
// computed length (the page table's width and the position range).
int32_t padded_verify_query(const SchedulerOutput& step, int32_t max_batch, int32_t max_query,
                            int32_t saves_per_draft, int32_t max_model_len);

// The most a padded step's filler may cost, in plain decode steps of the same batch, for padding
// to pay: about what a graph replay saves over an eager step (1.00-1.06x measured at the Qwen3-8B
// shape on an H200, 1.02-1.24x at the 0.6B shape; docs/engine.md "CUDA graphs": measured).
inline constexpr double kVerifyPaddingCostBound = 0.05;

// Whether padding `step` (padded_verify_query() gave q >= 2) to q tokens a sequence pays under the
// adaptive-speculation cost model (engine/spec_policy.h): a filler row costs what a draft row does,
// B / (B + knee) of a plain decode step of batch B per row a sequence, so F filler positions cost
// (F / B) * B / (B + knee) = F / (B + knee) of a step; padding pays while that is at most
// kVerifyPaddingCostBound. knee >= 0 (0: every row costs a full decode row, as on the CPU).
bool verify_padding_pays(const SchedulerOutput& step, int32_t q, double knee);

}  // namespace syv
