// JSON Schema -> grammar: documents the grammar accepts and refuses, refused keywords named with
// their path, and a differential check: random walks through the grammar's automaton produce
// texts that nlohmann::json parses and a small independent validator accepts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "grammar/automaton.h"
#include "grammar/choice.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "unit/expect_error.h"

namespace syv::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

std::shared_ptr<const Grammar> from_schema(const std::string& schema_text) {
  auto text = json_schema_to_gbnf(ojson::parse(schema_text));
  EXPECT_TRUE(text.ok()) << text.message();
  if (!text.ok()) return nullptr;
  auto g = Grammar::parse(*text);
  EXPECT_TRUE(g.ok()) << g.message() << "\n" << *text;
  return g.ok() ? *g : nullptr;
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Automaton a(g);
  ConfigId c = a.initial();
  for (char b : s) {
    c = a.step(c, static_cast<uint8_t>(b));
    if (c == kDead) return false;
  }
  return a.accepting(c);
}

// A random sentence of the grammar (bytes chosen uniformly among those allowed; stops with
// probability 1/3 wherever it may); "" when it ran past `limit` bytes.
std::string random_sentence(Automaton& a, std::mt19937& rng, size_t limit = 3000) {
  std::string out;
  ConfigId c = a.initial();
  while (out.size() < limit) {
    if (a.accepting(c) && (!a.can_continue(c) || rng() % 3 == 0)) return out;
    std::vector<int> allowed;
    for (int b = 0; b < 256; ++b)
      if (a.step(c, static_cast<uint8_t>(b)) != kDead) allowed.push_back(b);
    if (allowed.empty()) return out;
    // Prefer structure over long strings: closing characters are picked more often.
    int b = allowed[rng() % allowed.size()];
    for (int pref : {'"', '}', ']', ','})
      if (rng() % 4 == 0 && std::find(allowed.begin(), allowed.end(), pref) != allowed.end())
        b = pref;
    out += static_cast<char>(b);
    c = a.step(c, static_cast<uint8_t>(b));
  }
  return "";
}

size_t codepoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// An independent validator for the subset the converter supports.
bool valid(const json& schema, const json& v, const json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    if (ref == "#") return valid(root, v, root);
    return valid(root.at(json::json_pointer(ref.substr(1))), v, root);
  }
  if (schema.contains("const")) return v == schema["const"];
  if (schema.contains("enum")) {
    for (const auto& e : schema["enum"])
      if (e == v) return true;
    return false;
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!schema.contains(k)) continue;
    for (const auto& s : schema[k])
      if (valid(s, v, root)) return true;
    return false;
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    if (schema["type"].is_string())
      types.push_back(schema["type"]);
    else
      for (const auto& t : schema["type"]) types.push_back(t);
  }
  if (schema.value("nullable", false)) types.push_back("null");
  auto type_ok = [&](const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "number") return v.is_number();
    if (t == "integer") {
      if (!v.is_number_integer()) return false;
      const auto i = v.get<int64_t>();
      if (schema.contains("minimum") && i < schema["minimum"].get<double>()) return false;
      if (schema.contains("maximum") && i > schema["maximum"].get<double>()) return false;
      if (schema.contains("exclusiveMinimum") && i <= schema["exclusiveMinimum"].get<double>())
        return false;
      if (schema.contains("exclusiveMaximum") && i >= schema["exclusiveMaximum"].get<double>())
        return false;
      return true;
    }
    if (t == "string") {
      if (!v.is_string()) return false;
      const size_t n = codepoints(v.get<std::string>());
      if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) return false;
      if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) return false;
      return true;
    }
    if (t == "array") {
      if (!v.is_array()) return false;
      if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return false;
      if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return false;
      for (const auto& item : v)
        if (schema.contains("items") && !valid(schema["items"], item, root)) return false;
      return true;
    }
    if (t == "object") {
      if (!v.is_object()) return false;
      const json props = schema.value("properties", json::object());
      for (const auto& r : schema.value("required", json::array()))
        if (!v.contains(r.get<std::string>())) return false;
      for (const auto& [k, x] : v.items()) {
        if (props.contains(k)) {
          if (!valid(props[k], x, root)) return false;
        } else {
          const json extra = schema.value("additionalProperties", json(false));
          if (!valid(extra, x, root)) return false;
        }
      }
      return true;
    }
    return false;
  };
  if (types.empty()) return true;
  for (const auto& t : types)
    if (type_ok(t)) return true;
  return false;
}

