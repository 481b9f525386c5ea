// `syv bench schedule`: the engine's schedule on a model that computes nothing. With a pool that
// holds every request at full length nothing is preempted or recomputed and the steps are what
// the budget and lengths give; with a pool too small for them the engine preempts, and what it
// reports adds up (computed = once + recomputed); a host tier keeps the victims' pages and serves
// them back, so they recompute only their unregistered tails; a pool given in bytes only is refused
// with the way out.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "e2e/cli_run.h"

namespace syv::testing {
namespace {

using nlohmann::json;

json schedule(const std::string& flags) {
  auto [status, out] =
      run_command(std::string(SYV_BIN) + " bench schedule --json --page-size 16 " + flags);
  EXPECT_EQ(status, 0) << out;
  return json_lines(out).empty() ? json() : json_lines(out).front();
}

// The figures add up: every token fed ran in a plain decode step or in another (prefill chunks
// with decodes), and computed = what the requests need once + what was recomputed.
void expect_adds_up(const json& j) {
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["decode_rows"].get<int>() + j["other_tokens"].get<int>(), j["computed_tokens"]);
  EXPECT_EQ(j["tokens_needed"].get<int>() + j["recomputed_tokens"].get<int>(),
            j["computed_tokens"]);
}

TEST(BenchSchedule, RoomyPoolRunsEachRequestOnce) {
  // 16 x (64 in, 32 out) = 96 tokens = 6 pages each; a 128-token budget admits two prompts a
  // step, so 8 prefill steps (the last with the first decodes), then the decodes.
  const json j = schedule(
      "--num-pages 200 --num-requests 16 --input-len 64 --output-len 32 --max-batched-tokens 128 "
      "--max-num-seqs 16");
  expect_adds_up(j);
  EXPECT_EQ(j["preemptions"], 0);
  EXPECT_EQ(j["recomputed_tokens"], 0);
  EXPECT_EQ(j["tokens_needed"], 16 * (64 + 32 - 1));
  EXPECT_GE(j["steps"].get<int>(), 31 + 8);
}

TEST(BenchSchedule, TightPoolPreemptsAndRecomputes) {
  // 32 x (64 in, 64 out) need 32 x 8 = 256 pages at the end; 160 hold them until ~40 tokens in.
  const std::string tight =
      "--num-pages 160 --num-requests 32 --input-len 64 --output-len 64 --max-batched-tokens 512 "
      "--max-num-seqs 32";
  const json j = schedule(tight);
  expect_adds_up(j);
  EXPECT_EQ(j["tokens_needed"], 32 * (64 + 64 - 1));
  EXPECT_GT(j["preemptions"].get<int>(), 0);
  EXPECT_GT(j["recomputed_tokens"].get<int>(), 0);
  // A host tier keeps every page a victim registered until it resumes (kv/host_tier.h "Kept for
  // preempted sequences"): it recomputes only what was not in a registered page, its last
  // partial page and at most one full page (a hit stops a token short of the sequence's end).
  for (int host_pages : {80, 160}) {
    const json host = schedule(tight + " --host-pages " + std::to_string(host_pages));
    expect_adds_up(host);
    EXPECT_EQ(host["preemptions"], j["preemptions"]);
    EXPECT_GT(host["host_page_hits"].get<int>(), 0);
    EXPECT_LE(host["recomputed_tokens"].get<int>(), j["preemptions"].get<int>() * 2 * 16)
        << host_pages << " host pages";
  }
}

// Lengths spread by --range-ratio: the figures still add up over the drawn lengths, the same
// draw gives the same schedule, and a ratio outside [0, 1) is refused.
TEST(BenchSchedule, SpreadLengthsAddUp) {
  const std::string spread =
      "--num-pages 160 --num-requests 32 --input-len 64 --output-len 64 --max-batched-tokens 512 "
      "--max-num-seqs 32 --range-ratio 0.5";
  const json j = schedule(spread);
  expect_adds_up(j);
  // The drawn lengths: 32 x (32..96 in, 32..96 out), not all 64 + 64.
  EXPECT_NE(j["tokens_needed"], 32 * (64 + 64 - 1));
  EXPECT_GE(j["tokens_needed"].get<int>(), 32 * (32 + 32 - 1));
  EXPECT_LE(j["tokens_needed"].get<int>(), 32 * (96 + 96 - 1));
  EXPECT_EQ(schedule(spread), j);
  EXPECT_NE(j["steps"], schedule(spread.substr(0, spread.find(" --range-ratio")))["steps"]);
  auto [status, out] =
      run_command(std::string(SYV_BIN) + " bench schedule --num-pages 160 --range-ratio 1", true);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--range-ratio"), std::string::npos) << out;
}

// The floor at given ceilings (dense Qwen3 config): positive, lower with faster ceilings, lower
// with smaller K/V; refused unless --config, --copy-gbps and --gemm-tflops come together.
TEST(BenchSchedule, FloorAtGivenCeilings) {
  const std::string base =
      "--num-pages 200 --num-requests 16 --input-len 64 --output-len 32 "
      "--config " SYV_SOURCE_DIR "/tools/bench/configs/qwen3-0.6b ";
  const json slow = schedule(base + "--copy-gbps 1000 --gemm-tflops 100");
  const json fast = schedule(base + "--copy-gbps 2000 --gemm-tflops 200");
  const json fp8 = schedule(base + "--copy-gbps 1000 --gemm-tflops 100 --kv-cache-dtype fp8");
  ASSERT_TRUE(slow.contains("floor_s") && fast.contains("floor_s") && fp8.contains("floor_s"));
  EXPECT_GT(slow["floor_s"].get<double>(), 0.0);
  EXPECT_NEAR(fast["floor_s"].get<double>(), slow["floor_s"].get<double>() / 2, 1e-9);
  EXPECT_LT(fp8["floor_s"].get<double>(), slow["floor_s"].get<double>());
  EXPECT_EQ(fp8["steps"], slow["steps"]);  // the K/V dtype does not change the schedule
  auto [status, out] =
      run_command(std::string(SYV_BIN) + " bench schedule --num-pages 200 " + "--copy-gbps 1000",
                  /*with_stderr=*/true);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--config, --copy-gbps and --gemm-tflops together"), std::string::npos) << out;
}

// Sizes in bytes and engine flags that cannot change a schedule are refused naming what to give,
// not ignored; so is a pool not given at all.
TEST(BenchSchedule, RefusesWhatItCannotHonour) {
  for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
           {"", "--num-pages"},
           {"--num-pages 100 --kv-cache-mb 64", "--num-pages"},
           {"--num-pages 100 --host-cache-gb 1", "--host-pages"},
           {"--num-pages 100 --cuda-graphs off", "--cuda-graphs"},
           {"--num-pages 100 --kv-cache-dtype fp8", "--config"}}) {
    auto [status, out] =
        run_command(std::string(SYV_BIN) + " bench schedule " + flags, /*with_stderr=*/true);
    EXPECT_NE(status, 0) << flags;
    EXPECT_NE(out.find(named), std::string::npos) << flags << ": " << out;
  }
}

}  // namespace
}  // namespace syv::testing
