// The Jinja interpreter, construct by construct: tests/fixtures/chat/jinja_cases.json holds small
// templates rendered by jinja2 in transformers' environment (tools/fixtures/make_jinja_cases.py);
// each must render byte-exactly (or fail where jinja2 fails). Then errors with positions, limits
// and the API details jinja2 cannot check.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
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

Result<std::string> render(const std::string& source, const ojson& context = ojson::object(),
                           uint64_t max_steps = 0) {
  auto t = ChatTemplate::parse(source);
  if (!t.ok()) return t.status();
  return t->render_context(context, max_steps);
}

std::string ok(const std::string& source, const ojson& context = ojson::object()) {
  auto r = render(source, context);
  EXPECT_TRUE(r.ok()) << source << "\n" << r.message();
  return r.ok() ? *r : "";
}

std::string err(const std::string& source, const ojson& context = ojson::object(),
                uint64_t max_steps = 0) {
  auto r = render(source, context, max_steps);
  EXPECT_FALSE(r.ok()) << source << " rendered: " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.message();
}

TEST(Jinja, MatchesJinja2OnEveryConstruct) {
  ojson data = ojson::parse(read(SYV_SOURCE_DIR "/tests/fixtures/chat/jinja_cases.json"));
  int checked = 0;
  for (const auto& c : data["cases"]) {
    const std::string src = c["template"].get<std::string>();
    SCOPED_TRACE(src);
    auto got = render(src, data["context"]);
    if (c.contains("error")) {
      EXPECT_FALSE(got.ok()) << "jinja2 failed (" << c["error"]
                             << ") but we rendered: " << (got.ok() ? *got : "");
      const std::string want = c["error"].get<std::string>();
      if (!got.ok() && want.rfind("TemplateError: ", 0) == 0) {
        EXPECT_NE(got.message().find(want.substr(15)), std::string::npos) << got.message();
      }
    } else {
      ASSERT_TRUE(got.ok()) << got.message();
      EXPECT_EQ(*got, c["expected"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(Jinja, ErrorsNameLineAndColumn) {
  EXPECT_EQ(err("line one\n  {{ 1 + }}"),
            "chat template line 2, column 10: expected an expression, found '}}'");
  EXPECT_EQ(err("{% if true %}\nx"),
            "chat template line 2, column 2: unexpected end of template, expected 'endif'");
  EXPECT_EQ(err("ok\n{% frobnicate %}"),
            "chat template line 2, column 4: unknown or unsupported tag 'frobnicate'");
  EXPECT_EQ(err("{{ 'abc }}"), "chat template line 1, column 4: unterminated string literal");
  EXPECT_EQ(err("é{# never closed"),
            "chat template line 1, column 2: unterminated comment (missing '#}')");
  // Render-time errors point at the failing operator, attribute dot, filter bar or call.
  EXPECT_EQ(err("a\nb {{ 'x' + 1 }}"),
            "chat template line 2, column 10: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(err("{{ foo.bar }}"), "chat template line 1, column 7: 'foo' is undefined");
  EXPECT_EQ(err("\n\n   {{ 1 | nope }}"), "chat template line 3, column 9: no filter named 'nope'");
}

TEST(Jinja, RaiseExceptionCarriesTheTemplateMessage) {
  std::string m =
      err("{%- for m in messages %}\n  {%- if m.role == 'bad' %}{{ raise_exception('Unexpected "
          "role: ' + m.role) }}{% endif %}\n{%- endfor %}",
          ojson{{"messages", ojson::array({{{"role", "user"}}, {{"role", "bad"}}})}});
  EXPECT_EQ(m, "chat template line 2, column 31: Unexpected role: bad");
}

TEST(Jinja, LimitsStopHostileTemplates) {
  // Infinite macro recursion: nesting limit, not a stack overflow.
  EXPECT_NE(err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nesting too deep"),
            std::string::npos);
  // Quadrillions of iterations: step limit.
  EXPECT_NE(err("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                ojson::object(), 100000)
                .find("render step limit reached"),
            std::string::npos);
  // Deeply nested source: parser limit.
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(err(deep).find("nested too deeply"), std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 1000; ++i) deep_ifs += "{% if true %}";
  EXPECT_NE(err(deep_ifs).find("nested too deeply"), std::string::npos);
  // Huge values.
  EXPECT_NE(err("{{ 'a' * 100000000000 }}").find("string too long"), std::string::npos);
  EXPECT_NE(err("{{ range(100000000000) | length }}").find("list too long"), std::string::npos);
  EXPECT_NE(err("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ "
                "ns.s %}{% endfor %}")
                .find("string too long"),
            std::string::npos);
  EXPECT_NE(err("{{ 2 ** 70 }}").find("integer overflow"), std::string::npos);
  // An empty sequence repeated a billion times is empty at once (it used to loop a billion times).
  EXPECT_EQ(ok("{{ '' * 1000000800 }}|{{ ([] * 1000000800) | length }}|{{ 1000000800 * '' }}"),
            "|0|");
  // A namespace cannot hold itself (no reference cycles).
  EXPECT_NE(err("{% set ns = namespace() %}{% set ns.me = [ns] %}").find("namespace"),
            std::string::npos);
  // Deeply nested values built in a loop stop at the value depth limit.
  EXPECT_NE(err("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% "
                "endfor %}{{ ns.v }}")
                .find("nested too deeply"),
            std::string::npos);
}

TEST(Jinja, ChatContextAsTransformersPassesIt) {
  auto t = ChatTemplate::parse(
      "{{ bos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ "
      "enable_thinking }}|"
      "{{ messages | length }}|{{ eos_token }}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(ojson::array({{{"role", "user"}, {"content", "x"}}}), nullptr, true,
                     ojson{{"enable_thinking", false}}, "<s>", "</s>");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "<s>|True|True|True|False|1|</s>");
  auto bad = t->render(ojson::array(), nullptr, false, ojson{{"messages", 1}}, "", "");
  EXPECT_FALSE(bad.ok());
}

TEST(Jinja, TojsonKeepsInsertionOrder) {
  auto t = ChatTemplate::parse("{{ tools | tojson }}");
  ASSERT_TRUE(t.ok());
  ojson tools =
      ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"z":1,"a":2.0}}}])");
  auto r = t->render(ojson::array(), tools, false, nullptr, "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(
      *r, R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2.0}}}])");
  // The nlohmann::json overload cannot keep the order (std::map): keys come out sorted.
  auto sorted = t->render(nlohmann::json::array(), nlohmann::json::parse(tools.dump()), false,
                          nlohmann::json(), "", "");
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(
      *sorted,
      R"([{"function": {"name": "f", "parameters": {"a": 2.0, "z": 1}}, "type": "function"}])");
}

