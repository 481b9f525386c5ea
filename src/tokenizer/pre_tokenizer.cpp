#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace syv {
namespace {

// Unicode White_Space, which is what Oniguruma's \s matches on UTF-8 text (PCRE2's UCP \s
// differs, e.g. on U+180E).
constexpr const char* kWhiteSpace =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr const char* kByteLevelPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

pcre2_jit_stack* thread_jit_stack(void*) {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    ~Holder() { pcre2_jit_stack_free(stack); }
  };
  thread_local Holder holder;
  return holder.stack;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string rewrite_oniguruma_pattern(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's') {
        if (!in_class) out += '[';
        out += kWhiteSpace;
        if (!in_class) out += ']';
      } else if (e == 'S' && !in_class) {
        out += "[^";
        out += kWhiteSpace;
        out += ']';
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Result<std::unique_ptr<Regex>> Regex::compile(const std::string& pattern, bool literal) {
  std::unique_ptr<Regex> regex(new Regex());
  const std::string source = literal ? pattern : rewrite_oniguruma_pattern(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &error, &error_offset, nullptr);
  if (code == nullptr) {
    return Status::Error("pre_tokenizer pattern \"" + pattern + "\": PCRE2 error at offset " +
                         std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  regex->code_ = code;
  const int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  if (jit != 0) {
    SYV_LOG(WARN) << "tokenizer: PCRE2 JIT unavailable (" << pcre2_message(jit)
                  << "); pre-tokenizing with the interpreter";
  }
  return regex;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  struct MatchState {
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    MatchState() {
      data = pcre2_match_data_create(4, nullptr);
      context = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(context, thread_jit_stack, nullptr);
    }
    ~MatchState() {
      pcre2_match_data_free(data);
      pcre2_match_context_free(context);
    }
  };
  thread_local MatchState state;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  uint32_t options = PCRE2_NO_UTF_CHECK;  // the tokenizer only passes valid UTF-8
  while (offset <= text.size()) {
    const int rc =
        pcre2_match(code, subject, text.size(), offset, options, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if ((options & PCRE2_NOTEMPTY_ATSTART) == 0) break;
      // No non-empty match where an empty one was found: step over one character.
      ++offset;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
      options = PCRE2_NO_UTF_CHECK;
      continue;
    }
    if (rc < 0) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        SYV_LOG(WARN) << "tokenizer: PCRE2 match failed (" << pcre2_message(rc)
                      << "); the rest of the text is kept as one piece";
      }
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    out.emplace_back(ovector[0], ovector[1]);
    options = PCRE2_NO_UTF_CHECK;
    if (ovector[0] == ovector[1]) options |= PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
    offset = ovector[1];
  }
}

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::from_json(const nlohmann::json& spec) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  std::vector<nlohmann::json> items;
  if (spec.is_object() && spec.value("type", "") == "Sequence") {
    if (!spec.contains("pretokenizers") || !spec["pretokenizers"].is_array()) {
      return Status::Error("pre_tokenizer Sequence: expected an array \"pretokenizers\"");
    }
    for (const auto& item : spec["pretokenizers"]) items.push_back(item);
  } else if (!spec.is_null()) {
    items.push_back(spec);
  }
  bool have_byte_level = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    if (!item.is_object() || !item.contains("type") || !item["type"].is_string()) {
      return Status::Error("pre_tokenizer: expected an object with a string \"type\", found " +
                           item.dump().substr(0, 80));
    }
    const std::string type = item["type"].get<std::string>();
    if (have_byte_level) {
      return Status::Error("pre_tokenizer \"" + type +
                           "\" after ByteLevel is not supported (ByteLevel must come last)");
    }
    if (type == "Split") {
      SplitStep step;
      const auto& pattern = item.value("pattern", nlohmann::json());
      std::string text;
      bool literal = false;
      if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
        text = pattern["Regex"].get<std::string>();
      } else if (pattern.is_object() && pattern.contains("String") &&
                 pattern["String"].is_string()) {
        text = pattern["String"].get<std::string>();
        literal = true;
      } else {
        return Status::Error(
            "pre_tokenizer Split: expected \"pattern\": {\"Regex\": ...} or "
            "{\"String\": ...}, found " +
            pattern.dump().substr(0, 80));
      }
      SYV_ASSIGN_OR_RETURN(step.regex, Regex::compile(text, literal));
      const std::string behavior = item.value("behavior", "Isolated");
      if (behavior == "Isolated") {
        step.behavior = Behavior::kIsolated;
      } else if (behavior == "Removed") {
        step.behavior = Behavior::kRemoved;
      } else if (behavior == "MergedWithPrevious") {
        step.behavior = Behavior::kMergedWithPrevious;
      } else if (behavior == "MergedWithNext") {
        step.behavior = Behavior::kMergedWithNext;
      } else if (behavior == "Contiguous") {
        step.behavior = Behavior::kContiguous;
      } else {
        return Status::Error("pre_tokenizer Split: unknown behavior \"" + behavior + "\"");
      }
      step.invert = item.value("invert", false);
      pt->steps_.push_back(std::move(step));
    } else if (type == "ByteLevel") {
      have_byte_level = true;
      pt->add_prefix_space_ = item.value("add_prefix_space", true);
      pt->prefix_step_ = pt->steps_.size();
      if (item.value("use_regex", true)) {
        SplitStep step;
        SYV_ASSIGN_OR_RETURN(step.regex, Regex::compile(kByteLevelPattern, false));
        pt->steps_.push_back(std::move(step));
      }
    } else {
      return Status::Error("pre_tokenizer type \"" + type +
                           "\" is not supported (supported: Sequence, Split, ByteLevel)");
    }
  }
  if (!have_byte_level) {
    return Status::Error(
        "pre_tokenizer: a ByteLevel pre-tokenizer is required (only byte-level BPE is "
        "supported), found " +
        spec.dump().substr(0, 120));
  }
  return pt;
}

