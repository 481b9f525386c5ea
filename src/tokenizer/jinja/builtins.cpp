#include "tokenizer/jinja/builtins.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <initializer_list>

#include "tokenizer/jinja/ops.h"
#include "tokenizer/jinja/renderer.h"

namespace syv::jinja {
namespace {

// ---- argument binding -------------------------------------------------------------------------

// Binds call arguments to a Python-like signature: positional slots by index, then by keyword.
class Args {
 public:
  Args(const std::string& fname, CallArgs& a, std::initializer_list<const char*> names)
      : fname_(fname), a_(a), names_(names) {
    if (a.positional.size() > names_.size())
      throw Error(fname + "() takes at most " + std::to_string(names_.size()) + " argument(s), " +
                  std::to_string(a.positional.size()) + " given");
    for (const auto& kv : a.keyword) {
      const std::string& key = kv.first;
      auto it =
          std::find_if(names_.begin(), names_.end(), [&key](const char* n) { return key == n; });
      if (it == names_.end())
        throw Error(fname + "() got an unexpected keyword argument '" + key + "'");
      if (static_cast<size_t>(it - names_.begin()) < a.positional.size())
        throw Error(fname + "() got multiple values for argument '" + key + "'");
    }
  }
  const Value* get(size_t idx) const {
    if (idx < a_.positional.size()) return &a_.positional[idx];
    for (const auto& [key, value] : a_.keyword)
      if (key == names_[idx]) return &value;
    return nullptr;
  }
  Value get_or(size_t idx, Value def) const {
    const Value* v = get(idx);
    return v ? *v : def;
  }
  std::string str(size_t idx, const std::string& def) const {
    const Value* v = get(idx);
    if (!v || v->is_none()) return def;
    if (!v->is_string())
      throw Error(fname_ + "(): argument '" + names_[idx] + "' must be a string, not " +
                  v->type_name());
    return v->s;
  }
  int64_t integer(size_t idx, int64_t def) const {
    const Value* v = get(idx);
    if (!v || v->is_none()) return def;
    if (!v->is_integer_like())
      throw Error(fname_ + "(): argument '" + names_[idx] + "' must be an integer, not " +
                  v->type_name());
    return v->as_int();
  }
  bool flag(size_t idx, bool def) const {
    const Value* v = get(idx);
    return v ? v->truthy() : def;
  }

 private:
  std::string fname_;
  CallArgs& a_;
  std::vector<const char*> names_;
};

// ---- strings ----------------------------------------------------------------------------------

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  for (uint32_t cp : decode_utf8(s)) {
    auto c = static_cast<utf8proc_int32_t>(cp);
    append_utf8(out, static_cast<uint32_t>(upper ? utf8proc_toupper(c) : utf8proc_tolower(c)));
  }
  return out;
}

bool is_upper_cp(uint32_t cp) {
  return utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)) != static_cast<utf8proc_int32_t>(cp);
}
bool is_lower_cp(uint32_t cp) {
  return utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)) != static_cast<utf8proc_int32_t>(cp);
}

std::string capitalize(const std::string& s) {
  auto cps = decode_utf8(s);
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) {
    auto c = static_cast<utf8proc_int32_t>(cps[k]);
    append_utf8(out, static_cast<uint32_t>(k == 0 ? utf8proc_toupper(c) : utf8proc_tolower(c)));
  }
  return out;
}

// Python str.strip/lstrip/rstrip: `chars` null = whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto cps = decode_utf8(s);
  std::vector<uint32_t> set;
  if (chars) set = decode_utf8(*chars);
  auto strip_it = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_py_space(cp);
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) append_utf8(out, cps[k]);
  return out;
}

