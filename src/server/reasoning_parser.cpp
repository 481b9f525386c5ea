#include "server/reasoning_parser.h"

#include <algorithm>

namespace syv::server {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
}  // namespace

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  const size_t max_len = std::min(text.size(), tag.size() - 1);
  for (size_t len = max_len; len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  // Only the last turn's text counts (ChatML: from its <|im_start|>): a <think> that a user wrote
  // in an earlier message opens nothing.
  if (const size_t turn = prompt.rfind("<|im_start|>"); turn != std::string_view::npos)
    prompt.remove_prefix(turn);
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

void ReasoningParser::emit(std::string_view text, Delta& out) {
  if (strip_newlines_) {
    size_t skip = 0;
    while (skip < text.size() && text[skip] == '\n') ++skip;
    text.remove_prefix(skip);
    if (text.empty()) return;
    strip_newlines_ = false;
  }
  (in_reasoning_ ? out.reasoning : out.content).append(text);
}

ReasoningParser::Delta ReasoningParser::feed(std::string_view text) {
  Delta out;
  std::string buf = std::move(pending_);
  pending_.clear();
  buf.append(text);
  std::string_view rest(buf);
  while (!rest.empty()) {
    // In the answer, both tags are looked for: a stray "</think>" (the template opened the block
    // and the caller did not know) is dropped rather than shown.
    const size_t close = rest.find(kClose);
    const size_t open = in_reasoning_ ? std::string_view::npos : rest.find(kOpen);
    const size_t hit = std::min(open, close);
    if (hit == std::string_view::npos) {
      size_t hold = partial_tag_suffix(rest, kClose);
      if (!in_reasoning_) hold = std::max(hold, partial_tag_suffix(rest, kOpen));
      emit(rest.substr(0, rest.size() - hold), out);
      pending_ = std::string(rest.substr(rest.size() - hold));
      break;
    }
    emit(rest.substr(0, hit), out);
    if (hit == open) {
      in_reasoning_ = true;
      rest.remove_prefix(hit + kOpen.size());
    } else {
      in_reasoning_ = false;
      rest.remove_prefix(hit + kClose.size());
    }
    strip_newlines_ = true;
  }
  return out;
}

ReasoningParser::Delta ReasoningParser::finish() {
  Delta out;
  std::string held = std::move(pending_);
  pending_.clear();
  emit(held, out);
  return out;
}

}  // namespace syv::server
