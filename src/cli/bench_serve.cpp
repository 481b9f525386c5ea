// `syv bench serve`: load on any OpenAI-compatible server (syv, vLLM, llama-server) through its
// HTTP API, streamed so that every token is timed. Scenarios (docs/benchmarking.md):
//   burst      N requests, C in flight at once, fixed (or spread) prompt / output lengths
//   c1         one stream at a time: TTFT and inter-token latency without batching (and tokens
//              per verify step when the server's /metrics has syv's speculation counters)
//   resend     a long prompt sent twice: cached tokens and the TTFT ratio of the second send
//   offload    the long prompt again after other prompts evicted it from the device pool: the
//              serve ratio (TTFT after eviction / cold TTFT) of the server's offload tier
//   multiturn  a chat of several turns: cached tokens of each turn against the previous turn's
//   sweep      concurrency 1, 2, 4 ... C: the throughput-latency curve
// Prompts of burst / c1 / resend / offload / sweep are random token ids sent to /v1/completions (so
// their length is exact whatever the tokenizer); multiturn sends words to /v1/chat/completions.
// Output: a table, then one JSON line per scenario on stdout; progress on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>

#include "cli/bench.h"
#include "cli/bench_serve_plot.h"
#include "cli/bench_serve_stats.h"
#include "cli/openai_client.h"
#include "cli/prometheus_text.h"

namespace syv::cli {
namespace {

using nlohmann::json;

struct Options {
  std::string url, api_key, model;
  std::vector<std::string> scenarios;
  int num_requests = 128;
  int concurrency = 64;
  int input_len = 512;
  int output_len = 128;
  double range_ratio = 0;  // lengths uniform in [L (1 - r), L (1 + r)]
  int c1_requests = 8;
  int resend_len = 2048;
  int64_t filler_tokens = 1 << 20;  // offload: tokens of other prompts sent between the sends
  int turns = 4;
  int64_t seed = -1;  // < 0: from the clock, so a second run does not hit the first's cache
  std::string plot;
  int timeout_s = 600;
  int max_token_id = 30000;  // random prompt ids in [1000, max_token_id)
};

// Token ids drawn from [kTokenLo, Options::max_token_id): by default a range every Qwen vocabulary
// holds as ordinary tokens; --max-token-id lowers the end for smaller vocabularies.
constexpr int kTokenLo = 1000;
constexpr const char* kVerifySteps = "syv_spec_verify_steps_by_tokens_total";

class Bench {
 public:
  Bench(const Options& o, OpenAiClient client, std::string model)
      : o_(o), client_(std::move(client)), model_(std::move(model)), rng_(o.seed) {}

  // The prompts' largest token id must be one the model has: a 1-token request with it is
  // refused where one with the smallest is answered.
  Status probe_token_range() const {
    auto one_token = [&](int id) {
      return client_.post("/v1/completions",
                          {{"model", model_}, {"prompt", json::array({id})}, {"max_tokens", 1}});
    };
    const int top = o_.max_token_id - 1;
    const HttpReply r = one_token(top);
    if (r.status != 400 || one_token(kTokenLo).status != 200) return Status::Ok();
    return Status::Error("the server refuses prompt token id " + std::to_string(top) +
                         " (HTTP 400: " + r.body.substr(0, 300) +
                         "): give --max-token-id at most the model's vocabulary size (default " +
                         std::to_string(Options{}.max_token_id) + ", for Qwen vocabularies)");
  }

  // vLLM's ignore_eos, if the server takes it (a 1-token request with it answers 200).
  void probe_ignore_eos() {
    json body = {{"model", model_},
                 {"prompt", json::array({kTokenLo})},
                 {"max_tokens", 1},
                 {"ignore_eos", true}};
    const HttpReply r = client_.post("/v1/completions", body);
    ignore_eos_ = r.status == 200;
    if (!ignore_eos_)
      std::fprintf(stderr,
                   "bench serve: the server refuses ignore_eos (HTTP %d); outputs may end "
                   "early at EOS\n",
                   r.status);
  }

  int run(const std::string& scenario) {
    if (scenario == "burst") return burst();
    if (scenario == "c1") return c1();
    if (scenario == "resend") return resend();
    if (scenario == "offload") return offload();
    if (scenario == "multiturn") return multiturn();
    if (scenario == "sweep") return sweep();
    return fail("--scenario: unknown scenario \"" + scenario +
                "\" (choices: burst, c1, resend, offload, multiturn, sweep)");
  }

