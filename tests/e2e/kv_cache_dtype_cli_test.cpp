// `--kv-cache-dtype` (cli/kv_cache_dtype.h) from the command line: `syv inspect` counts the real
// bytes (the planned pool grows ~2x with fp8 and 3.56x with int4 over bf16), `syv eval-ppl` runs a
// quantized cache and compares it with the float one (--kl-reference), and bad values, int4 with a
// head_dim that is not a multiple of 32, and a backend without kernels are refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "e2e/cli_run.h"

namespace {

using json = nlohmann::json;
using syv::testing::run_command;

const std::string kRoot = SYV_SOURCE_DIR;
const std::string kDense = kRoot + "/models/tiny-dense";

// The planned pool's tokens of `syv inspect --kv-cache-dtype kv` on an 8 GiB device.
long long planned_tokens(const std::string& kv) {
  auto [status, out] = run_command(std::string(SYV_BIN) + " inspect --model " + kDense +
                                   " --gpu-memory-gib 8 --gpu-memory-utilization 0.9" +
                                   " --max-batch-tokens 256 --kv-cache-dtype " + kv);
  EXPECT_EQ(status, 0) << out;
  const std::string key = "KV pool: ";
  const size_t at = out.find(key);
  EXPECT_NE(at, std::string::npos) << out;
  const std::string dtype = kv == "fp8" ? "f8e4m3" : kv == "int4" ? "u4x2" : "bf16";
  EXPECT_NE(out.find("(KV " + dtype + ";"), std::string::npos) << out;
  return at == std::string::npos ? 0 : std::stoll(out.substr(at + key.size()));
}

TEST(KvCacheDtypeCli, InspectPlansTheRealBytes) {
  const double bf16 = static_cast<double>(planned_tokens("auto"));
  ASSERT_GT(bf16, 0);
  EXPECT_EQ(planned_tokens("bf16"), static_cast<long long>(bf16));
  // head_dim 64: fp8 2 x 64 + 8 bytes per kv head and token vs 256 (1.88x), int4 64 + 8 (f16
  // scales: 3.56x).
  EXPECT_NEAR(planned_tokens("fp8") / bf16, 256.0 / 136.0, 0.01);
  EXPECT_NEAR(planned_tokens("int4") / bf16, 256.0 / 72.0, 0.01);
  auto [status, out] = run_command(std::string(SYV_BIN) + " inspect --json --model " + kDense +
                                   " --kv-cache-dtype int4");
  ASSERT_EQ(status, 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j.at("kv_cache_dtype"), "int4");
  EXPECT_EQ(j.at("kv_bytes_per_token").get<long long>() * 256,
            j.at("kv_bytes_per_token_bf16").get<long long>() * 72);
}

TEST(KvCacheDtypeCli, EvalPplComparesAQuantizedCacheWithTheFloatOne) {
  auto [status, out] = run_command(
      std::string(SYV_BIN) + " eval-ppl --model " + kRoot + "/models/tiny-draft" + " --text-file " +
      kRoot + "/tests/fixtures/tiny/heldout_sample.txt --context 256 --kv-cache-dtype fp8 " +
      "--kl-reference auto --json");
  ASSERT_EQ(status, 0) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j.at("kv_cache_dtype"), "fp8");
  EXPECT_EQ(j.at("kl_reference"), "auto");
  const double ppl = j.at("ppl").get<double>(), ref = j.at("reference_ppl").get<double>();
  // The reference is the float cache: docs/models.md's figure for this file and context.
  EXPECT_NEAR(ref, 23.55197, 1e-3);
  EXPECT_NEAR(j.at("delta_ppl_percent").get<double>(), 100.0 * (ppl / ref - 1.0), 1e-9);
  EXPECT_NE(ppl, ref) << "fp8 KV changed nothing: is the flag used?";
  const double kl = j.at("mean_kl").get<double>();
  EXPECT_GT(kl, 0.0);
  EXPECT_LT(kl, 0.01);
}

TEST(KvCacheDtypeCli, RefusalsNameTheFlag) {
  auto [s1, t1] = run_command(
      std::string(SYV_BIN) + " inspect --model " + kDense + " --kv-cache-dtype fp16", true);
  EXPECT_NE(s1, 0);
  EXPECT_NE(t1.find("--kv-cache-dtype"), std::string::npos) << t1;
  EXPECT_NE(t1.find("fp8"), std::string::npos) << t1;  // the choices
  // head_dim 16 cannot hold int4's groups of 32.
  auto [s2, t2] = run_command(std::string(SYV_BIN) + " generate --model " + kRoot +
                                  "/tests/fixtures/qwen3/tied_gqa2 --tokens 1,2,3 --max-tokens 1 " +
                                  "--kv-cache-dtype int4",
                              true);
  EXPECT_NE(s2, 0);
  EXPECT_NE(t2.find("--kv-cache-dtype int4: needs head_dim to be a multiple of 32"),
            std::string::npos)
      << t2;
  EXPECT_NE(t2.find("head_dim is 16"), std::string::npos) << t2;
  // bf16 KV on the CPU backend (f32 activations): no kernels.
  auto [s3, t3] = run_command(std::string(SYV_BIN) + " generate --model " + kDense +
                                  " --tokens 1,2,3 --max-tokens 1 --kv-cache-dtype bf16",
                              true);
  EXPECT_NE(s3, 0);
  EXPECT_NE(t3.find("--kv-cache-dtype bf16: backend cpu has no kernels for KV in bf16"),
            std::string::npos)
      << t3;
}

}  // namespace
