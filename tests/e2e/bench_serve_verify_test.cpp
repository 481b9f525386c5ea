// `syv bench serve` and `syv verify` against `syv serve` on the demo model (CPU): the scenarios'
// JSON lines (counts, times that are non-negative, cached tokens on a resend, a prompt evicted
// to the host tier and served from it; no timing values asserted), the SVG plot, the deployment's
// facts in /metrics equal to the start-up log's, and verify: every check passing with --model
// (the deployment facts, tool calls and the reasoning split included, and speculation equal to
// none through a second launch), a failing check turning into FAIL and exit code 1 with --url;
// verify on a trained tiny model whose vocabulary lacks the demo's words; bench serve naming
// --max-token-id for a small vocabulary and quoting the server's errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "e2e/cli_run.h"
#include "e2e/serve_process.h"

namespace syv::testing {
namespace {

using nlohmann::json;

constexpr const char* kKey = "sk-e2e-bench-key-0123456789abcdef";

class BenchServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ensure_demo_model();
    server_ = new ServerProcess(
        {"serve", "--model", kDemoDir, "--port", "0", "--api-key", kKey, "--device", "cpu",
         "--kv-cache-mb", "64", "--page-size", "16", "--max-num-seqs", "8", "--max-model-len",
         "2048", "--public-routes", "/health"},
        "e2e_bench_serve.log");
    const std::string port = server_->wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))",
                                                    std::chrono::seconds(300));
    ASSERT_FALSE(port.empty()) << server_->log();
    url_ = "http://127.0.0.1:" + port;
    ASSERT_TRUE(wait_ready(std::stoi(port), kKey, std::chrono::seconds(120))) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static std::map<std::string, json> bench(const std::string& args) {
    const auto [status, out] = run_command(std::string(SYV_BIN) + " bench serve --url " + url_ +
                                           " --api-key " + kKey + " --seed 7 " + args);
    EXPECT_EQ(status, 0) << out;
    std::map<std::string, json> by_scenario;
    for (const json& j : json_lines(out)) by_scenario[j["scenario"]] = j;
    return by_scenario;
  }
  static void expect_sane(const json& run, int requests, int output_tokens_each) {
    EXPECT_EQ(run["requests"], requests) << run;
    EXPECT_EQ(run["completed"], requests) << run;
    EXPECT_TRUE(run["errors"].empty()) << run;
    // ignore_eos (syv takes it): every request gives exactly max_tokens.
    EXPECT_EQ(run["output_tokens"], requests * output_tokens_each) << run;
    for (const char* t : {"ttft_ms", "itl_ms", "e2e_ms"})
      for (const char* q : {"p50", "p90", "p99", "mean"})
        EXPECT_GE(run[t][q].get<double>(), 0.0) << t << " " << q << " " << run;
    EXPECT_EQ(run["ttft_ms"]["n"], requests);
    EXPECT_EQ(run["itl_ms"]["n"], requests * (output_tokens_each - 1));
    EXPECT_GT(run["output_tok_s"].get<double>(), 0.0);
  }

  static ServerProcess* server_;
  static std::string url_;
};
ServerProcess* BenchServe::server_ = nullptr;
std::string BenchServe::url_;

