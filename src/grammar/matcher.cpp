#include "grammar/matcher.h"

#include "core/check.h"

namespace syv::grammar {

Matcher::Matcher(std::shared_ptr<GrammarSession> session) : session_(std::move(session)) {
  SYV_CHECK(session_ != nullptr) << "null grammar session";
  session_->trim();
  set(session_->automaton().initial());
}

void Matcher::set(ConfigId c) {
  SYV_CHECK(c != kDead) << "matcher moved to a dead configuration";
  config_ = c;
  generation_ = session_->automaton().generation();
  stacks_ = session_->automaton().export_stacks(c);
}

ConfigId Matcher::current() {
  session_->trim();
  Automaton& a = session_->automaton();
  if (generation_ != a.generation()) {
    config_ = a.import_stacks(stacks_);
    generation_ = a.generation();
  }
  return config_;
}

const std::vector<uint64_t>& Matcher::allowed_tokens() {
  return session_->mask(current());
}

bool Matcher::token_allowed(int32_t token) {
  if (token < 0 || token >= session_->trie().vocab_size()) return false;
  const auto& bits = allowed_tokens();
  return (bits[static_cast<size_t>(token) >> 6] >> (token & 63)) & 1u;
}

bool Matcher::can_end() {
  return session_->automaton().accepting(current());
}

bool Matcher::finished() {
  const ConfigId c = current();
  return session_->automaton().accepting(c) && !session_->automaton().can_continue(c);
}

bool Matcher::accept_token(int32_t token) {
  if (token < 0 || token >= session_->trie().vocab_size()) return false;
  const std::string& bytes = session_->trie().bytes(token);
  if (bytes.empty()) return false;  // special tokens and ids without bytes
  return accept_bytes(bytes);
}

bool Matcher::accept_bytes(std::string_view bytes) {
  Automaton& a = session_->automaton();
  ConfigId c = current();
  for (char b : bytes) {
    c = a.step(c, static_cast<uint8_t>(b));
    if (c == kDead) return false;
  }
  set(c);
  return true;
}

}  // namespace syv::grammar
