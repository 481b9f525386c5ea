#include "grammar/regex.h"

#include <cstdio>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_builder.h"
#include "grammar/utf8_ranges.h"

namespace syv::grammar {
namespace {

// Group nesting. Each group becomes a GBNF group and a quantified one is wrapped once more, so 60
// levels stay within the GBNF parser's 128 (gbnf_parser.cpp kMaxNesting); a quantifier may not
// follow another (below), which would wrap again without a group.
constexpr int kMaxDepth = 60;

using Ranges = std::vector<CodepointRange>;

const Ranges& digit() {
  static const Ranges r{{'0', '9'}};
  return r;
}
const Ranges& word() {
  static const Ranges r{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& space() {
  static const Ranges r{{'\t', '\r'}, {' ', ' '}};
  return r;
}

// A code point inside a GBNF class or literal: printable ASCII letters and digits as is,
// everything else escaped.
std::string class_char(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
    return std::string(1, static_cast<char>(cp));
  char buf[16];
  if (cp < 0x100) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  return buf;
}

std::string class_text(const Ranges& ranges) {
  std::string out = "[";
  for (CodepointRange r : ranges) {
    out += class_char(r.lo);
    if (r.hi != r.lo) {
      out += '-';
      out += class_char(r.hi);
    }
  }
  return out + "]";
}

// A GBNF string literal of `bytes` (appended piecewise: `"\"" + s + ...` trips GCC 12's -O3
// -Wrestrict false positive).
std::string quoted(const std::string& bytes) {
  std::string out = "\"";
  out += gbnf_escape(bytes);
  out += '"';
  return out;
}

// The JSON-string escape of a character that cannot appear raw in a JSON string.
std::string json_escape_of(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      return buf;
    }
  }
}

// GBNF for one character of `ranges` (normalized, non-empty).
std::string set_expr(const Ranges& ranges, bool json) {
  if (!json) return class_text(ranges);
  Ranges raw;
  std::vector<std::string> escaped;
  for (CodepointRange r : ranges) {
    for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x20; ++cp) escaped.push_back(json_escape_of(cp));
    if (r.lo <= '"' && r.hi >= '"') escaped.push_back(json_escape_of('"'));
    if (r.lo <= '\\' && r.hi >= '\\') escaped.push_back(json_escape_of('\\'));
    raw.push_back(r);
  }
  raw = normalize_ranges(
      [&] {
        // raw minus { 0x00-0x1F, '"', '\\' }
        Ranges keep;
        const Ranges cut = normalize_ranges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
        for (CodepointRange a : raw)
          for (CodepointRange b : cut) {
            const uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
            if (lo <= hi) keep.push_back({lo, hi});
          }
        return keep;
      }(),
      false);
  std::string out;
  if (!raw.empty()) out = class_text(raw);
  for (const std::string& e : escaped) {
    if (!out.empty()) out += " | ";
    out += quoted(e);
  }
  return "(" + out + ")";
}

class RegexParser {
 public:
  RegexParser(std::string_view p, bool json) : p_(p), json_(json) {}

  Result<std::string> parse() {
    if (peek() == '^') ++pos_;
    std::string out;
    SYV_RETURN_IF_ERROR(alternation(out, 0));
    if (pos_ < p_.size()) return error(pos_, "unbalanced ')'");
    return out;
  }

 private:
  Status error(size_t at, const std::string& what) const {
    return Status::Error("regex at offset " + std::to_string(at) + ": " + what);
  }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool end() const { return pos_ >= p_.size(); }

  Status alternation(std::string& out, int depth) {
    if (depth > kMaxDepth) return error(pos_, "groups nested too deeply");
    std::vector<std::string> alts;
    for (;;) {
      std::string seq;
      SYV_RETURN_IF_ERROR(concatenation(seq, depth));
      alts.push_back(seq.empty() ? "\"\"" : seq);
      if (peek() != '|') break;
      ++pos_;
    }
    if (alts.size() == 1) {
      out = alts[0];
    } else {
      std::string joined(1, '(');
      for (size_t i = 0; i < alts.size(); ++i) {
        if (i > 0) joined += " | ";
        joined += alts[i];
      }
      joined += ')';
      out = std::move(joined);
    }
    return Status::Ok();
  }

