// `syv quantize --calibration-file` (GPTQ over a calibration text, cli/quantize_calibration.h):
// the flags that only mean something with a calibration file are refused without one, fp8 refuses
// it, a bad file or damping is named; and on a trained model (models/tiny-draft) a calibrated int4
// folder loads, says what it did, and its next-token distributions on held-out text sit closer to
// the float model's than the round-to-nearest folder's (mean KL, `syv eval-ppl
// --kl-reference-model`), in both int4 layouts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e/cli_run.h"
#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using syv::testing::run_command;

const fs::path kSource = fs::path(SYV_SOURCE_DIR);
const fs::path kModel = kSource / "models/tiny-draft";
const fs::path kCalibration = kSource / "tests/fixtures/tiny/calibration_sample.txt";
const fs::path kHeldOut = kSource / "tests/fixtures/tiny/heldout_sample.txt";

class QuantizeCalibration : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) /
            ("syv_qcal_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  void TearDown() override { fs::remove_all(base_); }

  std::pair<int, std::string> quantize(const std::string& args, const fs::path& out) {
    return run_command(std::string(SYV_BIN) + " quantize --in " + kModel.string() + " --out " +
                           out.string() + " " + args,
                       /*with_stderr=*/true);
  }
  // Mean KL of `dir` against the float model on the held-out text (context 256).
  double mean_kl(const fs::path& dir) {
    auto [status, text] = run_command(
        std::string(SYV_BIN) + " eval-ppl --model " + dir.string() + " --text-file " +
        kHeldOut.string() + " --context 256 --json --kl-reference-model " + kModel.string());
    EXPECT_EQ(status, 0) << text;
    return status == 0 ? json::parse(text)["mean_kl"].get<double>() : -1.0;
  }

  fs::path base_;
};

TEST_F(QuantizeCalibration, RefusesWhatItCannotHonour) {
  struct Case {
    std::string args, message;
  };
  const std::string file = " --calibration-file " + kCalibration.string();
  for (const Case& c : std::vector<Case>{
           {"--format gptq --calibration-tokens 100",
            "--calibration-tokens needs --calibration-file"},
           {"--format awq --calibration-context 64",
            "--calibration-context needs --calibration-file"},
           {"--format gptq --gptq-damp 0.1", "--gptq-damp needs --calibration-file"},
           {"--format gptq --act-order", "--act-order needs --calibration-file"},
           {"--format fp8" + file, "--calibration-file applies to awq and gptq"},
           {"--format gptq --calibration-file " + (base_ / "missing.txt").string(),
            "missing.txt\": cannot open"},
           {"--format gptq --gptq-damp 0" + file, "--gptq-damp: expected > 0"},
           {"--format gptq --calibration-tokens 1" + file, "--calibration-tokens: expected >= 2"},
       }) {
    const fs::path out = base_ / "out";
    auto [status, text] = quantize(c.args, out);
    EXPECT_NE(status, 0) << c.args;
    EXPECT_NE(text.find(c.message), std::string::npos) << c.args << "\n" << text;
    EXPECT_FALSE(fs::exists(out / "model.safetensors")) << c.args;
  }
}

TEST_F(QuantizeCalibration, CalibratedInt4SitsCloserToTheFloatModel) {
  for (const std::string format : {"gptq", "awq"}) {
    const fs::path rtn = base_ / (format + "-rtn"), cal = base_ / (format + "-cal");
    auto [rtn_status, rtn_text] = quantize("--format " + format, rtn);
    ASSERT_EQ(rtn_status, 0) << rtn_text;
    auto [status, text] = quantize("--format " + format + " --calibration-file " +
                                       kCalibration.string() + " --calibration-tokens 8192",
                                   cal);
    ASSERT_EQ(status, 0) << text;
    // tiny-draft: 2 layers x 7 projections, every one read by a dense linear.
    EXPECT_NE(text.find("16 window(s) of up to 512 tokens (8192 in all)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("quantize: 14 tensor(s) by GPTQ over the calibration inputs\n"),
              std::string::npos)
        << text;
    std::ifstream config(cal / "config.json");
    const json q = json::parse(config)["quantization_config"];
    EXPECT_EQ(q["quant_method"], format);
    if (format == "gptq") EXPECT_DOUBLE_EQ(q["damp_percent"].get<double>(), 0.01);
    const double kl_rtn = mean_kl(rtn), kl_cal = mean_kl(cal);
    ASSERT_GT(kl_rtn, 0.0);
    ASSERT_GT(kl_cal, 0.0);
    // Measured with these 8,192 tokens: awq 0.0620 -> 0.0454; the whole file (29,905): 0.0394.
    EXPECT_LT(kl_cal, 0.8 * kl_rtn) << format << ": calibrated " << kl_cal << ", rtn " << kl_rtn;
  }
}

// A hybrid with an MTP head: the head runs in the calibration too, so every quantized tensor of
// tiny-hybrid (its 7 head projections included) takes GPTQ.
TEST_F(QuantizeCalibration, TheMtpHeadIsCalibratedToo) {
  const fs::path out = base_ / "hybrid";
  auto [status, text] =
      run_command(std::string(SYV_BIN) + " quantize --format gptq --group-size 64 --in " +
                      (kSource / "models/tiny-hybrid").string() + " --out " + out.string() +
                      " --calibration-tokens 1024 --calibration-file " + kCalibration.string(),
                  /*with_stderr=*/true);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("quantize: 32 tensor(s) by GPTQ over the calibration inputs\n"),
            std::string::npos)
      << text;
}

// --act-order: GPTQ's desc_act with static groups, so the folder keeps plain groups (the
// loader finds g_idx = k / group_size and drops it) while its config says how it was made.
TEST_F(QuantizeCalibration, ActOrderWritesPlainGroupsAndSaysSo) {
  const fs::path rtn = base_ / "rtn", cal = base_ / "ao";
  auto [rtn_status, rtn_text] = quantize("--format gptq", rtn);
  ASSERT_EQ(rtn_status, 0) << rtn_text;
  auto [status, text] = quantize(
      "--format gptq --act-order --calibration-tokens 8192 "
      "--calibration-file " +
          kCalibration.string(),
      cal);
  ASSERT_EQ(status, 0) << text;
  std::ifstream config(cal / "config.json");
  const json q = json::parse(config)["quantization_config"];
  EXPECT_EQ(q["desc_act"], true);
  EXPECT_EQ(q["static_groups"], true);
  // Every g_idx is the plain k / group_size (the loader then drops it: no gather at run time).
  auto store = syv::WeightStore::open_dir(cal.string());
  ASSERT_TRUE(store.ok()) << store.message();
  int checked = 0;
  for (const std::string& name : store->names()) {
    if (name.size() < 6 || name.compare(name.size() - 6, 6, ".g_idx") != 0) continue;
    const syv::TensorInfo& t = *store->find(name);
    std::vector<int32_t> g(static_cast<size_t>(t.numel()));
    std::memcpy(g.data(), t.data, g.size() * sizeof(int32_t));
    for (size_t k = 0; k < g.size(); ++k) ASSERT_EQ(g[k], static_cast<int32_t>(k / 128)) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
  const double kl_rtn = mean_kl(rtn), kl_cal = mean_kl(cal);
  ASSERT_GT(kl_cal, 0.0);
  EXPECT_LT(kl_cal, 0.8 * kl_rtn) << "act-order " << kl_cal << ", rtn " << kl_rtn;
}

}  // namespace