TEST_F(BenchServe, BurstC1AndResendGiveSaneJson) {
  const std::string svg = std::string(SYV_BINARY_DIR) + "/e2e_bench_serve.svg";
  std::filesystem::remove(svg);
  auto lines = bench(
      "--scenario burst --scenario c1 --scenario resend --num-requests 6 --concurrency 3 "
      "--input-len 24 --output-len 5 --c1-requests 2 --resend-len 200 --plot " +
      svg);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines["burst"]["ignore_eos"], true);
  expect_sane(lines["burst"], 6, 5);
  EXPECT_EQ(lines["burst"]["prompt_tokens"], 6 * 24);
  // The server's engine steps over the burst, from its /metrics (syv_engine_step_seconds_total):
  // at least one step per output token of the slowest request, and a GPU-idle share in [0, 1).
  ASSERT_TRUE(lines["burst"]["engine_steps"].is_number()) << lines["burst"];
  EXPECT_GE(lines["burst"]["engine_steps"].get<double>(), 5.0) << lines["burst"];
  EXPECT_GE(lines["burst"]["engine_idle_share"].get<double>(), 0.0) << lines["burst"];
  EXPECT_LT(lines["burst"]["engine_idle_share"].get<double>(), 1.0) << lines["burst"];
  expect_sane(lines["c1"], 2, 5);
  EXPECT_TRUE(lines["c1"]["tokens_per_step"].is_null()) << "this server does not speculate";
  const json& resend = lines["resend"];
  EXPECT_EQ(resend["first"]["completed"], 1) << resend;
  EXPECT_EQ(resend["second"]["completed"], 1) << resend;
  EXPECT_GT(resend["cached_tokens"].get<int64_t>(), 0) << resend;
  EXPECT_LE(resend["cached_tokens"].get<int64_t>(), 200) << resend;
  EXPECT_GE(resend["ttft_ratio"].get<double>(), 0.0) << resend;
  std::ifstream in(svg);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().rfind("<svg", 0), 0u) << "no SVG at " << svg;
  EXPECT_NE(ss.str().find("latency distributions"), std::string::npos);
}

TEST_F(BenchServe, MultiturnReusesAndSweepHasALevelPerConcurrency) {
  auto lines = bench(
      "--scenario multiturn --scenario sweep --turns 2 --input-len 40 --output-len 4 "
      "--num-requests 2 --concurrency 2");
  ASSERT_EQ(lines.size(), 2u);
  const json& turns = lines["multiturn"]["turns"];
  ASSERT_EQ(turns.size(), 2u) << lines["multiturn"];
  EXPECT_EQ(turns[1]["status"], 200);
  EXPECT_GT(turns[1]["cached_tokens"].get<int64_t>(), 0) << turns;
  EXPECT_LE(turns[1]["cached_tokens"].get<int64_t>(), turns[1]["previous_total_tokens"]) << turns;
  const json& levels = lines["sweep"]["levels"];
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0]["concurrency"], 1);
  EXPECT_EQ(levels[1]["concurrency"], 2);
  for (const json& l : levels) expect_sane(l, 2, 4);
}

TEST_F(BenchServe, UnknownScenarioIsRefused) {
  const auto [status, out] =
      run_command(std::string(SYV_BIN) + " bench serve --url " + url_ + " --scenario spill",
                  /*with_stderr=*/true);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("spill"), std::string::npos) << out;
}

// A model whose vocabulary is smaller than the random prompts' default token range (the trained
// tiny-dense: 8192 ids): bench serve stops before the scenario, quoting the server's refusal and
// naming --max-token-id, instead of timing 100% errors; with it, the scenario runs. A run's
// errors are shown with the server's first answer of each kind.
TEST(BenchServeTokenRange, ASmallVocabularyIsNamedBeforeTheScenario) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/models/tiny-dense";
  ServerProcess server({"serve", "--model", dir, "--port", "0", "--api-key", kKey, "--device",
                        "cpu", "--kv-cache-mb", "16", "--max-model-len", "1024"},
                       "e2e_bench_serve_token_range.log");
  const std::string port =
      server.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  ASSERT_FALSE(port.empty()) << server.log();
  ASSERT_TRUE(wait_ready(std::stoi(port), kKey, std::chrono::seconds(120))) << server.log();
  const std::string bench = std::string(SYV_BIN) + " bench serve --url http://127.0.0.1:" + port +
                            " --api-key " + kKey + " --input-len 32 --output-len 4 ";
  {
    const auto [status, out] = run_command(bench + "--scenario c1 --c1-requests 2", true);
    EXPECT_NE(status, 0) << out;
    EXPECT_NE(out.find("refuses prompt token id 29999"), std::string::npos) << out;
    EXPECT_NE(out.find("expected a token id in [0, 8192)"), std::string::npos) << out;
    EXPECT_NE(out.find("--max-token-id"), std::string::npos) << out;
  }
  {
    const auto [status, out] =
        run_command(bench + "--scenario c1 --c1-requests 2 --max-token-id 8000");
    EXPECT_EQ(status, 0) << out;
    const std::vector<json> lines = json_lines(out);
    ASSERT_EQ(lines.size(), 1u) << out;
    EXPECT_EQ(lines[0]["completed"], 2) << out;
  }
  {  // prompts longer than --max-model-len: every request refused, the reason shown
    const auto [status, out] =
        run_command(bench + "--scenario resend --resend-len 2000 --max-token-id 8000");
    EXPECT_NE(out.find("resend 1st: http_400 x1, the first: {\"error\""), std::string::npos) << out;
    EXPECT_NE(out.find("context_length_exceeded"), std::string::npos) << out;
  }
}

