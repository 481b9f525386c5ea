#include "tokenizer/jinja/value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace syv::jinja {

static int child_depth(const Value& v) {
  if (v.depth >= kMaxValueDepth)
    throw Error("value nested too deeply (limit " + std::to_string(kMaxValueDepth) + ")");
  return v.depth + 1;
}

Value Value::from_list(List items, bool tuple) {
  Value v = make(Kind::kList);
  v.tuple = tuple;
  v.depth = 1;
  for (const auto& e : items) {
    v.depth = std::max(v.depth, child_depth(e));
    v.has_ns = v.has_ns || e.has_ns;
  }
  v.list = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::from_dict(Dict d) {
  Value v = make(Kind::kDict);
  v.depth = 1;
  for (const auto& e : d.items) {
    v.depth = std::max(v.depth, child_depth(e.second));
    v.has_ns = v.has_ns || e.second.has_ns;
  }
  v.dict = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::from_callable(Callable c) {
  Value v = make(Kind::kCallable);
  v.callable = std::make_shared<const Callable>(std::move(c));
  return v;
}

namespace {

// `level`: containers enclosing `j`. Checked before recursing, so the stack never holds more than
// kMaxValueDepth frames of this function.
Value from_json_at(const nlohmann::ordered_json& j, int level) {
  if ((j.is_array() || j.is_object()) && level >= kMaxValueDepth) {
    throw Error("value nested too deeply (limit " + std::to_string(kMaxValueDepth) + ")");
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, level + 1));
      return Value::from_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.set(it.key(), from_json_at(it.value(), level + 1));
      return Value::from_dict(std::move(d));
    }
    default:
      return Value::none();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b;
    case Kind::kInt:
      return i != 0;
    case Kind::kFloat:
      return f != 0.0;
    case Kind::kString:
      return !s.empty();
    case Kind::kList:
      return !list->empty();
    case Kind::kDict:
      return !dict->items.empty();
    case Kind::kCallable:
    case Kind::kNamespace:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kCallable:
      return "function";
    case Kind::kNamespace:
      return "Namespace";
  }
  return "object";
}

// ---- UTF-8 ------------------------------------------------------------------------------------

std::vector<uint32_t> decode_utf8(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                          static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {  // invalid byte: keep it as a code point of its own (like surrogateescape)
      out.push_back(static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.push_back(static_cast<uint32_t>(cp));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_length(const std::string& s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
  return ascii ? s.size() : decode_utf8(s).size();
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---- printing ---------------------------------------------------------------------------------

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0.0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's repr layout: fixed for 1e-4 <= |x| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exp10 + 1;  // position of the decimal point relative to digits
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out += ".";
      out += digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    int ex = decpt - 1;
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    out += eb;
  }
  return out;
}

static bool py_printable(uint32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : decode_utf8(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!py_printable(cp)) {
      char buf[16];
      if (cp < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      else if (cp < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  out.push_back(quote);
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return repr_string(v.s);
    case Value::Kind::kUndefined:
      return "Undefined";  // repr(jinja2.Undefined())
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.b ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.i);
    case Value::Kind::kFloat:
      return float_repr(v.f);
    case Value::Kind::kString:
      return v.s;
    case Value::Kind::kList: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const Dict& d = v.kind == Value::Kind::kDict ? *v.dict : *v.ns;
      std::string out = "{";
      for (size_t k = 0; k < d.items.size(); ++k) {
        if (k) out += ", ";
        out += repr_string(d.items[k].first) + ": " + repr(d.items[k].second);
      }
      out += "}";
      return v.kind == Value::Kind::kDict ? out : "<Namespace " + out + ">";
    }
    case Value::Kind::kCallable:
      return "<function " + v.callable->name + ">";
  }
  return "";
}

// ---- JSON (json.dumps with ensure_ascii=False) -------------------------------------------------

static void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

static void json_value(std::string& out, const Value& v, int indent, int level,
                       const std::string& item_sep, const std::string& key_sep, bool sort_keys,
                       int depth) {
  if (depth > 512) throw Error("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    out.push_back('\n');
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      if (std::isnan(v.f))
        out += "NaN";
      else if (std::isinf(v.f))
        out += v.f > 0 ? "Infinity" : "-Infinity";
      else
        out += float_repr(v.f);
      return;
    case Value::Kind::kString:
      json_string(out, v.s);
      return;
    case Value::Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_value(out, (*v.list)[k], indent, level + 1, item_sep, key_sep, sort_keys, depth + 1);
      }
      if (indent >= 0) newline(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      const Dict& d = *v.dict;
      if (d.items.empty()) {
        out += "{}";
        return;
      }
      std::vector<size_t> order(d.items.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      if (sort_keys)
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return d.items[a].first < d.items[b].first; });
      out.push_back('{');
      for (size_t k = 0; k < order.size(); ++k) {
        if (k) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_string(out, d.items[order[k]].first);
        out += key_sep;
        json_value(out, d.items[order[k]].second, indent, level + 1, item_sep, key_sep, sort_keys,
                   depth + 1);
      }
      if (indent >= 0) newline(level);
      out.push_back('}');
      return;
    }
    default:
      throw Error("tojson: Object of type " + v.type_name() + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, int indent, const std::string* item_sep,
                    const std::string* key_sep, bool sort_keys) {
  std::string isep = item_sep ? *item_sep : (indent >= 0 ? "," : ", ");
  std::string ksep = key_sep ? *key_sep : ": ";
  std::string out;
  json_value(out, v, indent, 0, isep, ksep, sort_keys, 0);
  return out;
}

// ---- equality ---------------------------------------------------------------------------------

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::kFloat || b.kind == Value::Kind::kFloat)
      return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.s == b.s;
    case Value::Kind::kList: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, val] : a.dict->items) {
        const Value* other = b.dict->find(key);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return a.callable == b.callable;
    case Value::Kind::kNamespace:
      return a.ns == b.ns;
    default:
      return false;
  }
}

}  // namespace syv::jinja
