// The JSON nesting and value-count limits (server/json_limits.h) and the checks behind them: the
// SAX measure, parse_json_body, tool-call arguments, the tool-call parser on model output, and
// jinja::Value::from_json, each at the limit, one past it, and far past it (10^6 levels).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "server/json_limits.h"
#include "server/openai_schema.h"
#include "server/tool_call_parser.h"
#include "tokenizer/jinja/value.h"

namespace syv::server {
namespace {

std::string nested(size_t depth) {
  std::string s(depth, '[');
  s.append(depth, ']');
  return s;
}

TEST(JsonLimits, DepthCountsContainersOutermostIncluded) {
  EXPECT_FALSE(find_json_depth_excess("1", 1));
  EXPECT_FALSE(find_json_depth_excess("[]", 1));
  EXPECT_TRUE(find_json_depth_excess("[[]]", 1));
  EXPECT_FALSE(find_json_depth_excess(nested(kMaxJsonDepth)));
  EXPECT_TRUE(find_json_depth_excess(nested(kMaxJsonDepth + 1)));
  EXPECT_TRUE(find_json_depth_excess(nested(1000000)));
  // Invalid JSON is not this check's business (the real parse reports it).
  EXPECT_FALSE(find_json_depth_excess("{not json"));
  EXPECT_FALSE(find_json_depth_excess(""));
  // Brackets inside strings are text.
  EXPECT_FALSE(find_json_depth_excess("\"" + nested(1000) + "\""));
}

TEST(JsonLimits, ExcessNamesTheFieldAndThePath) {
  auto e =
      find_json_depth_excess(R"({"messages": [{"role": "user"}, {"x": )" + nested(100) + "}]}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "messages[1].x");
  EXPECT_EQ(e->path.rfind("messages[1].x[0]", 0), 0u) << e->path;
  EXPECT_NE(e->path.find("..."), std::string::npos);
  std::string obj;  // {"p": {"p": ... 1 }}
  for (int i = 0; i < 100; ++i) obj += "{\"p\": ";
  obj += "1";
  obj.append(100, '}');
  e = find_json_depth_excess(R"({"tools": [{"function": {"parameters": )" + obj + "}}]}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "tools[0].function.parameters");
  // Scalars before the deep value advance the array index.
  e = find_json_depth_excess("[1, \"a\", {}, []," + nested(100) + "]");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "");
  EXPECT_EQ(e->path.rfind("[4][0]", 0), 0u) << e->path;
}

// The reference: a recursive walk in document order (safe here: the documents are shallow) that
// finds the first container with more than `limit` containers around and including it, and
// the keys and indices leading to it.
bool first_excess(const nlohmann::ordered_json& j, int enclosing, int limit,
                  std::vector<std::string>& path) {
  if (!j.is_structured()) return false;
  if (enclosing + 1 > limit) return true;
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      path.push_back("[" + std::to_string(i) + "]");
      if (first_excess(j[i], enclosing + 1, limit, path)) return true;
      path.pop_back();
    }
  } else {
    for (auto it = j.begin(); it != j.end(); ++it) {
      path.push_back("." + it.key());
      if (first_excess(it.value(), enclosing + 1, limit, path)) return true;
      path.pop_back();
    }
  }
  return false;
}

nlohmann::ordered_json random_json(std::mt19937& rng, int depth_left) {
  const int kind = depth_left <= 0 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 6);
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<int>(rng() % 100);
    case 2:
      return std::string(rng() % 3, "[{\"]"[rng() % 4]);  // brackets inside strings are text
    case 3:
    case 4: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      const int n = static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) a.push_back(random_json(rng, depth_left - 1));
      if (n == 0 || rng() % 2) a.push_back(random_json(rng, depth_left - 1));
      return a;
    }
    default: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        o[std::string(1, static_cast<char>('a' + i)) + std::to_string(rng() % 10)] =
            random_json(rng, depth_left - 1);
      }
      return o;
    }
  }
}

// Differential: the iterative SAX measure against the recursive reference, on 3000 random
// documents and limits 1..8 (fixed seed).
TEST(JsonLimits, MatchesARecursiveReference) {
  std::mt19937 rng(2323);
  int exceeded = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const nlohmann::ordered_json doc = random_json(rng, 1 + static_cast<int>(rng() % 40));
    const int limit = 1 + static_cast<int>(rng() % 8);
    const std::string text = doc.dump();
    std::vector<std::string> path;
    const bool expected = first_excess(doc, 0, limit, path);
    const auto got = find_json_depth_excess(text, limit);
    ASSERT_EQ(got.has_value(), expected) << text << " limit " << limit;
    if (!expected) continue;
    ++exceeded;
    std::string want;
    for (size_t i = 0; i < path.size() && i < 12; ++i) {
      want += (i == 0 && path[i][0] == '.') ? path[i].substr(1) : path[i];
    }
    if (path.size() > 12) want += "...";
    EXPECT_EQ(got->path, want) << text << " limit " << limit;
  }
  EXPECT_GT(exceeded, 300);  // both outcomes are well covered
  EXPECT_LT(exceeded, 2700);
}

