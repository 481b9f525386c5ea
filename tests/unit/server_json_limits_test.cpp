// The JSON nesting limit (server/json_limits.h) and the depth checks behind it: the SAX measure,
// parse_json_body, tool-call arguments, the tool-call parser on model output, and
// jinja::Value::from_json, each at the limit, one past it, and far past it (10^6 levels).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