std::vector<std::string> split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw Error("empty separator");
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  auto cps = decode_utf8(s);
  size_t k = 0;
  while (k < cps.size()) {
    while (k < cps.size() && is_py_space(cps[k])) ++k;
    if (k >= cps.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = cps.size();
      while (e > k && is_py_space(cps[e - 1])) --e;
      for (size_t j = k; j < e; ++j) append_utf8(word, cps[j]);
      out.push_back(word);
      break;
    }
    while (k < cps.size() && !is_py_space(cps[k])) append_utf8(word, cps[k++]);
    out.push_back(word);
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count, const SizeLimits& limits) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts `with` between every character
    auto chars = utf8_chars(s);
    for (size_t k = 0; k <= chars.size(); ++k) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (k < chars.size()) out += chars[k];
      check_string_size(out.size(), limits);
    }
    return out;
  }
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += with;
    check_string_size(out.size(), limits);
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  check_string_size(out.size(), limits);
  return out;
}

std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n' || s[k] == '\r') {
      out.push_back(cur);
      cur.clear();
      if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
    } else {
      cur.push_back(s[k]);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

Value string_list(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::from_list(std::move(out));
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start,
                    const std::string& fname) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      throw Error(fname + "() argument must be str or a tuple of str, not " + a.type_name());
    if (a.s.size() > s.size()) return false;
    return start ? s.compare(0, a.s.size(), a.s) == 0
                 : s.compare(s.size() - a.s.size(), a.s.size(), a.s) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : *affix.list)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

std::string require_string(const Value& v, const std::string& what) {
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_string()) throw Error(what + " expects a string, found " + v.type_name());
  return v.s;
}

// ---- attribute paths (map/selectattr/join attribute=) -----------------------------------------

Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (cur.is_undefined()) return cur;
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part)))
                  : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// ---- numbers ----------------------------------------------------------------------------------

std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string t = strip(text, nullptr, true, true);
  std::string digits;
  for (char c : t)
    if (c != '_') digits.push_back(c);
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

std::optional<double> parse_float(const std::string& text) {
  std::string t = strip(text, nullptr, true, true);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

// json.dumps(ensure_ascii=True): escape non-ASCII as \uXXXX (surrogate pairs above the BMP).
std::string ascii_escape(const std::string& json) {
  std::string out;
  for (uint32_t cp : decode_utf8(json)) {
    char buf[16];
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      out += buf;
    } else {
      uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    }
  }
  return out;
}

Value tojson(const Value& input, CallArgs& a) {
  Args args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  bool ensure_ascii = args.flag(0, false);
  int indent = -1;
  std::string indent_str;
  if (const Value* v = args.get(1); v && !v->is_none()) {
    if (!v->is_integer_like()) throw Error("tojson(): indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(v->as_int(), 0, 64));
  }
  std::string item_sep, key_sep;
  bool have_seps = false;
  if (const Value* v = args.get(2); v && !v->is_none()) {
    if (!v->is_list() || v->list->size() != 2 || !(*v->list)[0].is_string() ||
        !(*v->list)[1].is_string())
      throw Error("tojson(): separators must be a pair of strings");
    item_sep = (*v->list)[0].s;
    key_sep = (*v->list)[1].s;
    have_seps = true;
  }
  std::string out = to_json(input, indent, have_seps ? &item_sep : nullptr,
                            have_seps ? &key_sep : nullptr, args.flag(3, false));
  return Value::string(ensure_ascii ? ascii_escape(out) : out);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string title_case(const std::string& s) {
  // jinja2: capitalise each chunk split at runs of [-\s({[<].
  auto cps = decode_utf8(s);
  std::string out;
  bool word_start = true;
  for (uint32_t cp : cps) {
    bool delim = cp == '-' || is_py_space(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    auto c = static_cast<utf8proc_int32_t>(cp);
    if (delim) {
      append_utf8(out, cp);
      word_start = true;
    } else {
      append_utf8(out,
                  static_cast<uint32_t>(word_start ? utf8proc_toupper(c) : utf8proc_tolower(c)));
      word_start = false;
    }
  }
  return out;
}

std::string indent(const std::string& text, const Value& width, bool first, bool blank) {
  std::string pad =
      width.is_string()
          ? width.s
          : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 256)), ' ');
  std::vector<std::string> lines = splitlines(text + "\n");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + pad;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : pad + lines[k]);
  }
  if (first) rv = pad + rv;
  return rv;
}

