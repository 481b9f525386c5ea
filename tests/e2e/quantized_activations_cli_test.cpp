// --quantized-activations (Backend::set_quantized_activations) from the command line on the CPU
// backend: auto and off run on a quantized folder (the CPU multiplies exact dequantized weights
// either way: the same tokens), fp8 is refused naming the flag and the backend (no fp8 GEMMs
// there), an unknown value is refused by the parser, and --int8-activations is refused saying
// what runs instead. The CUDA paths are tests/gpu/quant_linear_gpu_test.cpp's and
// engine_quantized_gpu_test.cpp's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "e2e/cli_run.h"

namespace {

using syv::testing::run_command;

const std::string kModel = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/tied_gqa2";
const std::string kGenerate =
    std::string(SYV_BIN) + " generate --model " + kModel + " --tokens 11,40,23,98,5 --max-tokens 6";

// On a quantized folder (the CPU has no fp8 GEMMs, so auto multiplies exactly as off does).
TEST(QuantizedActivationsCli, AutoAndOffGiveTheSameTokensOnTheCpu) {
  namespace fs = std::filesystem;
  const fs::path fp8 =
      fs::path(::testing::TempDir()) / ("syv_qact_cli_" + std::to_string(::getpid()));
  auto [qs, qt] = run_command(std::string(SYV_BIN) + " quantize --format fp8 --in " + kModel +
                              " --out " + fp8.string());
  ASSERT_EQ(qs, 0) << qt;
  const std::string generate = std::string(SYV_BIN) + " generate --model " + fp8.string() +
                               " --tokens 11,40,23,98,5 --max-tokens 6";
  auto [s1, autos] = run_command(generate + " --quantized-activations auto");
  auto [s2, off] = run_command(generate + " --quantized-activations off");
  fs::remove_all(fp8);
  ASSERT_EQ(s1, 0) << autos;
  ASSERT_EQ(s2, 0) << off;
  EXPECT_FALSE(autos.empty());
  EXPECT_EQ(autos, off);
}

TEST(QuantizedActivationsCli, Fp8IsRefusedWhereTheBackendHasNoFp8Gemms) {
  auto [status, text] = run_command(kGenerate + " --quantized-activations fp8", true);
  EXPECT_NE(status, 0);
  EXPECT_NE(text.find("--quantized-activations fp8"), std::string::npos) << text;
  EXPECT_NE(text.find("backend cpu"), std::string::npos) << text;
  // The folder is fine: no hint about what --model takes.
  EXPECT_EQ(text.find("--model takes"), std::string::npos) << text;
}

TEST(QuantizedActivationsCli, UnknownValuesAndInt8AreRefused) {
  auto [s1, unknown] = run_command(kGenerate + " --quantized-activations int8", true);
  EXPECT_NE(s1, 0);
  EXPECT_NE(unknown.find("--quantized-activations"), std::string::npos) << unknown;
  auto [s2, int8] = run_command(kGenerate + " --int8-activations", true);
  EXPECT_NE(s2, 0);
  EXPECT_NE(int8.find("--int8-activations"), std::string::npos) << int8;
  EXPECT_NE(int8.find("--quantized-activations fp8"), std::string::npos) << int8;
}

}  // namespace
