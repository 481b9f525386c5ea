// Quantized folders through the CLI: `syv quantize` writes them; `syv inspect` counts their
// logical parameters (no false mismatch from scales / zeros), names the format and what stays in
// float, reports the packed bytes as stored, and plans memory with the bytes the device keeps
// (also from a config.json alone, `--config --weights-format`, as the written folder would);
// `syv generate --prompts-file` on them gives batched = one by one = the float folder of the
// dequantized weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "e2e/cli_run.h"
#include "unit/quantized_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using syv::testing::json_lines;
using syv::testing::run_command;

const fs::path kFixture = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";

class QuantizedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) /
            ("syv_qcli_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  void TearDown() override { fs::remove_all(base_); }

  // `syv quantize --format <format> <extra>` of the fixture into base_/<format>.
  fs::path quantize(const std::string& format, const std::string& extra = "") {
    const fs::path out = base_ / format;
    auto [status, text] =
        run_command(std::string(SYV_BIN) + " quantize --format " + format + " --in " +
                        kFixture.string() + " --out " + out.string() + " " + extra,
                    /*with_stderr=*/true);
    EXPECT_EQ(status, 0) << text;
    return out;
  }
  static json inspect_json(const fs::path& dir, const std::string& extra = "") {
    auto [status, text] =
        run_command(std::string(SYV_BIN) + " inspect --json --model " + dir.string() + " " + extra);
    EXPECT_EQ(status, 0) << text;
    return status == 0 ? json::parse(text) : json();
  }
  // "KV pool: N tokens" of a plan line -> N.
  static int64_t pool_tokens(const std::string& plan) {
    const size_t at = plan.find("KV pool: ");
    EXPECT_NE(at, std::string::npos) << plan;
    return at == std::string::npos ? -1 : std::stoll(plan.substr(at + 9));
  }

  fs::path base_;
};

// The fixture: hidden 64, intermediate 128, 2 layers, q 64x64, k and v 32x64, o 64x64, gate and
// up 128x64, down 64x128: N*K = 36864 quantized weights per layer, 14 quantized modules in all.
constexpr int64_t kQuantizedPerLayer = 4096 + 2 * 2048 + 4096 + 3 * 8192;

