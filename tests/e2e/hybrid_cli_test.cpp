// `syv generate` on the hybrid fixtures (tests/fixtures/hybrid/*): the CLI path (load_model ->
// one state slot -> prefill + token-by-token decode) must reproduce transformers' 12 greedy tokens;
// `syv inspect` gives a mixture-of-experts fixture's active parameters and bytes per token.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

class HybridCli : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridCli, GenerateReproducesGreedyTokens) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/" + GetParam();
  std::ifstream in(dir + "/meta.json");
  ASSERT_TRUE(in.good()) << dir;
  const nlohmann::json meta = nlohmann::json::parse(in);
  const auto tokens = meta["tokens"].get<std::vector<int>>();
  const auto greedy = meta["greedy_tokens"].get<std::vector<int>>();
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  int status = -1;
  const std::string out =
      run(std::string(SYV_BIN) + " generate --model " + dir + " --tokens " + list +
              " --max-tokens " + std::to_string(greedy.size()) + " --json",
          &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("tokens")) << out;
  EXPECT_EQ(j["tokens"].get<std::vector<int>>(), greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridCli,
                         ::testing::Values("q35_r1_lllf", "q35_r2_flfl_tied", "q35_nested_r2",
                                           "qnext_top1_r2", "qnext_top2_r1", "q35moe_top2_r2"));

// --random-weights on a MoE config: the stacked experts are drawn by the backend (load_concat, no
// host copy) and the model runs, the same tokens for the same seed.
TEST(HybridCli, MixtureOfExpertsRunsOnRandomWeights) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/qnext_top2_r1";
  auto tokens = [&](int seed) {
    int status = -1;
    const std::string out =
        run(std::string(SYV_BIN) + " generate --model " + dir + " --random-weights --weight-seed " +
                std::to_string(seed) + " --tokens 1,2,3,4,5 --max-tokens 6 --json",
            &status);
    EXPECT_EQ(status, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("tokens")) << out;
    return j.is_object() && j.contains("tokens") ? j["tokens"].get<std::vector<int>>()
                                                 : std::vector<int>{};
  };
  const std::vector<int> a = tokens(3);
  ASSERT_EQ(a.size(), 6u);
  for (int t : a) EXPECT_TRUE(t >= 0 && t < 400) << t;
  EXPECT_EQ(tokens(3), a);
}

// qnext_top2_r1: 5 layers, layer 2 dense (mlp_only_layers), 8 experts of hidden 64 and moe
// intermediate 24, 2 per token, untied embeddings (vocab 400).
TEST(HybridCli, InspectGivesActiveParametersOfAMixtureOfExperts) {
  const std::string dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/qnext_top2_r1";
  int status = -1;
  const std::string out = run(std::string(SYV_BIN) + " inspect --json --model " + dir, &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("experts")) << out;
  const nlohmann::json& e = j["experts"];
  const int64_t routed = 4 * 8 * 3 * 64 * 24, unused = routed - routed * 2 / 8;
  EXPECT_EQ(e["num_experts"], 8);
  EXPECT_EQ(e["experts_per_token"], 2);
  EXPECT_EQ(e["routed_expert_parameters"], routed);
  EXPECT_EQ(e["active_parameters"], j["parameters"].get<int64_t>() - unused);
  EXPECT_EQ(e["active_bytes_per_token"],
            j["weight_bytes_device"].get<int64_t>() - 2 * unused - 2 * 399 * 64);

  const std::string text = run(std::string(SYV_BIN) + " inspect --model " + dir, &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("8 routed, 2 per token"), std::string::npos) << text;
  EXPECT_NE(text.find("active/token     " + std::to_string(e["active_parameters"].get<int64_t>()) +
                      " parameters"),
            std::string::npos)
      << text;

  // A dense hybrid has no expert figures.
  const std::string dense = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/q35_r1_lllf";
  const nlohmann::json d = nlohmann::json::parse(
      run(std::string(SYV_BIN) + " inspect --json --model " + dense, &status), nullptr, false);
  ASSERT_EQ(status, 0);
  EXPECT_FALSE(d.contains("experts"));
}

// `syv inspect --config` on a MoE config (no weights read: the architecture's tensor list) gives
// the parameters, device bytes and active figures `--model` counts from the files, for Qwen3-Next
// and Qwen3.5-MoE;
// a quantized MoE is refused there (the experts' bytes are the backend's choice at load).
TEST(HybridCli, InspectConfigCountsAMixtureOfExpertsAsItsFiles) {
  const std::string hybrid = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/";
  for (const char* name : {"qnext_top2_r1", "q35moe_top2_r2"}) {
    SCOPED_TRACE(name);
    int status = -1;
    auto inspect = [&](const std::string& how) {
      const std::string out =
          run(std::string(SYV_BIN) + " inspect --json " + how + " " + hybrid + name, &status);
      EXPECT_EQ(status, 0) << out;
      return nlohmann::json::parse(out, nullptr, false);
    };
    const nlohmann::json config = inspect("--config"), files = inspect("--model");
    ASSERT_TRUE(config.is_object() && files.is_object());
    EXPECT_EQ(config["parameters"], files["parameters"]);
    EXPECT_EQ(config["weight_bytes_device"], files["weight_bytes_device"]);
    EXPECT_EQ(config["experts"], files["experts"]);  // active parameters and bytes a token
    const std::string refused = run("sh -c '" + std::string(SYV_BIN) + " inspect --config " +
                                        hybrid + name + " --weights-format gptq 2>&1'",
                                    &status);
    EXPECT_NE(status, 0);
    EXPECT_NE(refused.find("quantize a folder"), std::string::npos) << refused;
  }
}

