// Jinja values: a small variant mirroring the Python objects jinja2 sees when transformers renders
// a chat template (None, bool, int, float, str, list, dict in insertion order, callables,
// namespace() objects, and jinja2's Undefined).
//
// Strings are UTF-8; lengths, indices and slices count code points, as Python does.
// Lists and dicts are immutable once built (ImmutableSandboxedEnvironment), so they are shared by
// pointer; a namespace is the one mutable container.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace syv::jinja {

// Position in the template source: 1-based line and column (column counts code points).
struct Pos {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

// Thrown by the lexer, parser, renderer and built-ins; the renderer fills in the position of the
// expression being evaluated when a built-in throws without one.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, Pos pos = {})
      : std::runtime_error(message), pos(pos) {}
  Pos pos;
};

constexpr int kMaxValueDepth = 256;

struct Value;
struct Dict;
struct Callable;
using List = std::vector<Value>;
using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using NamespacePtr = std::shared_ptr<Dict>;  // namespace(): mutable attributes
using CallablePtr = std::shared_ptr<const Callable>;

struct Value {
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kCallable,
    kNamespace
  };

  Kind kind = Kind::kUndefined;
  int depth = 0;        // container nesting (lists/dicts), capped at kMaxValueDepth
  bool has_ns = false;  // is or contains a namespace (namespaces may not hold one: no cycles)
  bool tuple = false;   // a kList that Python would hold as a tuple (prints as "(a, b)")
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;  // kString; for kUndefined, the name that was looked up (for error messages)
  ListPtr list;
  DictPtr dict;
  CallablePtr callable;
  NamespacePtr ns;

  static Value undefined(std::string hint = "") {
    Value v;
    v.s = std::move(hint);
    return v;
  }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool x) {
    Value v = make(Kind::kBool);
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v = make(Kind::kInt);
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v = make(Kind::kFloat);
    v.f = x;
    return v;
  }
  static Value string(std::string x) {
    Value v = make(Kind::kString);
    v.s = std::move(x);
    return v;
  }
  static Value from_list(List items, bool tuple = false);
  static Value from_dict(Dict d);
  static Value from_callable(Callable c);
  // Throws Error when `j` nests more than kMaxValueDepth containers, before descending past the
  // limit (so a hostile 10^6-deep value costs at most kMaxValueDepth stack frames).
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool is_integer_like() const { return kind == Kind::kInt || kind == Kind::kBool; }
  int64_t as_int() const { return kind == Kind::kBool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::kFloat ? f : static_cast<double>(as_int()); }

  bool truthy() const;
  std::string type_name() const;  // Python-style: 'str', 'int', 'NoneType', ...

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// A dict with Python's insertion order. Keys are strings (chat templates never need others).
// Small dicts (messages, loop objects) are searched linearly; a hash index is built past 16 keys.
struct Dict {
  static constexpr size_t kIndexFrom = 16;
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;  // filled only when items.size() > kIndexFrom

  const Value* find(const std::string& key) const {
    if (items.size() <= kIndexFrom) {
      for (const auto& kv : items)
        if (kv.first == key) return &kv.second;
      return nullptr;
    }
    auto it = index.find(key);
    return it == index.end() ? nullptr : &items[it->second].second;
  }
  void set(const std::string& key, Value value) {
    if (Value* v = const_cast<Value*>(find(key))) {
      *v = std::move(value);
      return;
    }
    items.emplace_back(key, std::move(value));
    if (items.size() == kIndexFrom + 1) {
      for (size_t k = 0; k < items.size(); ++k) index.emplace(items[k].first, k);
    } else if (items.size() > kIndexFrom + 1) {
      index.emplace(key, items.size() - 1);
    }
  }
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Renderer;
struct Callable {
  std::string name;
  std::function<Value(Renderer&, CallArgs&)> fn;
};

// Python str(): what {{ value }} prints.
std::string to_str(const Value& v);
// Python repr(): used inside containers.
std::string repr(const Value& v);
// Python float repr ("1.0", "0.1", "1e-05", "inf").
std::string float_repr(double x);
// json.dumps(v, ensure_ascii=False, indent=indent (<0: None), separators, sort_keys), as
// transformers' tojson filter. item_sep/key_sep default to Python's (", "/": ", or ","/": " with an
// indent).
std::string to_json(const Value& v, int indent, const std::string* item_sep = nullptr,
                    const std::string* key_sep = nullptr, bool sort_keys = false);
// Python ==.
bool equals(const Value& a, const Value& b);

// UTF-8 helpers (code points).
std::vector<uint32_t> decode_utf8(const std::string& s);
void append_utf8(std::string& out, uint32_t cp);
size_t utf8_length(const std::string& s);
bool is_py_space(uint32_t cp);  // Python str.isspace()

}  // namespace syv::jinja
