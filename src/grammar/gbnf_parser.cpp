// GBNF text -> Grammar::Builder rules (llama.cpp's grammar syntax):
//
//   rule   ::= name "::=" alts              a newline ends a rule, except inside ( ) or after |
//   alts   ::= seq ("|" seq)*
//   seq    ::= (item postfix*)*
//   item   ::= name | "literal" | [class] | [^class] | . | ( alts )
//   postfix::= * | + | ? | {m} | {m,} | {m,n} | {,n}
//
// Names are [A-Za-z0-9_-]+; `#` starts a comment to the end of the line. Literals and classes
// take UTF-8 text and the escapes \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH (code points,
// as in llama.cpp; a literal is matched as the UTF-8 bytes of its code points). `.` is any code
// point. llama.cpp's token references (<[id]>, <name>) are not supported.
#include <string>

#include "grammar/grammar_builder.h"
#include "grammar/utf8_ranges.h"

namespace syv::grammar {
namespace {

constexpr int kMaxNesting = 128;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  Parser(std::string_view src, Grammar::Builder& b) : src_(src), text_(src), b_(b) {}

  Status parse() {
    skip_space(true);
    while (pos_ < src_.size()) {
      SYV_RETURN_IF_ERROR(parse_rule());
      skip_space(true);
    }
    return Status::Ok();
  }

