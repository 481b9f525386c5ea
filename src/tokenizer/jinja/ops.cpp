#include "tokenizer/jinja/ops.h"

#include <cmath>
#include <limits>
#include <optional>

namespace syv::jinja {

void check_string_size(size_t n, const SizeLimits& limits) {
  if (n > limits.max_string)
    throw Error("string too long (" + std::to_string(n) + " bytes, limit " +
                std::to_string(limits.max_string) + ")");
}

void check_list_size(size_t n, const SizeLimits& limits) {
  if (n > limits.max_list)
    throw Error("list too long (" + std::to_string(n) + " items, limit " +
                std::to_string(limits.max_list) + ")");
}

void undefined_error(const Value& v) {
  throw Error(v.s.empty() ? std::string("value is undefined") : v.s);
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  out.reserve(s.size());
  for (uint32_t cp : decode_utf8(s)) {
    std::string c;
    append_utf8(c, cp);
    out.push_back(std::move(c));
  }
  return out;
}

static bool is_ascii(const std::string& s) {
  for (char c : s)
    if (c & 0x80) return false;
  return true;
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict: {
      const Value* v = obj.dict->find(name);
      if (v) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.ns->find(name);
      if (v) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    default:
      return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
  }
}

static bool normalise_index(int64_t& idx, size_t size) {
  if (idx < 0) idx += static_cast<int64_t>(size);
  return idx >= 0 && idx < static_cast<int64_t>(size);
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict:
      if (key.is_string()) {
        const Value* v = obj.dict->find(key.s);
        if (v) return *v;
      }
      return Value::undefined("'dict object' has no attribute '" + to_str(key) + "'");
    case Value::Kind::kList:
      if (key.is_integer_like()) {
        int64_t idx = key.as_int();
        if (normalise_index(idx, obj.list->size())) return (*obj.list)[static_cast<size_t>(idx)];
      }
      return Value::undefined("'list object' has no element " + to_str(key));
    case Value::Kind::kString:
      if (key.is_integer_like()) {
        int64_t idx = key.as_int();
        if (is_ascii(obj.s)) {
          if (normalise_index(idx, obj.s.size()))
            return Value::string(std::string(1, obj.s[static_cast<size_t>(idx)]));
        } else {
          auto chars = utf8_chars(obj.s);
          if (normalise_index(idx, chars.size()))
            return Value::string(chars[static_cast<size_t>(idx)]);
        }
      }
      return Value::undefined("'str object' has no element " + to_str(key));
    case Value::Kind::kNamespace:
      if (key.is_string()) return get_attr(obj, key.s);
      return Value::undefined("'Namespace object' has no element " + to_str(key));
    default:
      return Value::undefined("'" + obj.type_name() + " object' has no element " + to_str(key));
  }
}

// Python slice.indices() + element selection.
static std::vector<size_t> slice_indices(size_t size, const Value* start, const Value* stop,
                                         const Value* step) {
  auto as_int = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!v->is_integer_like())
      throw Error(std::string("slice ") + what + " must be an integer or none, not " +
                  v->type_name());
    return v->as_int();
  };
  int64_t n = static_cast<int64_t>(size);
  int64_t st = as_int(step, "step").value_or(1);
  if (st == 0) throw Error("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) -> int64_t {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = clamp(as_int(start, "start"), st < 0 ? n - 1 : 0);
  int64_t hi = clamp(as_int(stop, "stop"), st < 0 ? -1 : n);
  std::vector<size_t> out;
  if (st > 0) {
    for (int64_t k = lo; k < hi; k += st) out.push_back(static_cast<size_t>(k));
  } else {
    for (int64_t k = lo; k > hi; k += st) out.push_back(static_cast<size_t>(k));
  }
  return out;
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_list()) {
    List out;
    for (size_t k : slice_indices(obj.list->size(), start, stop, step))
      out.push_back((*obj.list)[k]);
    return Value::from_list(std::move(out));
  }
  if (obj.is_string()) {
    std::string out;
    if (is_ascii(obj.s)) {
      for (size_t k : slice_indices(obj.s.size(), start, stop, step)) out.push_back(obj.s[k]);
    } else {
      auto chars = utf8_chars(obj.s);
      for (size_t k : slice_indices(chars.size(), start, stop, step)) out += chars[k];
    }
    return Value::string(std::move(out));
  }
  return Value::undefined("'" + obj.type_name() + " object' is not subscriptable");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return *v.list;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->items.size());
      for (const auto& kv : v.dict->items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> out;
      for (auto& c : utf8_chars(v.s)) out.push_back(Value::string(std::move(c)));
      return out;
    }
    default:
      throw Error("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8_length(v.s));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict->items.size());
    default:
      throw Error("object of type '" + v.type_name() + "' has no len()");
  }
}