TEST_F(QuantizedCli, InspectCountsLogicalParametersAndTheBytesAsStored) {
  const json plain = inspect_json(kFixture);
  ASSERT_EQ(plain["status"], "servable");
  EXPECT_EQ(plain["quantization"]["method"], "none");
  const int64_t params = plain["parameters"].get<int64_t>();
  const int64_t float_kept = plain["weight_bytes"].get<int64_t>() - 2 * 2 * kQuantizedPerLayer;
  EXPECT_EQ(plain["weight_bytes_device"].get<int64_t>(), 2 * params);  // bf16 on CUDA

  struct Want {
    std::string format, extra, method;
    int64_t stored, device;  // bytes of the quantized modules: in the files, on the device
  };
  const int64_t nk = 2 * kQuantizedPerLayer;
  const std::vector<Want> wants = {
      // e4m3 bytes + one f32 scale per module (every N, K <= 128): the same in the files and
      // on the device.
      {"fp8", "", "fp8 (e4m3, 128x128 blocks)", nk + 14 * 4, nk + 14 * 4},
      // files: i32 qweight (K*N/2 bytes) + i32 qzeros (K/32 * N/8 words) + f16 scales (K/32 * N);
      // device: u4x2 (N*K/2) + f32 scales and u8 zeros per (row, group of 32).
      {"awq", "--group-size 32", "awq (int4 gemm, groups of 32, zero points)",
       nk / 2 + nk / 64 + nk / 16, nk / 2 + 5 * nk / 32},
      // gptq v1, symmetric: the files also hold g_idx (i32 [K] per module; sum of K: 2 * 512),
      // which is the plain k / 32 and not kept; no zeros on the device.
      {"gptq", "--group-size 32", "gptq (int4, groups of 32, symmetric)",
       nk / 2 + nk / 64 + nk / 16 + 4 * 2 * 512, nk / 2 + 4 * nk / 32},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.format);
    const fs::path dir = quantize(w.format, w.extra);
    const json j = inspect_json(dir);
    EXPECT_EQ(j["status"], "servable") << "no parameter mismatch from scales / zeros";
    EXPECT_EQ(j["parameters"].get<int64_t>(), params);
    const json& q = j["quantization"];
    EXPECT_EQ(q["method"], w.method);
    EXPECT_EQ(q["quantized_tensors"], 14);
    EXPECT_EQ(q["quantized_parameters"].get<int64_t>(), nk);
    EXPECT_EQ(q["quantized"],
              json({"down_proj", "gate_proj", "up_proj", "k_proj", "o_proj", "q_proj", "v_proj"}));
    EXPECT_EQ(q["kept"], json({"embed_tokens", "norms"}));
    EXPECT_EQ(q["kept_dtypes"], json({"bf16"}));
    EXPECT_EQ(q["quantized_bytes"].get<int64_t>(), w.stored);
    EXPECT_EQ(q["float_bytes"].get<int64_t>(), float_kept);
    EXPECT_EQ(j["weight_bytes"].get<int64_t>(), w.stored + float_kept);
    EXPECT_EQ(j["weight_bytes_device"].get<int64_t>(), w.device + float_kept);
    EXPECT_EQ(j["parameters_by_dtype"][w.format == "fp8" ? "f8e4m3" : "int4"].get<int64_t>(), nk);

    // The text says the same, and no mismatch.
    auto [status, text] = run_command(std::string(SYV_BIN) + " inspect --model " + dir.string());
    ASSERT_EQ(status, 0) << text;
    EXPECT_NE(text.find("quantization     " + w.method +
                        ": 14 tensors (down_proj, gate_proj, up_proj, k_proj, o_proj, q_proj, "
                        "v_proj); kept in bf16: embed_tokens, norms\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(" in 1 file(s): quantized " + std::to_string(w.stored) +
                        " (packed weights + scales), float " + std::to_string(float_kept)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("status           servable\n"), std::string::npos) << text;

    // The memory plan takes the device bytes: the KV pool grows by what the weights save (to the
    // page of 64 tokens, 256 bytes per token). CUDA's dequantization buffer of the largest
    // quantized weight (gate|up [256, 64] in bf16) is scratch, which serve's plan counts in its
    // runtime reserve (runtime_reserve_bytes: at least kRuntimeReserveBytes), so a scratch this
    // small takes nothing from the pool.
    const std::string plan_args = "--gpu-memory-utilization 0.9 --gpu-memory-gib 2";
    EXPECT_EQ(j["cuda_scratch_bytes"].get<int64_t>() - plain["cuda_scratch_bytes"].get<int64_t>(),
              256 * 64 * 2);
    const int64_t saved = 2 * params - (w.device + float_kept);
    const int64_t grown = pool_tokens(inspect_json(dir, plan_args)["memory_plan"]) -
                          pool_tokens(inspect_json(kFixture, plan_args)["memory_plan"]);
    EXPECT_GE(grown, saved / 256 - 64) << "saved " << saved << " bytes";
    EXPECT_LE(grown, saved / 256 + 64) << "saved " << saved << " bytes";
  }
}

