#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace syv::jinja {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Length in bytes of the whitespace (Python \s, Unicode-aware) starting at byte `i`, or 0.
size_t space_at(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return (is_ascii_space(static_cast<char>(c)) || (c >= 0x1C && c <= 0x1F)) ? 1 : 0;
  std::string one;
  size_t n = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : (c >= 0xC0) ? 2 : 1;
  if (i + n > s.size()) return 0;
  auto cps = decode_utf8(s.substr(i, n));
  return (cps.size() == 1 && is_py_space(cps[0])) ? n : 0;
}

// Python str.rstrip() on UTF-8 (Unicode whitespace).
void rstrip_unicode(std::string& s) {
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_at(s, start) == s.size() - start) {
      s.erase(start);
    } else {
      break;
    }
  }
}

bool all_space(const std::string& s, size_t from) {
  if (from >= s.size()) return false;  // \s+ needs at least one character
  size_t i = from;
  while (i < s.size()) {
    size_t n = space_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(const std::string& raw) : src_(normalise(raw)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      std::string text =
          src_.substr(pos_, start == std::string::npos ? std::string::npos : start - pos_);
      Pos text_pos = here();
      if (start == std::string::npos) {
        advance_to(src_.size());
        emit_data(text, text_pos);
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      char sign = (start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+'))
                      ? src_[start + 2]
                      : 0;
      if (sign == '-') {
        rstrip_unicode(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        size_t l_pos = text.rfind('\n');
        l_pos = (l_pos == std::string::npos) ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && all_space(text, l_pos)) text.erase(l_pos);
      }
      advance_to(start);
      emit_data(text, text_pos);
      Pos tag_pos = here();
      advance_to(start + 2 + (sign ? 1 : 0));
      if (kind == '#') {
        line_starting = lex_comment(tag_pos);
      } else {
        line_starting = lex_tag(kind == '%', tag_pos);
      }
    }
    Token end;
    end.type = Tok::kEnd;
    end.pos = here();
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  static std::string normalise(const std::string& raw) {
    std::string out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        out.push_back('\n');
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        out.push_back(raw[i]);
      }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
    return out;
  }

  size_t find_tag(size_t from) const {
    size_t i = from;
    while (true) {
      i = src_.find('{', i);
      if (i == std::string::npos || i + 1 >= src_.size()) return std::string::npos;
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      ++i;
    }
  }

  Pos here() const { return Pos{line_, col_}; }

  void advance_to(size_t target) {
    while (pos_ < target && pos_ < src_.size()) {
      unsigned char c = static_cast<unsigned char>(src_[pos_]);
      if (c == '\n') {
        ++line_;
        col_ = 1;
      } else if ((c & 0xC0) != 0x80) {
        ++col_;
      }
      ++pos_;
    }
  }

  void emit_data(const std::string& text, Pos p) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kData;
    t.text = text;
    t.pos = p;
    tokens_.push_back(std::move(t));
  }

  void emit(Tok type, std::string text, Pos p) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.pos = p;
    tokens_.push_back(std::move(t));
  }

  // After a tag end: `-` strips all following whitespace; otherwise trim_blocks drops one newline
  // after block/comment tags. Returns whether the consumed text ended with a newline.
  bool after_tag_end(char sign, bool is_block_or_comment) {
    bool newline = false;
    if (sign == '-') {
      while (pos_ < src_.size()) {
        size_t n = space_at(src_, pos_);
        if (n == 0) break;
        newline = src_[pos_] == '\n';
        advance_to(pos_ + n);
      }
    } else if (sign != '+' && is_block_or_comment && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
      newline = true;
    }
    return newline;
  }

  bool lex_comment(Pos tag_pos) {
    if (pos_ >= src_.size()) return false;  // jinja2 quirk: a bare "{#" at the very end is dropped
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) throw Error("unterminated comment (missing '#}')", tag_pos);
    char sign = (end > pos_ && src_[end - 1] == '-')   ? '-'
                : (end > pos_ && src_[end - 1] == '+') ? '+'
                                                       : 0;
    advance_to(end + 2);
    return after_tag_end(sign, true);
  }

  bool lex_tag(bool block, Pos tag_pos) {
    emit(block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", tag_pos);
    std::vector<char> braces;
    while (true) {
      while (pos_ < src_.size() && is_ascii_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        throw Error(std::string("unterminated tag (missing '") + (block ? "%}" : "}}") + "')",
                    tag_pos);
      Pos p = here();
      char c = src_[pos_];
      // End of tag (only outside brackets, like jinja2's balancing stack).
      if (braces.empty()) {
        char sign = 0;
        size_t at = pos_;
        if (c == '-' || c == '+') {
          sign = c;
          ++at;
        }
        const char* close = block ? "%}" : "}}";
        if (src_.compare(at, 2, close) == 0 && !(sign == '+' && !block)) {
          advance_to(at + 2);
          emit(block ? Tok::kBlockEnd : Tok::kVarEnd, close, p);
          return after_tag_end(sign, block);
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
          ++e;
        emit(Tok::kName, src_.substr(pos_, e - pos_), p);
        advance_to(e);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number(p);
      } else if (c == '\'' || c == '"') {
        lex_string(p);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src_.compare(pos_, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string("+-/*%~[](){}<>=.:|,;").find(c) == std::string::npos)
            throw Error(std::string("unexpected character '") + c + "' in tag", p);
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") braces.push_back(op[0]);
        if (op == ")" || op == "]" || op == "}") {
          char want = op == ")" ? '(' : op == "]" ? '[' : '{';
          if (braces.empty() || braces.back() != want) throw Error("unexpected '" + op + "'", p);
          braces.pop_back();
        }
        emit(Tok::kOp, op, p);
        advance_to(pos_ + op.size());
      }
    }
  }

  void lex_number(Pos p) {
    size_t e = pos_;
    // 0x / 0o / 0b literals (with optional '_' separators).
    if (src_[pos_] == '0' && pos_ + 2 < src_.size() &&
        std::string("xXoObB").find(src_[pos_ + 1]) != std::string::npos) {
      char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[pos_ + 1])));
      int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      size_t k = pos_ + 2;
      uint64_t v = 0;
      bool any = false;
      while (k < src_.size()) {
        char c = src_[k];
        if (c == '_' && any) {
          ++k;
          continue;
        }
        int d = hex_value(c);
        if (d < 0 || d >= base) break;
        if (v > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) /
                    static_cast<uint64_t>(base))
          throw Error("integer literal too large", p);
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
        any = true;
        ++k;
      }
      if (any) {
        Token t;
        t.type = Tok::kInt;
        t.ival = static_cast<int64_t>(v);
        t.text = src_.substr(pos_, k - pos_);
        t.pos = p;
        tokens_.push_back(std::move(t));
        advance_to(k);
        return;
      }
    }
    auto digits = [&](size_t& k) {
      size_t begin = k;
      while (k < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[k])) ||
                                 (src_[k] == '_' && k > begin && k + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[k + 1])))))
        ++k;
    };
    digits(e);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits(e);
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        is_float = true;
        e = k;
        digits(e);
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text.push_back(src_[k]);
    Token t;
    t.pos = p;
    t.text = text;
    if (is_float) {
      t.type = Tok::kFloat;
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = Tok::kInt;
      if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos)
        throw Error("leading zeros in an integer literal are not permitted: " + text, p);
      errno = 0;
      unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
        throw Error("integer literal too large: " + text, p);
      t.ival = static_cast<int64_t>(v);
    }
    tokens_.push_back(std::move(t));
    advance_to(e);
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python 'unicode-escape' decoding of the literal's body, as jinja2 does.
  void lex_string(Pos p) {
    char quote = src_[pos_];
    size_t k = pos_ + 1;
    std::string out;
    while (true) {
      if (k >= src_.size()) throw Error("unterminated string literal", p);
      char c = src_[k];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++k;
        continue;
      }
      if (k + 1 >= src_.size()) throw Error("unterminated string literal", p);
      char e = src_[k + 1];
      k += 2;
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int d = 0; d < n; ++d) {
            int h = k < src_.size() ? hex_value(src_[k]) : -1;
            if (h < 0)
              throw Error(std::string("truncated \\") + e + " escape in string literal", p);
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++k;
          }
          if (cp > 0x10FFFF) throw Error("escape out of range in string literal", p);
          append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int d = 0; d < 2 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++d, ++k)
              cp = cp * 8 + static_cast<uint32_t>(src_[k] - '0');
            append_utf8(out, cp);
          } else {  // unknown escape: kept as written
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Token t;
    t.type = Tok::kString;
    t.text = std::move(out);
    t.pos = p;
    tokens_.push_back(std::move(t));
    advance_to(k + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
  return Lexer(source).run();
}

}  // namespace syv::jinja
