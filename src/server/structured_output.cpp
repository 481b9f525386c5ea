#include "server/structured_output.h"

#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "grammar/choice.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/openai_schema.h"

namespace syv::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kFields[] = {"response_format", "structured_outputs", "guided_json",
                                   "guided_regex",    "guided_choice",      "guided_grammar",
                                   "grammar",         "json_schema"};

// Compiled grammars by text, most recently used first.
Result<std::shared_ptr<const grammar::Grammar>> compile_cached(const std::string& gbnf) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const grammar::Grammar>>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->first == gbnf) {
        cache.splice(cache.begin(), cache, it);
        return it->second;
      }
    }
  }
  SYV_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> g, grammar::Grammar::parse(gbnf));
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace_front(gbnf, g);
  if (cache.size() > 64) cache.pop_back();
  return g;
}

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError::bad_param(param, param + ": " + message);
}

// 400 unsupported_parameter for what syv cannot honour (a JSON Schema keyword, a regex
// construct): `param` is the top-level field, the message names the place inside it.
ApiError unsupported(const std::string& where, const std::string& message) {
  return ApiError::unsupported(where.substr(0, where.find_first_of(".[")), where + ": " + message);
}

// The value at `path` of the ordered body, or `fallback` converted (keys sorted).
ordered_json ordered_at(const ordered_json* ordered, const std::vector<std::string>& path,
                        const json& fallback) {
  const ordered_json* node = ordered;
  for (const std::string& key : path) {
    if (node == nullptr || !node->is_object()) break;
    auto it = node->find(key);
    node = it == node->end() ? nullptr : &*it;
  }
  if (node != nullptr) return *node;
  return ordered_json::parse(fallback.dump());
}

// A schema given as an object (or a boolean) or as a JSON string.
std::optional<ApiError> schema_value(const json& v, const ordered_json* ordered,
                                     const std::vector<std::string>& path, const std::string& param,
                                     ordered_json& out) {
  if (v.is_string()) {
    try {
      out = ordered_json::parse(v.get<std::string>());
    } catch (const std::exception& e) {
      return bad(param, std::string("expected a JSON Schema (an object, or a string holding one); "
                                    "the string is not JSON: ") +
                            e.what());
    }
    return std::nullopt;
  }
  if (!v.is_object() && !v.is_boolean()) {
    return bad(param, "expected a JSON Schema (an object, or a string holding one), found " +
                          describe_json(v));
  }
  out = ordered_at(ordered, path, v);
  return std::nullopt;
}

std::optional<ApiError> from_schema(const ordered_json& schema, const std::string& param,
                                    std::string& gbnf) {
  Result<std::string> text = grammar::json_schema_to_gbnf(schema);
  if (!text.ok()) return unsupported(param, text.message());
  gbnf = *text;
  return std::nullopt;
}

std::optional<ApiError> from_regex(const json& v, const std::string& param, std::string& gbnf) {
  if (!v.is_string())
    return bad(param, "expected a regular expression (a string), found " + describe_json(v));
  Result<std::string> text = grammar::regex_to_gbnf(v.get<std::string>());
  if (!text.ok()) return unsupported(param, text.message());
  gbnf = *text;
  return std::nullopt;
}

std::optional<ApiError> from_choice(const json& v, const std::string& param, std::string& gbnf) {
  if (!v.is_array() || v.empty()) {
    return bad(param, "expected a non-empty array of strings, found " + describe_json(v));
  }
  std::vector<std::string> choices;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return bad(param + "[" + std::to_string(i) + "]",
                 "expected a string, found " + describe_json(v[i]));
    }
    choices.push_back(v[i].get<std::string>());
  }
  Result<std::string> text = grammar::choice_gbnf(choices);
  if (!text.ok()) return bad(param, text.message());
  gbnf = *text;
  return std::nullopt;
}

