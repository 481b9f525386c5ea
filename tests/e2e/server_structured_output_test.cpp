// Structured outputs through `syv serve` on the demo model. Its weights are noise, so an output
// that parses and conforms every time is the proof that the grammar constrains decoding:
// response_format json_schema (strict, property order kept, greedy and seeded, n = 2, streamed),
// json_object, vLLM's guided_regex / guided_choice / guided_json / structured_outputs, llama.cpp's
// grammar / json_schema; refusals name the field.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "e2e/http_test_util.h"
#include "e2e/serve_process.h"
#include "grammar/automaton.h"
#include "grammar/json_schema.h"

namespace syv::testing {
namespace {

using nlohmann::json;

constexpr const char* kKey = "sk-e2e-structured-0123456789abcdef";

// Properties deliberately out of alphabetical order: the output must keep the schema's order.
const char* kSchemaText =
    R"({"type": "object", "properties": {"zeta": {"type": "string", "maxLength": 12}, "count": {"type": "integer", "minimum": -5, "maximum": 500}, "kind": {"enum": ["cat", "dog", "eel"]}, "alpha": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}, "note": {"type": ["string", "null"], "maxLength": 6}}, "required": ["zeta", "count", "kind", "alpha", "note"], "additionalProperties": false})";

class StructuredE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    ensure_demo_model();
    server_ =
        new ServerProcess({"serve", "--model", kDemoDir, "--port", "0", "--api-key", kKey,
                           "--served-model-name", "tiny", "--max-model-len", "2048", "--page-size",
                           "16", "--kv-cache-mb", "64", "--max-num-seqs", "16", "--device", "cpu"},
                          "e2e_structured.log");
    const std::string port = server_->wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))",
                                                    std::chrono::seconds(300));
    ASSERT_FALSE(port.empty()) << server_->log();
    port_ = std::stoi(port);
    ASSERT_TRUE(wait_ready(port_, kKey, std::chrono::seconds(300))) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // POSTs `body` (raw text, so the key order of a schema is what the test wrote).
  static httplib::Result post(const std::string& path, const std::string& body) {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(300, 0);
    return cli.Post(path.c_str(), {{"Authorization", std::string("Bearer ") + kKey}}, body,
                    "application/json");
  }
  // The texts of every choice of a successful, non-streamed answer (all finished by "stop").
  static std::vector<std::string> texts(const std::string& path, const json& body,
                                        const std::string& raw_extra = "") {
    std::string text = body.dump();
    if (!raw_extra.empty()) text = text.substr(0, text.size() - 1) + "," + raw_extra + "}";
    auto res = post(path, text);
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    const json r = json::parse(res->body);
    std::vector<std::string> out;
    for (const auto& c : r["choices"]) {
      EXPECT_EQ(c["finish_reason"], "stop") << res->body;
      out.push_back(c.contains("message") ? c["message"]["content"].get<std::string>()
                                          : c["text"].get<std::string>());
    }
    return out;
  }

  static ServerProcess* server_;
  static int port_;
};
ServerProcess* StructuredE2E::server_ = nullptr;
int StructuredE2E::port_ = 0;

json chat(const std::string& content, double temperature, int seed, int n = 1) {
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", 600},
          {"temperature", temperature},
          {"seed", seed},
          {"n", n}};
}

// Parses `text` and checks it against kSchema; the keys come in the schema's order.
void expect_conforms(const std::string& text) {
  SCOPED_TRACE(text);
  json v;
  ASSERT_NO_THROW(v = json::parse(text));
  ASSERT_TRUE(v.is_object());
  for (const char* key : {"zeta", "count", "kind", "alpha", "note"})
    ASSERT_TRUE(v.contains(key)) << key;
  EXPECT_EQ(v.size(), 5u);
  EXPECT_TRUE(v["zeta"].is_string());
  ASSERT_TRUE(v["count"].is_number_integer());
  EXPECT_GE(v["count"].get<int>(), -5);
  EXPECT_LE(v["count"].get<int>(), 500);
  EXPECT_TRUE(v["kind"] == "cat" || v["kind"] == "dog" || v["kind"] == "eel");
  ASSERT_TRUE(v["alpha"].is_array());
  EXPECT_GE(v["alpha"].size(), 1u);
  EXPECT_LE(v["alpha"].size(), 3u);
  for (const auto& b : v["alpha"]) EXPECT_TRUE(b.is_boolean());
  EXPECT_TRUE(v["note"].is_null() || v["note"].is_string());
  EXPECT_LT(text.find("\"zeta\""), text.find("\"count\""));
  EXPECT_LT(text.find("\"kind\""), text.find("\"alpha\""));
}