// Random sentences of `schema`'s grammar parse as JSON and validate; none is left unfinished.
void differential(const std::string& schema_text, int samples = 300) {
  SCOPED_TRACE(schema_text);
  auto g = from_schema(schema_text);
  ASSERT_NE(g, nullptr);
  Automaton a(g);
  std::mt19937 rng(1234);
  const json schema = json::parse(schema_text);
  int checked = 0;
  for (int i = 0; i < samples; ++i) {
    const std::string s = random_sentence(a, rng);
    if (s.empty()) continue;
    json v;
    ASSERT_NO_THROW(v = json::parse(s)) << s;
    ASSERT_TRUE(valid(schema, v, schema)) << s;
    ++checked;
  }
  EXPECT_GT(checked, samples / 2);
}

TEST(JsonSchema, AcceptsConformingDocuments) {
  auto g = from_schema(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
      "ok": {"type": "boolean"},
      "score": {"type": ["number", "null"]}
    },
    "required": ["name", "age"],
    "additionalProperties": false
  })");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"({"name": "Ann", "age": 31})"));
  EXPECT_TRUE(
      accepts(g, R"({"name":"é\"x\u00e9","age":0,"tags":["a","b"],"ok":true,"score":null})"));
  EXPECT_TRUE(accepts(g, "{\n  \"name\": \"\",\n  \"age\": 150, \"score\": -1.5e3\n}"));
  EXPECT_FALSE(accepts(g, R"({"age": 31, "name": "Ann"})"));              // order of properties
  EXPECT_FALSE(accepts(g, R"({"name": "Ann"})"));                         // age required
  EXPECT_FALSE(accepts(g, R"({"name": "Ann", "age": 151})"));             // maximum
  EXPECT_FALSE(accepts(g, R"({"name": "Ann", "age": -1})"));              // minimum
  EXPECT_FALSE(accepts(g, R"({"name": "Ann", "age": 01})"));              // leading zero
  EXPECT_FALSE(accepts(g, R"({"name": "123456789", "age": 1})"));         // maxLength
  EXPECT_FALSE(accepts(g, R"({"name": "A", "age": 1, "x": 1})"));         // additionalProperties
  EXPECT_FALSE(accepts(g, R"({"name": "A", "age": 1, "tags": ["c"]})"));  // enum
  EXPECT_FALSE(accepts(g, R"({"name": "A", "age": 1, "tags": ["a","a","a","a"]})"));
  EXPECT_FALSE(accepts(g, R"({"name": "A	", "age": 1})"));  // raw control character
}

TEST(JsonSchema, RefsAnyOfConstAndRecursion) {
  auto g = from_schema(R"({
    "$defs": {"node": {"type": "object", "properties": {
        "v": {"const": 1}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}},
    "anyOf": [{"$ref": "#/$defs/node"}, {"type": "string", "enum": ["leaf"]}]
  })");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"("leaf")"));
  EXPECT_TRUE(accepts(g, R"({"v": 1, "kids": [{"v": 1}, {"v": 1, "kids": []}]})"));
  EXPECT_FALSE(accepts(g, R"({"v": 2})"));
  EXPECT_FALSE(accepts(g, R"("tree")"));
}

TEST(JsonSchema, AdditionalPropertiesNeverRepeatADeclaredKey) {
  auto g = from_schema(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                           "additionalProperties": {"type": "boolean"}})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"({"id": 1, "x": true, "idx": false, "i": true, "": false})"));
  EXPECT_TRUE(accepts(g, R"({"other": true})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1, "id": true})"));
  EXPECT_FALSE(accepts(g, R"({"x": 1})"));
}

