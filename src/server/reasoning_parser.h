// Splits a model's output stream into reasoning and answer: text inside <think>...</think> becomes
// `reasoning_content`, the rest `content` (Qwen3's format). Incremental: feed() takes arbitrary
// chunks (a tag may be split across chunks; a partial tag at the end of a chunk is held back until
// the next chunk or finish()). Newlines right after a tag are dropped, as Qwen writes
// "<think>\n...\n</think>\n\n".
//
// Not thread-safe: one parser per sample.
#pragma once

#include <string>
#include <string_view>

namespace syv::server {

class ReasoningParser {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };

  // start_in_reasoning: the prompt already opened a <think> block (the chat template ends the
  // generation prompt with "<think>\n"), so output is reasoning until "</think>".
  explicit ReasoningParser(bool start_in_reasoning = false)
      : in_reasoning_(start_in_reasoning), strip_newlines_(start_in_reasoning) {}

  Delta feed(std::string_view text);
  // Emits whatever is held back (an incomplete tag is plain text).
  Delta finish();

  bool in_reasoning() const { return in_reasoning_; }

 private:
  void emit(std::string_view text, Delta& out);

  bool in_reasoning_;
  bool strip_newlines_;  // drop '\n' until the next other character (after a tag)
  std::string pending_;  // a suffix that may be the start of a tag
};

// Whether a rendered prompt leaves a <think> block open in its last turn (from its last ChatML
// "<|im_start|>", or the whole prompt without one: the last "<think>" there is after the last
// "</think>"): the output then starts inside the reasoning. Text of earlier turns (a user who
// wrote "<think>") does not count.
bool prompt_opens_reasoning(std::string_view prompt);

// Length of the longest suffix of `text` that is a proper prefix of `tag` (0 if none).
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

}  // namespace syv::server