// A device pool of 1024 tokens (1 MiB of f32 KV) under a host tier: 4096 filler tokens evict
// the 512-token prompt, which then comes back from the host tier.
TEST(BenchServeOffload, TheEvictedPromptComesBackFromTheHostTier) {
  ensure_demo_model();
  ServerProcess server({"serve", "--model", kDemoDir, "--port", "0", "--api-key", kKey, "--device",
                        "cpu", "--kv-cache-mb", "1", "--page-size", "16", "--host-cache-gb", "0.01",
                        "--max-model-len", "1024"},
                       "e2e_bench_serve_offload.log");
  const std::string port =
      server.wait_for_line(R"(listening on http://127\.0\.0\.1:(\d+))", std::chrono::seconds(300));
  ASSERT_FALSE(port.empty()) << server.log();
  ASSERT_TRUE(wait_ready(std::stoi(port), kKey, std::chrono::seconds(120))) << server.log();
  const auto [status, out] = run_command(
      std::string(SYV_BIN) + " bench serve --url http://127.0.0.1:" + port + " --api-key " + kKey +
      " --scenario offload --resend-len 512 --filler-tokens 4096 --concurrency 4 " +
      "--output-len 4");
  ASSERT_EQ(status, 0) << out;
  const std::vector<json> lines = json_lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  const json& j = lines[0];
  EXPECT_EQ(j["scenario"], "offload");
  EXPECT_EQ(j["filler_tokens"], 4096);
  EXPECT_EQ(j["filler"]["completed"], 8) << j;
  EXPECT_EQ(j["after_eviction"]["completed"], 1) << j;
  EXPECT_GT(j["cached_tokens"].get<int64_t>(), 0) << j;
  EXPECT_GT(j["host_tier_hit_tokens"].get<double>(), 0) << j;
  EXPECT_GE(j["serve_ratio"].get<double>(), 0.0) << j;
}