std::optional<ApiError> from_gbnf(const json& v, const std::string& param, std::string& gbnf) {
  if (!v.is_string()) {
    return bad(param, "expected a GBNF grammar (a string), found " + describe_json(v));
  }
  gbnf = v.get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> response_format(const json& v, const ordered_json* ordered,
                                        std::string& gbnf) {
  if (!v.is_object())
    return bad("response_format", "expected an object, found " + describe_json(v));
  auto type = v.find("type");
  if (type == v.end() || !type->is_string()) {
    return ApiError::bad_param("response_format.type",
                               "response_format.type: expected \"text\", \"json_object\" or "
                               "\"json_schema\"");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    if (auto s = v.find("schema"); s != v.end() && !s->is_null()) {  // llama-server's extension
      ordered_json schema;
      if (auto e = schema_value(*s, ordered, {"response_format", "schema"},
                                "response_format.schema", schema))
        return e;
      return from_schema(schema, "response_format.schema", gbnf);
    }
    gbnf = grammar::json_object_gbnf();
    return std::nullopt;
  }
  if (t == "json_schema") {
    auto js = v.find("json_schema");
    if (js == v.end() || !js->is_object()) {
      return ApiError::bad_param("response_format.json_schema",
                                 "response_format.json_schema: expected an object with the "
                                 "schema in \"schema\"");
    }
    if (auto strict = js->find("strict");
        strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
      return bad("response_format.json_schema.strict",
                 "expected a boolean, found " + describe_json(*strict));
    }
    auto s = js->find("schema");
    if (s == js->end() || s->is_null()) {
      return ApiError::bad_param("response_format.json_schema.schema",
                                 "response_format.json_schema.schema: required (the JSON Schema "
                                 "the output must follow)");
    }
    ordered_json schema;
    if (auto e = schema_value(*s, ordered, {"response_format", "json_schema", "schema"},
                              "response_format.json_schema.schema", schema))
      return e;
    return from_schema(schema, "response_format.json_schema.schema", gbnf);
  }
  return ApiError::bad_param("response_format.type",
                             "response_format.type: expected \"text\", \"json_object\" or "
                             "\"json_schema\", found " +
                                 describe_json(*type));
}

std::optional<ApiError> structured_outputs(const json& v, const ordered_json* ordered,
                                           std::string& param, std::string& gbnf) {
  if (!v.is_object()) {
    return bad("structured_outputs", "expected an object, found " + describe_json(v));
  }
  std::string which;
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    const std::string p = "structured_outputs." + key;
    if (key == "disable_fallback") {
      if (!value.is_boolean()) return bad(p, "expected a boolean, found " + describe_json(value));
      continue;
    }
    if (key != "json" && key != "regex" && key != "choice" && key != "grammar" &&
        key != "json_object") {
      return unsupported(p,
                         "not supported (syv reads json, regex, choice, grammar, json_object "
                         "and disable_fallback)");
    }
    if (!which.empty()) {
      return bad("structured_outputs",
                 "give exactly one of json, regex, choice, grammar and "
                 "json_object, found " +
                     which + " and " + key);
    }
    which = key;
  }
  if (which.empty()) {
    return bad("structured_outputs",
               "expected one of json, regex, choice, grammar and json_object");
  }
  param = "structured_outputs." + which;
  const json& value = v[which];
  if (which == "json") {
    ordered_json schema;
    if (auto e = schema_value(value, ordered, {"structured_outputs", "json"}, param, schema))
      return e;
    return from_schema(schema, param, gbnf);
  }
  if (which == "regex") return from_regex(value, param, gbnf);
  if (which == "choice") return from_choice(value, param, gbnf);
  if (which == "grammar") return from_gbnf(value, param, gbnf);
  if (!value.is_boolean() || !value.get<bool>()) {
    return bad(param, "expected true, found " + describe_json(value));
  }
  gbnf = grammar::json_object_gbnf();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> tool_call_grammar(const json& tools, const ordered_json* ordered,
                                          const std::string& name, bool single,
                                          StructuredOutput& out) {
  out = StructuredOutput{};
  const ordered_json* ordered_tools = nullptr;
  if (ordered != nullptr && ordered->is_object()) {
    auto it = ordered->find("tools");
    if (it != ordered->end() && it->is_array() && it->size() == tools.size()) ordered_tools = &*it;
  }
  // One JSON Schema for the call object: anyOf over the tools' {name, arguments}, their $defs
  // hoisted to the top (a tool's "#/$defs/x" then still resolves).
  ordered_json alternatives = ordered_json::array();
  ordered_json defs = ordered_json::object();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = tools[i]["function"];
    const std::string fn_name = fn["name"].get<std::string>();
    if (!name.empty() && fn_name != name) continue;
    const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
    ordered_json params = ordered_json::object();
    if (fn.contains("parameters") && !fn["parameters"].is_null()) {
      params = ordered_tools != nullptr ? (*ordered_tools)[i]["function"]["parameters"]
                                        : ordered_json::parse(fn["parameters"].dump());
    }
    for (const char* key : {"$defs", "definitions"}) {
      auto d = params.find(key);
      if (d == params.end()) continue;
      if (!d->is_object()) return bad(param + "." + key, "expected an object");
      for (const auto& [k, v] : d->items()) {
        if (defs.contains(k) && defs[k] != v) {
          return ApiError::unsupported(
              param, param + ": $defs entry \"" + k +
                         "\" differs from another tool's of the same name (constrained tool calls "
                         "put every tool's $defs together)");
        }
        defs[k] = v;
      }
      params.erase(key);
    }
    ordered_json call = {{"type", "object"},
                         {"properties", {{"name", {{"const", fn_name}}}, {"arguments", params}}},
                         {"required", {"name", "arguments"}},
                         {"additionalProperties", false}};
    alternatives.push_back(std::move(call));
  }
  if (alternatives.empty()) {
    return bad("tool_choice.function.name", "no tool in tools is named \"" + name + "\"");
  }
  ordered_json schema = {{"anyOf", alternatives}};
  if (!defs.empty()) {
    schema["$defs"] = defs;
    schema["definitions"] = defs;  // "#/definitions/x" resolves too
  }
  Result<std::string> text = grammar::json_schema_to_gbnf(schema);
  if (!text.ok()) {
    return ApiError::unsupported("tools", "tools: " + text.message() +
                                              " (constrained tool calls need every tool's "
                                              "parameters in syv's JSON Schema subset)");
  }
  std::string gbnf = *text;
  gbnf.replace(0, std::string("root ::= ").size(), "call-json ::= ");
  gbnf = std::string(name.empty() && !single ? "root ::= call (\"\\n\" call)*\n"
                                              : "root ::= call\n") +
         "call ::= \"<tool_call>\\n\" call-json \"\\n</tool_call>\"\n" + gbnf;
  Result<std::shared_ptr<const grammar::Grammar>> g = compile_cached(gbnf);
  if (!g.ok()) return bad("tools", g.message());
  out.field = "tool_choice";
  out.gbnf = std::move(gbnf);
  out.grammar = *g;
  return std::nullopt;
}