// Python-ish ordering for sort/min/max with jinja2's case-insensitive default.
bool sort_less(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string())
    return map_case(a.s, false) < map_case(b.s, false);
  return less_than(a, b);
}

Value filter_items(Renderer& r, const Value& input, const std::string& test, CallArgs& rest,
                   bool select, const std::string* attribute);

}  // namespace

// ---- tests ------------------------------------------------------------------------------------

bool apply_test(Renderer& r, const std::string& name, const Value& v, CallArgs& a) {
  (void)r;
  auto arg = [&](const char* what) -> const Value& {
    if (a.positional.empty()) throw Error("test '" + name + "' needs an argument (" + what + ")");
    return a.positional[0];
  };
  using K = Value::Kind;
  static const char* no_arg_tests[] = {"defined", "undefined", "none",     "boolean",  "true",
                                       "false",   "integer",   "float",    "number",   "string",
                                       "mapping", "sequence",  "iterable", "callable", "escaped",
                                       "odd",     "even",      "lower",    "upper"};
  for (const char* t : no_arg_tests)
    if (name == t && (!a.positional.empty() || !a.keyword.empty()))
      throw Error("test '" + name + "' takes no arguments");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // jinja2's Undefined has __len__/__getitem__/__iter__/__call__, so these tests accept it.
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.kind == K::kCallable || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "sameas") {
    const Value& o = arg("other");
    if (v.kind != o.kind || v.is_undefined()) return false;  // two Undefined objects are never `is`
    switch (v.kind) {
      case K::kNone:
        return true;
      case K::kBool:
        return v.b == o.b;
      case K::kList:
        return v.list == o.list;
      case K::kDict:
        return v.dict == o.dict;
      case K::kNamespace:
        return v.ns == o.ns;
      case K::kCallable:
        return v.callable == o.callable;
      default:
        return equals(v, o);
    }
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_integer_like()) {
      if (v.is_undefined()) undefined_error(v);
      throw Error("test '" + name + "' needs an integer, found " + v.type_name());
    }
    int64_t d = 2;
    if (name == "divisibleby") {
      const Value& n = arg("divisor");
      if (!n.is_integer_like() || n.as_int() == 0)
        throw Error("divisibleby needs a non-zero integer");
      d = n.as_int();
    }
    int64_t m = v.as_int() % d;
    return name == "odd" ? m != 0 : m == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    bool any = false;
    for (uint32_t cp : decode_utf8(v.s)) {
      if (is_upper_cp(cp)) {
        if (name == "lower") return false;
        any = true;
      } else if (is_lower_cp(cp)) {
        if (name == "upper") return false;
        any = true;
      }
    }
    return any;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg("other"));
  if (name == "ne" || name == "!=") return !equals(v, arg("other"));
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(v, arg("other"));
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(arg("other"), v);
  if (name == "le" || name == "<=") return less_than(v, arg("other")) || equals(v, arg("other"));
  if (name == "ge" || name == ">=") return less_than(arg("other"), v) || equals(v, arg("other"));
  if (name == "in") return contains(arg("container"), v);
  throw Error("no test named '" + name + "'");
}

namespace {

Value filter_items(Renderer& r, const Value& input, const std::string& test, CallArgs& rest,
                   bool select, const std::string* attribute) {
  List out;
  for (const auto& item : iterate(input)) {
    Value subject = attribute ? attr_path(item, *attribute) : item;
    bool ok = test.empty() ? subject.truthy() : apply_test(r, test, subject, rest);
    if (ok == select) out.push_back(item);
  }
  return Value::from_list(std::move(out));
}

}  // namespace

