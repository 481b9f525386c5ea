// Streaming parsers: every split of the input into chunks gives the same result as one chunk.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/reasoning_parser.h"
#include "server/sse.h"
#include "server/tool_call_parser.h"

namespace syv::server {
namespace {

struct Split {
  std::string reasoning, content;
};

Split run_reasoning(const std::string& text, const std::vector<size_t>& cuts, bool start_in) {
  ReasoningParser p(start_in);
  Split out;
  size_t prev = 0;
  for (size_t cut : cuts) {
    auto d = p.feed(std::string_view(text).substr(prev, cut - prev));
    out.reasoning += d.reasoning;
    out.content += d.content;
    prev = cut;
  }
  auto d = p.feed(std::string_view(text).substr(prev));
  out.reasoning += d.reasoning;
  out.content += d.content;
  d = p.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

TEST(ReasoningParser, WholeText) {
  auto s = run_reasoning("<think>\nI think.\n</think>\n\nThe answer.", {}, false);
  EXPECT_EQ(s.reasoning, "I think.\n");
  EXPECT_EQ(s.content, "The answer.");
}

TEST(ReasoningParser, EverySplitPointAndPair) {
  const std::string text = "<think>\nstep <one> and </thin k>\n</think>\n\nDone <b>x</b> <thi";
  const Split whole = run_reasoning(text, {}, false);
  EXPECT_EQ(whole.reasoning, "step <one> and </thin k>\n");
  EXPECT_EQ(whole.content, "Done <b>x</b> <thi");
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); j += 3) {
      const Split s = run_reasoning(text, {i, j}, false);
      ASSERT_EQ(s.reasoning, whole.reasoning) << "cuts " << i << "," << j;
      ASSERT_EQ(s.content, whole.content) << "cuts " << i << "," << j;
    }
  }
}

TEST(ReasoningParser, StartsInsideWhenPromptOpenedThink) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  // A user's literal "<think>" in an earlier turn opens nothing; the last turn decides.
  EXPECT_FALSE(prompt_opens_reasoning(
      "<|im_start|>user\nWhat does <think> mean?<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_reasoning(
      "<|im_start|>user\nWhat does </think> mean?<|im_end|>\n<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning("no turns <think> here"));  // no ChatML: the whole text
  const std::string text = "reason\n</think>\n\nanswer";
  for (size_t i = 0; i <= text.size(); ++i) {
    const Split s = run_reasoning(text, {i}, true);
    EXPECT_EQ(s.reasoning, "reason\n");
    EXPECT_EQ(s.content, "answer");
  }
}

TEST(ReasoningParser, UnclosedThinkIsAllReasoning) {
  auto s = run_reasoning("<think>\nstill thinking </thi", {}, false);
  EXPECT_EQ(s.reasoning, "still thinking </thi");
  EXPECT_EQ(s.content, "");
}

TEST(ReasoningParser, NoTagsIsContent) {
  auto s = run_reasoning("plain answer with < and >", {5}, false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "plain answer with < and >");
}

struct ToolRun {
  std::string content;
  std::vector<ToolCall> calls;
};

ToolRun run_tools(const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallParser p;
  ToolRun out;
  size_t prev = 0;
  auto take = [&](ToolCallParser::Delta d) {
    out.content += d.content;
    for (auto& c : d.calls) out.calls.push_back(c);
  };
  for (size_t cut : cuts) {
    take(p.feed(std::string_view(text).substr(prev, cut - prev)));
    prev = cut;
  }
  take(p.feed(std::string_view(text).substr(prev)));
  take(p.finish());
  return out;
}

TEST(ToolCallParser, QwenBlocksBecomeCalls) {
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); j += 7) {
      const ToolRun r = run_tools(text, {i, j});
      ASSERT_EQ(r.content, "") << i << "," << j;
      ASSERT_EQ(r.calls.size(), 2u) << i << "," << j;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(nlohmann::json::parse(r.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
      EXPECT_EQ(r.calls[1].name, "get_time");
      EXPECT_EQ(r.calls[1].arguments, "{}");
      EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
      EXPECT_NE(r.calls[0].id, r.calls[1].id);
    }
  }
}

TEST(ToolCallParser, ContentAroundCallsIsKept) {
  const std::string text =
      "Let me check. <tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>";
  for (size_t i = 0; i <= text.size(); ++i) {
    const ToolRun r = run_tools(text, {i});
    EXPECT_EQ(r.content, "Let me check.");  // whitespace before a call is dropped
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"a\": 1}");
  }
}

TEST(ToolCallParser, InvalidOrUnclosedBlocksStayText) {
  const std::string bad = "a <tool_call>not json</tool_call> b";
  EXPECT_EQ(run_tools(bad, {}).content, bad);
  EXPECT_TRUE(run_tools(bad, {}).calls.empty());
  const std::string unclosed = "x <tool_call>{\"name\": \"f\"";
  for (size_t i = 0; i <= unclosed.size(); ++i) {
    const ToolRun r = run_tools(unclosed, {i});
    EXPECT_EQ(r.content, unclosed);
    EXPECT_TRUE(r.calls.empty());
  }
  const std::string no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
  EXPECT_EQ(run_tools(no_name, {}).content, no_name);
  EXPECT_EQ(run_tools("just < text <tool", {}).content, "just < text <tool");
  EXPECT_EQ(run_tools("  \n", {}).content, "  \n");
}

TEST(Sse, FormatAndReadBack) {
  const std::string a = sse_data({{"x", 1}});
  EXPECT_EQ(a, "data: {\"x\":1}\n\n");
  const std::string stream =
      a + ": comment\n\n" + sse_data({{"y", "two\nlines"}}) + std::string(kSseDone);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseReader reader;
    auto events = reader.feed(stream.substr(0, cut));
    auto rest = reader.feed(stream.substr(cut));
    events.insert(events.end(), rest.begin(), rest.end());
    ASSERT_EQ(events.size(), 3u) << cut;
    EXPECT_EQ(nlohmann::json::parse(events[0])["x"], 1);
    EXPECT_EQ(nlohmann::json::parse(events[1])["y"], "two\nlines");
    EXPECT_EQ(events[2], "[DONE]");
    EXPECT_TRUE(reader.pending().empty());
  }
}

}  // namespace
}  // namespace syv::server
