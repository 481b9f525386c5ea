// `--preset` (src/cli/preset.h): each preset resolves to the flags docs/configuration.md
// documents (syv inspect --preset --json on the demo model: dense, no MTP head, so interactive
// speculates with ngram; on a hybrid folder with an MTP head it speculates with mtp), a flag given
// on the command line wins over the preset's (syv serve: the start-up line and the engine's own
// log), and an unknown preset is refused naming the choices.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e/cli_run.h"
#include "e2e/serve_process.h"
#include "unit/mtp_fixture.h"

namespace syv::testing {
namespace {

using Flags = std::map<std::string, std::string>;

Flags inspect_preset(const std::string& name, const std::string& model = kDemoDir) {
  const auto [status, out] =
      run_command(std::string(SYV_BIN) + " inspect --json --model " + model + " --preset " + name);
  EXPECT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;
  if (j.is_discarded() || !j.contains("preset")) return {};
  EXPECT_EQ(j["preset"]["name"], name);
  return j["preset"]["flags"].get<Flags>();
}

TEST(Preset, EachResolvesToItsDocumentedFlags) {
  ensure_demo_model();
  EXPECT_EQ(inspect_preset("interactive"), (Flags{{"--max-num-seqs", "16"},
                                                  {"--max-graph-batch", "16"},
                                                  {"--speculative-method", "ngram"},
                                                  {"--num-speculative-tokens", "4"}}));
  EXPECT_EQ(inspect_preset("long"), (Flags{{"--max-num-seqs", "4"},
                                           {"--gpu-memory-utilization", "0.95"},
                                           {"--kv-cache-dtype", "fp8"}}));
  EXPECT_EQ(inspect_preset("throughput"), (Flags{{"--max-num-seqs", "512"},
                                                 {"--max-batched-tokens", "16384"},
                                                 {"--max-graph-batch", "512"},
                                                 {"--max-waiting", "1024"}}));
  // The text form names them too, and the plan they give (with a device size given here).
  const auto [status, out] = run_command(std::string(SYV_BIN) + " inspect --model " + kDemoDir +
                                         " --preset throughput --gpu-memory-gib 80");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("preset throughput --max-num-seqs 512 --max-batched-tokens 16384"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("16384 batch tokens"), std::string::npos) << out;
}

// A preset without a step budget plans the one `syv serve` would choose on a GPU of --gemm-tflops
// (cli/step_budget.h: the largest multiple of 1,024 tokens within 2,048-16,384 whose linears
// compute in 50 ms at that rate), and the "step budget" figures agree with that rule.
TEST(Preset, WithoutABudgetPlansTheOneServeWouldChoose) {
  ensure_demo_model();
  for (const double tflops : {0.01, 0.05}) {
    const std::string rate = std::to_string(tflops);
    const auto [status, out] =
        run_command(std::string(SYV_BIN) + " inspect --json --model " + kDemoDir +
                    " --preset interactive --gpu-memory-gib 24 --gemm-tflops " + rate);
    ASSERT_EQ(status, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    const double gflop = j.value("prefill_gflop_per_token", 0.0);
    ASSERT_GT(gflop, 0) << out;
    const double fit = 0.050 * tflops * 1e12 / (gflop * 1e9);
    const int64_t expected = std::clamp<int64_t>(
        static_cast<int64_t>(std::min(fit, 16384.0) / 1024) * 1024, 2048, 16384);
    EXPECT_EQ(j.value("step_budget_tokens", 0), expected) << rate << ": " << out;
    EXPECT_NE(
        j.value("memory_plan", std::string()).find(std::to_string(expected) + " batch tokens"),
        std::string::npos)
        << rate << ": " << out;
  }
}

// A hybrid folder with an MTP head (config.json and the mtp.* tensors) drafts with it; one whose
// config.json claims a head its tensors lack falls back to ngram.
TEST(Preset, InteractiveUsesTheMtpHeadWhenTheFolderHasOne) {
  const std::string with_head = make_mtp_fixture("q35_r1_lllf", 5);
  EXPECT_EQ(inspect_preset("interactive", with_head), (Flags{{"--max-num-seqs", "16"},
                                                             {"--max-graph-batch", "16"},
                                                             {"--speculative-method", "mtp"},
                                                             {"--num-speculative-tokens", "2"}}));
  const std::string config_only = make_mtp_fixture("q35_r1_lllf", 5, /*with_tensors=*/false);
  EXPECT_EQ(inspect_preset("interactive", config_only)["--speculative-method"], "ngram");
  std::filesystem::remove_all(with_head);
  std::filesystem::remove_all(config_only);
}

TEST(Preset, UnknownIsRefusedNamingTheChoices) {
  ensure_demo_model();
  for (const char* command : {"inspect", "serve --device cpu --port 0"}) {
    const auto [status, out] = run_command(
        std::string(SYV_BIN) + " " + command + " --model " + kDemoDir + " --preset fastest",
        /*with_stderr=*/true);
    EXPECT_NE(status, 0) << command;
    EXPECT_NE(out.find("unknown preset \"fastest\" (choices: interactive, long, throughput)"),
              std::string::npos)
        << command << ": " << out;
    EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  }
}

TEST(Preset, AFlagGivenOnTheCommandLineWins) {
  ensure_demo_model();
  ServerProcess p({"serve", "--model", kDemoDir, "--port", "0", "--device", "cpu", "--kv-cache-mb",
                   "64", "--http-threads", "8", "--preset", "throughput", "--max-num-seqs", "8"},
                  "e2e_preset_serve.log");
  const std::string line = p.wait_for_line(R"(syv: (preset .*))", std::chrono::seconds(60));
  EXPECT_EQ(line,
            "preset throughput: --max-batched-tokens 16384 --max-graph-batch 512 --max-waiting "
            "1024; given on the command line: --max-num-seqs 8");
  ASSERT_FALSE(p.wait_for_line(R"(syv: ready)", std::chrono::seconds(120)).empty()) << p.log();
  // The engine runs what the line says: the given --max-num-seqs, the preset's budget.
  EXPECT_NE(p.log().find("max_num_seqs 8, token budget 16384"), std::string::npos) << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(30)), 0);
}

}  // namespace
}  // namespace syv::testing