TEST_F(StructuredE2E, ResponseFormatJsonSchemaGreedyAndSeeded) {
  const std::string format =
      std::string(
          R"("response_format": {"type": "json_schema", "json_schema": {"name": "thing", "strict": true, "schema": )") +
      kSchemaText + "}}";
  int checked = 0;
  for (const auto& [temperature, seed, n] :
       std::vector<std::tuple<double, int, int>>{{0.0, 1, 1}, {1.0, 7, 2}, {0.8, 8, 1}}) {
    for (const std::string& t :
         texts("/v1/chat/completions", chat("Describe an animal as JSON", temperature, seed, n),
               format)) {
      expect_conforms(t);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);
  // The same seed gives the same object.
  EXPECT_EQ(texts("/v1/chat/completions", chat("Again", 1.0, 3), format),
            texts("/v1/chat/completions", chat("Again", 1.0, 3), format));
}

TEST_F(StructuredE2E, StreamedJsonSchema) {
  json body = chat("Stream it", 1.0, 5);
  body["stream"] = true;
  const std::string text = body.dump();
  auto res = post("/v1/chat/completions",
                  text.substr(0, text.size() - 1) + R"(, "guided_json": )" + kSchemaText + "}");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const SseBody sse = parse_sse(res->body);
  ASSERT_TRUE(sse.ok);
  std::string content, finish;
  for (const std::string& e : sse.events) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const auto& c : chunk["choices"]) {
      if (c["delta"].contains("content") && c["delta"]["content"].is_string())
        content += c["delta"]["content"].get<std::string>();
      if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "stop");
  expect_conforms(content);
}

// Any JSON object: strings are unbounded, and the demo model's noise repeats itself, so many
// samples run into max_tokens inside a string. Each finished one must parse; each cut one must be
// a prefix of a JSON object (checked with the grammar engine on its own).
TEST_F(StructuredE2E, JsonObject) {
  auto g = grammar::Grammar::parse(grammar::json_object_gbnf());
  ASSERT_TRUE(g.ok());
  int finished = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    json body = chat("Any JSON object", seed == 1 ? 0.0 : 1.0, seed);
    body["max_tokens"] = 300;
    body["presence_penalty"] = 2;
    body["frequency_penalty"] = 2;
    body["response_format"] = {{"type", "json_object"}};
    auto res = post("/v1/chat/completions", body.dump());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json c = json::parse(res->body)["choices"][0];
    const std::string t = c["message"]["content"];
    SCOPED_TRACE(t);
    if (c["finish_reason"] == "stop") {
      json v;
      ASSERT_NO_THROW(v = json::parse(t));
      EXPECT_TRUE(v.is_object());
      ++finished;
    } else {
      EXPECT_EQ(c["finish_reason"], "length");
      grammar::Automaton a(g.value());
      grammar::ConfigId state = a.initial();
      for (char b : t) {
        state = a.step(state, static_cast<uint8_t>(b));
        ASSERT_NE(state, grammar::kDead) << "not a prefix of a JSON object";
      }
    }
  }
  EXPECT_GE(finished, 2);
}

TEST_F(StructuredE2E, RegexChoiceAndGrammar) {
  const std::regex phone(R"([0-9]{3}-[0-9]{4})");
  json c = {{"prompt", "Call me at"}, {"max_tokens", 40}, {"temperature", 1.0}, {"seed", 4}};
  c["guided_regex"] = "\\d{3}-\\d{4}";
  for (const std::string& t : texts("/v1/completions", c))
    EXPECT_TRUE(std::regex_match(t, phone)) << t;
  c.erase("guided_regex");
  c["structured_outputs"] = {{"regex", "(yes|no)!{1,3}"}};
  for (const std::string& t : texts("/v1/completions", c))
    EXPECT_TRUE(std::regex_match(t, std::regex("(yes|no)!{1,3}"))) << t;
  c.erase("structured_outputs");
  for (int seed : {1, 2, 3, 4}) {
    c["seed"] = seed;
    c["guided_choice"] = {"red", "green", "blue"};
    for (const std::string& t : texts("/v1/completions", c))
      EXPECT_TRUE(t == "red" || t == "green" || t == "blue") << t;
  }
  c.erase("guided_choice");
  c["grammar"] = "root ::= \"(\" [a-z]{1,5} (\" \" [a-z]{1,5}){0,2} \")\"";
  for (const std::string& t : texts("/v1/completions", c))
    EXPECT_TRUE(std::regex_match(t, std::regex(R"(\([a-z]{1,5}( [a-z]{1,5}){0,2}\))"))) << t;
  c.erase("grammar");
  c["json_schema"] = {{"type", "array"},
                      {"items", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}},
                      {"minItems", 2},
                      {"maxItems", 4}};
  for (const std::string& t : texts("/v1/completions", c)) {
    const json v = json::parse(t);
    ASSERT_TRUE(v.is_array()) << t;
    EXPECT_GE(v.size(), 2u);
    EXPECT_LE(v.size(), 4u);
    for (const auto& x : v) EXPECT_TRUE(x.is_number_integer() && x >= 0 && x <= 9) << t;
  }
}

