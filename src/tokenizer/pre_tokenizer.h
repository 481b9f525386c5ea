// Pre-tokenizer of tokenizer.json: a Sequence of Split steps (PCRE2 regex or literal string, any
// SplitDelimiterBehavior, optional invert) ending in ByteLevel (optionally with its own GPT-2
// regex and add_prefix_space). The ByteLevel byte->char mapping itself is fused into the BPE
// model, which works on raw bytes, so pre_tokenize() returns byte ranges of the input.
//
// Regexes are written for Oniguruma (what HF tokenizers uses); they are compiled with PCRE2
// (UTF + UCP, JIT) after rewriting \s and \S to Oniguruma's Unicode White_Space set, so that
// e.g. U+180E counts as whitespace exactly when HF says so. Other pre-tokenizer types (Whitespace,
// Metaspace, Digits, BertPreTokenizer, ...) are refused at load with their name.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace syv {

class Regex;

class PreTokenizer {
 public:
  static Result<std::unique_ptr<PreTokenizer>> from_json(const nlohmann::json& spec);
  ~PreTokenizer();

  // Splits valid UTF-8 `text` into pieces. When add_prefix_space is set a piece may need a
  // leading space that is not in `text`: such pieces are built in `storage` (which must outlive
  // the returned views). Empty pieces are never returned.
  void pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces,
                    std::deque<std::string>& storage) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct SplitStep {
    std::unique_ptr<Regex> regex;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
  };
  PreTokenizer() = default;
  void split(const SplitStep& step, std::string_view text,
             std::vector<std::string_view>& out) const;

  std::vector<SplitStep> steps_;  // the Split steps, then ByteLevel's regex when use_regex
  bool add_prefix_space_ = false;
  size_t prefix_step_ = 0;  // steps_[prefix_step_..] run after ByteLevel's add_prefix_space
};

// A PCRE2 pattern with JIT; find() is thread-safe.
class Regex {
 public:
  // `pattern` in Oniguruma syntax (rewritten as described above) or, if literal, a plain string.
  static Result<std::unique_ptr<Regex>> compile(const std::string& pattern, bool literal);
  ~Regex();
  // Byte offsets [start, end) of all non-overlapping matches in `text`, left to right.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Rewrites Oniguruma's \s / \S (Unicode White_Space) into explicit PCRE2 classes.
std::string rewrite_oniguruma_pattern(const std::string& pattern);

}  // namespace syv
