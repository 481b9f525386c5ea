// GPTQ calibration of MoE experts (cli/quantize_calibration.h): the CPU backend reports each
// expert's routed rows against its slice of the stacked expert weights (cpu::moe_experts), the
// loader names each slice's checkpoint tensors, so every expert of a MoE fixture gets its own
// factor: gate_proj and up_proj of one expert share one (one input), down_proj has its own of
// width moe_intermediate_size, and the tokens they were gathered over add up, per MoE layer, to
// every calibration token times top_k (each routed row counted once, in exactly one expert).
// Quantized with those factors, the experts' int4 outputs on held-out rows (routed as the float
// model routes them) sit closer to the float experts' than rounded to nearest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/quantize_calibration.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "model/model.h"
#include "model/quantize_folder.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

// n token ids in [0, vocab) from a fixed mt19937 stream (its output is specified by the standard;
// the modulo keeps the ids the same on every library, unlike std::uniform_int_distribution).
std::vector<int32_t> random_tokens(uint32_t seed, int64_t n, int64_t vocab) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
  return ids;
}

bool is_expert(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

// The experts' inputs on held-out tokens (6 sequences of 32), as the float model routes them: for
// each expert weight (its slice of the stacked experts), the checkpoint tensors it holds and the
// rows it multiplied.
struct ExpertInputs {
  std::vector<std::string> names;
  int64_t k = 0;
  std::vector<float> rows;  // [n, k]
};
std::vector<ExpertInputs> held_out_expert_inputs(const fs::path& source, int64_t vocab) {
  CpuBackend backend;
  WeightSources sources;
  LoadOptions load;
  load.weight_sources = &sources;
  auto model = load_model(source.string(), backend, load);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return {};
  std::map<const void*, ExpertInputs> seen;
  backend.set_linear_observer([&](const Tensor& x, const Tensor& w) {
    auto it = sources.find(w.data);
    if (it == sources.end() || !is_expert(it->second[0])) return;
    ExpertInputs& e = seen[w.data];
    e.names = it->second;
    e.k = x.dim(-1);
    e.rows.insert(e.rows.end(), x.as<const float>(), x.as<const float>() + x.numel());
  });
  for (uint32_t s = 0; s < 6; ++s)
    testing::sequence_logits(**model, backend, random_tokens(1000 + s, 32, vocab));
  std::vector<ExpertInputs> out;
  for (auto& [data, e] : seen) out.push_back(std::move(e));
  return out;
}

// Sum over the held-out expert rows x of |W_q x - W x|^2 (W_q: `quantized`'s dequantized values).
double expert_output_error(const std::vector<ExpertInputs>& inputs, const fs::path& source,
                           const fs::path& quantized) {
  auto config = load_model_config(quantized.string());
  auto qs = WeightStore::open_dir(quantized.string());
  auto fs = WeightStore::open_dir(source.string());
  EXPECT_TRUE(config.ok() && qs.ok() && fs.ok());
  double error = 0.0;
  for (const ExpertInputs& e : inputs) {
    std::vector<float> w, wq;  // the expert's rows, stacked as the names list them
    for (const std::string& name : e.names) {
      const TensorInfo& t = *fs->find(name);
      const size_t at = w.size();
      w.resize(at + static_cast<size_t>(t.numel()));
      convert_to_f32(t.dtype, t.data, w.data() + at, static_cast<size_t>(t.numel()));
      auto q = read_quantized(name, t.shape, *qs, config->quant);
      EXPECT_TRUE(q.ok()) << q.message();
      if (!q.ok()) return -1.0;
      const std::vector<float> d = q->dequantize();
      wq.insert(wq.end(), d.begin(), d.end());
    }
    const int64_t n = static_cast<int64_t>(e.rows.size()) / e.k;
    const int64_t N = static_cast<int64_t>(w.size()) / e.k;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t o = 0; o < N; ++o) {
        double d = 0.0;
        for (int64_t c = 0; c < e.k; ++c)
          d += (static_cast<double>(wq[o * e.k + c]) - w[o * e.k + c]) * e.rows[r * e.k + c];
        error += d * d;
      }
    }
  }
  return error;
}

class MoeCalibration : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeCalibration, EveryExpertIsCalibratedOnItsOwnTokens) {
  set_log_level(LogLevel::WARN);
  const std::string fixture = GetParam();
  const fs::path source = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/hybrid" / fixture;
  auto config = load_model_config(source.string());
  ASSERT_TRUE(config.ok()) << config.message();
  const int64_t E = config->num_experts, H = config->hidden_size;
  const int64_t I = config->moe_intermediate_size, k = config->num_experts_per_tok;

  cli::CalibrationOptions o;
  o.model_dir = source.string();
  o.context = 256;
  o.token_ids = random_tokens(7, 2048, config->vocab_size);
  auto factors = cli::gather_gptq_factors(o);
  ASSERT_TRUE(factors.ok()) << factors.message();