void PreTokenizer::split(const SplitStep& step, std::string_view text,
                         std::vector<std::string_view>& out) const {
  std::vector<std::pair<size_t, size_t>> matches;
  step.regex->find_all(text, matches);
  // Segments covering the text: gaps (is_match false) and matches (true), as HF's Pattern does.
  struct Segment {
    size_t start, end;
    bool is_match;
  };
  std::vector<Segment> segments;
  segments.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (prev != start) segments.push_back({prev, start, step.invert});
    segments.push_back({start, end, !step.invert});
    prev = end;
  }
  if (prev != text.size()) segments.push_back({prev, text.size(), step.invert});

  std::vector<Segment> kept;  // is_match reused as "remove"
  kept.reserve(segments.size());
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kIsolated:
      for (const auto& s : segments) kept.push_back({s.start, s.end, false});
      break;
    case Behavior::kRemoved:
      for (const auto& s : segments) kept.push_back(s);
      break;
    case Behavior::kContiguous:
      for (const auto& s : segments) {
        if (s.is_match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : segments) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const auto& s = segments[i];
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().start = s.start;
        } else {
          kept.push_back({s.start, s.end, false});
        }
        previous_match = s.is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const auto& s : kept) {
    if (!s.is_match && s.end > s.start) out.push_back(text.substr(s.start, s.end - s.start));
  }
}

void PreTokenizer::pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces,
                                std::deque<std::string>& storage) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (size_t i = 0; i <= steps_.size(); ++i) {
    if (i == prefix_step_ && add_prefix_space_) {
      // HF prepends the space to every piece that reaches ByteLevel (a deque keeps the views
      // valid while it grows).
      for (auto& piece : pieces) {
        if (piece.front() != ' ') {
          std::string& prefixed = storage.emplace_back();
          prefixed.reserve(piece.size() + 1);
          prefixed += ' ';
          prefixed.append(piece);
          piece = prefixed;
        }
      }
    }
    if (i == steps_.size()) break;
    next.clear();
    for (const auto& piece : pieces) split(steps_[i], piece, next);
    pieces.swap(next);
  }
}

}  // namespace syv
