// --host-embeddings (LoadOptions::host_embeddings) from the command line: a model with untied
// embeddings gives the same tokens with the table in host-resident memory (on the CPU backend the
// same memory; tests/gpu/qwen3_golden_test.cpp checks the CUDA one bit for bit), a tied model is
// refused naming the flag, and `syv inspect` plans the table's device bytes into the KV pool.
#include <gtest/gtest.h>

#include <string>

#include "e2e/cli_run.h"

namespace {

using syv::testing::run_command;

const std::string kRoot = SYV_SOURCE_DIR;
const std::string kUntied = kRoot + "/tests/fixtures/qwen3/untied_gqa4_hd24";
const std::string kTied = kRoot + "/tests/fixtures/qwen3/tied_gqa2";

TEST(HostEmbeddingsCli, GenerateGivesTheSameTokens) {
  const std::string cmd = std::string(SYV_BIN) + " generate --model " + kUntied +
                          " --tokens 11,400,23,987,5 --max-tokens 12";
  auto [s1, plain] = run_command(cmd);
  auto [s2, host] = run_command(cmd + " --host-embeddings");
  ASSERT_EQ(s1, 0) << plain;
  ASSERT_EQ(s2, 0) << host;
  EXPECT_FALSE(plain.empty());
  EXPECT_EQ(host, plain);
  // On the CPU backend the table is host memory either way: the start-up memory check counts it.
  auto check = [&](const std::string& flags) {
    auto [status, log] = run_command(cmd + flags, /*with_stderr=*/true);
    EXPECT_EQ(status, 0) << log;
    const size_t at = log.find("memory check: weights ");
    EXPECT_NE(at, std::string::npos) << log;
    return at == std::string::npos ? std::string() : log.substr(at, log.find(',', at) - at);
  };
  EXPECT_EQ(check(" --host-embeddings"), check(""));
}

TEST(HostEmbeddingsCli, TiedEmbeddingsAreRefusedByName) {
  auto [status, text] = run_command(std::string(SYV_BIN) + " generate --model " + kTied +
                                        " --tokens 1,2,3 --max-tokens 1 --host-embeddings",
                                    /*with_stderr=*/true);
  EXPECT_NE(status, 0);
  EXPECT_NE(text.find("--host-embeddings"), std::string::npos) << text;
  EXPECT_NE(text.find("tie_word_embeddings"), std::string::npos) << text;
}

// The planned pool's tokens, and the plan's line, of `syv inspect ... flags`.
std::pair<long long, std::string> planned(const std::string& flags) {
  auto [status, out] = run_command(std::string(SYV_BIN) + " inspect " + flags, true);
  EXPECT_EQ(status, 0) << flags << "\n" << out;
  const size_t at = out.find("KV pool: ");
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return {0, out};
  return {std::stoll(out.substr(at + 9)), out.substr(at, out.find('\n', at) - at)};
}

TEST(HostEmbeddingsCli, InspectPlansTheTableIntoThePool) {
  // Qwen3.5-27B: vocab 248,320 x hidden 5,120 in bf16 (2.54 GB) at 65,536 bytes of bf16 K/V a
  // token: 38,797 tokens more, to the page of 64.
  const std::string base = "--config " + kRoot +
                           "/tools/bench/configs/qwen3.5-27b --weights-format gptq "
                           "--gpu-memory-gib 24 --gpu-memory-utilization 0.95 --max-num-seqs 1 "
                           "--max-batch-tokens 2048";
  const auto [device, device_line] = planned(base);
  const auto [host, host_line] = planned(base + " --host-embeddings");
  EXPECT_NEAR(static_cast<double>(host - device), 2.0 * 248320 * 5120 / 65536, 64.0)
      << device_line << "\n"
      << host_line;
  EXPECT_NE(host_line.find("the embedding table in host memory"), std::string::npos) << host_line;
  auto [status, text] = run_command(std::string(SYV_BIN) + " inspect --model " + kTied +
                                        " --gpu-memory-gib 2 --gpu-memory-utilization 0.9"
                                        " --host-embeddings",
                                    true);
  EXPECT_NE(status, 0) << text;
  EXPECT_NE(text.find("--host-embeddings"), std::string::npos) << text;
}

}  // namespace
