// One sequence's position in a grammar: which tokens may come next, and advancing over the
// tokens (or bytes) it produced. Cheap to copy (a configuration id and its stacks).
//
//   Matcher m(session);
//   const auto& allowed = m.allowed_tokens();   // bit t: token t keeps the grammar alive
//   bool end_ok = m.can_end();                  // a stop token may come now
//   m.accept_token(t);                          // false when t was not allowed (state unchanged)
//
// The session (token_masks.h) is shared by every matcher of the same grammar and vocabulary, on
// the thread that owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/token_masks.h"

namespace syv::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<GrammarSession> session);

  // The tokens that may come next (bit t of word t / 64); valid until the next call on any
  // matcher of the session.
  const std::vector<uint64_t>& allowed_tokens();
  bool token_allowed(int32_t token);
  // The output so far is a complete sentence: a stop token may end it.
  bool can_end();
  // Nothing can follow: the sentence is complete and no stack can take another byte.
  bool finished();
  // Advances over token `token`'s bytes; false (nothing changes) when they do not fit.
  bool accept_token(int32_t token);
  // Advances over `bytes`; false (nothing changes) when they do not fit.
  bool accept_bytes(std::string_view bytes);

  GrammarSession& session() { return *session_; }

 private:
  ConfigId current();
  void set(ConfigId c);

  std::shared_ptr<GrammarSession> session_;
  ConfigId config_ = kDead;
  uint64_t generation_ = 0;
  Stacks stacks_;  // config_ in plain form, re-imported after the session resets
};

}  // namespace syv::grammar
