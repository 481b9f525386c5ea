#include "engine/ngram_drafter.h"

#include <algorithm>

#include "core/check.h"
#include "engine/sequence.h"

namespace syv {

NgramDrafter::NgramDrafter(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  SYV_CHECK(min_n >= 1 && min_n <= max_n)
      << "n-gram drafter: min_n " << min_n << ", max_n " << max_n;
}

void NgramDrafter::propose(const Sequence& seq, int32_t max_tokens, std::vector<int32_t>& out) {
  propose_tokens(seq.tokens, max_tokens, out);
}

void NgramDrafter::propose_tokens(const std::vector<int32_t>& tokens, int32_t max_tokens,
                                  std::vector<int32_t>& out) const {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // The most recent earlier occurrence: it starts at i < len - n, so something follows it.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      const int64_t from = i + n, to = std::min<int64_t>(from + max_tokens, len);
      out.insert(out.end(), tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

}  // namespace syv
