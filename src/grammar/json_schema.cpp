#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/regex.h"

namespace syv::grammar {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;

// The primitive rules, emitted when used (llama.cpp's json-schema-to-grammar shapes: numbers
// with at most 16 digits per part, whitespace bounded per position).
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"space", R"(| " " | "\n" [ \t]{0,20})"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"decimal-part", R"([0-9]{1,16})"},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)"},
      {"integer", R"(("-"? integral-part) space)"},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object",
       R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)"},
      {"array", R"("[" space (value ("," space value)*)? "]" space)"},
  };
  return p;
}

const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> d = {
      {"boolean", {"space"}},
      {"null", {"space"}},
      {"number", {"integral-part", "decimal-part", "space"}},
      {"integer", {"integral-part", "space"}},
      {"string", {"char", "space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"space", "string", "value"}},
      {"array", {"space", "value"}},
  };
  return d;
}

// Keywords that carry no constraint.
const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {
      "title",      "description", "$schema",   "$id",    "$comment", "default",    "examples",
      "deprecated", "readOnly",    "writeOnly", "strict", "$defs",    "definitions"};
  return a;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
  }
  if (out.size() > 40) out.resize(40);
  return out;
}

std::string literal(const std::string& bytes) {
  return "\"" + gbnf_escape(bytes) + "\"";
}

class Converter {
 public:
  explicit Converter(const ojson& root) : root_(root) {}

  Result<std::string> convert() {
    SYV_ASSIGN_OR_RETURN(std::string expr, visit(root_, "root", "", 0));
    std::string out = "root ::= " + expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  Status error(const std::string& path, const std::string& what) const {
    return Status::Error("json schema " + (path.empty() ? std::string("/") : path) + ": " + what);
  }

  std::string use(const std::string& primitive) {
    if (rules_.count(primitive)) return primitive;
    rules_[primitive] = primitives().at(primitive);
    auto deps = primitive_deps().find(primitive);
    if (deps != primitive_deps().end())
      for (const std::string& d : deps->second) use(d);
    return primitive;
  }

  std::string fresh(const std::string& hint) {
    std::string base = sanitize(hint);
    if (base.empty()) base = "r";
    for (int n = 0;; ++n) {
      const std::string name = base + (n ? "-" + std::to_string(n) : std::string()) + "-s";
      if (!rules_.count(name)) {
        rules_[name] = "";
        return name;
      }
    }
  }

  // A rule for `expr` (named after `hint`); returns its name.
  std::string rule(const std::string& hint, const std::string& expr) {
    const std::string name = fresh(hint);
    rules_[name] = expr;
    return name;
  }

  // The JSON text of `value` as a literal, followed by optional whitespace.
  std::string json_literal(const ojson& value) {
    use("space");
    return literal(value.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace)) +
           " space";
  }

