// `syv verify`'s checks of what the model's chat template and the server's output parsers do
// together (cli/verify_checks.h): a forced tool call and its round trip, and the reasoning split
// (`<think>...</think>` into `reasoning_content`). Both are deterministic on any weights: the
// call is forced by `tool_choice` (its arguments constrained to the tool's schema), the tags by
// `logit_bias` on one token or by a regex (docs/benchmarking.md "syv verify").
#include <algorithm>
#include <optional>

#include "cli/verify_checks.h"
#include "cli/verify_reply.h"

namespace syv::cli {
namespace {

using nlohmann::json;

// The tool the check declares: every property required, no others (the schema the arguments
// must fit).
const json& weather_tool() {
  static const json tool = json::parse(R"({"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, for some days ahead.",
    "parameters": {"type": "object", "additionalProperties": false,
      "properties": {"city": {"type": "string", "maxLength": 20},
                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "unit", "days"]}}})");
  return tool;
}

// j[key] when it is a string, else "" (absent, null: OpenAI's content of a tool-call answer).
std::string text_field(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// "" when `args` fits weather_tool()'s parameters, else what does not.
std::string misfit(const json& args) {
  if (!args.is_object()) return "not a JSON object";
  if (args.size() != 3) return "expected exactly the keys city, unit, days";
  if (!args.contains("city") || !args["city"].is_string() ||
      code_points(args["city"].get<std::string>()) > 20)
    return "city: expected a string of at most 20 characters";
  if (!args.contains("unit") || (args["unit"] != "celsius" && args["unit"] != "fahrenheit"))
    return "unit: expected \"celsius\" or \"fahrenheit\"";
  if (!args.contains("days") || !args["days"].is_number_integer() || args["days"] < 1 ||
      args["days"] > 7)
    return "days: expected an integer in [1, 7]";
  return "";
}

// Whether `prompt` leaves a <think> block open (its last "<think>" after its last "</think>"):
// the output then starts inside the reasoning.
bool leaves_think_open(const std::string& prompt) {
  const size_t open = prompt.rfind("<think>"), close = prompt.rfind("</think>");
  return open != std::string::npos && (close == std::string::npos || open > close);
}

}  // namespace

