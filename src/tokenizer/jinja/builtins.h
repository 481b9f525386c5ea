// jinja2's built-in filters, tests and globals, the Python str/dict methods chat templates call,
// and transformers' additions (tojson with json.dumps semantics, raise_exception, strftime_now).
#pragma once

#include <string>

#include "tokenizer/jinja/value.h"

namespace syv::jinja {

class Renderer;

// `input | name(args)`. Throws Error for unknown filters or bad arguments.
Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
// `value is name(args)`.
bool apply_test(Renderer& r, const std::string& name, const Value& value, CallArgs& args);
// True when `self.name(...)` is a supported method of self's type (str, dict, list).
bool has_method(const Value& self, const std::string& name);
// `self.name(args)`.
Value call_method(Renderer& r, const Value& self, const std::string& name, CallArgs& args);
// Globals: range, dict, namespace, raise_exception, strftime_now. Undefined when unknown.
Value lookup_global(const std::string& name);

}  // namespace syv::jinja