  Result<std::string> visit(const ojson& s, const std::string& hint, const std::string& path,
                            int depth) {
    if (depth > kMaxDepth) return error(path, "nested more than 64 levels deep");
    if (s.is_boolean()) {
      if (s.get<bool>()) return use("value");
      return error(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return error(path, "expected a schema (an object or a boolean)");

    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key) || handled().count(key)) continue;
      return error(path, "keyword \"" + key + "\" is not supported");
    }
    if (auto it = s.find("$ref"); it != s.end()) return visit_ref(*it, path, depth);
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1)
        return error(path + "/allOf", "only allOf with exactly one schema is supported");
      if (has_constraints(s, "allOf"))
        return error(path, "allOf next to other constraining keywords is not supported");
      return visit((*it)[0], hint, path + "/allOf/0", depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty())
        return error(path + "/" + key, "expected a non-empty array of schemas");
      if (has_constraints(s, key))
        return error(path, std::string(key) +
                               " next to other constraining keywords is not "
                               "supported (put them inside each alternative)");
      std::string alts;
      for (size_t i = 0; i < it->size(); ++i) {
        SYV_ASSIGN_OR_RETURN(std::string a,
                             visit((*it)[i], hint + "-" + std::to_string(i),
                                   path + "/" + key + "/" + std::to_string(i), depth + 1));
        alts += (i ? " | " : "") + a;
      }
      return rule(hint, alts);
    }
    if (auto it = s.find("const"); it != s.end()) return json_literal(*it);
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty())
        return error(path + "/enum", "expected a non-empty array");
      std::string alts;
      for (size_t i = 0; i < it->size(); ++i) alts += (i ? " | " : "") + json_literal((*it)[i]);
      return rule(hint, "(" + alts + ")");
    }

    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const auto& t : *it) {
          if (!t.is_string()) return error(path + "/type", "expected type names");
          types.push_back(t.get<std::string>());
        }
      } else {
        return error(path + "/type", "expected a type name or a non-empty list of them");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    if (auto it = s.find("nullable"); it != s.end()) {
      if (!it->is_boolean()) return error(path + "/nullable", "expected a boolean");
      if (it->get<bool>() && std::find(types.begin(), types.end(), "null") == types.end())
        types.push_back("null");
    }
    std::string alts;
    for (size_t i = 0; i < types.size(); ++i) {
      SYV_ASSIGN_OR_RETURN(std::string a, visit_type(s, types[i], hint, path, depth));
      alts += (i ? " | " : "") + a;
    }
    return types.size() == 1 ? alts : rule(hint, alts);
  }

  static const std::set<std::string>& handled() {
    static const std::set<std::string> h = {"$ref",
                                            "allOf",
                                            "anyOf",
                                            "oneOf",
                                            "const",
                                            "enum",
                                            "type",
                                            "nullable",
                                            "properties",
                                            "required",
                                            "additionalProperties",
                                            "minProperties",
                                            "items",
                                            "minItems",
                                            "maxItems",
                                            "minLength",
                                            "maxLength",
                                            "pattern",
                                            "format",
                                            "minimum",
                                            "maximum",
                                            "exclusiveMinimum",
                                            "exclusiveMaximum"};
    return h;
  }

  // Whether `s` has constraining keywords besides `except` (and annotations).
  static bool has_constraints(const ojson& s, const std::string& except) {
    for (const auto& [key, value] : s.items())
      if (key != except && !annotations().count(key)) return true;
    return false;
  }

  Result<std::string> visit_ref(const ojson& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return error(path + "/$ref", "expected a string");
    const std::string target = ref.get<std::string>();
    auto done = refs_.find(target);
    if (done != refs_.end()) return done->second;
    const ojson* node = nullptr;
    if (target == "#") {
      node = &root_;
    } else if (target.rfind("#/", 0) == 0) {
      node = &root_;
      std::string rest = target.substr(2);
      while (node != nullptr) {
        const size_t slash = rest.find('/');
        std::string part = rest.substr(0, slash);
        for (size_t p; (p = part.find("~1")) != std::string::npos;) part.replace(p, 2, "/");
        for (size_t p; (p = part.find("~0")) != std::string::npos;) part.replace(p, 2, "~");
        auto it = node->is_object() ? node->find(part) : node->end();
        node = it == node->end() ? nullptr : &*it;
        if (slash == std::string::npos) break;
        rest = rest.substr(slash + 1);
      }
    } else {
      return error(path + "/$ref",
                   "only local references (\"#\", \"#/$defs/...\") are "
                   "supported, found \"" +
                       target + "\"");
    }
    if (node == nullptr) return error(path + "/$ref", "\"" + target + "\" names nothing");
    const std::string name = fresh("ref-" + target.substr(target.rfind('/') + 1));
    refs_[target] = name;  // before visiting: recursive schemas refer back to it
    SYV_ASSIGN_OR_RETURN(std::string expr, visit(*node, name, target.substr(1), depth + 1));
    rules_[name] = expr;
    return name;
  }

  Result<std::string> visit_type(const ojson& s, const std::string& type, const std::string& hint,
                                 const std::string& path, int depth) {
    if (type == "object") return visit_object(s, hint, path, depth);
    if (type == "array") return visit_array(s, hint, path, depth);
    if (type == "string") return visit_string(s, hint, path);
    if (type == "integer") return visit_integer(s, hint, path);
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k))
          return error(path, std::string("keyword \"") + k + "\" is supported for integers only");
      return use("number");
    }
    if (type == "boolean") return use("boolean");
    if (type == "null") return use("null");
    return error(path + "/type", "unknown type \"" + type + "\"");
  }

  Result<std::string> visit_object(const ojson& s, const std::string& hint, const std::string& path,
                                   int depth) {
    use("space");
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return error(path + "/required", "expected an array of names");
      for (const auto& r : *it) {
        if (!r.is_string()) return error(path + "/required", "expected an array of names");
        required.insert(r.get<std::string>());
      }
    }
    if (auto it = s.find("minProperties"); it != s.end() && !(it->is_number_integer() && *it == 0))
      return error(path + "/minProperties", "only 0 is supported");
    std::vector<std::pair<std::string, std::string>> req, opt;  // (key, kv rule)
    std::vector<std::string> keys;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return error(path + "/properties", "expected an object");
      for (const auto& [key, sub] : it->items()) {
        SYV_ASSIGN_OR_RETURN(std::string value,
                             visit(sub, hint + "-" + key, path + "/properties/" + key, depth + 1));
        const std::string kv =
            rule(hint + "-" + key + "-kv", json_literal(ojson(key)) + " \":\" space " + value);
        (required.count(key) ? req : opt).push_back({key, kv});
        keys.push_back(key);
      }
    }
    for (const std::string& r : required) {
      if (std::find(keys.begin(), keys.end(), r) == keys.end())
        return error(path + "/required", "\"" + r + "\" is required but not in properties");
    }
    std::string extra_kv;
    if (auto it = s.find("additionalProperties"); it != s.end() && !it->is_boolean()) {
      SYV_ASSIGN_OR_RETURN(std::string value, visit(*it, hint + "-additional",
                                                    path + "/additionalProperties", depth + 1));
      extra_kv = rule(hint + "-additional-kv", not_keys(keys, hint) + " \":\" space " + value);
    } else if (it != s.end() && it->get<bool>()) {
      extra_kv =
          rule(hint + "-additional-kv", not_keys(keys, hint) + " \":\" space " + use("value"));
    }
    // The optional properties (in order, each at most once), then any extra ones.
    std::vector<std::string> optional;
    for (const auto& [key, kv] : opt) optional.push_back(kv);
    if (!extra_kv.empty()) optional.push_back(extra_kv + "-many");
    if (!extra_kv.empty()) {
      rules_[extra_kv + "-many"] = extra_kv + " (\",\" space " + extra_kv + ")*";
    }
    std::string body = "\"{\" space ";
    if (!req.empty()) {
      for (size_t i = 0; i < req.size(); ++i) body += (i ? " \",\" space " : "") + req[i].second;
      for (const std::string& o : optional) body += " (\",\" space " + o + ")?";
    } else if (!optional.empty()) {
      // Whichever optional property comes first has no comma before it.
      std::string alts;
      for (size_t i = 0; i < optional.size(); ++i) {
        std::string alt = optional[i];
        for (size_t j = i + 1; j < optional.size(); ++j)
          alt += " (\",\" space " + optional[j] + ")?";
        alts += (i ? " | " : "") + alt;
      }
      body += "(" + alts + ")?";
    }
    body += " \"}\" space";
    return rule(hint, body);
  }

  // A JSON string (with its quotes and trailing space) that is none of `keys`: at each point of
  // the trie of the keys it either leaves the trie (any other character, then anything) or ends
  // where no key ends.
  std::string not_keys(const std::vector<std::string>& keys, const std::string& hint) {
    use("string");
    if (keys.empty()) return "string";
    struct Node {
      std::map<std::string, int> next;  // one UTF-8 character -> child
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& key : keys) {
      int n = 0;
      for (size_t i = 0; i < key.size();) {
        size_t len = 1;
        const auto c = static_cast<uint8_t>(key[i]);
        if (c >= 0xF0)
          len = 4;
        else if (c >= 0xE0)
          len = 3;
        else if (c >= 0xC0)
          len = 2;
        const std::string ch = key.substr(i, len);
        i += len;
        auto it = trie[static_cast<size_t>(n)].next.find(ch);
        if (it == trie[static_cast<size_t>(n)].next.end()) {
          trie.push_back({});
          it = trie[static_cast<size_t>(n)]
                   .next.emplace(ch, static_cast<int>(trie.size()) - 1)
                   .first;
        }
        n = it->second;
      }
      trie[static_cast<size_t>(n)].end = true;
    }
    const std::string base = fresh(hint + "-other-key");
    for (size_t n = 0; n < trie.size(); ++n) {
      std::string alts;
      std::string excluded = "\"\\\\\\x7F\\x00-\\x1F";
      for (const auto& [ch, child] : trie[n].next) {
        const std::string escaped =
            gbnf_escape(ojson(ch).dump().substr(1, ojson(ch).dump().size() - 2));
        alts += (alts.empty() ? "" : " | ") + std::string("\"") + escaped + "\" " + base + "-" +
                std::to_string(child);
        if (ch.size() == 1 && ch[0] != '"' && ch[0] != '\\' &&
            static_cast<uint8_t>(ch[0]) >= 0x20) {
          excluded += (ch[0] == ']' || ch[0] == '-' || ch[0] == '^') ? "\\" + ch : ch;
        } else if (ch.size() > 1) {
          excluded += ch;
        }
      }
      // Leave the trie: a character no key continues with (escapes always count as leaving).
      alts += (alts.empty() ? "" : " | ") + std::string("([^") + excluded +
              "] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})) char* \"\\\"\" space";
      if (!trie[n].end) alts += " | \"\\\"\" space";
      rules_[base + "-" + std::to_string(n)] = alts;
    }
    rules_.erase(base);
    return "\"\\\"\" " + base + "-0";
  }

  Result<std::string> visit_array(const ojson& s, const std::string& hint, const std::string& path,
                                  int depth) {
    use("space");
    std::string item;
    if (auto it = s.find("items"); it != s.end()) {
      SYV_ASSIGN_OR_RETURN(item, visit(*it, hint + "-item", path + "/items", depth + 1));
    } else {
      item = use("value");
    }
    int64_t min = 0, max = -1;
    SYV_RETURN_IF_ERROR(count(s, "minItems", path, min));
    SYV_RETURN_IF_ERROR(count(s, "maxItems", path, max));
    if (max >= 0 && max < min) return error(path, "maxItems is below minItems");
    std::string body = "\"[\" space ";
    if (max != 0) {
      std::string more = "(\",\" space " + item + ")";
      const int64_t lo = std::max<int64_t>(min - 1, 0);
      more += max < 0 ? "{" + std::to_string(lo) + ",}"
                      : "{" + std::to_string(lo) + "," + std::to_string(max - 1) + "}";
      const std::string items = item + " " + more;
      body += min > 0 ? items : "(" + items + ")?";
    }
    body += " \"]\" space";
    return rule(hint, body);
  }

  // A non-negative integer keyword (absent leaves `value` as is).
  Status count(const ojson& s, const char* key, const std::string& path, int64_t& value) {
    auto it = s.find(key);
    if (it == s.end()) return Status::Ok();
    if (!it->is_number_integer() || *it < 0 || *it > 4096)
      return error(path + "/" + key, "expected an integer in [0, 4096]");
    value = it->get<int64_t>();
    return Status::Ok();
  }

  Result<std::string> visit_string(const ojson& s, const std::string& hint,
                                   const std::string& path) {
    use("space");
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return error(path + "/pattern", "expected a string");
      if (has_len || s.contains("format"))
        return error(path, "pattern together with minLength/maxLength/format is not supported");
      std::string pattern = it->get<std::string>();
      // JSON Schema patterns are not anchored: text may surround the match.
      const bool head = !pattern.empty() && pattern.front() == '^';
      const bool tail = !pattern.empty() && pattern.back() == '$' &&
                        (pattern.size() < 2 || pattern[pattern.size() - 2] != '\\');
      auto expr = regex_to_gbnf_expr(pattern, true);
      if (!expr.ok()) return error(path + "/pattern", expr.message());
      use("char");
      return rule(hint, std::string("\"\\\"\" ") + (head ? "" : "char* ") + "(" + *expr + ")" +
                            (tail ? "" : " char*") + " \"\\\"\" space");
    }
    if (auto it = s.find("format"); it != s.end()) {
      if (has_len) return error(path, "format together with minLength/maxLength is not supported");
      static const std::map<std::string, std::string> formats = {
          {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))"},
          {"time",
           R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"date-time",
           R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"uuid",
           R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
      };
      if (!it->is_string() || !formats.count(it->get<std::string>())) {
        return error(path + "/format",
                     "supported formats are date, time, date-time and uuid, "
                     "found " +
                         it->dump());
      }
      auto expr = regex_to_gbnf_expr(formats.at(it->get<std::string>()), true);
      if (!expr.ok()) return error(path + "/format", expr.message());
      return rule(hint, "\"\\\"\" " + *expr + " \"\\\"\" space");
    }
    if (!has_len) return use("string");
    int64_t min = 0, max = -1;
    SYV_RETURN_IF_ERROR(count(s, "minLength", path, min));
    SYV_RETURN_IF_ERROR(count(s, "maxLength", path, max));
    if (max >= 0 && max < min) return error(path, "maxLength is below minLength");
    use("char");
    return rule(hint, "\"\\\"\" char{" + std::to_string(min) + "," +
                          (max >= 0 ? std::to_string(max) : std::string()) + "} \"\\\"\" space");
  }

  Result<std::string> visit_integer(const ojson& s, const std::string& hint,
                                    const std::string& path) {
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_number() || std::abs(it->get<double>()) > 1e15)
        return error(path + "/" + key, "expected a number within +-1e15");
      const double v = it->get<double>();
      const std::string k = key;
      if (k == "minimum") lo = static_cast<int64_t>(std::ceil(v));
      if (k == "exclusiveMinimum") lo = static_cast<int64_t>(std::floor(v)) + 1;
      if (k == "maximum") hi = static_cast<int64_t>(std::floor(v));
      if (k == "exclusiveMaximum") hi = static_cast<int64_t>(std::ceil(v)) - 1;
    }
    if (!lo && !hi) return use("integer");
    use("space");
    if (lo && hi && *hi < *lo) return error(path, "the integer bounds leave no value");
    // An open side reaches 16 digits, as the integer rule does.
    constexpr int64_t kWidest = 9999999999999999;
    return rule(hint, "(" + int_range(lo.value_or(-kWidest), hi.value_or(kWidest)) + ") space");
  }

  // Decimal integers in [lo, hi] (lo <= hi, both within 16 digits), without leading zeros.
  static std::string int_range(int64_t lo, int64_t hi) {
    std::vector<std::string> alts;
    if (lo < 0) alts.push_back("\"-\" (" + nat_range(hi < 0 ? -hi : 1, -lo) + ")");  // -x
    if (hi >= 0) alts.push_back(nat_range(lo > 0 ? lo : 0, hi));
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
  }

  // Natural numbers in [lo, hi], 0 <= lo <= hi.
  static std::string nat_range(int64_t lo, int64_t hi) {
    std::vector<std::string> alts;
    const std::string slo = std::to_string(lo), shi = std::to_string(hi);
    for (size_t d = slo.size(); d <= shi.size(); ++d) {
      std::string a = slo;
      if (d > slo.size()) {  // 10...0 (not "1" + zeros: GCC 12's -Wrestrict false positive)
        a.assign(d, '0');
        a[0] = '1';
      }
      const std::string b = d == shi.size() ? shi : std::string(d, '9');
      if (a.size() == b.size() && a > b) continue;
      same_length_range(a, b, "", alts);
    }
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out.empty() ? "\"0\"" : out;
  }

  // Decimal strings of equal length in [a, b] (the classic range-to-regex split), each
  // alternative prefixed by `prefix`.
  static void same_length_range(const std::string& a, const std::string& b,
                                const std::string& prefix, std::vector<std::string>& out) {
    if (a.empty()) {
      out.push_back(prefix.empty() ? "\"\"" : prefix);
      return;
    }
    auto digit_class = [](char lo, char hi) {
      return lo == hi ? "\"" + std::string(1, lo) + "\""
                      : "[" + std::string(1, lo) + "-" + std::string(1, hi) + "]";
    };
    auto join = [&](const std::string& p, const std::string& x) {
      return p.empty() ? x : p + " " + x;
    };
    if (a[0] == b[0]) {
      same_length_range(a.substr(1), b.substr(1), join(prefix, digit_class(a[0], a[0])), out);
      return;
    }
    const size_t rest = a.size() - 1;
    const bool a_low = a.substr(1) == std::string(rest, '0');
    const bool b_high = b.substr(1) == std::string(rest, '9');
    auto tail = [&](const std::string& p) {
      return rest == 0 ? p : join(p, "[0-9]{" + std::to_string(rest) + "}");
    };
    char from = a[0], to = b[0];
    if (!a_low) {
      same_length_range(a.substr(1), std::string(rest, '9'), join(prefix, digit_class(a[0], a[0])),
                        out);
      ++from;
    }
    if (!b_high) --to;
    if (from <= to) out.push_back(tail(join(prefix, digit_class(from, to))));
    if (!b_high)
      same_length_range(std::string(rest, '0'), b.substr(1), join(prefix, digit_class(b[0], b[0])),
                        out);
  }

  const ojson& root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  Converter c(schema);
  return c.convert();
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (const char* name : {"object", "array", "value", "string", "char", "number", "integer",
                           "integral-part", "decimal-part", "boolean", "null", "space"}) {
    if (std::string(name) == "integer") continue;
    out += std::string(name) + " ::= " + primitives().at(name) + "\n";
  }
  return out;
}

}  // namespace syv::grammar