// A chat request that names its one tool in tool_choice must answer with one well-formed call of
// it (finish_reason "tool_calls"); the call sent back as the assistant's message (content null)
// with a tool result must be rendered by the template and answered.
void Verifier::tool_calls() {
  const std::string name = "tool calls: tool_choice naming a function gives one call of it";
  const json user = {{"role", "user"}, {"content", "What will the weather be in Paris?"}};
  const json forced = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  const HttpReply r =
      client_->post("/v1/chat/completions", {{"model", model_},
                                             {"messages", json::array({user})},
                                             {"tools", json::array({weather_tool()})},
                                             {"tool_choice", forced},
                                             {"max_tokens", 200},
                                             {"temperature", 0}});
  json j = parse_object(r.body);
  if (r.status == 400 && j.contains("error") && j["error"].is_object() &&
      j["error"].value("code", "") == "context_length_exceeded") {
    // A deployment whose model length cannot hold the request (the template's tool prompt and
    // 200 tokens of call): nothing to check, not a fault.
    const std::string why = "the model length cannot hold this check's request: " +
                            j["error"].value("message", std::string());
    skip(name, why);
    return skip("tool calls: the call and its result sent back are rendered and answered", why);
  }
  std::string problem;
  json call, args;
  if (r.status != 200 || !j["choices"].is_array() || j["choices"].empty()) {
    problem = describe(r);
  } else if (text_field(j["choices"][0], "finish_reason") != "tool_calls") {
    problem = "finish_reason " + j["choices"][0]["finish_reason"].dump() + ", expected tool_calls";
  } else if (const json& calls = j["choices"][0]["message"]["tool_calls"];
             !calls.is_array() || calls.size() != 1) {
    problem = "expected one entry in message.tool_calls, got " + calls.dump();
  } else {
    call = calls[0];
    if (!call["id"].is_string() || call["id"].get<std::string>().empty() ||
        text_field(call, "type") != "function" ||
        text_field(call["function"], "name") != "get_weather")
      problem =
          "expected {id, type: function, function: {name: get_weather, ...}}, got " + call.dump();
    else if (!call["function"]["arguments"].is_string())
      problem = "function.arguments is not a JSON string: " + call["function"].dump();
    else if (args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
             args.is_discarded())
      problem = "function.arguments does not parse: " + call["function"]["arguments"].dump();
    else if (std::string m = misfit(args); !m.empty())
      problem = "arguments " + args.dump() + " do not fit the parameters: " + m;
  }
  check(name, problem.empty(), problem.empty() ? "arguments " + args.dump() : problem);
  if (!problem.empty()) return;

  // The round trip: the call as the assistant's turn (content null) and its result.
  const std::string result = R"({"temperature": 18, "sky": "clear"})";
  const json messages = {
      user,
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}},
      {{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", result}}};
  const std::string round =
      "tool calls: the call and its result sent back are rendered and answered";
  // The template's prompt (POST /tokenize, then /detokenize): the result in it, and one more
  // mention of the function than the user's turn alone gives (the call).
  auto rendered = [&](const json& turns, json* tokens) {
    json reply = parse_object(client_
                                  ->post("/tokenize", {{"model", model_},
                                                       {"messages", turns},
                                                       {"tools", json::array({weather_tool()})}})
                                  .body);
    if (tokens != nullptr) *tokens = reply;
    if (!reply["tokens"].is_array()) return std::string();
    return text_field(
        parse_object(client_->post("/detokenize", {{"tokens", reply["tokens"]}}).body), "prompt");
  };
  json tj;
  const std::string text = rendered(messages, &tj);
  const std::string first = rendered(json::array({user}), nullptr);
  if (text.find(result) == std::string::npos ||
      count_of(text, "get_weather") <= count_of(first, "get_weather")) {
    return check(round, false,
                 "the template's prompt (POST /tokenize, /detokenize) should hold the call and "
                 "its result: " +
                     json(text).dump());
  }
  const HttpReply a =
      client_->post("/v1/chat/completions", {{"model", model_},
                                             {"messages", messages},
                                             {"tools", json::array({weather_tool()})},
                                             {"max_tokens", 8},
                                             {"temperature", 0}});
  json aj = parse_object(a.body);
  const bool ok = a.status == 200 && aj["choices"].is_array() && !aj["choices"].empty() &&
                  text_field(aj["choices"][0]["message"], "role") == "assistant" &&
                  aj["usage"].is_object() &&
                  aj["usage"].value("prompt_tokens", 0) == tj.value("count", -1);
  check(round, ok,
        ok ? std::to_string(tj.value("count", 0)) + " prompt tokens, finish " +
                 aj["choices"][0]["finish_reason"].dump()
           : "expected 200 with an assistant message and usage.prompt_tokens = /tokenize's " +
                 std::to_string(tj.value("count", -1)) + ": " + describe(a));
}

// The split of `<think>...</think>` into reasoning_content, with the model's template and its
// own tag tokens, in three checks that hold on any weights: one forced token each (logit_bias
// 100 wins greedy decoding against any logit spread a model has in practice), or a grammar.
//   1. The template's default: the model's <think> token written first must open the reasoning
//      (kept out of content; /v1/completions shows the token's text is "<think>"). A template
//      that opens the block in its prompt: a word written first (one token: "reason", or another
//      where the vocabulary has no such token) must be reasoning_content.
//   2. "<think>reason</think>answer" written through a regex (the tags spelled with ordinary
//      tokens: a grammar never emits added tokens) comes back as reasoning_content "reason" and
//      content "answer".
//   3. enable_thinking false: the template must close the block (Qwen3 renders an empty one), and a
//      word written first is content.
void Verifier::reasoning() {
  const std::string opens = "reasoning: the model's <think> token opens reasoning_content";
  const std::string split =
      "reasoning: <think>reason</think>answer gives reasoning_content and content";
  const std::string off = "reasoning: enable_thinking false keeps the output in content";
  // One token's id, if `text` is one token of this tokenizer.
  auto single_token = [&](const std::string& text) -> std::optional<int64_t> {
    const HttpReply t = client_->post(
        "/tokenize", {{"model", model_}, {"prompt", text}, {"add_special_tokens", false}});
    json tj = parse_object(t.body);
    if (t.status != 200 || !tj["tokens"].is_array() || tj["tokens"].size() != 1) return {};
    return tj["tokens"][0].get<int64_t>();
  };
  const auto think = single_token("<think>");
  if (!think || !single_token("</think>")) {
    const std::string why = "the tokenizer has no <think> and </think> tokens";
    for (const std::string& name : {opens, split, off}) skip(name, why);
    return;
  }
  // The template's prompt for one user turn: its ids and text.
  const json messages = {{{"role", "user"}, {"content", "Is 7 a prime number?"}}};
  struct Prompt {
    json ids;
    std::string text;
  };
  auto render = [&](const json& kwargs) -> std::optional<Prompt> {
    json body = {{"model", model_}, {"messages", messages}};
    if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
    json tj = parse_object(client_->post("/tokenize", body).body);
    if (!tj["tokens"].is_array()) return {};
    json dj = parse_object(client_->post("/detokenize", {{"tokens", tj["tokens"]}}).body);
    if (!dj["prompt"].is_string()) return {};
    return Prompt{tj["tokens"], dj["prompt"].get<std::string>()};
  };
  const json thinking_off = {{"enable_thinking", false}};
  const auto plain = render(nullptr), no_thinking = render(thinking_off);
  if (!plain || !no_thinking) {
    check(opens, false, "POST /tokenize + /detokenize of a chat turn failed");
    return;
  }
  // A word that is one token of this tokenizer, written first by checks 1 and 3: "reason" in
  // Qwen's vocabulary; a small one (the trained tiny models') may only have " reason", so other
  // words follow, down to "a", which every byte-level BPE vocabulary has.
  std::optional<int64_t> word;
  std::string word_text;
  for (const char* w : {"reason", "answer", "Yes", "The", "a"}) {
    if ((word = single_token(w))) {
      word_text = w;
      break;
    }
  }
  if (!word) {
    check(opens, false,
          "POST /tokenize found none of \"reason\", \"answer\", \"Yes\", \"The\", \"a\" to be one "
          "token");
    return;
  }
  const std::string quoted_word = "\"" + word_text + "\"";
  // A chat answer of one greedy token lifted by logit_bias 100.
  auto one_token = [&](int64_t id, const json& kwargs) {
    json body = {{"model", model_},  {"messages", messages},
                 {"max_tokens", 1},  {"temperature", 0},
                 {"logprobs", true}, {"logit_bias", {{std::to_string(id), 100}}}};
    if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
    return client_->post("/v1/chat/completions", body);
  };
  auto message_of = [](const HttpReply& r) {
    return parse_object(r.body)["choices"][0]["message"];
  };
  // Why logit_bias 100 cannot make `id` the greedy token after `ids`, or nothing: the raw
  // log-probability of `id` there (prompt_logprobs of ids + [id]) more than 100 below the most
  // likely token's. Random weights can spread their logits that far (the 0.6B shape's do); a
  // trained model's spread is far smaller, so a check that then fails is a real failure.
  auto out_of_bias_reach = [&](const json& ids, int64_t id) -> std::optional<std::string> {
    json prompt = ids;
    prompt.push_back(id);
    const HttpReply r = client_->post(
        "/v1/completions",
        {{"model", model_}, {"prompt", prompt}, {"max_tokens", 0}, {"prompt_logprobs", 1}});
    const json last = parse_object(r.body)["choices"][0]["prompt_logprobs"];
    if (r.status != 200 || !last.is_array() || last.empty() || !last.back().is_object()) return {};
    double forced = 0, best = -1e30;
    bool found = false;
    for (const auto& [token, entry] : last.back().items()) {
      if (!entry.is_object() || !entry["logprob"].is_number()) return {};
      const double lp = entry["logprob"].get<double>();
      best = std::max(best, lp);
      if (token == std::to_string(id)) forced = lp, found = true;
    }
    if (!found || best - forced <= 100) return {};
    return "logit_bias (at most 100) cannot make token " + std::to_string(id) +
           " the greedy one on these weights: its log-probability is " +
           std::to_string(best - forced) + " below the most likely token's (random weights?)";
  };

  // The word written first (one token) must land in `field` ("content" or "reasoning_content"),
  // the other one empty: "" when it does, else what came back.
  auto word_lands_in = [&](const std::string& field, const json& kwargs) -> std::string {
    const HttpReply r = one_token(*word, kwargs);
    const json m = message_of(r);
    const std::string other = field == "content" ? "reasoning_content" : "content";
    if (r.status == 200 && text_field(m, field.c_str()) == word_text &&
        text_field(m, other.c_str()).empty())
      return "";
    return "expected " + field + " " + quoted_word + " and no " + other + ", got " +
           (r.status == 200 ? m.dump() : describe(r));
  };

  if (leaves_think_open(plain->text)) {
    const std::string got = word_lands_in("reasoning_content", nullptr);
    check(opens, got.empty(),
          "the template opens <think> in its prompt" +
              (got.empty() ? "; " + quoted_word + " written first is reasoning_content"
                           : ": " + got));
  } else {
    const HttpReply r = one_token(*think, nullptr);
    json j = parse_object(r.body);
    const json m = j["choices"][0]["message"];
    const json first = j["choices"][0]["logprobs"]["content"][0];
    // The same prompt and token through /v1/completions, which does not split: its text.
    const HttpReply c =
        client_->post("/v1/completions", {{"model", model_},
                                          {"prompt", plain->ids},
                                          {"max_tokens", 1},
                                          {"temperature", 0},
                                          {"logit_bias", {{std::to_string(*think), 100}}}});
    const std::string written = text_field(parse_object(c.body)["choices"][0], "text");
    const bool ok = r.status == 200 && text_field(first, "token") == "<think>" &&
                    written == "<think>" &&
                    text_field(m, "content").find("<think>") == std::string::npos;
    if (const auto why = ok ? std::nullopt : out_of_bias_reach(plain->ids, *think))
      skip(opens, *why);
    else
      check(
          opens, ok,
          ok ? "<think> (id " + std::to_string(*think) +
                   ") written first: /v1/completions' text \"<think>\", kept out of chat's content"
             : "<think> (id " + std::to_string(*think) +
                   ") written first should be the generated token, /v1/completions' text "
                   "\"<think>\" and kept out of chat's content; got token " +
                   first.dump() + ", completions text " + json(written).dump() + ", message " +
                   (r.status == 200 ? m.dump() : describe(r)));
  }

  const HttpReply g = client_->post(
      "/v1/chat/completions", {{"model", model_},
                               {"messages", messages},
                               {"max_tokens", 48},
                               {"temperature", 0},
                               {"structured_outputs", {{"regex", "<think>reason</think>answer"}}}});
  const json gm = message_of(g);
  const bool split_ok = g.status == 200 && text_field(gm, "reasoning_content") == "reason" &&
                        text_field(gm, "content") == "answer";
  check(split, split_ok,
        split_ok ? "written through structured_outputs.regex"
                 : "expected reasoning_content \"reason\" and content \"answer\", got " +
                       (g.status == 200 ? gm.dump() : describe(g)));

  // Thinking off: the template must close the block (Qwen3 writes an empty one), so the output is
  // content from the start.
  if (no_thinking->text == plain->text) {
    skip(off,
         "the template renders the same prompt with enable_thinking false (no thinking "
         "switch)");
  } else if (leaves_think_open(no_thinking->text)) {
    check(off, false, "the prompt with enable_thinking false leaves a <think> block open");
  } else {
    const std::string got = word_lands_in("content", thinking_off);
    if (const auto why = got.empty() ? std::nullopt : out_of_bias_reach(no_thinking->ids, *word)) {
      skip(off, *why);
      return;
    }
    check(off, got.empty(),
          got.empty() ? "the template closes the block in its prompt; " + quoted_word +
                            " written first is content, no reasoning_content"
                      : got);
  }
}

}  // namespace syv::cli