bool has_structured_output_field(const json& body) {
  for (const char* f : kFields) {
    auto it = body.find(f);
    if (it != body.end() && !it->is_null()) return true;
  }
  auto tc = body.find("tool_choice");  // a forced tool call is constrained too
  return tc != body.end() && (tc->is_object() || *tc == "required");
}

std::optional<ApiError> parse_structured_output(const json& body, const ordered_json* ordered,
                                                StructuredOutput& out) {
  out = StructuredOutput{};
  std::string field;
  for (const char* f : kFields) {
    auto it = body.find(f);
    if (it == body.end() || it->is_null()) continue;
    if (std::string(f) == "response_format" && it->is_object() && it->contains("type") &&
        (*it)["type"] == "text")
      continue;  // no constraint
    if (!field.empty()) {
      return bad(f,
                 "give at most one structured-output field (response_format, "
                 "structured_outputs, guided_json, guided_regex, guided_choice, "
                 "guided_grammar, grammar, json_schema); found " +
                     field + " and " + f);
    }
    field = f;
  }
  if (field.empty()) {
    if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
      std::string unused;
      return response_format(*it, ordered, unused);  // type checks of a "text" format
    }
    return std::nullopt;
  }
  const json& v = body.at(field);
  std::string param = field;
  std::optional<ApiError> err;
  if (field == "response_format") {
    err = response_format(v, ordered, out.gbnf);
  } else if (field == "structured_outputs") {
    err = structured_outputs(v, ordered, param, out.gbnf);
  } else if (field == "guided_json" || field == "json_schema") {
    ordered_json schema;
    err = schema_value(v, ordered, {field}, field, schema);
    if (!err) err = from_schema(schema, field, out.gbnf);
  } else if (field == "guided_regex") {
    err = from_regex(v, field, out.gbnf);
  } else if (field == "guided_choice") {
    err = from_choice(v, field, out.gbnf);
  } else {  // guided_grammar, grammar
    err = from_gbnf(v, field, out.gbnf);
  }
  if (err) return err;
  Result<std::shared_ptr<const grammar::Grammar>> g = compile_cached(out.gbnf);
  if (!g.ok()) return bad(param, g.message());
  out.field = field;
  out.grammar = *g;
  return std::nullopt;
}

}  // namespace syv::server