 private:
  Status error(size_t at, const std::string& what) const {
    return Status::Error(grammar_position(src_, at) + what);
  }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool at_end() const { return pos_ >= src_.size(); }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  Status parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    if (name.empty()) {
      return error(pos_, "expected a rule name, found " + describe_here());
    }
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") {
      return error(pos_,
                   "expected \"::=\" after rule name \"" + name + "\", found " + describe_here());
    }
    pos_ += 3;
    skip_space(true);
    const int32_t r = b_.rule(name, start);
    auto& rule = b_.rules[static_cast<size_t>(r)];
    if (rule.defined) return error(start, "rule \"" + name + "\" is defined twice");
    rule.defined = true;
    rule.defined_at = start;
    SYV_RETURN_IF_ERROR(parse_alternatives(r, name, false, 0));
    if (!at_end() && peek() != '\n' && peek() != '\r') {
      return error(
          pos_, "expected the end of rule \"" + name + "\" (a newline), found " + describe_here());
    }
    return Status::Ok();
  }

  std::string describe_here() const {
    if (at_end()) return "the end of the grammar";
    const char c = peek();
    if (c == '\n' || c == '\r') return "a line break";
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F)
      return "byte 0x" + hex2(static_cast<uint8_t>(c));
    return std::string("'") + c + "'";
  }
  static std::string hex2(uint8_t v) {
    const char* d = "0123456789ABCDEF";
    return {d[v >> 4], d[v & 15]};
  }

  Status parse_alternatives(int32_t r, const std::string& base, bool nested, int depth) {
    for (;;) {
      Grammar::Builder::Alt alt;
      SYV_RETURN_IF_ERROR(parse_sequence(alt, base, nested, depth));
      b_.add_alt(r, std::move(alt));
      if (b_.num_elements > kMaxElements) {
        return error(pos_, "the grammar is too large (more than " + std::to_string(kMaxElements) +
                               " elements once repetitions are expanded)");
      }
      if (peek() != '|') return Status::Ok();
      ++pos_;
      skip_space(true);
    }
  }

  Status parse_sequence(Grammar::Builder::Alt& out, const std::string& base, bool nested,
                        int depth) {
    for (;;) {
      const size_t item_at = pos_;
      Grammar::Builder::Alt item;
      const char c = peek();
      if (c == '"') {
        SYV_RETURN_IF_ERROR(parse_literal(item));
      } else if (c == '[') {
        SYV_RETURN_IF_ERROR(parse_class(item, base));
      } else if (c == '.') {
        ++pos_;
        class_item(normalize_ranges({{0, kMaxCodepoint}}, false), base, item_at, item);
      } else if (c == '(') {
        if (depth >= kMaxNesting) return error(pos_, "groups nested too deeply");
        ++pos_;
        skip_space(true);
        const int32_t g = b_.generated(base, item_at);
        SYV_RETURN_IF_ERROR(parse_alternatives(g, base, true, depth + 1));
        if (peek() != ')') return error(pos_, "expected ')', found " + describe_here());
        ++pos_;
        item.push_back(b_.ref(g));
      } else if (is_name_char(c)) {
        const std::string name = parse_name();
        item.push_back(b_.ref(b_.rule(name, item_at)));
      } else if (c == '<') {
        return error(pos_, "token references (<...>) are not supported");
      } else {
        return Status::Ok();  // end of the sequence: '|', ')', a newline, the end
      }
      skip_space(nested);
      SYV_RETURN_IF_ERROR(parse_postfix(item, base, item_at, nested));
      out.insert(out.end(), item.begin(), item.end());
    }
  }

  Status parse_postfix(Grammar::Builder::Alt& item, const std::string& base, size_t at,
                       bool nested) {
    for (;;) {
      const char c = peek();
      int32_t min = 0, max = -1;  // -1: unbounded
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        ++pos_;
        skip_space(false);
        bool has_min = false;
        SYV_RETURN_IF_ERROR(parse_count(min, has_min));
        skip_space(false);
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          bool has_max = false;
          SYV_RETURN_IF_ERROR(parse_count(max, has_max));
          if (!has_max) max = -1;
        } else {
          if (!has_min) return error(pos_, "expected a number in {m,n}, found " + describe_here());
          max = min;
        }
        skip_space(false);
        if (peek() != '}') return error(pos_, "expected '}', found " + describe_here());
        ++pos_;
        if (max >= 0 && max < min) {
          return error(at, "repetition {" + std::to_string(min) + "," + std::to_string(max) +
                               "}: the maximum is below the minimum");
        }
      } else {
        return Status::Ok();
      }
      repeat(item, base, at, min, max);
      if (b_.num_elements > kMaxElements) {
        return error(at, "the grammar is too large (more than " + std::to_string(kMaxElements) +
                             " elements once repetitions are expanded)");
      }
      skip_space(nested);
    }
  }

  Status parse_count(int32_t& value, bool& present) {
    present = false;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      present = true;
      if (v > kMaxRepetition) {
        return error(pos_, "repetition count above " + std::to_string(kMaxRepetition));
      }
      ++pos_;
    }
    value = static_cast<int32_t>(v);
    return Status::Ok();
  }

  // item -> item{min,max}, with generated rules for the optional and unbounded parts.
  void repeat(Grammar::Builder::Alt& item, const std::string& base, size_t at, int32_t min,
              int32_t max) {
    Element x;
    if (item.size() == 1) {
      x = item[0];
    } else {
      const int32_t g = b_.generated(base, at);
      b_.add_alt(g, item);
      x = b_.ref(g);
    }
    Grammar::Builder::Alt out(static_cast<size_t>(min), x);
    b_.num_elements += static_cast<size_t>(min);
    if (max < 0) {
      const int32_t star = b_.generated(base, at);  // star ::= x star |
      b_.add_alt(star, {x, b_.ref(star)});
      b_.add_alt(star, {});
      out.push_back(b_.ref(star));
    } else if (max > min) {
      int32_t prev = -1;  // opt_k ::= x opt_{k-1} |   (opt_1 ::= x |)
      const auto chain = static_cast<int32_t>(b_.chains.size());
      b_.chains.push_back({x, {}});
      for (int32_t k = 1; k <= max - min; ++k) {
        const int32_t opt = b_.generated(base, at);
        b_.rules[static_cast<size_t>(opt)].chain = chain;
        b_.rules[static_cast<size_t>(opt)].chain_k = k;
        b_.chains.back().rules.push_back(opt);
        if (prev < 0) {
          b_.add_alt(opt, {x});
        } else {
          b_.add_alt(opt, {x, b_.ref(prev)});
        }
        b_.add_alt(opt, {});
        prev = opt;
      }
      out.push_back(b_.ref(prev));
    }
    item = std::move(out);
  }

  // One character of a literal or class at pos_: an escape or a UTF-8 code point.
  Status parse_char(uint32_t& cp) {
    const size_t at = pos_;
    if (peek() != '\\') {
      if (!utf8_decode(text_, pos_, cp)) return error(at, "invalid UTF-8");
      return Status::Ok();
    }
    ++pos_;
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n':
        cp = '\n';
        return Status::Ok();
      case 'r':
        cp = '\r';
        return Status::Ok();
      case 't':
        cp = '\t';
        return Status::Ok();
      case '0':
        cp = 0;
        return Status::Ok();
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
      case '/':
        cp = static_cast<uint8_t>(e);
        return Status::Ok();
      case 'x':
        return parse_hex(2, cp, at);
      case 'u':
        return parse_hex(4, cp, at);
      case 'U':
        return parse_hex(8, cp, at);
      default:
        return error(at, e == '\0' ? std::string("unfinished escape")
                                   : std::string("unknown escape \\") + e);
    }
  }

  Status parse_hex(int digits, uint32_t& cp, size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return error(at, "expected " + std::to_string(digits) + " hex digits in escape");
      v = v * 16 + static_cast<uint64_t>(d);
      ++pos_;
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return error(at, "escape is not a Unicode scalar value");
    }
    cp = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status parse_literal(Grammar::Builder::Alt& item) {
    const size_t start = pos_;
    ++pos_;  // "
    for (;;) {
      if (at_end()) return error(start, "unterminated string literal");
      if (peek() == '"') {
        ++pos_;
        return Status::Ok();
      }
      uint32_t cp = 0;
      SYV_RETURN_IF_ERROR(parse_char(cp));
      for (char byte : utf8_encode(cp)) {
        ByteSet set;
        set.add(static_cast<uint8_t>(byte));
        item.push_back(b_.bytes(set));
      }
    }
  }

  Status parse_class(Grammar::Builder::Alt& item, const std::string& base) {
    const size_t start = pos_;
    ++pos_;  // [
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    std::vector<CodepointRange> ranges;
    for (;;) {
      if (at_end()) return error(start, "unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      uint32_t lo = 0, hi = 0;
      SYV_RETURN_IF_ERROR(parse_char(lo));
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        const size_t at = pos_;
        SYV_RETURN_IF_ERROR(parse_char(hi));
        if (hi < lo) return error(at, "character range is out of order");
      }
      ranges.push_back({lo, hi});
    }
    const auto norm = normalize_ranges(std::move(ranges), negate);
    if (norm.empty()) return error(start, "character class matches nothing");
    class_item(norm, base, start, item);
    return Status::Ok();
  }

  // A class of code points (normalized) as elements: one byte set when it is all ASCII, else a
  // generated rule with one alternative per UTF-8 sequence (the ASCII part in one).
  void class_item(const std::vector<CodepointRange>& ranges, const std::string& base, size_t at,
                  Grammar::Builder::Alt& item) {
    ByteSet ascii;
    bool has_ascii = false, has_multi = false;
    for (CodepointRange r : ranges) {
      if (r.lo < 0x80) {
        ascii.add_range(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(std::min(r.hi, 0x7Fu)));
        has_ascii = true;
      }
      if (r.hi >= 0x80) has_multi = true;
    }
    if (!has_multi) {
      item.push_back(b_.bytes(ascii));
      return;
    }
    const int32_t g = b_.generated(base, at);
    if (has_ascii) b_.add_alt(g, {b_.bytes(ascii)});
    for (const ByteRangeSeq& seq : utf8_sequences(ranges)) {
      if (seq.size() == 1) continue;  // the ASCII part, already added
      Grammar::Builder::Alt alt;
      for (auto [lo, hi] : seq) {
        ByteSet set;
        set.add_range(lo, hi);
        alt.push_back(b_.bytes(set));
      }
      b_.add_alt(g, std::move(alt));
    }
    item.push_back(b_.ref(g));
  }

  std::string_view src_;
  std::string text_;  // src_ as a string, for utf8_decode
  Grammar::Builder& b_;
  size_t pos_ = 0;
};

}  // namespace