// tool_choice "required" (with parallel_tool_calls false: one call) and a named function: the
// answer is tool calls whose arguments follow the tool's parameters, finish_reason "tool_calls".
TEST_F(StructuredE2E, ForcedToolCalls) {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}},
      "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 100},
                     "b": {"type": "integer", "minimum": 0, "maximum": 100}},
      "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "noop"}}])");
  auto check_call = [](const json& call) -> std::string {
    const std::string name = call["function"]["name"];
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    if (name == "get_weather") {
      EXPECT_TRUE(args["city"].is_string());
      EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f");
      EXPECT_EQ(args.size(), 2u);
    } else if (name == "add") {
      for (const char* k : {"a", "b"}) {
        EXPECT_TRUE(args[k].is_number_integer()) << args;
        EXPECT_GE(args.value(k, -1), 0);
        EXPECT_LE(args.value(k, 101), 100);
      }
    } else {
      EXPECT_EQ(name, "noop");
      EXPECT_EQ(args, json::object());
    }
    return name;
  };
  for (const json& choice : {json("required"), json::parse(R"({"type": "function",
                                                            "function": {"name": "add"}})")}) {
    for (int seed : {1, 2, 3}) {
      json body = chat("What is the weather in Paris, and 2 + 3?", seed == 1 ? 0.0 : 1.0, seed);
      body["tools"] = tools;
      body["tool_choice"] = choice;
      body["parallel_tool_calls"] = false;
      body["max_tokens"] = 300;
      auto res = post("/v1/chat/completions", body.dump());
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      const json c = json::parse(res->body)["choices"][0];
      SCOPED_TRACE(res->body);
      EXPECT_EQ(c["finish_reason"], "tool_calls");
      ASSERT_TRUE(c["message"]["tool_calls"].is_array());
      ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
      const std::string name = check_call(c["message"]["tool_calls"][0]);
      if (choice.is_object()) {
        EXPECT_EQ(name, "add");
      }
    }
  }
}

TEST_F(StructuredE2E, RefusalsNameTheField) {
  struct Case {
    std::string extra, param, code;
  };
  const std::vector<Case> cases = {
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "multipleOf": 3}}})",
       "response_format", "unsupported_parameter"},
      {R"("guided_regex": "(a)\\1")", "guided_regex", "unsupported_parameter"},
      {R"("grammar": "root ::= missing")", "grammar", "invalid_value"},
      {R"("guided_choice": [], "max_tokens": 3)", "guided_choice", "invalid_value"},
      {R"("guided_regex": "a", "guided_choice": ["a"])", "guided_choice", "invalid_value"},
      {R"("guided_regex": "a", "ignore_eos": true)", "ignore_eos", "unsupported_parameter"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra);
    auto res = post("/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "x"}], )" + c.extra + "}");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    ASSERT_TRUE(is_openai_error(res->body)) << res->body;
    const json e = json::parse(res->body)["error"];
    EXPECT_EQ(e["param"], c.param) << res->body;
    EXPECT_EQ(e["code"], c.code) << res->body;
  }
}

// `syv bench grammar`: the per-token mask cost for a schema and a document; a document the
// grammar refuses is an error naming the token.
TEST(BenchGrammarCli, MeasuresAndRefuses) {
  const std::string dir = std::string(SYV_BINARY_DIR) + "/bench-grammar";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/schema.json") << kSchemaText;
  std::ofstream(dir + "/doc.json")
      << R"({"zeta": "z", "count": 3, "kind": "eel", "alpha": [true], "note": null})";
  std::ofstream(dir + "/bad.json") << R"({"zeta": 1})";
  auto run = [&](const std::string& doc) {
    const std::string cmd = std::string(SYV_BIN) + " bench grammar --tokenizer " + kTokenizerDir +
                            " --schema " + dir + "/schema.json --document " + dir + "/" + doc +
                            " --repeat 1 --json 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    const int status = p != nullptr ? pclose(p) : -1;
    return std::make_pair(status, out);
  };
  const auto [ok_status, ok_out] = run("doc.json");
  ASSERT_EQ(ok_status, 0) << ok_out;
  const json j = json::parse(ok_out);
  EXPECT_GT(j["tokens"].get<int>(), 10);
  EXPECT_GT(j["cold_us_per_token"].get<double>(), 0);
  EXPECT_GT(j["warm_us_per_token"].get<double>(), 0);
  EXPECT_EQ(j["vocab"], 151669);
  const auto [bad_status, bad_out] = run("bad.json");
  EXPECT_NE(bad_status, 0);
  EXPECT_NE(bad_out.find("the grammar refuses token"), std::string::npos) << bad_out;
}

}  // namespace
}  // namespace syv::testing