  // Per layer with experts: every expert's three tensors have factors of the right widths, gate
  // and up share one, and the routed rows add up to 2048 x top_k.
  std::map<int64_t, int64_t> routed_rows;  // layer -> sum over experts of gate_up's tokens
  for (int64_t layer = 0; layer < config->num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    if (factors->count(p + "0.gate_proj.weight") == 0) continue;
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + std::to_string(e) + ".";
      ASSERT_EQ(factors->count(q + "gate_proj.weight"), 1u) << q;
      ASSERT_EQ(factors->count(q + "down_proj.weight"), 1u) << q;
      const auto& gate = factors->at(q + "gate_proj.weight");
      const auto& down = factors->at(q + "down_proj.weight");
      EXPECT_EQ(gate, factors->at(q + "up_proj.weight")) << q;
      EXPECT_EQ(gate->k, H) << q;
      EXPECT_EQ(down->k, I) << q;
      EXPECT_EQ(down->tokens, gate->tokens) << q;
      EXPECT_GT(gate->tokens, 0) << q;
      routed_rows[layer] += gate->tokens;
    }
  }
  ASSERT_FALSE(routed_rows.empty()) << fixture << ": no expert was calibrated";
  for (const auto& [layer, rows] : routed_rows) EXPECT_EQ(rows, 2048 * k) << "layer " << layer;

  // int4 with and without the experts' factors (the other tensors calibrated in both).
  cli::GptqFactors rest;
  for (const auto& [name, factor] : *factors)
    if (!is_expert(name)) rest.emplace(name, factor);
  ASSERT_LT(rest.size(), factors->size());
  const fs::path base =
      fs::path(::testing::TempDir()) / ("syv_moecal_" + std::to_string(::getpid()) + "_" + fixture);
  const std::vector<ExpertInputs> held = held_out_expert_inputs(source, config->vocab_size);
  ASSERT_FALSE(held.empty());
  double error[2];
  for (int with_experts = 0; with_experts < 2; ++with_experts) {
    QuantizeOptions q;
    q.in_dir = source.string();
    q.out_dir = (base / std::to_string(with_experts)).string();
    q.format = QuantizeFormat::kGptq;
    q.group_size = 8;  // divides every K of the fixtures (hidden 64, expert widths 24 / 32)
    q.gptq = with_experts ? &factors.value() : &rest;
    fs::remove_all(q.out_dir);
    Status s = quantize_folder(q);
    ASSERT_TRUE(s.ok()) << s.message();
    error[with_experts] = expert_output_error(held, source, q.out_dir);
    ASSERT_GT(error[with_experts], 0.0);
  }
  fs::remove_all(base);
  // Measured: 0.93x / 0.94x / 0.94x (on the calibration tokens themselves 0.85x / 0.86x / 0.86x):
  // random weights and random tokens give near-isotropic inputs, where GPTQ has little to use.
  EXPECT_LT(error[1], 0.97 * error[0])
      << fixture << ": experts calibrated " << error[1] << ", to nearest " << error[0];
}

// An expert the router sends no calibration token to gets no factor (it would have only dead
// columns, which GPTQ zeroes): it is rounded to nearest, the others calibrated.
TEST(MoeCalibrationFewTokens, AnExpertNoTokenReachesIsLeftToNearest) {
  set_log_level(LogLevel::WARN);
  const fs::path source = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/hybrid/qnext_top1_r2";
  auto config = load_model_config(source.string());
  ASSERT_TRUE(config.ok()) << config.message();
  cli::CalibrationOptions o;
  o.model_dir = source.string();
  o.token_ids = random_tokens(7, 2, config->vocab_size);  // 2 tokens, top-1: <= 2 of 4 experts
  auto factors = cli::gather_gptq_factors(o);
  ASSERT_TRUE(factors.ok()) << factors.message();
  int reached = 0, unreached = 0;
  for (int64_t e = 0; e < config->num_experts; ++e) {
    const std::string q = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
    const bool has = factors->count(q + "gate_proj.weight") > 0;
    EXPECT_EQ(has, factors->count(q + "down_proj.weight") > 0) << q;
    if (has) EXPECT_GT(factors->at(q + "gate_proj.weight")->tokens, 0) << q;
    (has ? reached : unreached) += 1;
  }
  EXPECT_GE(reached, 1);
  EXPECT_GE(unreached, 2);
}

// With a Gram budget smaller than any one weight's, every weight takes its own pass over the
// tokens: the factors are those of the single pass, bit for bit.
TEST(MoeCalibrationPasses, OnePassPerWeightGivesTheSameFactors) {
  set_log_level(LogLevel::WARN);
  cli::CalibrationOptions o;
  o.model_dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/qnext_top1_r2";
  o.context = 64;
  o.token_ids = random_tokens(9, 128, 384);
  o.memory_budget_bytes = int64_t{1} << 30;
  auto one = cli::gather_gptq_factors(o);
  ASSERT_TRUE(one.ok()) << one.message();
  o.memory_budget_bytes = 1;
  auto many = cli::gather_gptq_factors(o);
  ASSERT_TRUE(many.ok()) << many.message();
  ASSERT_EQ(one->size(), many->size());
  for (const auto& [name, factor] : *one) {
    ASSERT_EQ(many->count(name), 1u) << name;
    const GptqFactor& other = *many->at(name);
    EXPECT_EQ(factor->tokens, other.tokens) << name;
    EXPECT_EQ(factor->u, other.u) << name;
    EXPECT_EQ(factor->dead, other.dead) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeCalibration,
                         ::testing::Values("q35moe_top2_r2", "qnext_top1_r2", "qnext_top2_r1"));

}  // namespace
}  // namespace syv
