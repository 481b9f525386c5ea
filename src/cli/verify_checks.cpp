#include "cli/verify_checks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "cli/prometheus_text.h"
#include "cli/verify_reply.h"

namespace syv::cli {
namespace {

using nlohmann::json;

// {"error": {"message": string, "type": string, "param", "code"}}, OpenAI's error shape.
bool openai_error(const json& j) {
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return false;
  const json& e = j["error"];
  return e.contains("message") && e["message"].is_string() && e.contains("type") &&
         e["type"].is_string() && e.contains("param") && e.contains("code");
}

bool utf8_boundary(const std::string& s, size_t i) {
  return i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
}

// The device pools syv verify's offload check evicts at most (tokens of other prompts it sends:
// the pool and twice its prompt).
constexpr int64_t kOffloadMaxPoolTokens = 32768;
// Their prompts' length at most (attention's cost grows with it; a CPU server takes seconds).
constexpr int64_t kOffloadFillerTokens = 2048;
// The pool a server for the check should have: ~2K tokens, evicted in seconds on a CPU too (8K
// took a minute on 2 cores). MiB for `bytes_per_token`.
int64_t offload_pool_mb(double bytes_per_token) {
  return std::max<int64_t>(1, (static_cast<int64_t>(2048 * bytes_per_token) + (1 << 20) - 1) >> 20);
}

// ~n tokens of plain English words.
std::string long_text(int words) {
  static const char* kWords[] = {"the",   "quiet",  "river", "runs",  "past",
                                 "an",    "old",    "mill",  "where", "children",
                                 "count", "stones", "under", "grey",  "sky"};
  std::string s;
  for (int i = 0; i < words; ++i) s += (i ? " " : "") + std::string(kWords[(i * 7 + i / 15) % 15]);
  return s;
}

}  // namespace

void Verifier::check(const std::string& name, bool ok, const std::string& detail) {
  if (ok) {
    ++passed_;
    std::printf("PASS %s%s\n", name.c_str(), detail.empty() ? "" : (" (" + detail + ")").c_str());
  } else {
    ++failed_;
    std::printf("FAIL %s: %s\n", name.c_str(), detail.c_str());
  }
  std::fflush(stdout);
}

void Verifier::skip(const std::string& name, const std::string& reason) {
  ++skipped_;
  std::printf("SKIP %s: %s\n", name.c_str(), reason.c_str());
  std::fflush(stdout);
}

void Verifier::run_all() {
  // An answer of an unexpected shape (a string where an object was due) fails its group of
  // checks instead of ending the run.
  const std::pair<const char*, void (Verifier::*)()> groups[] = {
      {"facts", &Verifier::facts},
      {"deployment", &Verifier::deployment},
      {"auth", &Verifier::auth},
      {"chat and completions", &Verifier::chat_and_completions},
      {"tool calls", &Verifier::tool_calls},
      {"reasoning", &Verifier::reasoning},
      {"streaming", &Verifier::streaming},
      {"stop strings", &Verifier::stop_strings},
      {"prefix cache", &Verifier::resend},
      {"metrics", &Verifier::metrics},
      {"batching", &Verifier::batched_equals_sequential},
      {"offload", &Verifier::offload},
      {"errors", &Verifier::bad_request},
      {"cancel", &Verifier::cancel}};
  for (const auto& [name, fn] : groups) {
    if (!reachable_) {
      // Nothing answers: one FAIL (the health check's) instead of one per check.
      std::printf("the server does not answer; the other checks were not run\n");
      return;
    }
    try {
      (this->*fn)();
    } catch (const json::exception& e) {
      check(name, false, std::string("an answer of an unexpected shape: ") + e.what());
    }
  }
}

void Verifier::facts() {
  const HttpReply h = client_->get("/health");
  reachable_ = h.status != 0;
  check("health: GET /health answers 200", h.status == 200, describe(h));
  HttpReply m;
  const bool ok = read_models(&m);
  std::string facts = ok ? "model \"" + model_ + "\"" : describe(m);
  if (ok && max_model_len_ > 0) facts += ", max_model_len " + std::to_string(max_model_len_);
  check("models: GET /v1/models lists the served model", ok, facts);
  if (!ok) return;
  const HttpReply card = client_->get("/v1/models/" + model_);
  check("models: GET /v1/models/{id} answers its card",
        card.status == 200 && parse_object(card.body).value("id", "") == model_, describe(card));
}

bool Verifier::read_models(HttpReply* reply) {
  const HttpReply m = client_->get("/v1/models");
  if (reply) *reply = m;
  json j = parse_object(m.body);
  if (m.status != 200 || j.value("object", "") != "list" || !j.contains("data") ||
      !j["data"].is_array() || j["data"].empty() || !j["data"][0].is_object() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return false;
  model_ = j["data"][0]["id"].get<std::string>();
  if (j["data"][0].contains("max_model_len") && j["data"][0]["max_model_len"].is_number())
    max_model_len_ = j["data"][0]["max_model_len"].get<int64_t>();
  return true;
}

void Verifier::auth() {
  const json chat = {
      {"model", model_}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}};
  const json completion = {{"model", model_}, {"prompt", "hi"}, {"max_tokens", 1}};
  struct Route {
    const char* method;
    std::string path;
    json body;
  };
  const std::vector<Route> routes = {
      {"GET", "/health", nullptr},
      {"GET", "/metrics", nullptr},
      {"GET", "/v1/models", nullptr},
      {"GET", "/v1/models/" + model_, nullptr},
      {"POST", "/v1/chat/completions", chat},
      {"POST", "/v1/completions", completion},
      {"POST", "/v1/responses", {{"model", model_}, {"input", "hi"}, {"max_output_tokens", 1}}},
      {"GET", "/v1/responses/resp_0", nullptr},
      {"POST", "/v1/embeddings", {{"model", model_}, {"input", "hi"}}},
      {"POST", "/tokenize", {{"prompt", "hi"}}},
      {"POST", "/detokenize", {{"tokens", {1}}}},
  };
  const std::string wrong = "sk-wrong-" + std::string(32, '0');
  for (const Route& r : routes) {
    std::string detail;
    bool ok = true;
    for (const std::string& key : {std::string(), wrong}) {
      const HttpReply reply =
          r.body.is_null() ? client_->get(r.path, key) : client_->post(r.path, r.body, key);
      if (reply.status != 401 || !openai_error(parse_object(reply.body))) {
        ok = false;
        detail += std::string(key.empty() ? "without a key: " : "with a wrong key: ") +
                  describe(reply) + "; ";
      }
    }
    check(std::string("auth: ") + r.method + " " + r.path + " refuses a missing and a wrong key",
          ok, ok ? "401 twice" : detail + "expected 401 with an OpenAI error body");
  }
}

void Verifier::chat_and_completions() {
  const HttpReply c = client_->post("/v1/chat/completions",
                                    {{"model", model_},
                                     {"messages", {{{"role", "user"}, {"content", "Say hello."}}}},
                                     {"max_tokens", 8},
                                     {"temperature", 0}});
  json cj = parse_object(c.body);
  bool ok =
      c.status == 200 && cj.value("object", "") == "chat.completion" && cj["choices"].is_array() &&
      !cj["choices"].empty() && cj["choices"][0]["message"].value("role", "") == "assistant" &&
      cj["usage"].value("prompt_tokens", 0) > 0 && cj["usage"].value("completion_tokens", 0) >= 1 &&
      cj["usage"].value("completion_tokens", 0) <= 8;
  check("chat: POST /v1/chat/completions answers an assistant message with usage", ok,
        ok ? std::to_string(cj["usage"]["completion_tokens"].get<int>()) + " tokens, finish " +
                 cj["choices"][0]["finish_reason"].dump()
           : describe(c));
  const HttpReply p = client_->post(
      "/v1/completions",
      {{"model", model_}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  json pj = parse_object(p.body);
  ok = p.status == 200 && pj.value("object", "") == "text_completion" && pj["choices"].is_array() &&
       !pj["choices"].empty() && pj["choices"][0]["text"].is_string() &&
       pj["usage"].value("completion_tokens", 0) >= 1;
  check("completions: POST /v1/completions answers text with usage", ok,
        ok ? std::to_string(pj["usage"]["completion_tokens"].get<int>()) + " tokens" : describe(p));
  // The Responses API, and the response it kept, read back by id.
  const HttpReply r = client_->post(
      "/v1/responses",
      {{"model", model_}, {"input", "Say hello."}, {"max_output_tokens", 8}, {"temperature", 0}});
  json rj = parse_object(r.body);
  ok = r.status == 200 && rj.value("object", "") == "response" && rj["output"].is_array() &&
       rj["usage"].is_object() && rj["usage"].value("output_tokens", 0) >= 1 &&
       rj["id"].is_string();
  if (ok) {
    const HttpReply back = client_->get("/v1/responses/" + rj["id"].get<std::string>());
    ok = back.status == 200 && parse_object(back.body) == rj;
  }
  check("responses: POST /v1/responses answers a response object, kept for GET /v1/responses/{id}",
        ok, ok ? rj["status"].get<std::string>() : describe(r));
}

void Verifier::streaming() {
  for (const bool chat : {true, false}) {
    json body = {{"model", model_},
                 {"max_tokens", 8},
                 {"temperature", 0},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (chat) {
      body["messages"] = {{{"role", "user"}, {"content", "Count to three."}}};
    } else {
      body["prompt"] = "One, two,";
    }
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    const StreamReply s = client_->stream(path, body);
    std::string problem;
    if (s.status != 200)
      problem = "HTTP " + std::to_string(s.status) + ": " + s.error;
    else if (!s.format_ok)
      problem = s.format_error;
    else if (!s.done)
      problem = "no data: [DONE] at the end";
    else if (s.output_times.empty())
      problem = "no chunk carried output";
    else if (s.finish_reason.empty())
      problem = "no finish_reason";
    else if (!s.usage.is_object())
      problem = "no usage chunk (stream_options.include_usage)";
    check("streaming: " + path + " sends SSE data: lines ending with [DONE]", problem.empty(),
          problem.empty() ? std::to_string(s.output_times.size()) + " output chunks, usage, [DONE]"
                          : problem);
  }
}

Verifier::Greedy Verifier::greedy(const std::string& prompt, int max_tokens) const {
  const HttpReply r = client_->post("/v1/completions", {{"model", model_},
                                                        {"prompt", prompt},
                                                        {"max_tokens", max_tokens},
                                                        {"temperature", 0},
                                                        {"ignore_eos", true}});
  json j = parse_object(r.body);
  Greedy g;
  if (r.status != 200 || !j["choices"].is_array() || j["choices"].empty()) {
    g.error = describe(r);
    return g;
  }
  g.ok = true;
  g.text = j["choices"][0].value("text", "");
  if (j["usage"].is_object()) g.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
  return g;
}

std::vector<std::string> Verifier::greedy_texts(const std::vector<std::string>& prompts,
                                                int max_tokens) const {
  std::vector<std::string> out;
  for (const std::string& p : prompts) out.push_back(greedy(p, max_tokens).text);
  return out;
}

// A stop string taken from the middle of a text the server wrote must cut the same request's
// text just before its first occurrence. The text is greedy, or seeded sampling where greedy text
// repeats itself (a random-weight model's often does), so that the request can be repeated exactly.
void Verifier::stop_strings() {
  const std::string name = "stop strings: the text ends before the stop string";
  struct Attempt {
    std::string prompt;
    double temperature;
  };
  const Attempt attempts[] = {{"The list of colours: red, green,", 0},
                              {"Once upon a time", 0},
                              {"The list of colours: red, green,", 1.0},
                              {"Once upon a time", 2.0}};
  std::string full, stop, tried;
  size_t at = 0;
  json body;
  for (const Attempt& a : attempts) {
    body = {{"model", model_},  {"prompt", a.prompt},
            {"max_tokens", 24}, {"temperature", a.temperature},
            {"seed", 1234},     {"ignore_eos", true}};
    const HttpReply r = client_->post("/v1/completions", body);
    json j = parse_object(r.body);
    if (r.status != 200) return check(name, false, describe(r));
    full = j["choices"][0].value("text", "");
    // At least 3 bytes of whole characters from the first third on, whose first occurrence is
    // not at the start (the text must keep something before it).
    for (size_t k = std::max<size_t>(1, full.size() / 3); k < full.size(); ++k) {
      if (!utf8_boundary(full, k)) continue;
      size_t end = k + 3;
      while (end < full.size() && !utf8_boundary(full, end)) ++end;
      if (end > full.size()) break;
      const size_t first = full.find(full.substr(k, end - k));
      if (first >= 1) {
        stop = full.substr(k, end - k);
        at = first;
        break;
      }
    }
    if (!stop.empty()) break;
    tried += (tried.empty() ? "" : ", ") + json(full).dump();
  }
  if (stop.empty())
    return check(name, false,
                 "no text with a usable stop string (3 bytes or more, not at the start): " + tried);
  body["stop"] = {stop};
  const HttpReply r = client_->post("/v1/completions", body);
  json j = parse_object(r.body);
  const bool ok = r.status == 200 && j["choices"][0].value("text", "") == full.substr(0, at) &&
                  j["choices"][0].value("finish_reason", "") == "stop";
  check(name, ok,
        ok ? "stop " + json(stop).dump() + " after " + std::to_string(at) + " bytes"
           : "stop " + json(stop).dump() + ": expected " + json(full.substr(0, at)).dump() +
                 " with finish_reason stop, got " + describe(r));
}

void Verifier::resend() {
  // ~400 words, fewer where the model length is shorter (a word is 1-2 tokens).
  const int words =
      max_model_len_ > 0 ? static_cast<int>(std::clamp<int64_t>(max_model_len_ / 3, 16, 400)) : 400;
  const json body = {
      {"model", model_}, {"prompt", long_text(words)}, {"max_tokens", 1}, {"temperature", 0}};
  const HttpReply first = client_->post("/v1/completions", body);
  const HttpReply second = client_->post("/v1/completions", body);
  json j = parse_object(second.body);
  int64_t cached = -1;
  if (second.status == 200 && j.contains("usage") && j["usage"].contains("prompt_tokens_details") &&
      j["usage"]["prompt_tokens_details"].is_object())
    cached = j["usage"]["prompt_tokens_details"].value("cached_tokens", int64_t{-1});
  check("prefix cache: a resent prompt reports cached tokens", first.status == 200 && cached > 0,
        cached > 0
            ? std::to_string(cached) + " of " +
                  std::to_string(j["usage"].value("prompt_tokens", 0)) + " prompt tokens cached"
            : "usage.prompt_tokens_details.cached_tokens: " + std::to_string(cached) + "; " +
                  describe(second));
}

void Verifier::metrics() {
  const HttpReply r = client_->get("/metrics");
  std::string missing;
  for (const char* name :
       {"syv_requests_running", "syv_requests_waiting", "syv_kv_pages_used", "syv_kv_pages_free",
        "syv_prefix_cache_hit_tokens_total", "syv_prefix_cache_query_tokens_total",
        "syv_prompt_tokens_total", "syv_generation_tokens_total", "syv_request_success_total",
        "syv_http_responses_total", "syv_time_to_first_token_seconds",
        "syv_inter_token_latency_seconds", "syv_e2e_request_latency_seconds"}) {
    if (r.body.find(std::string("# TYPE ") + name + " ") == std::string::npos)
      missing += std::string(missing.empty() ? "" : ", ") + name;
  }
  check("metrics: GET /metrics has the documented names", r.status == 200 && missing.empty(),
        r.status != 200   ? describe(r)
        : missing.empty() ? "13 names"
                          : "missing " + missing);
}

// The same greedy requests alone, one at a time, and then all at once (each prompt twice):
// every text must be the same.
void Verifier::batched_equals_sequential() {
  const std::vector<std::string> prompts = {
      "The capital of France is", "def fibonacci(n):", "Water boils at", "A haiku about the sea:"};
  const std::vector<std::string> alone = greedy_texts(prompts, 16);
  std::vector<std::future<std::string>> batched;
  for (int copy = 0; copy < 2; ++copy)
    for (const std::string& p : prompts)
      batched.push_back(
          std::async(std::launch::async, [this, p] { return greedy_texts({p}, 16)[0]; }));
  int differ = 0;
  std::string first_diff;
  for (size_t i = 0; i < batched.size(); ++i) {
    const std::string got = batched[i].get();
    const std::string& want = alone[i % prompts.size()];
    if (want.empty() || got != want) {
      if (differ++ == 0)
        first_diff = "prompt " + json(prompts[i % prompts.size()]).dump() + ": alone " +
                     json(want).dump() + ", batched " + json(got).dump();
    }
  }
  check("batching: greedy output alone = among 8 concurrent requests", differ == 0,
        differ == 0 ? "4 prompts x 2, 16 tokens each"
                    : std::to_string(differ) + " of 8 differ; " + first_diff);
}

void Verifier::bad_request() {
  const HttpReply r =
      client_->post("/v1/chat/completions", {{"model", model_},
                                             {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                             {"temperature", 5}});
  json j = parse_object(r.body);
  const bool ok = r.status == 400 && openai_error(j) && j["error"]["param"] == "temperature";
  check("errors: temperature 5 gets an OpenAI-shaped 400 naming the field", ok,
        ok ? "param \"temperature\": " + j["error"].value("message", "") : describe(r));
}

// A prompt whose KV pages (and, on a hybrid, recurrent-state checkpoints) were evicted to the host
// tier by other prompts and then served back from it must give its first greedy output. The
// other prompts must overflow the device pool, so the check runs where that pool holds at most
// kOffloadMaxPoolTokens and the host tier can keep the prompt; elsewhere it is skipped, saying why
// (or, deferred, left to a second server with a small pool). `where`: that server, for the line.
void Verifier::offload_check(const std::string& where) {
  const std::string name =
      "offload: a prompt served back from the host tier gives its first greedy output";
  if (!where.empty()) read_models();  // another server: its model length
  const std::string before = client_->get("/metrics").body;
  const double host_pages = prometheus_sum(before, "syv_host_tier_pages_capacity");
  const double pool = prometheus_sum(before, "syv_kv_pool_tokens");
  const double page = prometheus_sum(before, "syv_kv_page_size_tokens");
  if (!(host_pages > 0))
    return skip(name,
                "no host tier (syv_host_tier_pages_capacity 0: --host-cache-gb 0, or "
                "prefix caching off)");
  if (!(pool > 0) || !(page > 0) || pool > kOffloadMaxPoolTokens) {
    const double per_token = prometheus_sum(before, "syv_kv_bytes_per_token");
    if (defer_offload_ && where.empty() && per_token > 0) {
      small_pool_mb_ = offload_pool_mb(per_token);
      return;
    }
    const std::string small = per_token > 0 ? std::to_string(offload_pool_mb(per_token)) : "N";
    return skip(name, "a device pool of " + std::to_string(static_cast<int64_t>(pool)) +
                          " tokens: evicting it takes more than the " +
                          std::to_string(kOffloadMaxPoolTokens) +
                          " tokens of traffic this check sends (a server with --kv-cache-mb " +
                          small + " would do; syv verify --model DIR starts one for this check)");
  }
  // The prompt: its tokens per word measured on its first run, to size the other prompts.
  const int64_t limit = max_model_len_ > 0 ? max_model_len_ : static_cast<int64_t>(pool);
  const int words = static_cast<int>(
      std::clamp<int64_t>(std::min<int64_t>(limit / 4, static_cast<int64_t>(pool) / 8), 16, 400));
  const std::string prompt = "Offload check. " + long_text(words);
  const Greedy first = greedy(prompt, 16);
  if (!first.ok) return check(name, false, "the prompt: " + first.error);
  const int64_t prompt_tokens = first.prompt_tokens;
  if (prompt_tokens < 2 * static_cast<int64_t>(page)) {  // only whole pages are cached
    return skip(name, "a device pool of " + std::to_string(static_cast<int64_t>(pool)) +
                          " tokens leaves room for a prompt of " + std::to_string(prompt_tokens) +
                          " tokens, under two of its " +
                          std::to_string(static_cast<int64_t>(page)) + "-token pages");
  }
  // Other prompts, each up to half the pool, the model length and kOffloadFillerTokens, together
  // the pool plus twice the prompt (so every page of the prompt leaves the device), 4 at a time.
  const double per_word = static_cast<double>(std::max<int64_t>(prompt_tokens, 1)) / (words + 3);
  const int64_t filler_tokens = std::max<int64_t>(
      16, std::min({static_cast<int64_t>(pool) / 2, limit - 32, kOffloadFillerTokens}));
  const int filler_words = std::max(8, static_cast<int>(filler_tokens / per_word) - 8);
  const int64_t fillers =
      (static_cast<int64_t>(pool) + 2 * prompt_tokens + filler_tokens - 1) / filler_tokens + 1;
  // The host tier takes what leaves the device, the prompt first: it keeps the prompt (its oldest
  // entry) only if it holds everything the others push out after it, with a page's slack each.
  const double host_tokens = host_pages * page;
  const double pushed =
      static_cast<double>(prompt_tokens + fillers * (filler_tokens + page)) - pool;
  if (host_tokens < pushed) {
    return skip(name, "a host tier of " + std::to_string(static_cast<int64_t>(host_tokens)) +
                          " tokens, under the " + std::to_string(static_cast<int64_t>(pushed)) +
                          " this check's prompts push out of the device pool (it would drop the "
                          "prompt first)");
  }
  const double hits_before = prometheus_sum(before, "syv_host_tier_hit_tokens_total");
  std::string filler_error;
  for (int64_t f0 = 0; f0 < fillers; f0 += 4) {
    std::vector<std::future<Greedy>> batch;
    for (int64_t f = f0; f < std::min<int64_t>(fillers, f0 + 4); ++f) {
      batch.push_back(std::async(std::launch::async, [&, f] {
        // Each filler starts differently, so no two share a cached prefix.
        return greedy("Filler " + std::to_string(f) + " of the offload check. " +
                          long_text(filler_words + static_cast<int>(f % 5)),
                      1);
      }));
    }
    for (auto& b : batch) {
      const Greedy r = b.get();
      if (!r.ok && filler_error.empty()) filler_error = r.error;
    }
  }
  if (!filler_error.empty()) return check(name, false, "another prompt: " + filler_error);
  const Greedy second = greedy(prompt, 16);
  const double hits =
      prometheus_sum(client_->get("/metrics").body, "syv_host_tier_hit_tokens_total") - hits_before;
  if (!second.ok) return check(name, false, "the resend: " + second.error);
  if (!(hits > 0)) {
    return check(name, false,
                 std::to_string(fillers) + " other prompts of ~" + std::to_string(filler_tokens) +
                     " tokens did not bring the " + std::to_string(prompt_tokens) +
                     "-token prompt back from the host tier (syv_host_tier_hit_tokens_total "
                     "unchanged)");
  }
  check(name, second.text == first.text,
        second.text == first.text
            ? (where.empty() ? "" : "on " + where + ": ") +
                  std::to_string(static_cast<int64_t>(hits)) + " of its " +
                  std::to_string(prompt_tokens) + " prompt tokens from the host tier after " +
                  std::to_string(fillers) + " other prompts; 16 tokens equal"
            : "first " + json(first.text).dump() + ", after the host tier " +
                  json(second.text).dump());
}

// A stream whose client goes away after two chunks: the server goes on serving, and its
// running requests and held KV pages return to 0.
void Verifier::cancel() {
  // Long enough to be cut mid-way, within the server's model length (a small pool caps it).
  const int64_t max_tokens =
      max_model_len_ > 0 ? std::min<int64_t>(2000, max_model_len_ - 64) : 2000;
  const json body = {{"model", model_},          {"prompt", "Tell me a long story."},
                     {"max_tokens", max_tokens}, {"temperature", 0},
                     {"ignore_eos", true},       {"stream", true}};
  const StreamReply s = client_->stream("/v1/completions", body, /*stop_after=*/2);
  if (s.output_times.size() < 2) {
    check("cancel: a disconnected stream leaves the server serving", false,
          "the stream sent fewer than 2 chunks: HTTP " + std::to_string(s.status) + " " + s.error);
    return;
  }
  double running = -1, pages = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = client_->get("/metrics").body;
    running = prometheus_sum(text, "syv_requests_running");
    pages = prometheus_sum(text, "syv_kv_pages_used");
    if (running == 0 && pages == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::vector<std::string> after = greedy_texts({"Hello"}, 4);
  const bool ok = running == 0 && pages == 0 && !after[0].empty();
  check("cancel: a disconnected stream leaves the server serving, its pages freed", ok,
        ok ? "running 0, pages used 0, next request answered"
           : "syv_requests_running " + std::to_string(running) + ", syv_kv_pages_used " +
                 std::to_string(pages) + ", next request " +
                 (after[0].empty() ? "failed" : "answered"));
}

}  // namespace syv::cli