  Status concatenation(std::string& out, int depth) {
    while (!end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == p_.size()) {  // the end anchor
        ++pos_;
        break;
      }
      std::string atom;
      SYV_RETURN_IF_ERROR(parse_atom(atom, depth));
      SYV_RETURN_IF_ERROR(quantifier(atom));
      if (!out.empty()) out += " ";
      out += atom;
    }
    return Status::Ok();
  }

  Status quantifier(std::string& atom) {
    bool quantified = false;
    for (;;) {
      const size_t at = pos_;
      const char c = peek();
      std::string q;
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        q = std::string(1, c);
      } else if (c == '{' && (isdigit(peek(1)) || peek(1) == ',')) {
        const size_t close = p_.find('}', pos_);
        if (close == std::string_view::npos) return error(at, "unterminated {m,n}");
        const std::string body(p_.substr(pos_ + 1, close - pos_ - 1));
        long m = -1, n = -1;
        const size_t comma = body.find(',');
        auto num = [&](const std::string& s, long& v) {
          if (s.empty()) return true;
          if (s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
          v = std::stol(s);
          return true;
        };
        if (!num(body.substr(0, comma), m) ||
            (comma != std::string::npos && !num(body.substr(comma + 1), n))) {
          return error(at, "bad repetition {" + body + "}");
        }
        if (comma == std::string::npos) n = m;
        if (m < 0) m = 0;
        if (m > kMaxRepetition || n > kMaxRepetition) {
          return error(at, "repetition count above " + std::to_string(kMaxRepetition));
        }
        if (n >= 0 && n < m) return error(at, "repetition {" + body + "}: maximum below minimum");
        q = '{';
        q += std::to_string(m);
        if (comma != std::string::npos) q += ',';
        if (comma != std::string::npos && n >= 0) q += std::to_string(n);
        q += '}';
        pos_ = close + 1;
      } else {
        return Status::Ok();
      }
      if (quantified) return error(at, "multiple repeat (a quantifier after a quantifier)");
      quantified = true;
      if (peek() == '?') ++pos_;  // lazy: the same strings match as a whole
      if (peek() == '+') return error(pos_, "possessive quantifiers are not supported");
      atom = "(" + atom + ")" + q;
    }
  }