// ---- filters ----------------------------------------------------------------------------------

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& a) {
  const SizeLimits& limits = r.limits();
  using K = Value::Kind;
  if (name == "tojson") return tojson(input, a);
  if (name == "safe" || name == "string") {
    Args("string", a, {});
    return input.is_string() ? input : Value::string(to_str(input));
  }
  if (name == "trim") {
    Args args("trim", a, {"chars"});
    std::string chars = args.str(0, "");
    bool have = args.get(0) && !args.get(0)->is_none();
    return Value::string(strip(to_str(input), have ? &chars : nullptr, true, true));
  }
  if (name == "length" || name == "count") {
    Args(name, a, {});
    return Value::integer(length_of(input));
  }
  if (name == "default" || name == "d") {
    Args args("default", a, {"default_value", "boolean"});
    bool use_default = input.is_undefined() || (args.flag(1, false) && !input.truthy());
    return use_default ? args.get_or(0, Value::string("")) : input;
  }
  if (name == "items") {
    Args("items", a, {});
    if (input.is_undefined()) return Value::from_list({});
    if (!input.is_dict())
      throw Error("can only get item pairs from a mapping, found " + input.type_name());
    List out;
    for (const auto& [k, v] : input.dict->items)
      out.push_back(Value::from_list({Value::string(k), v}, true));
    return Value::from_list(std::move(out));
  }
  if (name == "join") {
    Args args("join", a, {"d", "attribute"});
    std::string sep = args.str(0, "");
    std::string attribute = args.str(1, "");
    std::string out;
    bool first = true;
    for (const auto& item : iterate(input)) {
      if (!first) out += sep;
      first = false;
      out += to_str(attribute.empty() ? item : attr_path(item, attribute));
      check_string_size(out.size(), limits);
    }
    return Value::string(std::move(out));
  }
  if (name == "upper" || name == "lower") {
    Args(name, a, {});
    return Value::string(map_case(to_str(input), name == "upper"));
  }
  if (name == "capitalize") {
    Args(name, a, {});
    return Value::string(capitalize(to_str(input)));
  }
  if (name == "title") {
    Args(name, a, {});
    return Value::string(title_case(to_str(input)));
  }
  if (name == "list") {
    Args(name, a, {});
    return Value::from_list(iterate(input));
  }
  if (name == "first" || name == "last") {
    Args(name, a, {});
    auto items = iterate(input);
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    Args(name, a, {});
    if (input.is_string()) {
      auto chars = utf8_chars(input.s);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    auto items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value::from_list(std::move(items));
  }
  if (name == "map") {
    List out;
    if (input.is_undefined()) return Value::from_list({});  // jinja2 checks arguments lazily
    const Value* attribute = nullptr;
    const Value* def = nullptr;
    for (const auto& [k, v] : a.keyword) {
      if (k == "attribute")
        attribute = &v;
      else if (k == "default")
        def = &v;
    }
    if (attribute) {
      if (!attribute->is_string()) throw Error("map(): attribute must be a string");
      for (const auto& item : iterate(input)) {
        Value v = attr_path(item, attribute->s);
        out.push_back(v.is_undefined() && def ? *def : v);
      }
      return Value::from_list(std::move(out));
    }
    if (a.positional.empty() || !a.positional[0].is_string())
      throw Error("map() needs a filter name or attribute=");
    std::string fname = a.positional[0].s;
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const auto& item : iterate(input)) out.push_back(apply_filter(r, fname, item, rest));
    return Value::from_list(std::move(out));
  }
  if (name == "select" || name == "reject") {
    std::string test;
    CallArgs rest;
    if (!a.positional.empty()) {
      if (!a.positional[0].is_string()) throw Error(name + "() needs a test name");
      test = a.positional[0].s;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    }
    return filter_items(r, input, test, rest, name == "select", nullptr);
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (a.positional.empty() || !a.positional[0].is_string())
      throw Error(name + "() needs an attribute name");
    std::string attribute = a.positional[0].s;
    std::string test;
    CallArgs rest;
    if (a.positional.size() > 1) {
      if (!a.positional[1].is_string()) throw Error(name + "() needs a test name");
      test = a.positional[1].s;
      rest.positional.assign(a.positional.begin() + 2, a.positional.end());
    }
    return filter_items(r, input, test, rest, name == "selectattr", &attribute);
  }
  if (name == "int") {
    Args args("int", a, {"default", "base"});
    Value def = args.get_or(0, Value::integer(0));
    switch (input.kind) {
      case K::kInt:
        return input;
      case K::kBool:
        return Value::integer(input.as_int());
      case K::kFloat:
        if (!std::isfinite(input.f) || std::fabs(input.f) >= 9.2e18) return def;
        return Value::integer(static_cast<int64_t>(input.f));
      case K::kString: {
        if (auto v = parse_int(input.s, static_cast<int>(args.integer(1, 10))))
          return Value::integer(*v);
        if (auto f = parse_float(input.s); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
          return Value::integer(static_cast<int64_t>(*f));
        return def;
      }
      default:
        return def;
    }
  }
  if (name == "float") {
    Args args("float", a, {"default"});
    Value def = args.get_or(0, Value::number(0.0));
    if (input.is_number()) return Value::number(input.as_double());
    if (input.is_string())
      if (auto f = parse_float(input.s)) return Value::number(*f);
    return def;
  }
  if (name == "abs") {
    Args(name, a, {});
    if (input.kind == K::kFloat) return Value::number(std::fabs(input.f));
    if (!input.is_integer_like())
      throw Error("bad operand type for abs(): '" + input.type_name() + "'");
    if (input.as_int() == INT64_MIN) throw Error("integer overflow");
    return Value::integer(std::llabs(input.as_int()));
  }
  if (name == "round") {
    Args args("round", a, {"precision", "method"});
    if (!input.is_number()) throw Error("round() needs a number, found " + input.type_name());
    int64_t precision = std::clamp<int64_t>(args.integer(0, 0), -30, 30);
    std::string method = args.str(1, "common");
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = input.as_double() * scale;
    double y = method == "ceil"    ? std::ceil(x)
               : method == "floor" ? std::floor(x)
                                   : std::nearbyint(x);  // Python round(): half to even
    if (method != "common" && method != "ceil" && method != "floor")
      throw Error("round(): method must be 'common', 'ceil' or 'floor'");
    return Value::number(y / scale);
  }
  if (name == "replace") {
    Args args("replace", a, {"old", "new", "count"});
    std::string s = to_str(input);
    return Value::string(replace(s, args.str(0, ""), args.str(1, ""), args.integer(2, -1), limits));
  }
  if (name == "indent") {
    Args args("indent", a, {"width", "first", "blank"});
    Value width = args.get_or(0, Value::integer(4));
    if (!width.is_string() && !width.is_integer_like())
      throw Error("indent(): width must be an integer or a string");
    std::string out = indent(to_str(input), width, args.flag(1, false), args.flag(2, false));
    check_string_size(out.size(), limits);
    return Value::string(std::move(out));
  }
  if (name == "escape" || name == "e") {
    Args(name, a, {});
    return Value::string(html_escape(to_str(input)));
  }
  if (name == "attr") {  // getattr only: dict items are not attributes
    Args args("attr", a, {"name"});
    std::string attr = args.str(0, "");
    if (input.kind == K::kNamespace) return get_attr(input, attr);
    if (input.is_undefined()) undefined_error(input);
    return Value::undefined("'" + input.type_name() + " object' has no attribute '" + attr + "'");
  }
  if (name == "unique") {
    Args args("unique", a, {"case_sensitive", "attribute"});
    bool cs = args.flag(0, false);
    std::string attribute = args.str(1, "");
    List out, keys;
    for (const auto& item : iterate(input)) {
      Value key = attribute.empty() ? item : attr_path(item, attribute);
      if (!cs && key.is_string()) key = Value::string(map_case(key.s, false));
      bool seen = false;
      for (const auto& k : keys) seen = seen || equals(k, key);
      if (!seen) {
        keys.push_back(key);
        out.push_back(item);
      }
    }
    return Value::from_list(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max") {
    Args args(name, a,
              name == "sort"
                  ? std::initializer_list<const char*>{"reverse", "case_sensitive", "attribute"}
                  : std::initializer_list<const char*>{"case_sensitive", "attribute"});
    bool reverse = name == "sort" && args.flag(0, false);
    size_t off = name == "sort" ? 1 : 0;
    bool cs = args.flag(off, false);
    std::string attribute = args.str(off + 1, "");
    auto items = iterate(input);
    auto key = [&](const Value& v) { return attribute.empty() ? v : attr_path(v, attribute); };
    auto less = [&](const Value& x, const Value& y) { return sort_less(key(x), key(y), cs); };
    if (name == "sort") {
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? less(y, x) : less(x, y);
      });
      return Value::from_list(std::move(items));
    }
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    auto it = name == "min" ? std::min_element(items.begin(), items.end(), less)
                            : std::max_element(items.begin(), items.end(), less);
    return *it;
  }
  if (name == "sum") {
    Args args("sum", a, {"attribute", "start"});
    std::string attribute = args.str(0, "");
    Value total = args.get_or(1, Value::integer(0));
    for (const auto& item : iterate(input))
      total = binary_op("+", total, attribute.empty() ? item : attr_path(item, attribute), limits);
    return total;
  }
  if (name == "wordcount") {
    Args(name, a, {});
    return Value::integer(static_cast<int64_t>(split(to_str(input), nullptr, -1).size()));
  }
  if (name == "center") {
    Args args("center", a, {"width"});
    std::string s = to_str(input);
    int64_t width = std::clamp<int64_t>(args.integer(0, 80), 0, 1 << 16);
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value::string(s);
    int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s +
                         std::string(static_cast<size_t>(total - left), ' '));
  }
  throw Error("no filter named '" + name + "'");
}

