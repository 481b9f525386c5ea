// Prompt-lookup (n-gram) drafting, as vLLM's `ngram` method and llama.cpp's lookup decoding: the
// sequence's last n tokens (n from max_n down to min_n) are searched for earlier in its own tokens
// (prompt and output); at the most recent earlier occurrence, the tokens that followed it are the
// drafts. No model, no memory; it pays off where output repeats its context (code edits,
// extraction, summaries that quote), and costs one verify step's extra rows where it does not.
//
// Cost: O(length x max_n) comparisons per sequence and step, on the engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/drafter.h"

namespace syv {

class NgramDrafter : public Drafter {
 public:
  // 1 <= min_n <= max_n.
  NgramDrafter(int32_t min_n, int32_t max_n);
  void propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) override;

  // The same on a bare token list (tests).
  void propose_tokens(const std::vector<int32_t>& tokens, int32_t max_tokens,
                      std::vector<int32_t>& out) const;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace syv