// `syv inspect --config` (a config.json alone) counts what `syv quantize` would write: the same
// parameters, device bytes and memory plan as `syv inspect --model` on the folder it writes, for
// bf16 (the fixture itself) and each format; what it cannot count is refused by name.
TEST_F(QuantizedCli, InspectConfigOnlyPlansWhatSyvQuantizeWrites) {
  const std::string plan_args =
      "--gpu-memory-utilization 0.9 --gpu-memory-gib 2 --kv-cache-dtype fp8 --max-num-seqs 8";
  const std::vector<std::pair<std::string, std::string>> formats = {
      {"bf16", ""}, {"fp8", ""}, {"awq", "--group-size 32"}, {"gptq", "--group-size 32"}};
  for (const auto& [format, extra] : formats) {
    SCOPED_TRACE(format);
    const fs::path dir = format == "bf16" ? kFixture : quantize(format, extra);
    const json real = inspect_json(dir, plan_args);
    auto [status, text] = run_command(std::string(SYV_BIN) + " inspect --json --config " +
                                      (kFixture / "config.json").string() + " --weights-format " +
                                      format + " " + extra + " " + plan_args);
    ASSERT_EQ(status, 0) << text;
    const json j = json::parse(text);
    ASSERT_TRUE(j.contains("memory_plan") && j.contains("kv_bytes_per_token")) << text;
    EXPECT_EQ(j["parameters"], real["parameters"]);
    EXPECT_EQ(j["weight_bytes_device"], real["weight_bytes_device"]);
    EXPECT_EQ(j["kv_bytes_per_token"], real["kv_bytes_per_token"]);
    EXPECT_EQ(j["memory_plan"], real["memory_plan"]);
  }
  // A hybrid (no tensor list in the registry: `--model` counts the files' tensors) the same.
  const fs::path hybrid = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/hybrid/q35_r1_lllf";
  const fs::path q35 = base_ / "q35_gptq";
  {
    auto [status, text] =
        run_command(std::string(SYV_BIN) + " quantize --format gptq --group-size 32 --in " +
                        hybrid.string() + " --out " + q35.string(),
                    /*with_stderr=*/true);
    ASSERT_EQ(status, 0) << text;
  }
  const json real = inspect_json(q35, plan_args);
  auto [status, text] =
      run_command(std::string(SYV_BIN) + " inspect --json --config " + hybrid.string() +
                  " --weights-format gptq --group-size 32 " + plan_args);
  ASSERT_EQ(status, 0) << text;
  const json j = json::parse(text);
  EXPECT_EQ(j["weight_bytes_device"], real["weight_bytes_device"]);
  EXPECT_EQ(j["cuda_scratch_bytes"], real["cuda_scratch_bytes"]);
  EXPECT_EQ(j["memory_plan"], real["memory_plan"]);

  const std::string config = " inspect --config " + kFixture.string();
  auto refused = [](const std::string& args, const std::string& why) {
    auto [status, text] = run_command(std::string(SYV_BIN) + args, /*with_stderr=*/true);
    EXPECT_NE(status, 0) << args;
    EXPECT_NE(text.find(why), std::string::npos) << args << "\n" << text;
  };
  // K = 64 is no multiple of 48: the first quantized module is named.
  refused(config + " --weights-format gptq --group-size 48",
          "--weights-format gptq: config.json: tensor \"model.layers.0.self_attn.q_proj.weight\"");
  refused(config + " --group-size 32", "--group-size");
  refused(" inspect --model " + kFixture.string() + " --weights-format awq", "--weights-format");
  refused(" inspect", "--model or --config needed");
}

// `syv quantize --format gptq --lm-head` on a model with untied embeddings: lm_head is written
// quantized ("lm_head": true in quantization_config, GPTQModel's field), loads quantized (inspect
// counts it), generates as the float folder of the dequantized weights does, and `syv inspect
// --config --weights-format gptq --lm-head` counts the same device bytes. Other formats and tied
// models are refused naming the flag.
TEST_F(QuantizedCli, GptqLmHeadQuantizesTheOutputProjection) {
  const fs::path untied = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/untied_gqa4_hd24";
  const fs::path out = base_ / "gptq_lm_head";
  auto quantize_untied = [&](const std::string& flags, const fs::path& dir) {
    return run_command(std::string(SYV_BIN) + " quantize --in " + untied.string() + " --out " +
                           dir.string() + " " + flags,
                       /*with_stderr=*/true);
  };
  {
    auto [status, text] = quantize_untied("--format gptq --group-size 32 --lm-head", out);
    ASSERT_EQ(status, 0) << text;
  }
  std::ifstream cfg(out / "config.json");
  const json config = json::parse(cfg);
  EXPECT_EQ(config["quantization_config"]["lm_head"], true);
  const json j = inspect_json(out);
  ASSERT_TRUE(j.contains("quantization")) << j.dump();
  const json& kinds = j["quantization"]["quantized"];
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "lm_head"), kinds.end()) << kinds.dump();
  // Without the flag lm_head stays in bf16: the device bytes shrink by what packing it saves.
  const fs::path plain = base_ / "gptq";
  {
    auto [status, text] = quantize_untied("--format gptq --group-size 32", plain);
    ASSERT_EQ(status, 0) << text;
  }
  const json p = inspect_json(plain);
  EXPECT_LT(j["weight_bytes_device"].get<int64_t>(), p["weight_bytes_device"].get<int64_t>());
  {
    auto [status, text] = run_command(std::string(SYV_BIN) + " inspect --json --config " +
                                      (untied / "config.json").string() +
                                      " --weights-format gptq --group-size 32 --lm-head");
    ASSERT_EQ(status, 0) << text;
    EXPECT_EQ(json::parse(text)["weight_bytes_device"], j["weight_bytes_device"]);
  }
  // The tokens of the float folder of the dequantized weights (lm_head included).
  ASSERT_TRUE(syv::testing::write_dequantized_folder(untied, out, base_ / "dequantized"));
  auto generate = [&](const fs::path& model) {
    auto [status, text] = run_command(std::string(SYV_BIN) + " generate --model " + model.string() +
                                      " --tokens 11,400,23,987,5 --max-tokens 12");
    EXPECT_EQ(status, 0) << text;
    return text;
  };
  const std::string tokens = generate(out);
  EXPECT_FALSE(tokens.empty());
  EXPECT_EQ(tokens, generate(base_ / "dequantized"));

  auto refused = [&](const std::string& cmd, const std::string& why) {
    auto [status, text] = run_command(std::string(SYV_BIN) + cmd, /*with_stderr=*/true);
    EXPECT_NE(status, 0) << cmd;
    EXPECT_NE(text.find(why), std::string::npos) << cmd << "\n" << text;
  };
  refused(" quantize --format fp8 --lm-head --in " + untied.string() + " --out " +
              (base_ / "x").string(),
          "--lm-head: gptq only");
  refused(" quantize --format gptq --group-size 32 --lm-head --in " + kFixture.string() +
              " --out " + (base_ / "y").string(),
          "no lm_head.weight");
}