int32_t Grammar::Builder::rule(const std::string& name, size_t at) {
  auto it = by_name.find(name);
  if (it != by_name.end()) return it->second;
  const int32_t id = static_cast<int32_t>(rules.size());
  Rule r;
  r.name = name;
  r.used_at = at;
  rules.push_back(std::move(r));
  by_name.emplace(name, id);
  return id;
}

int32_t Grammar::Builder::generated(const std::string& base, size_t at) {
  std::string name;
  for (int n = static_cast<int>(rules.size());; ++n) {
    name = base + "-" + std::to_string(n);
    if (!by_name.count(name)) break;
  }
  const int32_t id = rule(name, at);
  rules[static_cast<size_t>(id)].defined = true;
  rules[static_cast<size_t>(id)].defined_at = at;
  return id;
}

Element Grammar::Builder::bytes(const ByteSet& set) {
  auto [it, fresh] = set_index.emplace(set.bits, static_cast<int32_t>(sets.size()));
  if (fresh) sets.push_back(set);
  return Element{ElemKind::kBytes, it->second};
}

Result<std::shared_ptr<const Grammar>> Grammar::parse(std::string_view text,
                                                      std::string_view root) {
  Builder b;
  Parser parser(text, b);
  SYV_RETURN_IF_ERROR(parser.parse());
  return b.finish(text, root);
}

}  // namespace syv::grammar