TEST(JsonSchema, PatternsAndFormats) {
  auto g = from_schema(R"({"type": "object", "properties": {
      "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
      "day": {"type": "string", "format": "date"},
      "note": {"type": "string", "pattern": "\"q\""}},
    "required": ["code", "day", "note"]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"({"code": "ABC-12", "day": "2026-12-01", "note": "say \"q\" now"})"));
  EXPECT_FALSE(accepts(g, R"({"code": "ABC-123", "day": "2026-12-01", "note": "\"q\""})"));
  EXPECT_FALSE(accepts(g, R"({"code": "ABC-12", "day": "2026-13-01", "note": "\"q\""})"));
  EXPECT_FALSE(accepts(g, R"({"code": "ABC-12", "day": "2026-12-01", "note": "q"})"));
}

TEST(JsonSchema, RefusedKeywordsAreNamed) {
  auto refuse = [](const std::string& schema) { return json_schema_to_gbnf(ojson::parse(schema)); };
  EXPECT_ERROR_HAS(refuse(R"({"type": "integer", "multipleOf": 3})"),
                   "json schema /: keyword \"multipleOf\" is not supported");
  EXPECT_ERROR_HAS(refuse(R"({"properties": {"a": {"type": "array", "uniqueItems": true}}})"),
                   "json schema /properties/a: keyword \"uniqueItems\" is not supported");
  EXPECT_ERROR_HAS(refuse(R"({"type": "number", "minimum": 0})"),
                   "\"minimum\" is supported for integers only");
  EXPECT_ERROR_HAS(refuse(R"({"$ref": "https://example.com/s.json"})"), "only local references");
  EXPECT_ERROR_HAS(refuse(R"({"$ref": "#/$defs/missing"})"), "names nothing");
  EXPECT_ERROR_HAS(refuse(R"({"type": "string", "format": "email"})"),
                   "/format: supported formats are date, time, date-time and uuid");
  EXPECT_ERROR_HAS(refuse(R"({"type": "string", "pattern": "(a)\\1"})"),
                   "/pattern: regex at offset 3: backreferences are not supported");
  EXPECT_ERROR_HAS(refuse(R"({"type": "wat"})"), "unknown type \"wat\"");
  EXPECT_ERROR_HAS(refuse(R"({"type": "object", "required": ["x"]})"),
                   "\"x\" is required but not in properties");
  EXPECT_ERROR_HAS(refuse(R"(false)"), "matches nothing");
  EXPECT_ERROR_HAS(refuse(R"({"allOf": [{}, {}]})"), "allOf with exactly one schema");
  EXPECT_ERROR_HAS(refuse(R"({"type": "array", "minItems": 3, "maxItems": 2})"),
                   "maxItems is below minItems");
  std::string deep = "{}";
  for (int i = 0; i < 80; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_ERROR_HAS(refuse(deep), "nested more than 64 levels deep");
}

TEST(JsonSchema, RandomSentencesValidate) {
  differential(R"({"type": "object", "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "nick": {"type": ["string", "null"], "maxLength": 4}},
    "required": ["name", "age"], "additionalProperties": false})");
  differential(R"({"type": "array", "items": {"type": "integer", "minimum": -20,
                   "exclusiveMaximum": 1007}, "minItems": 1, "maxItems": 5})");
  differential(R"({"type": "object", "properties": {"a": {"type": "boolean"},
                   "b": {"enum": [1, "two", null, [3]]}, "c": {"type": "number"}}})");
  differential(R"({"anyOf": [{"type": "integer", "maximum": -5}, {"type": "string", "maxLength": 3},
                   {"type": "object", "properties": {"k": {"const": {"x": [1, 2]}}},
                    "required": ["k"]}]})");
  differential(R"({"$defs": {"t": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}}}},
    "$ref": "#/$defs/t"})");
  differential(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                   "additionalProperties": {"type": "integer", "minimum": 7, "maximum": 7}})");
  differential("{}");
}

