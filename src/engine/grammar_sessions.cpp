#include "engine/grammar_sessions.h"

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace syv {

GrammarSessions::GrammarSessions(const Tokenizer& tokenizer, size_t max_sessions,
                                 size_t max_bytes_per_session)
    : tokenizer_(tokenizer), max_sessions_(max_sessions), max_bytes_(max_bytes_per_session) {}

std::shared_ptr<grammar::GrammarSession> GrammarSessions::session(
    const std::shared_ptr<const grammar::Grammar>& g) {
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->first == g) {
      sessions_.splice(sessions_.begin(), sessions_, it);
      return it->second;
    }
  }
  if (trie_ == nullptr) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> bytes(static_cast<size_t>(tokenizer_.vocab_size()));
    for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id)
      if (!tokenizer_.is_added(id)) bytes[static_cast<size_t>(id)] = tokenizer_.token_bytes(id);
    trie_ = std::make_shared<const grammar::TokenTrie>(std::move(bytes));
    trie_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SYV_LOG(INFO) << "structured outputs: token trie of " << tokenizer_.vocab_size() << " tokens ("
                  << trie_->nodes().size() << " nodes) built in "
                  << static_cast<int>(trie_seconds_ * 1000) << " ms";
  }
  auto s = std::make_shared<grammar::GrammarSession>(g, trie_, max_bytes_);
  sessions_.emplace_front(g, s);
  if (sessions_.size() > max_sessions_) sessions_.pop_back();  // live matchers keep theirs
  return s;
}

void fill_allowed(grammar::Matcher& matcher, const std::vector<int32_t>& stop_ids, int32_t vocab,
                  std::vector<uint64_t>& allowed) {
  const std::vector<uint64_t>& mask = matcher.allowed_tokens();
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  allowed.assign(words, 0);
  std::copy_n(mask.begin(), std::min(words, mask.size()), allowed.begin());
  if (vocab % 64 != 0 && words <= mask.size()) allowed.back() &= (uint64_t{1} << (vocab % 64)) - 1;
  bool any = false;
  for (uint64_t w : allowed) any = any || w != 0;
  if (matcher.can_end() || !any) {
    for (int32_t t : stop_ids)
      if (t >= 0 && t < vocab) allowed[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
}

}  // namespace syv