  Status parse_atom(std::string& out, int depth) {
    const size_t at = pos_;
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (peek(1) == ':') {
          pos_ += 2;
        } else if (peek(1) == 'P' && peek(2) == '<') {
          pos_ = p_.find('>', pos_);
          if (pos_ == std::string_view::npos) return error(at, "unterminated group name");
          ++pos_;
        } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
          pos_ = p_.find('>', pos_);
          if (pos_ == std::string_view::npos) return error(at, "unterminated group name");
          ++pos_;
        } else {
          return error(at,
                       "lookaround and inline flags ((?=, (?!, (?<=, (?i) ...) are not "
                       "supported");
        }
      }
      std::string inner;
      SYV_RETURN_IF_ERROR(alternation(inner, depth + 1));
      if (peek() != ')') return error(at, "unterminated group");
      ++pos_;
      out = "(" + inner + ")";
      return Status::Ok();
    }
    if (c == '[') return parse_class(out);
    if (c == '.') {
      ++pos_;
      out = set_expr(normalize_ranges({{'\n', '\n'}}, true), json_);
      return Status::Ok();
    }
    if (c == '^' || c == '$') return error(at, "anchors are supported only at the ends");
    if (c == '*' || c == '+' || c == '?') return error(at, "nothing to repeat");
    Ranges set;
    SYV_RETURN_IF_ERROR(parse_char(set, false));
    if (set.size() == 1 && set[0].lo == set[0].hi) {
      out = literal(set[0].lo);
    } else {
      out = set_expr(normalize_ranges(set, false), json_);
    }
    return Status::Ok();
  }

  std::string literal(uint32_t cp) const {
    const std::string text =
        json_ && (cp < 0x20 || cp == '"' || cp == '\\') ? json_escape_of(cp) : utf8_encode(cp);
    return quoted(text);
  }

  // One character or escape; a class escape (\d ...) adds its ranges.
  Status parse_char(Ranges& set, bool in_class) {
    const size_t at = pos_;
    if (peek() != '\\') {
      uint32_t cp = 0;
      const std::string s(p_);
      if (!utf8_decode(s, pos_, cp)) return error(at, "invalid UTF-8");
      set.push_back({cp, cp});
      return Status::Ok();
    }
    ++pos_;
    const char e = peek();
    ++pos_;
    auto add = [&](const Ranges& r, bool negate) {
      const Ranges n = normalize_ranges(r, negate);
      set.insert(set.end(), n.begin(), n.end());
    };
    auto one = [&](uint32_t cp) { set.push_back({cp, cp}); };
    switch (e) {
      case 'd':
        add(digit(), false);
        break;
      case 'D':
        add(digit(), true);
        break;
      case 'w':
        add(word(), false);
        break;
      case 'W':
        add(word(), true);
        break;
      case 's':
        add(space(), false);
        break;
      case 'S':
        add(space(), true);
        break;
      case 'n':
        one('\n');
        break;
      case 'r':
        one('\r');
        break;
      case 't':
        one('\t');
        break;
      case 'f':
        one('\f');
        break;
      case 'v':
        one('\v');
        break;
      case '0':
        one(0);
        break;
      case 'x':
      case 'u': {
        uint32_t cp = 0;
        SYV_RETURN_IF_ERROR(parse_hex(e == 'x' ? 2 : 4, cp, at));
        one(cp);
        break;
      }
      case 'b':
        if (in_class) {
          one('\b');
          break;
        }
        return error(at, "word boundaries (\\b) are not supported");
      case 'B':
        return error(at, "\\B is not supported");
      case '\0':
        return error(at, "unfinished escape");
      default:
        if (e >= '1' && e <= '9') return error(at, "backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          return error(at, std::string("unknown escape \\") + e);
        }
        --pos_;  // escaped punctuation (or UTF-8): the character itself
        {
          uint32_t cp = 0;
          const std::string s(p_);
          if (!utf8_decode(s, pos_, cp)) return error(at, "invalid UTF-8");
          one(cp);
        }
    }
    return Status::Ok();
  }

  Status parse_hex(int digits, uint32_t& cp, size_t at) {
    const bool braced = digits == 4 && peek() == '{';
    if (braced) ++pos_;
    uint64_t v = 0;
    int n = 0;
    for (; braced ? peek() != '}' : n < digits; ++n) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0 || n >= 8) return error(at, "bad hex escape");
      v = v * 16 + static_cast<uint64_t>(d);
      ++pos_;
    }
    if (braced) ++pos_;
    if (n == 0 || v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF))
      return error(at, "escape is not a Unicode scalar value");
    cp = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status parse_class(std::string& out) {
    const size_t at = pos_;
    ++pos_;
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    Ranges set;
    bool first = true;
    for (;;) {
      if (end()) return error(at, "unterminated character class");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      if (peek() == '[' && peek(1) == ':') return error(pos_, "POSIX classes are not supported");
      first = false;
      Ranges lo;
      SYV_RETURN_IF_ERROR(parse_char(lo, true));
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0' && lo.size() == 1 &&
          lo[0].lo == lo[0].hi) {
        ++pos_;
        Ranges hi;
        const size_t hi_at = pos_;
        SYV_RETURN_IF_ERROR(parse_char(hi, true));
        if (hi.size() != 1 || hi[0].lo != hi[0].hi) return error(hi_at, "bad class range");
        if (hi[0].lo < lo[0].lo) return error(hi_at, "class range out of order");
        set.push_back({lo[0].lo, hi[0].lo});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    const Ranges norm = normalize_ranges(set, negate);
    if (norm.empty()) return error(at, "character class matches nothing");
    out = set_expr(norm, json_);
    return Status::Ok();
  }

  std::string_view p_;
  bool json_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> regex_to_gbnf_expr(std::string_view pattern, bool in_json_string) {
  RegexParser parser(pattern, in_json_string);
  SYV_ASSIGN_OR_RETURN(std::string expr, parser.parse());
  return expr.empty() ? std::string("\"\"") : expr;
}

Result<std::string> regex_to_gbnf(std::string_view pattern) {
  SYV_ASSIGN_OR_RETURN(std::string expr, regex_to_gbnf_expr(pattern, false));
  return "root ::= " + expr + "\n";
}

}  // namespace syv::grammar