TEST(Jinja, GenerationTagIsTransparent) {
  // transformers' AssistantTracker extension: {% generation %} renders its body in place.
  EXPECT_EQ(ok("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

// Without a fixed clock (the server's case), strftime_now() prints the local time of the render in
// the template's format. The day is read before and after, so the test holds across midnight.
TEST(Jinja, StrftimeNowUsesLocalTime) {
  auto today = [] {
    char buf[64];
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    return std::string(buf, std::strftime(buf, sizeof(buf), "%d %b %Y", &local));
  };
  const std::string before = today();
  const std::string got = ok("{{ strftime_now('%d %b %Y') }}");
  const std::string after = today();
  EXPECT_TRUE(got == before || got == after) << got << " is neither " << before << " nor " << after;
}

// A fixed clock: strftime_now() reads it, whatever the day, hour or time zone of the run.
TEST(Jinja, StrftimeNowReadsTheFixedClock) {
  auto t = ChatTemplate::parse("{{ strftime_now('%Y-%m-%d %H:%M:%S %a %d %b %Y') }}");
  ASSERT_TRUE(t.ok()) << t.message();
  std::tm leap{};
  leap.tm_year = 2028 - 1900;
  leap.tm_mon = 1;
  leap.tm_mday = 29;
  leap.tm_hour = 23;
  leap.tm_min = 59;
  leap.tm_sec = 58;
  leap.tm_wday = 2;  // a Tuesday
  t->fix_clock(leap);
  auto r = t->render_context(ojson::object());
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "2028-02-29 23:59:58 Tue 29 Feb 2028");
  std::tm new_year{};
  new_year.tm_year = 2031 - 1900;
  new_year.tm_mday = 1;
  new_year.tm_wday = 3;  // a Wednesday
  t->fix_clock(new_year);
  r = t->render_context(ojson::object());
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "2031-01-01 00:00:00 Wed 01 Jan 2031");
}

TEST(Jinja, WhitespaceControlLikeTransformers) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it goes.
  EXPECT_EQ(ok("<a>\n    {% if true %}\n    x\n    {% endif %}\n</a>"), "<a>\n    x\n</a>");
  // Expressions are neither trimmed nor lstripped.
  EXPECT_EQ(ok("  {{ 'x' }}\n"), "  x");  // one trailing newline of the source is dropped
  EXPECT_EQ(ok("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(ok("a\n{#- comment -#}\nb"), "ab");
  EXPECT_EQ(ok("{{- '  x  ' -}}"), "  x  ");
  // `+` disables lstrip_blocks / trim_blocks for that tag.
  EXPECT_EQ(ok("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
}

TEST(Jinja, ParseErrorIsNotACrash) {
  for (const char* src :
       {"{{", "{%", "{% for %}", "{% for x in %}", "{{ a[ }}", "{{ (1, }}", "{% set %}",
        "{% macro %}", "{{ 1 if }}", "{% if x %}{% else %}{% else %}{% endif %}", "{% endfor %}",
        "{{ a | }}", "{{ a is }}", "{{ {1: 2} }}", "{{ 'x' ~ }}", "}}", "%}"}) {
    auto r = render(src);
    if (!r.ok()) {
      EXPECT_EQ(r.message().rfind("chat template", 0), 0u) << src;
    }
  }
}

}  // namespace
}  // namespace syv