TEST(JsonSchema, IntegerRangesExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{
           {0, 150}, {-37, 1234}, {5, 9}, {-9, -3}, {99, 101}, {0, 0}, {-1000, -999}}) {
    auto g = from_schema(R"({"type": "integer", "minimum": )" + std::to_string(lo) +
                         R"(, "maximum": )" + std::to_string(hi) + "}");
    ASSERT_NE(g, nullptr);
    for (int v = -1200; v <= 1300; ++v)
      ASSERT_EQ(accepts(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
  }
}

TEST(JsonObject, AnyObject) {
  auto g = Grammar::parse(json_object_gbnf());
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_TRUE(accepts(*g, R"({})"));
  EXPECT_TRUE(accepts(*g, R"({"a": [1, 2.5e-3, "x", null, true, {"b": {}}]})"));
  EXPECT_FALSE(accepts(*g, R"([1])"));
  EXPECT_FALSE(accepts(*g, R"({"a": 1,})"));
  EXPECT_FALSE(accepts(*g, R"({'a': 1})"));
}

TEST(Regex, Subset) {
  auto check = [](const std::string& pattern, std::vector<std::string> yes,
                  std::vector<std::string> no) {
    SCOPED_TRACE(pattern);
    auto text = regex_to_gbnf(pattern);
    ASSERT_TRUE(text.ok()) << text.message();
    auto g = Grammar::parse(*text);
    ASSERT_TRUE(g.ok()) << g.message() << "\n" << *text;
    for (const auto& s : yes) EXPECT_TRUE(accepts(*g, s)) << s;
    for (const auto& s : no) EXPECT_FALSE(accepts(*g, s)) << s;
  };
  check(R"(^\d{3}-\d{4}$)", {"555-1234"}, {"5555-1234", "555-123", "abc-defg"});
  check(R"((cat|dog)s?)", {"cat", "dogs"}, {"cats!", "bird"});
  check(R"([A-Za-z_]\w*)", {"x", "_a9"}, {"9a", ""});
  check(R"(a.c)", {"abc", "a c", "aéc"}, {"a\nc", "ac"});
  check(R"([^0-9]+)", {"ab", "é"}, {"a1"});
  check(R"(\.\*\(x\))", {".*(x)"}, {"a*(x)"});
  check(R"((?:ab){2,3}(?P<n>z)?)", {"abab", "abababz"}, {"ab", "abababab"});
  check(R"(\s\S\u00e9\x41)", {" xéA"}, {"  éA"});
  check(R"(a*?b+?)", {"b", "aab"}, {"a"});
  check(R"()", {""}, {"a"});
  for (const char* bad : {"(a", "a)", "[a", "a{2,1}", "\\1", "(?=a)", "a\\b", "a^b", "*a", "a++",
                          "\\q", "[[:alpha:]]"}) {
    EXPECT_FALSE(regex_to_gbnf(bad).ok()) << bad;
  }
  EXPECT_ERROR_HAS(regex_to_gbnf("(?=x)"), "regex at offset 0: lookaround");
  // Stacked quantifiers are refused (as Python's re and JavaScript do); each would nest the
  // grammar once more (the fuzzer found 130 of them past the GBNF parser's nesting limit).
  EXPECT_ERROR_HAS(regex_to_gbnf("a**"), "regex at offset 2: multiple repeat");
  EXPECT_ERROR_HAS(regex_to_gbnf("a{2}{3}"), "multiple repeat");
  EXPECT_TRUE(regex_to_gbnf("a*?").ok());
  // The deepest group nesting allowed compiles as a grammar; one more is refused.
  std::string deep;
  for (int i = 0; i < 60; ++i) deep += "(";
  deep += "a";
  for (int i = 0; i < 60; ++i) deep += ")*";
  auto deep_gbnf = regex_to_gbnf(deep);
  ASSERT_TRUE(deep_gbnf.ok()) << deep_gbnf.message();
  EXPECT_TRUE(Grammar::parse(deep_gbnf.value()).ok());
  EXPECT_ERROR_HAS(regex_to_gbnf("(" + deep + ")"), "nested too deeply");
}

TEST(Choice, ExactlyOne) {
  auto text = choice_gbnf({"yes", "no", "maybe \"so\""});
  ASSERT_TRUE(text.ok());
  auto g = Grammar::parse(*text);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_TRUE(accepts(*g, "yes"));
  EXPECT_TRUE(accepts(*g, "maybe \"so\""));
  EXPECT_FALSE(accepts(*g, "yesno"));
  EXPECT_FALSE(accepts(*g, "ye"));
  EXPECT_ERROR_HAS(choice_gbnf({}), "at least one");
  EXPECT_ERROR_HAS(choice_gbnf({"ok", "\xff"}), "entry 1 is not valid UTF-8");
}

}  // namespace
}  // namespace syv::grammar