TEST_F(QuantizedCli, GeneratePromptsFileBatchedEqualsOneByOneAndTheDequantizedModel) {
  const fs::path prompts = base_ / "prompts.jsonl";
  {
    std::mt19937 rng(3);
    std::ofstream out(prompts);
    std::vector<int> shared(40);
    for (int& t : shared) t = static_cast<int>(rng() % 512);
    for (int i = 0; i < 10; ++i) {
      std::vector<int> tokens = i % 2 ? shared : std::vector<int>{};
      for (int k = 0, n = 1 + static_cast<int>(rng() % 40); k < n; ++k)
        tokens.push_back(static_cast<int>(rng() % 512));
      out << json({{"tokens", tokens}, {"max_tokens", 2 + static_cast<int>(rng() % 12)}}).dump()
          << "\n";
    }
  }
  for (const std::string format : {"fp8", "gptq"}) {
    SCOPED_TRACE(format);
    const fs::path dir = quantize(format, format == "gptq" ? "--group-size 32" : "");
    ASSERT_TRUE(syv::testing::write_dequantized_folder(kFixture, dir, base_ / (format + "_d")));
    auto generate = [&](const fs::path& model, const std::string& flags) {
      auto [status, text] =
          run_command(std::string(SYV_BIN) + " generate --model " + model.string() +
                      " --prompts-file " + prompts.string() + " " + flags);
      EXPECT_EQ(status, 0) << text;
      return json_lines(text);
    };
    const std::string batched_flags =
        "--max-num-seqs 4 --max-batched-tokens 40 --max-prefill-chunk 16 --page-size 16 "
        "--num-pages 40";
    const std::vector<json> batched = generate(dir, batched_flags);
    const std::vector<json> alone =
        generate(dir, "--one-by-one --no-prefix-caching --kv-cache-mb 16");
    const std::vector<json> dense = generate(base_ / (format + "_d"), batched_flags);
    ASSERT_EQ(batched.size(), 10u);
    ASSERT_EQ(alone.size(), 10u);
    ASSERT_EQ(dense.size(), 10u);
    int64_t cached = 0;
    for (size_t i = 0; i < batched.size(); ++i) {
      EXPECT_EQ(batched[i]["tokens"], alone[i]["tokens"]) << "line " << i;
      EXPECT_EQ(batched[i]["tokens"], dense[i]["tokens"]) << "line " << i;
      cached += batched[i]["cached_tokens"].get<int64_t>();
    }
    EXPECT_GT(cached, 0) << "the shared 40-token prefix should hit the prefix cache";
  }
}

}  // namespace