  void print() const {
    std::printf("%s\n", stats_table_header().c_str());
    for (const RunStats& r : runs_) std::printf("%s\n", stats_table_row(r).c_str());
    // What the server said, once per run and kind of error (bodies cut to 300 bytes).
    for (const RunStats& r : runs_)
      for (const auto& [kind, body] : r.first_error)
        std::printf("%s: %s x%lld, the first: %s\n", r.label.c_str(), kind.c_str(),
                    static_cast<long long>(r.errors.at(kind)), body.substr(0, 300).c_str());
    for (const std::string& line : notes_) std::printf("%s\n", line.c_str());
    for (const json& j : lines_) std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  Status plot(const std::string& path) const { return write_bench_plot(path, sweep_, runs_); }

 private:
  int length(int base) {
    if (o_.range_ratio <= 0) return base;
    std::uniform_int_distribution<int> d(std::max(1, static_cast<int>(base * (1 - o_.range_ratio))),
                                         static_cast<int>(base * (1 + o_.range_ratio)));
    return d(rng_);
  }
  json random_ids(int n) {
    std::uniform_int_distribution<int> d(kTokenLo, o_.max_token_id - 1);
    json ids = json::array();
    for (int i = 0; i < n; ++i) ids.push_back(d(rng_));
    return ids;
  }
  json completion(json prompt, int max_tokens) const {
    json b = {{"model", model_},          {"prompt", std::move(prompt)},
              {"max_tokens", max_tokens}, {"temperature", 0},
              {"stream", true},           {"stream_options", {{"include_usage", true}}}};
    if (ignore_eos_) b["ignore_eos"] = true;
    return b;
  }
  json header(const std::string& scenario) const {
    return {{"scenario", scenario},
            {"url", client_.url()},
            {"model", model_},
            {"ignore_eos", ignore_eos_},
            {"seed", o_.seed}};
  }

  // Sends `bodies` to /v1/completions (or `path`) with `concurrency` in flight.
  RunStats run_requests(const std::string& label, const std::vector<json>& bodies, int concurrency,
                        const std::string& path = "/v1/completions") const {
    return run_streams(client_, label, bodies, concurrency, path);
  }

  int finish(const std::string& scenario, const RunStats& s, json extra = json::object()) {
    runs_.push_back(s);
    json j = header(scenario);
    j.update(extra);
    j.update(s.to_json());
    lines_.push_back(j);
    return 0;
  }

  int burst() {
    std::vector<json> bodies;
    for (int i = 0; i < o_.num_requests; ++i)
      bodies.push_back(completion(random_ids(length(o_.input_len)), length(o_.output_len)));
    const StepPhases before = step_phases();
    RunStats stats = run_requests("burst", bodies, o_.concurrency);
    json extra = {{"input_len", o_.input_len},
                  {"output_len", o_.output_len},
                  {"range_ratio", o_.range_ratio}};
    // The server's engine steps over the run (syv only; exact when it is otherwise idle): the
    // share of their time the GPU waited for host work between steps.
    const StepPhases after = step_phases();
    const double steps = after.steps - before.steps;
    const double schedule = after.schedule - before.schedule,
                 forward = after.forward - before.forward, output = after.output - before.output;
    if (before.steps >= 0 && steps > 0 && schedule + forward + output > 0) {
      const double idle = (schedule + output) / (schedule + forward + output);
      extra["engine_steps"] = steps;
      extra["engine_idle_share"] = idle;
      char line[320];
      std::snprintf(line, sizeof line,
                    "burst: the server ran %.0f engine steps, %.2f ms forward each; the GPU "
                    "waited %.1f%% of the steps' time for host work between them (schedule %.3f "
                    "ms + output %.3f ms a step)",
                    steps, 1e3 * forward / steps, 100.0 * idle, 1e3 * schedule / steps,
                    1e3 * output / steps);
      notes_.push_back(line);
    }
    return finish("burst", stats, extra);
  }

  // syv's engine step counters (syv_engine_steps_total, syv_engine_step_seconds_total{phase});
  // steps = -1 when the server has none.
  struct StepPhases {
    double steps = -1, schedule = 0, forward = 0, output = 0;
  };
  StepPhases step_phases() const {
    StepPhases p;
    const HttpReply r = client_.get("/metrics");
    if (r.status != 200 || r.body.find("syv_engine_steps_total") == std::string::npos) return p;
    p.steps = prometheus_sum(r.body, "syv_engine_steps_total");
    const auto phases = prometheus_by_label(r.body, "syv_engine_step_seconds_total", "phase");
    auto at = [&](const char* k) { return phases.count(k) ? phases.at(k) : 0.0; };
    p.schedule = at("schedule");
    p.forward = at("forward");
    p.output = at("output");
    return p;
  }

  // syv's verify steps by the tokens they produced (syv_spec_verify_steps_by_tokens_total
  // {tokens="n"}, with speculative decoding on), summed by n; empty when /metrics has none.
  std::map<int, double> verify_steps() const {
    std::map<int, double> steps;
    const HttpReply r = client_.get("/metrics");
    if (r.status != 200) return steps;
    for (const auto& [n, count] : prometheus_by_label(r.body, kVerifySteps, "tokens"))
      steps[std::atoi(n.c_str())] += count;
    return steps;
  }
  // A counter of syv's /metrics (summed over labels), or -1 when the server has none.
  double server_counter(const std::string& name) const {
    const HttpReply r = client_.get("/metrics");
    return r.status == 200 ? prometheus_sum(r.body, name) : -1;
  }

  int c1() {
    std::vector<json> bodies;
    for (int i = 0; i < o_.c1_requests; ++i)
      bodies.push_back(completion(random_ids(length(o_.input_len)), length(o_.output_len)));
    const std::map<int, double> before = verify_steps();
    RunStats stats = run_requests("c1", bodies, 1);
    // Tokens per verify step over the run (the server's, so only exact when it is otherwise idle).
    double steps = 0, tokens = 0;
    for (const auto& [n, count] : verify_steps()) {
      const double d = count - (before.count(n) ? before.at(n) : 0.0);
      steps += d;
      tokens += n * d;
    }
    json extra = {{"input_len", o_.input_len}, {"output_len", o_.output_len}};
    extra["tokens_per_step"] = steps > 0 ? json(tokens / steps) : json(nullptr);
    if (steps > 0)
      notes_.push_back("c1: " + std::to_string(tokens / steps) + " tokens per verify step (" +
                       kVerifySteps + ")");
    return finish("c1", stats, extra);
  }

  int sweep() {
    json levels = json::array();
    for (int c = 1;; c = std::min(c * 2, o_.concurrency)) {
      std::vector<json> bodies;
      for (int i = 0; i < std::max(o_.num_requests, c); ++i)
        bodies.push_back(completion(random_ids(length(o_.input_len)), length(o_.output_len)));
      RunStats s = run_requests("sweep c=" + std::to_string(c), bodies, c);
      runs_.push_back(s);
      sweep_.push_back(s);
      levels.push_back(s.to_json());
      if (c >= o_.concurrency) break;
    }
    json j = header("sweep");
    j["input_len"] = o_.input_len;
    j["output_len"] = o_.output_len;
    j["levels"] = levels;
    lines_.push_back(j);
    return 0;
  }

  // The same long prompt twice, one after the other.
  int resend() {
    const json body = completion(random_ids(o_.resend_len), std::min(o_.output_len, 16));
    RunStats first = run_requests("resend 1st", {body}, 1);
    RunStats second = run_requests("resend 2nd", {body}, 1);
    runs_.push_back(first);
    runs_.push_back(second);
    json j = header("resend");
    j["prompt_len"] = o_.resend_len;
    j["first"] = first.to_json();
    j["second"] = second.to_json();
    const bool ok = first.completed == 1 && second.completed == 1;
    j["cached_tokens"] = second.cached_tokens;
    j["ttft_ratio"] = ok && first.ttft_s[0] > 0 ? second.ttft_s[0] / first.ttft_s[0] : -1.0;
    notes_.push_back("resend: " + std::to_string(o_.resend_len) + "-token prompt: cached tokens " +
                     std::to_string(first.cached_tokens) + " then " +
                     std::to_string(second.cached_tokens) + ", TTFT ratio (2nd / 1st) " +
                     std::to_string(j["ttft_ratio"].get<double>()));
    lines_.push_back(j);
    return 0;
  }

  // A long prompt sent cold, then after --filler-tokens of other prompts have pushed it out of
  // the device pool, then once more at once: the TTFT after the eviction against the cold one
  // is the serve ratio of the server's offload tier (syv: the host tier, --host-cache-gb).
  int offload() {
    const json body = completion(random_ids(o_.resend_len), std::min(o_.output_len, 16));
    RunStats cold = run_requests("offload cold", {body}, 1);
    std::vector<json> filler;
    for (int64_t sent = 0; sent < o_.filler_tokens; sent += o_.resend_len)
      filler.push_back(completion(random_ids(o_.resend_len), 1));
    RunStats fill = run_requests("offload fill", filler, o_.concurrency);
    const double host_hits_before = server_counter("syv_host_tier_hit_tokens_total");
    RunStats evicted = run_requests("offload back", {body}, 1);
    const double host_hits = server_counter("syv_host_tier_hit_tokens_total");
    RunStats device = run_requests("offload dev", {body}, 1);
    for (const RunStats* r : {&cold, &fill, &evicted, &device}) runs_.push_back(*r);
    json j = header("offload");
    j["prompt_len"] = o_.resend_len;
    j["filler_tokens"] = static_cast<int64_t>(filler.size()) * o_.resend_len;
    j["cold"] = cold.to_json();
    j["filler"] = fill.to_json();
    j["after_eviction"] = evicted.to_json();
    j["from_device"] = device.to_json();
    const bool ok = cold.completed == 1 && evicted.completed == 1 && cold.ttft_s[0] > 0;
    j["cached_tokens"] = evicted.cached_tokens;
    j["serve_ratio"] = ok ? evicted.ttft_s[0] / cold.ttft_s[0] : -1.0;
    // syv: the tokens of that send served from the host tier.
    j["host_tier_hit_tokens"] = host_hits >= 0 && host_hits_before >= 0
                                    ? json(host_hits - host_hits_before)
                                    : json(nullptr);
    notes_.push_back("offload: " + std::to_string(o_.resend_len) + "-token prompt after " +
                     std::to_string(j["filler_tokens"].get<int64_t>()) +
                     " filler tokens: cached tokens " + std::to_string(evicted.cached_tokens) +
                     ", serve ratio (TTFT after eviction / cold) " +
                     std::to_string(j["serve_ratio"].get<double>()));
    lines_.push_back(j);
    return 0;
  }

  std::string words(int n) {
    static const char* kWords[] = {"river",  "stone",  "light",  "market", "garden",  "copper",
                                   "winter", "signal", "harbor", "paper",  "orbit",   "meadow",
                                   "engine", "silver", "forest", "window", "thunder", "valley"};
    std::uniform_int_distribution<int> d(0, static_cast<int>(std::size(kWords)) - 1);
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? " " : "") + std::string(kWords[d(rng_)]);
    return s;
  }