// The deployment's facts in /metrics are the ones the start-up log states: the engine's pool line
// (pages, page size, tokens, max_num_seqs, token budget, max_model_len), the cache store's KV
// dtype and bytes per page, and what the flags asked for.
TEST_F(BenchServe, MetricsStateWhatTheStartUpLogStates) {
  const std::string log = server_->log();
  std::smatch pool, store;
  const std::regex pool_line(
      R"(engine: (\d+) KV pages of (\d+) tokens \((\d+) tokens, \d+ MiB\), max_num_seqs (\d+), )"
      R"(token budget (\d+), prefix caching \w+, max_model_len (\d+))");
  ASSERT_TRUE(std::regex_search(log, pool, pool_line)) << log;
  const std::regex store_line(R"(cache store: \d+ pages x \d+ tokens for \d+ attention layers )"
                              R"(\(KV (\w+), (\d+) bytes/page\))");
  ASSERT_TRUE(std::regex_search(log, store, store_line)) << log;
  httplib::Client cli(url_);
  auto res = cli.Get("/metrics", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_TRUE(res && res->status == 200);
  const std::string& text = res->body;
  EXPECT_EQ(metric(text, "syv_kv_pool_pages"), std::stoll(pool[1])) << text;
  EXPECT_EQ(metric(text, "syv_kv_page_size_tokens"), std::stoll(pool[2]));
  EXPECT_EQ(metric(text, "syv_kv_page_size_tokens"), 16);  // --page-size
  EXPECT_EQ(metric(text, "syv_kv_pool_tokens"), std::stoll(pool[3]));
  EXPECT_EQ(metric(text, "syv_max_num_seqs"), std::stoll(pool[4]));
  EXPECT_EQ(metric(text, "syv_max_num_seqs"), 8);  // --max-num-seqs
  EXPECT_EQ(metric(text, "syv_max_num_batched_tokens"), std::stoll(pool[5]));
  EXPECT_EQ(metric(text, "syv_max_model_len"), std::stoll(pool[6]));
  EXPECT_EQ(metric(text, "syv_max_model_len"), 2048);  // --max-model-len
  EXPECT_EQ(metric(text, "syv_kv_bytes_per_token") * 16, std::stoll(store[2]));
  // --kv-cache-mb 64: the pool is the whole pages that fit in 64 MiB.
  EXPECT_EQ(metric(text, "syv_kv_pool_pages"),
            (int64_t{64} << 20) / (metric(text, "syv_kv_bytes_per_token") * 16));
  EXPECT_NE(
      text.find("syv_kv_cache_info{dtype=\"" + store[1].str() + "\",sized_by=\"kv-cache-mb\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("syv_device_info{backend=\"cpu\",name=\""), std::string::npos) << text;
  // cuda: "none" in a build without the CUDA backend, else the toolkit and archs.
#ifdef SYV_HAVE_CUDA
  const std::string cuda = R"([0-9][^"]* \(sm [^"]+\))";
#else
  const std::string cuda = "none";
#endif
  EXPECT_TRUE(std::regex_search(
      text, std::regex(R"(syv_build_info\{version="0\.1\.0",git_commit="[^"]+",build_type=")"
                       R"([^"]+",compiler="[^"]+",cuda=")" +
                       cuda + R"("\} 1\n)")))
      << text;
  EXPECT_EQ(text.find("syv_memory_plan_"), std::string::npos) << "no GPU plan on the CPU";
}

// This server leaves /health public: verify's auth check on it fails, the rest pass but the
// offload check, skipped (its 65,536-token pool is more than the check evicts).
TEST_F(BenchServe, VerifyReportsAFailedCheckAndExits1) {
  const auto [status, out] =
      run_command(std::string(SYV_BIN) + " verify --url " + url_ + " --api-key " + kKey);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("FAIL auth: GET /health refuses a missing and a wrong key"), std::string::npos)
      << out;
  EXPECT_NE(out.find("PASS batching"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS responses: POST /v1/responses"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS auth: POST /v1/responses refuses"), std::string::npos) << out;
  EXPECT_NE(out.find("SKIP offload: "), std::string::npos) << out;
  EXPECT_NE(out.find(" passed, 1 failed, 1 skipped\n"), std::string::npos) << out;
}

TEST(Verify, PassesOnTheDemoModelWithAndWithoutSpeculation) {
  ensure_demo_model();
  const auto [status, out] = run_command(
      std::string(SYV_BIN) + " verify --model " + kDemoDir +
      " --device cpu --serve-args '--kv-cache-mb 8 --host-cache-gb 0.25 --max-num-seqs 16 "
      "--speculative-method ngram --num-speculative-tokens 3 --speculative-adaptive off'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS speculation: greedy output with it = without it"), std::string::npos)
      << out;
  EXPECT_NE(out.find("PASS shutdown: SIGTERM drains and exits 0"), std::string::npos) << out;
  // An 8 MiB pool (8,192 tokens) is small enough for the offload check to evict its prompt.
  EXPECT_NE(out.find("PASS offload: a prompt served back from the host tier gives its first "
                     "greedy output"),
            std::string::npos)
      << out;
  // The checks of issue 18's list that read /metrics' deployment facts and use the template.
  for (const char* line : {"PASS deployment: /metrics states the build (syv_build_info) (syv 0.1.0",
                           "PASS deployment: /metrics names the device (syv_device_info) (cpu",
                           "PASS deployment: /metrics states the KV pool and memory plan, "
                           "consistent (KV pool ",
                           "PASS tool calls: tool_choice naming a function gives one call of it",
                           "PASS tool calls: the call and its result sent back are rendered and "
                           "answered",
                           "PASS reasoning: the model's <think> token opens reasoning_content "
                           "(<think> (id 151667) written first",
                           "PASS reasoning: <think>reason</think>answer gives reasoning_content "
                           "and content",
                           "PASS reasoning: enable_thinking false keeps the output in content "
                           "(the template closes the block"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(out.find("SKIP"), std::string::npos) << out;
  EXPECT_NE(out.find(" passed, 0 failed\n"), std::string::npos) << out;
}

// A trained tiny model (models/tiny-dense): its small vocabulary has " reason" but no "reason"
// token, so the reasoning checks write another one-token word first (they once failed here).
// Its default pool is too large for the offload check to evict, so verify runs that check on a
// second server with a small pool (the --url form skips it instead: VerifyReportsAFailedCheck...).
TEST(Verify, PassesOnATrainedTinyModelWithASmallVocabulary) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/models/tiny-dense";
  // The host tier's size given (its default follows the machine's free memory).
  const auto [status, out] = run_command(std::string(SYV_BIN) + " verify --model " + dir +
                                         " --device cpu --serve-args '--host-cache-gb 0.25'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_EQ(out.find("SKIP"), std::string::npos) << out;
  for (const char* line : {"PASS reasoning: the model's <think> token opens reasoning_content",
                           "PASS reasoning: <think>reason</think>answer gives reasoning_content "
                           "and content",
                           "PASS reasoning: enable_thinking false keeps the output in content "
                           "(the template closes the block in its prompt; \"The\" written first",
                           "PASS offload: a prompt served back from the host tier gives its first "
                           "greedy output (on a second server with a "}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(PASS server: syv serve with a \d+ MiB KV pool starts at )")))
      << out;
  EXPECT_NE(out.find(" passed, 0 failed\n"), std::string::npos) << out;
}

// Draft-model speculation: the second server, started without speculation, drops --draft-model
// too (serve refuses it without --speculative-method; verify once failed there).
TEST(Verify, DraftModelSpeculationEqualsNone) {
  const std::string models = std::string(SYV_SOURCE_DIR) + "/models/";
  const auto [status, out] = run_command(std::string(SYV_BIN) + " verify --model " + models +
                                         "tiny-dense --device cpu --serve-args " +
                                         "'--speculative-method draft --draft-model " + models +
                                         "tiny-draft --num-speculative-tokens 3'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS speculation: greedy output with it = without it"), std::string::npos)
      << out;
}

// Speculation a preset turns on (interactive: MTP on tiny-hybrid, which has the head) is
// checked too: the second server gets the preset's other flags, without the speculative ones.
// A 1 MiB pool: the offload check evicts the hybrid's pages and checkpoints to the host tier and
// serves its prompt back from there; the cancel check keeps within the 1,024-token model length.
TEST(Verify, PresetSpeculationEqualsNone) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/models/tiny-hybrid";
  const auto [status, out] =
      run_command(std::string(SYV_BIN) + " verify --model " + dir +
                  " --device cpu --serve-args '--preset interactive --kv-cache-mb 1 "
                  "--host-cache-gb 0.25'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS speculation: greedy output with it = without it"), std::string::npos)
      << out;
  EXPECT_NE(out.find("PASS offload: a prompt served back from the host tier gives its first "
                     "greedy output"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace syv::testing