TEST(JsonLimits, ParseJsonBodyRefusesDeepBodies) {
  auto r = parse_json_body(R"({"a": )" + nested(kMaxJsonDepth - 1) + "}");
  EXPECT_TRUE(r.ok());
  r = parse_json_body(R"({"a": )" + nested(kMaxJsonDepth) + "}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().param, "a");
  r = parse_json_body(nested(1000000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "");
  EXPECT_NE(r.error().message.find("request body: JSON nested more than 64"), std::string::npos)
      << r.error().message;
}

TEST(JsonLimits, ToolCallArgumentsStringIsMeasured) {
  nlohmann::json body = {{"messages",
                          {{{"role", "user"}, {"content", "hi"}},
                           {{"role", "assistant"},
                            {"content", nullptr},
                            {"tool_calls",
                             {{{"id", "c"},
                               {"type", "function"},
                               {"function", {{"name", "f"}, {"arguments", nested(100000)}}}}}}}}}};
  auto r = parse_chat_request(body, SchemaLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "messages[1].tool_calls[0].function.arguments");
  body["messages"][1]["tool_calls"][0]["function"]["arguments"] = R"({"a": [1]})";
  r = parse_chat_request(body, SchemaLimits{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages[1]["tool_calls"][0]["function"]["arguments"],
            nlohmann::json::parse(R"({"a": [1]})"));
}

// n copies of `item` in an array under messages[0].x.
std::string wide_body(size_t n, const std::string& item) {
  std::string body = R"({"messages": [{"role": "user", "content": "hi", "x": [)";
  for (size_t i = 0; i < n; ++i) body += (i ? "," : "") + item;
  return body + "]}]}";
}

TEST(JsonLimits, ValuesCountScalarsAndContainersNotKeys) {
  size_t values = 0;
  EXPECT_FALSE(find_json_excess(R"({"a": 1, "b": [true, null, "s", {}], "c": {"d": 2.5}})",
                                JsonLimits{}, &values));
  EXPECT_EQ(values, 9u);  // {} 1 [] true null "s" {} {} 2.5
  EXPECT_FALSE(find_json_excess("7", JsonLimits{}, &values));
  EXPECT_EQ(values, 1u);
  // Exactly at the limit passes; one more is refused, naming the field and the element.
  const std::string body = wide_body(100, "{\"a\": 1}");  // 6 values around x, 200 in it
  EXPECT_FALSE(find_json_excess(body, JsonLimits{kMaxJsonDepth, 206}, &values));
  EXPECT_EQ(values, 206u);
  auto e = find_json_excess(body, JsonLimits{kMaxJsonDepth, 205});
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->values);
  EXPECT_EQ(e->field, "messages[0].x");
  EXPECT_EQ(e->path, "messages[0].x[99].a");
  e = find_json_excess(body, JsonLimits{kMaxJsonDepth, 100});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "messages[0].x");
  EXPECT_EQ(e->path, "messages[0].x[47]");
  // Depth is still its own limit.
  e = find_json_excess(nested(100), JsonLimits{});
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->values);
}

TEST(JsonLimits, ParseJsonBodyRefusesTooManyValues) {
  // The default: 2^18 values; the body below holds 6 + n.
  const size_t n = kDefaultMaxJsonValues - 6;
  EXPECT_TRUE(parse_json_body(wide_body(n, "0")).ok());
  auto r = parse_json_body(wide_body(n + 1, "0"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().code, "invalid_value");
  EXPECT_EQ(r.error().param, "messages[0].x");
  EXPECT_EQ(r.error().message,
            "messages[0].x: more than 262144 JSON values in the request (--max-json-values) (at "
            "messages[0].x[" +
                std::to_string(n) + "])");
  // A smaller limit, and far past it (a million empty objects).
  EXPECT_TRUE(parse_json_body(wide_body(1018, "[]"), 1024).ok());
  EXPECT_FALSE(parse_json_body(wide_body(1019, "[]"), 1024).ok());
  r = parse_json_body(wide_body(1000000, "{}"), 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than 1024 JSON values"), std::string::npos);
}

// The tool-call arguments strings of a request are parsed into objects for the template: their
// values count together against the same limit.
TEST(JsonLimits, ToolCallArgumentsCountTogether) {
  auto call = [](const std::string& args) {
    return nlohmann::json{
        {"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args}}}};
  };
  std::string args = "[";
  for (int i = 0; i < 600; ++i) args += std::string(i ? "," : "") + "1";
  args += "]";  // 601 values
  nlohmann::json body = {{"messages",
                          {{{"role", "user"}, {"content", "hi"}},
                           {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call(args)}}},
                           {{"role", "tool"}, {"content", "r"}}}}};
  SchemaLimits limits;
  limits.max_json_values = 1024;
  EXPECT_TRUE(parse_chat_request(body, limits).ok());
  body["messages"][1]["tool_calls"].push_back(call(args));  // 1202 together
  auto r = parse_chat_request(body, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "messages[1].tool_calls[1].function.arguments");
  EXPECT_NE(r.error().message.find("more than 1024 JSON values"), std::string::npos)
      << r.error().message;
}

TEST(JsonLimits, ModelOutputTooDeepStaysText) {
  ToolCall call;
  EXPECT_TRUE(parse_tool_call_body(R"({"name": "f", "arguments": {"a": 1}})", call));
  EXPECT_FALSE(
      parse_tool_call_body(R"({"name": "f", "arguments": {"a": )" + nested(100000) + "}}", call));
}

TEST(JinjaFromJson, DepthIsCheckedBeforeRecursing) {
  using jinja::kMaxValueDepth;
  // Build the values iteratively (nlohmann's parser does not recurse; destruction does not either).
  auto deep = [](int depth) {
    return nlohmann::ordered_json::parse(nested(static_cast<size_t>(depth)));
  };
  EXPECT_EQ(jinja::Value::from_json(deep(kMaxValueDepth)).depth, kMaxValueDepth);
  EXPECT_THROW(jinja::Value::from_json(deep(kMaxValueDepth + 1)), jinja::Error);
  // 10^6 levels: refused at level kMaxValueDepth, not after descending to the bottom.
  EXPECT_THROW(jinja::Value::from_json(deep(1000000)), jinja::Error);
}

}  // namespace
}  // namespace syv::server