  // A chat of --turns turns, each a new user message of --input-len words after the replies so
  // far; what the server reuses of the previous turn is its prompt + reply, rounded down to the
  // cache's granularity (whole pages on syv; docs/benchmarking.md).
  int multiturn() {
    json messages = json::array();
    json turns = json::array();
    RunStats all;
    all.label = "multiturn";
    int64_t previous_total = 0;
    for (int t = 0; t < o_.turns; ++t) {
      messages.push_back({{"role", "user"}, {"content", words(o_.input_len)}});
      json body = {{"model", model_},
                   {"messages", messages},
                   {"max_tokens", o_.output_len},
                   {"temperature", 0},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
      if (ignore_eos_) body["ignore_eos"] = true;
      const auto t0 = std::chrono::steady_clock::now();
      const StreamReply r = client_.stream("/v1/chat/completions", body);
      all.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      all.add(r);
      const int64_t prompt =
          r.usage.is_object() ? r.usage.value("prompt_tokens", int64_t{0}) : int64_t{0};
      turns.push_back({{"turn", t + 1},
                       {"status", r.status},
                       {"prompt_tokens", prompt},
                       {"cached_tokens", r.cached_tokens()},
                       {"previous_total_tokens", previous_total},
                       {"ttft_ms", r.ttft * 1e3}});
      std::fprintf(stderr, "bench serve: multiturn: turn %d: %lld prompt tokens, %lld cached\n",
                   t + 1, static_cast<long long>(prompt),
                   static_cast<long long>(r.cached_tokens()));
      if (r.status != 200) break;
      previous_total = prompt + r.completion_tokens();
      messages.push_back({{"role", "assistant"}, {"content", r.text}});
    }
    all.concurrency = 1;
    return finish("multiturn", all, {{"turns", turns}, {"user_words", o_.input_len}});
  }

  const Options& o_;
  OpenAiClient client_;
  std::string model_;
  std::mt19937_64 rng_;
  bool ignore_eos_ = false;
  std::vector<RunStats> runs_, sweep_;
  std::vector<json> lines_;
  std::vector<std::string> notes_;
};

int run(Options o) {
  if (o.api_key.empty()) {
    if (const char* env = std::getenv("SYV_API_KEY")) o.api_key = env;
  }
  if (o.seed < 0) o.seed = std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff;
  Result<OpenAiClient> client = OpenAiClient::create(o.url, o.api_key);
  if (!client.ok()) return fail(client.message());
  client->set_timeout_s(o.timeout_s);
  std::string model = o.model;
  if (model.empty()) {
    Result<std::string> served = served_model(*client);
    if (!served.ok()) return fail(served.message(), "check --url and --api-key");
    model = *served;
  }
  Bench bench(o, std::move(*client), model);
  if (Status st = bench.probe_token_range(); !st.ok()) return fail(st.message());
  bench.probe_ignore_eos();
  for (const std::string& s : o.scenarios) {
    if (int rc = bench.run(s); rc != 0) return rc;
  }
  bench.print();
  if (!o.plot.empty()) {
    if (Status st = bench.plot(o.plot); !st.ok()) return fail(st.message());
    std::fprintf(stderr, "bench serve: wrote %s\n", o.plot.c_str());
  }
  return 0;
}

BenchRegistration reg{
    "serve",
    "Load an OpenAI-compatible server over HTTP (burst, c1, resend, multiturn, sweep): TTFT, "
    "inter-token and end-to-end latency percentiles, tokens/s, errors",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--url", o->url, "The server: http://HOST:PORT")->required();
      app.add_option("--api-key", o->api_key, "Bearer key (default: $SYV_API_KEY)");
      app.add_option("--model", o->model, "Model id to send (default: the first of /v1/models)");
      app.add_option("--scenario", o->scenarios,
                     "burst, c1, resend, offload, multiturn or sweep; repeat to run several in "
                     "order")
          ->required()
          ->check(CLI::IsMember({"burst", "c1", "resend", "offload", "multiturn", "sweep"}));
      app.add_option("--num-requests", o->num_requests,
                     "burst: requests; sweep: requests per level (at least the concurrency)")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str();
      app.add_option("--concurrency", o->concurrency,
                     "burst: requests in flight at once; sweep: the last level")
          ->check(CLI::Range(1, 4096))
          ->capture_default_str();
      app.add_option("--input-len", o->input_len,
                     "Prompt tokens (random ids); multiturn: words per user message")
          ->check(CLI::Range(1, 1 << 22))
          ->capture_default_str();
      app.add_option("--output-len", o->output_len, "max_tokens of each request")
          ->check(CLI::Range(1, 1 << 22))
          ->capture_default_str();
      app.add_option("--range-ratio", o->range_ratio,
                     "Spread lengths uniformly over [L(1-r), L(1+r)] (0 = fixed)")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      app.add_option("--c1-requests", o->c1_requests, "c1: requests, one at a time")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str();
      app.add_option("--filler-tokens", o->filler_tokens,
                     "offload: tokens of other prompts (of --resend-len each) sent between the "
                     "first and the second send; more than the server's device KV pool")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
          ->capture_default_str();
      app.add_option("--resend-len", o->resend_len, "resend, offload: prompt tokens")
          ->check(CLI::Range(1, 1 << 22))
          ->capture_default_str();
      app.add_option("--turns", o->turns, "multiturn: user turns")
          ->check(CLI::Range(1, 1000))
          ->capture_default_str();
      app.add_option("--max-token-id", o->max_token_id,
                     "Random prompts' token ids are drawn from [1000, N): lower it below the "
                     "vocabulary size of a small model (the trained tiny models have 8192)")
          ->check(CLI::Range(1001, 1 << 30));
      app.add_option("--seed", o->seed, "Random prompts' seed (default: from the clock)");
      app.add_option("--plot", o->plot,
                     "Write an SVG: the sweep's throughput vs inter-token latency, and the latency "
                     "distributions");
      app.add_option("--timeout", o->timeout_s, "Seconds a request may take")
          ->check(CLI::Range(1, 86400))
          ->capture_default_str();
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