// A quantized MoE folder: with SYV_QUANT_MOE=1 (CUDA keeps its experts quantized) `syv inspect`
// counts the experts at their packed bytes, on the device and in the bytes a token reads (the
// unused experts' share of those packed bytes), as the CUDA backend would hold them.
TEST(HybridCli, InspectCountsQuantizedExpertsAsCudaKeepsThem) {
  const std::string source = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/qnext_top2_r1";
  const std::string dir = ::testing::TempDir() + "/syv_inspect_moeq_" + std::to_string(getpid());
  int status = -1;
  const std::string made =
      run(std::string(SYV_BIN) + " quantize --format gptq --group-size 8 --in " + source +
              " --out " + dir,
          &status);
  ASSERT_EQ(status, 0) << made;
  auto inspect = [&](const std::string& env) {
    const std::string out = run(env + " " + SYV_BIN + " inspect --json --model " + dir, &status);
    EXPECT_EQ(status, 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  const nlohmann::json dequantized = inspect("SYV_QUANT_MOE=0"), kept = inspect("SYV_QUANT_MOE=1");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(dequantized.contains("experts") && kept.contains("experts"));
  const int64_t routed = 4 * 8 * 3 * 64 * 24;
  const int64_t bf16_device = dequantized["weight_bytes_device"].get<int64_t>();
  const int64_t kept_device = kept["weight_bytes_device"].get<int64_t>();
  ASSERT_LT(kept_device, bf16_device);
  // The experts' packed bytes: their bf16 bytes less what keeping them quantized saves.
  const int64_t packed = 2 * routed - (bf16_device - kept_device);
  EXPECT_GT(packed, 0);
  EXPECT_EQ(dequantized["experts"]["active_bytes_per_token"].get<int64_t>(),
            bf16_device - (2 * routed - 2 * routed * 2 / 8) - 2 * 399 * 64);
  EXPECT_EQ(kept["experts"]["active_bytes_per_token"].get<int64_t>(),
            kept_device - (packed - packed * 2 / 8) - 2 * 399 * 64);
  EXPECT_EQ(kept["experts"]["active_parameters"], dequantized["experts"]["active_parameters"]);
}

// `syv inspect`'s memory plan reserves the recurrent-state slots `syv serve` would: --state-dtype
// bf16 shrinks each slot and --num-checkpoints sets how many checkpoints there are, so the pool
// grows by what they free.
TEST(HybridCli, InspectPlansTheHybridStateFlags) {
  const std::string base = std::string(SYV_BIN) + " inspect --model " +
                           std::string(SYV_SOURCE_DIR) +
                           "/models/tiny-hybrid --gpu-memory-gib 2 --gpu-memory-utilization 0.9" +
                           " --max-num-seqs 2 --max-batch-tokens 256";
  struct Plan {
    long long tokens = 0, slots = 0;
    double slot_mb = 0;
  };
  auto plan = [&](const std::string& flags) {
    int status = -1;
    const std::string out = run(base + " " + flags, &status);
    EXPECT_EQ(status, 0) << flags << "\n" << out;
    Plan p;
    const size_t pool = out.find("KV pool: "), state = out.find("recurrent state: ");
    EXPECT_NE(pool, std::string::npos) << out;
    EXPECT_NE(state, std::string::npos) << out;
    if (pool == std::string::npos || state == std::string::npos) return p;
    p.tokens = std::stoll(out.substr(pool + 9));
    // "recurrent state: S slots x B MB = G GB"
    std::sscanf(out.c_str() + state, "recurrent state: %lld slots x %lf MB", &p.slots, &p.slot_mb);
    return p;
  };
  const Plan fp32 = plan(""), bf16 = plan("--state-dtype bf16"),
             one = plan("--state-dtype bf16 --num-checkpoints 1");
  ASSERT_GT(fp32.slots, 2);  // 2 live slots and the derived checkpoints
  EXPECT_EQ(bf16.slots, fp32.slots);
  EXPECT_LT(bf16.slot_mb, 0.75 * fp32.slot_mb) << "the delta-rule state in bf16";
  EXPECT_GT(bf16.tokens, fp32.tokens);
  EXPECT_EQ(one.slots, 3);  // 2 live slots + 1 checkpoint
  EXPECT_EQ(one.slot_mb, bf16.slot_mb);
  EXPECT_GT(one.tokens, bf16.tokens);
  int status = -1;
  run(base + " --state-dtype f16", &status);
  EXPECT_NE(status, 0) << "--state-dtype takes fp32 or bf16";
}

}  // namespace