[[noreturn]] static void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

static double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

static Value repeat(const Value& seq, int64_t times, const SizeLimits& limits) {
  if (times < 0) times = 0;
  // An empty sequence stays empty however many times (as in Python), at once: a billion appends
  // of nothing passed every size limit and ran for seconds (found by jinja_fuzz, 2026-12-06).
  if (seq.is_string() && seq.s.empty()) return Value::string(std::string());
  if (!seq.is_string() && seq.list->empty()) return Value::from_list(List());
  if (seq.is_string()) {
    if (!seq.s.empty() && static_cast<uint64_t>(times) > limits.max_string)
      check_string_size(limits.max_string + 1, limits);
    check_string_size(seq.s.size() * static_cast<size_t>(times), limits);
    std::string out;
    out.reserve(seq.s.size() * static_cast<size_t>(times));
    for (int64_t k = 0; k < times; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  if (!seq.list->empty() && static_cast<uint64_t>(times) > limits.max_list)
    check_list_size(limits.max_list + 1, limits);
  check_list_size(seq.list->size() * static_cast<size_t>(times), limits);
  List out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::from_list(std::move(out));
}

Value binary_op(const std::string& op, const Value& a, const Value& b, const SizeLimits& limits) {
  if (op == "~") {
    std::string out = to_str(a);
    out += to_str(b);
    check_string_size(out.size(), limits);
    return Value::string(std::move(out));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  bool numbers = a.is_number() && b.is_number();
  bool ints = a.is_integer_like() && b.is_integer_like();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) throw Error("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.s.size() + b.s.size(), limits);
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list()) {
      check_list_size(a.list->size() + b.list->size(), limits);
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::from_list(std::move(out));
    }
    if (a.is_string())
      throw Error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) throw Error("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) throw Error("integer overflow");
      return Value::integer(r);
    }
    if (numbers) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && b.is_integer_like()) return repeat(a, b.as_int(), limits);
    if ((b.is_string() || b.is_list()) && a.is_integer_like()) return repeat(b, a.as_int(), limits);
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0.0) throw Error("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0.0)
      throw Error(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (x == std::numeric_limits<int64_t>::min() && y == -1) throw Error("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    double x = a.as_double(), y = b.as_double();
    if (op == "%") return Value::number(py_fmod(x, y));
    return Value::number(std::floor(x / y));
  }
  if (op == "**") {
    if (!numbers) unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(r, base, &r)) throw Error("integer overflow");
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) throw Error("integer overflow");
      }
      return Value::integer(r);
    }
    if (a.as_double() == 0.0 && b.as_double() < 0) throw Error("zero to a negative power");
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  throw Error("unknown operator " + op);
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integer_like() && b.is_integer_like()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.s < b.s;
  if (a.is_list() && b.is_list()) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (!equals((*a.list)[k], (*b.list)[k])) return less_than((*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size();
  }
  throw Error("'<' not supported between instances of '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string())
        throw Error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& e : *container.list)
        if (equals(e, item)) return true;
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.dict->find(item.s) != nullptr;
    default:
      throw Error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "<") return less_than(a, b);
  if (op == ">") return less_than(b, a);
  if (op == "<=") return less_than(a, b) || equals(a, b);
  if (op == ">=") return less_than(b, a) || equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  throw Error("unknown comparison " + op);
}

}  // namespace syv::jinja
