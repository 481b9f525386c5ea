// Golden chat-template renders: every case in tests/fixtures/chat/cases.json (rendered by
// transformers, see tools/fixtures/make_chat_fixtures.py) must come out byte-exact from
// ChatTemplate, and every conversation a template refuses must be refused by ours too.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/chat_template.h"

namespace syv {
namespace {

using ojson = nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ojson& cases() {
  static const ojson data = ojson::parse(read(SYV_SOURCE_DIR "/tests/fixtures/chat/cases.json"));
  return data;
}

// "YYYY-MM-DDTHH:MM:SS" as a local broken-down time (no time zone involved).
std::tm parse_clock(const std::string& iso) {
  std::tm t{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  EXPECT_EQ(std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s), 6) << iso;
  t.tm_year = y - 1900;
  t.tm_mon = mo - 1;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = s;
  t.tm_isdst = -1;
  std::tm normalized = t;  // fills tm_wday/tm_yday for %a/%A/%j; timegm keeps it zone-free
  const std::time_t as_utc = timegm(&normalized);
  gmtime_r(&as_utc, &normalized);
  return normalized;
}

// The template as the fixtures were rendered: strftime_now() reads the fixture's fixed clock (the
// moment transformers rendered them), so the Llama 3.2 "Today Date" line matches on any day.
ChatTemplate fixture_template(const std::string& name) {
  const std::string source =
      read(SYV_SOURCE_DIR "/tests/fixtures/chat/templates/" + name + ".jinja");
  EXPECT_FALSE(source.empty()) << name;
  auto tmpl = ChatTemplate::parse(source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.message();
  ChatTemplate t = tmpl.ok() ? *tmpl : *ChatTemplate::parse("");
  t.fix_clock(parse_clock(cases()["clock"].get<std::string>()));
  return t;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out.push_back(c);
  }
  return out;
}

// "first difference at byte N: expected ...X... got ...Y..."
std::string diff(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + " (expected " +
         std::to_string(want.size()) + " bytes, got " + std::to_string(got.size()) +
         ")\n  expected: ..." + escape(want.substr(from, 100)) + "\n  got:      ..." +
         escape(got.substr(from, 100));
}

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesTransformers) {
  const std::string name = GetParam();
  const ChatTemplate t = fixture_template(name);
  const ChatTemplate* tmpl = &t;
  int rendered = 0, refused = 0;
  for (const auto& c : cases()["cases"]) {
    if (c["template"] != name) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    auto got =
        tmpl->render(c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(), c["kwargs"],
                     c["bos_token"].get<std::string>(), c["eos_token"].get<std::string>());
    if (c.contains("expected_error")) {
      ++refused;
      EXPECT_FALSE(got.ok()) << "transformers refused this conversation (" << c["expected_error"]
                             << ") but we rendered: " << escape(got.ok() ? *got : "");
      if (!got.ok() && c["error_type"] == "TemplateError") {  // raise_exception: same message
        EXPECT_NE(got.message().find(c["expected_error"].get<std::string>()), std::string::npos)
            << got.message();
        EXPECT_EQ(got.message().rfind("chat template line ", 0), 0u) << got.message();
      }
      continue;
    }
    ++rendered;
    ASSERT_TRUE(got.ok()) << got.message();
    const std::string want = c["expected"].get<std::string>();
    EXPECT_TRUE(*got == want) << diff(want, *got);
  }
  EXPECT_GT(rendered, 20) << "too few cases for " << name;
  std::printf("%s: %d renders, %d refusals checked\n", name.c_str(), rendered, refused);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateGolden,
                         ::testing::Values("qwen3", "qwen3_5", "qwen2_5", "llama3", "llama3_1",
                                           "llama3_2", "mistral_v0_3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ChatTemplateGolden, FixtureCoversTheIssue) {
  // >= 20 conversations, Qwen3 on all of them, both add_generation_prompt settings.
  std::map<std::string, int> per_template;
  bool gen = false, nogen = false;
  for (const auto& c : cases()["cases"]) {
    per_template[c["template"].get<std::string>()]++;
    (c["add_generation_prompt"].get<bool>() ? gen : nogen) = true;
  }
  EXPECT_GE(per_template["qwen3"], 40);
  EXPECT_TRUE(gen && nogen);
  EXPECT_EQ(cases()["renderer"].get<std::string>().rfind("transformers", 0), 0u)
      << "cases.json must be generated by transformers, not the jinja2 fallback";
  EXPECT_TRUE(cases().contains("clock")) << "cases.json must record the clock it was rendered at";
}

// The Llama 3.2 template prints strftime_now("%d %b %Y") when no date_string is given. With the
// clock moved to other days (a leap day, a new year, a single-digit day), every golden render that
// printed the fixture's date prints the moved date instead, and nothing else changes.
TEST(ChatTemplateGolden, Llama32TodayDateFollowsTheClock) {
  const std::string fixture_day = [] {
    const std::tm t = parse_clock(cases()["clock"].get<std::string>());
    char buf[32];
    return std::string(buf, std::strftime(buf, sizeof(buf), "%d %b %Y", &t));
  }();
  int checked = 0;
  for (const char* clock : {"2028-02-29T23:59:59", "2031-01-01T00:00:00", "2026-12-01T08:30:00"}) {
    SCOPED_TRACE(clock);
    ChatTemplate t = fixture_template("llama3_2");
    const std::tm moved = parse_clock(clock);
    t.fix_clock(moved);
    char buf[32];
    const std::string moved_day(buf, std::strftime(buf, sizeof(buf), "%d %b %Y", &moved));
    for (const auto& c : cases()["cases"]) {
      if (c["template"] != "llama3_2" || !c.contains("expected")) continue;
      if (c["kwargs"].contains("date_string")) continue;
      SCOPED_TRACE(c["name"].get<std::string>());
      const std::string want = c["expected"].get<std::string>();
      ASSERT_NE(want.find("Today Date: " + fixture_day + "\n"), std::string::npos);
      auto got =
          t.render(c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(), c["kwargs"],
                   c["bos_token"].get<std::string>(), c["eos_token"].get<std::string>());
      ASSERT_TRUE(got.ok()) << got.message();
      EXPECT_EQ(*got, replace_all(want, "Today Date: " + fixture_day + "\n",
                                  "Today Date: " + moved_day + "\n"));
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace syv
