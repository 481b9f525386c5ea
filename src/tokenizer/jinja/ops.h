// Python/jinja2 semantics of the operations the renderer needs: attribute and item lookup,
// slicing, iteration, arithmetic, comparison and membership. Failures throw Error.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace syv::jinja {

// Size caps for values built while rendering (strings in bytes, lists in elements).
struct SizeLimits {
  size_t max_string = 16u << 20;
  size_t max_list = 100000;
};
void check_string_size(size_t n, const SizeLimits& limits);
void check_list_size(size_t n, const SizeLimits& limits);

// jinja2's "'x' is undefined" error for using an undefined value.
[[noreturn]] void undefined_error(const Value& v);

// obj.name (attribute first, then item, like jinja2's sandboxed getattr). Methods of str, dict
// and list are resolved by the renderer; this returns the item or Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]; Undefined when missing or out of range.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] for lists and strings (nullptr = omitted).
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
// Python iter(): list items, dict keys, string characters; Undefined iterates as empty.
std::vector<Value> iterate(const Value& v);
// Python len().
int64_t length_of(const Value& v);

// Binary operators: + - * / // % ** ~.
Value binary_op(const std::string& op, const Value& a, const Value& b, const SizeLimits& limits);
// Comparisons: == != < <= > >= in notin.
bool compare_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// Python a < b (raises TypeError-like Error for unorderable types).
bool less_than(const Value& a, const Value& b);

// Code-point view of a UTF-8 string, for indexing and slicing.
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace syv::jinja