// ---- methods ----------------------------------------------------------------------------------

bool has_method(const Value& self, const std::string& name) {
  static const char* str_methods[] = {
      "startswith", "endswith", "split",        "rsplit",       "strip",      "lstrip",  "rstrip",
      "replace",    "upper",    "lower",        "title",        "capitalize", "find",    "rfind",
      "count",      "join",     "splitlines",   "isdigit",      "isalpha",    "isalnum", "isspace",
      "isupper",    "islower",  "removeprefix", "removesuffix", "index"};
  static const char* dict_methods[] = {"items", "keys", "values", "get"};
  static const char* list_methods[] = {"index", "count"};
  auto in = [&](auto& arr) {
    return std::any_of(std::begin(arr), std::end(arr), [&](const char* m) { return name == m; });
  };
  if (self.is_string()) return in(str_methods);
  if (self.is_dict()) return in(dict_methods);
  if (self.is_list()) return in(list_methods);
  return false;
}

Value call_method(Renderer& r, const Value& self, const std::string& name, CallArgs& a) {
  const SizeLimits& limits = r.limits();
  if (self.is_dict()) {
    const Dict& d = *self.dict;
    if (name == "get") {
      Args args("get", a, {"key", "default"});
      const Value* key = args.get(0);
      if (!key) throw Error("get() needs a key");
      const Value* v = key->is_string() ? d.find(key->s) : nullptr;
      return v ? *v : args.get_or(1, Value::none());
    }
    Args(name, a, {});
    List out;
    for (const auto& [k, v] : d.items) {
      if (name == "items")
        out.push_back(Value::from_list({Value::string(k), v}, true));
      else if (name == "keys")
        out.push_back(Value::string(k));
      else
        out.push_back(v);
    }
    return Value::from_list(std::move(out));
  }
  if (self.is_list()) {
    Args args(name, a, {"value"});
    const Value* x = args.get(0);
    if (!x) throw Error(name + "() needs an argument");
    int64_t count = 0;
    for (size_t k = 0; k < self.list->size(); ++k) {
      if (equals((*self.list)[k], *x)) {
        if (name == "index") return Value::integer(static_cast<int64_t>(k));
        ++count;
      }
    }
    if (name == "index") throw Error(to_str(*x) + " is not in list");
    return Value::integer(count);
  }
  const std::string& s = self.s;
  if (name == "startswith" || name == "endswith") {
    Args args(name, a, {"prefix", "start", "end"});
    const Value* affix = args.get(0);
    if (!affix) throw Error(name + "() takes at least 1 argument");
    std::string sub = s;
    if (args.get(1) || args.get(2)) {
      Value start = args.get_or(1, Value::none()), end = args.get_or(2, Value::none());
      sub = get_slice(self, &start, &end, nullptr).s;
    }
    return Value::boolean(starts_or_ends(sub, *affix, name == "startswith", name));
  }
  if (name == "split" || name == "rsplit") {
    Args args(name, a, {"sep", "maxsplit"});
    const Value* sep = args.get(0);
    std::string sep_s = args.str(0, "");
    bool have_sep = sep && !sep->is_none();
    int64_t maxsplit = args.integer(1, -1);
    if (name == "rsplit" && maxsplit >= 0) {  // split from the right: reverse, split, reverse back
      auto rev = [](const std::string& x) {
        auto chars = utf8_chars(x);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
        return out;
      };
      std::string rsep = rev(sep_s);
      auto parts = split(rev(s), have_sep ? &rsep : nullptr, maxsplit);
      std::reverse(parts.begin(), parts.end());
      for (auto& p : parts) p = rev(p);
      return string_list(parts);
    }
    return string_list(split(s, have_sep ? &sep_s : nullptr, maxsplit));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args args(name, a, {"chars"});
    const Value* chars = args.get(0);
    std::string cs = args.str(0, "");
    bool have = chars && !chars->is_none();
    return Value::string(strip(s, have ? &cs : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "replace") {
    Args args("replace", a, {"old", "new", "count"});
    return Value::string(replace(
        s, require_string(args.get_or(0, Value::undefined("replace() needs 'old'")), "replace()"),
        require_string(args.get_or(1, Value::undefined("replace() needs 'new'")), "replace()"),
        args.integer(2, -1), limits));
  }
  if (name == "upper" || name == "lower") {
    Args(name, a, {});
    return Value::string(map_case(s, name == "upper"));
  }
  if (name == "title") {
    Args(name, a, {});
    return Value::string(title_case(s));
  }
  if (name == "capitalize") {
    Args(name, a, {});
    return Value::string(capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    Args args(name, a, {"sub"});
    std::string sub = require_string(
        args.get_or(0, Value::undefined(name + "() needs an argument")), name + "()");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") throw Error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(s.substr(0, at))));
  }
  if (name == "join") {
    Args args("join", a, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(args.get_or(0, Value::from_list({})))) {
      if (!item.is_string())
        throw Error("sequence item: expected str instance, " + item.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += item.s;
      check_string_size(out.size(), limits);
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    Args(name, a, {});
    return string_list(splitlines(s));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Args args(name, a, {"affix"});
    std::string affix = require_string(
        args.get_or(0, Value::undefined(name + "() needs an argument")), name + "()");
    if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0)
      return Value::string(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
      return Value::string(s.substr(0, s.size() - affix.size()));
    return self;
  }
  // is* predicates
  Args(name, a, {});
  auto cps = decode_utf8(s);
  if (cps.empty()) return Value::boolean(false);
  auto all = [&](auto pred) { return Value::boolean(std::all_of(cps.begin(), cps.end(), pred)); };
  auto cat = [](uint32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); };
  if (name == "isdigit") return all([&](uint32_t cp) { return cat(cp) == UTF8PROC_CATEGORY_ND; });
  if (name == "isalpha")
    return all([&](uint32_t cp) {
      auto c = cat(cp);
      return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
    });
  if (name == "isalnum")
    return all([&](uint32_t cp) {
      auto c = cat(cp);
      return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || c == UTF8PROC_CATEGORY_ND;
    });
  if (name == "isspace") return all(is_py_space);
  bool any_upper = std::any_of(cps.begin(), cps.end(), is_upper_cp);
  bool any_lower = std::any_of(cps.begin(), cps.end(), is_lower_cp);
  if (name == "isupper") return Value::boolean(any_upper && !any_lower);
  return Value::boolean(any_lower && !any_upper);  // islower
}

// ---- globals ----------------------------------------------------------------------------------

Value lookup_global(const std::string& name) {
  Callable c;
  c.name = name;
  if (name == "range") {
    c.fn = [](Renderer& r, CallArgs& a) -> Value {
      if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
        throw Error("range() takes 1 to 3 integer arguments");
      for (const auto& v : a.positional)
        if (!v.is_integer_like())
          throw Error("range() arguments must be integers, found " + v.type_name());
      int64_t start = 0, stop, step = 1;
      if (a.positional.size() == 1) {
        stop = a.positional[0].as_int();
      } else {
        start = a.positional[0].as_int();
        stop = a.positional[1].as_int();
        if (a.positional.size() == 3) step = a.positional[2].as_int();
      }
      if (step == 0) throw Error("range() arg 3 must not be zero");
      long double count = step > 0 ? (static_cast<long double>(stop) - start) / step
                                   : (static_cast<long double>(start) - stop) / -step;
      if (count > static_cast<long double>(r.limits().max_list))
        check_list_size(r.limits().max_list + 1, r.limits());
      List out;
      for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
        out.push_back(Value::integer(k));
        if (__builtin_add_overflow(k, step, &k)) break;
      }
      return Value::from_list(std::move(out));
    };
  } else if (name == "dict" || name == "namespace") {
    bool is_ns = name == "namespace";
    c.fn = [is_ns](Renderer&, CallArgs& a) -> Value {
      Dict d;
      for (const auto& v : a.positional) {
        if (!v.is_dict())
          throw Error(std::string(is_ns ? "namespace" : "dict") +
                      "() positional argument must be a mapping");
        for (const auto& [k, x] : v.dict->items) d.set(k, x);
      }
      for (const auto& [k, v] : a.keyword) d.set(k, v);
      if (!is_ns) return Value::from_dict(std::move(d));
      for (const auto& kv : d.items)
        if (kv.second.has_ns) throw Error("a namespace cannot hold another namespace");
      Value v;
      v.kind = Value::Kind::kNamespace;
      v.has_ns = true;
      v.ns = std::make_shared<Dict>(std::move(d));
      return v;
    };
  } else if (name == "raise_exception") {
    c.fn = [](Renderer&, CallArgs& a) -> Value {
      throw Error(a.positional.empty() ? std::string("raise_exception() called")
                                       : to_str(a.positional[0]));
    };
  } else if (name == "strftime_now") {
    c.fn = [](Renderer& r, CallArgs& a) -> Value {
      if (a.positional.size() != 1 || !a.positional[0].is_string())
        throw Error("strftime_now() needs a format string");
      const std::tm local = r.clock().local_now();
      char buf[512];
      size_t n = std::strftime(buf, sizeof(buf), a.positional[0].s.c_str(), &local);
      return Value::string(std::string(buf, n));
    };
  } else {
    return Value::undefined();
  }
  return Value::from_callable(std::move(c));
}

}  // namespace syv::jinja
