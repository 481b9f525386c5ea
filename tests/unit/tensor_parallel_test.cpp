// Tensor parallelism's sharding math (model/tensor_parallel.h) on the CPU backend: N simulated
// ranks (one CPU backend and thread each, the all-reduce a sum in rank order) run the Qwen3 and
// Qwen3.5 hybrid fixtures through the engine (batched, chunked, prefix hits: for the hybrids
// through checkpoints the engine copies on every rank's mirrored store); greedy tokens equal one
// rank's and the logprobs agree within float rounding, with split and with replicated KV and GDN
// key heads, dense and MoE MLPs (Qwen3.5-MoE, Qwen3-Next); bad sizes are refused naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/prepare_model.h"
#include "model/tensor_parallel.h"
#include "unit/engine_harness.h"
#include "unit/tensor_parallel_requests.h"

namespace syv::testing {
namespace {

struct Ranks {
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> backends;
  std::unique_ptr<Model> model;
};

// `dir`: a model folder relative to the repository.
Ranks load_split(const std::string& dir, int n) {
  Ranks r;
  for (int i = 0; i < n; ++i) {
    r.owned.push_back(make_cpu_backend());
    r.backends.push_back(r.owned.back().get());
  }
  auto prepared = prepare_model(std::string(SYV_SOURCE_DIR) + "/" + dir, *r.backends[0]);
  EXPECT_TRUE(prepared.ok()) << prepared.message();
  if (!prepared.ok()) return r;
  auto model = load_tensor_parallel(prepared.value(), r.backends, LoadOptions{});
  EXPECT_TRUE(model.ok()) << model.message();
  if (model.ok()) r.model = std::move(model).value();
  return r;
}

TEST(TensorParallel, SplitRanksEqualOneRank) {
  struct Case {
    const char* fixture;
    std::vector<int> sizes;
  };
  // Qwen3: tied_gqa2: 4 query / 2 KV heads; untied_mha_hd32: 4 / 4; untied_gqa4_hd24: 8 / 2;
  // tied_gqa4_kv1_hd64: 4 / 1 (its one KV head replicated on every rank). Qwen3.5 (GDN key /
  // value heads): q35_r1_lllf 2 / 2; q35_r2_flfl_tied 2 / 4 with 1 KV head (replicated);
  // q35_nested_r2 1 / 2 (its GDN key head replicated); tiny-hybrid (trained) 2 / 4. MoE (experts
  // split by their intermediate size): q35moe_top2_r2 (8 experts, top 2), qnext_top1_r2 and
  // qnext_top2_r1 (with a dense layer, mlp_only_layers).
  for (const Case& c :
       {Case{"tests/fixtures/qwen3/tied_gqa2", {2}},
        Case{"tests/fixtures/qwen3/untied_mha_hd32", {2, 4}},
        Case{"tests/fixtures/qwen3/untied_gqa4_hd24", {2}},
        Case{"tests/fixtures/qwen3/tied_gqa4_kv1_hd64", {2, 4}},
        Case{"tests/fixtures/hybrid/q35_r1_lllf", {2}},
        Case{"tests/fixtures/hybrid/q35_r2_flfl_tied", {2}},
        Case{"tests/fixtures/hybrid/q35_nested_r2", {2}}, Case{"models/tiny-hybrid", {2}},
        Case{"tests/fixtures/hybrid/q35moe_top2_r2", {2, 4}},
        Case{"tests/fixtures/hybrid/qnext_top1_r2", {2}},
        Case{"tests/fixtures/hybrid/qnext_top2_r1", {2}}}) {
    LoadedModel one = load_cpu_model(c.fixture);
    ASSERT_TRUE(one.model);
    const std::vector<Request> requests =
        split_requests(static_cast<int32_t>(one.model->config().vocab_size));
    // Batched, chunked prompts, prefix caching on: the engine's usual paths over the split model.
    // Few sequences at once, so the shared prefix's later requests find it cached.
    const EngineOptions o = scenario_options(16, 128, 4096, 24, true, 2);
    EngineStats one_stats;
    const std::vector<RequestOutput> want = run_requests(*one.model, o, requests, &one_stats);
    EXPECT_GT(one_stats.prefix_hit_tokens, 0u) << "the scenario takes prefix hits";
    for (int n : c.sizes) {
      SCOPED_TRACE(std::string(c.fixture) + " over " + std::to_string(n) + " ranks");
      Ranks split = load_split(c.fixture, n);
      ASSERT_TRUE(split.model);
      EXPECT_EQ(split.model->config().num_attention_heads, one.model->config().num_attention_heads);
      EngineStats stats;
      const std::vector<RequestOutput> got = run_requests(*split.model, o, requests, &stats);
      EXPECT_EQ(stats.prefix_hit_tokens, one_stats.prefix_hit_tokens);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const SampleOutput& g = got[i].samples.at(0);
        const SampleOutput& w = want[i].samples.at(0);
        EXPECT_EQ(g.tokens, w.tokens) << "request " << i;
        ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << "request " << i;
        for (size_t t = 0; t < g.logprobs.size(); ++t)
          EXPECT_NEAR(g.logprobs[t], w.logprobs[t], 1e-4) << "request " << i << " token " << t;
        ASSERT_EQ(g.prompt_logprobs.size(), w.prompt_logprobs.size()) << "request " << i;
        ASSERT_EQ(w.prompt_logprobs.empty(), i >= 5);
        for (size_t t = 0; t < g.prompt_logprobs.size(); ++t) {
          const PromptLogprob& a = g.prompt_logprobs[t];
          const PromptLogprob& b = w.prompt_logprobs[t];
          EXPECT_NEAR(a.token.logprob, b.token.logprob, 1e-4) << "request " << i << " at " << t;
          ASSERT_EQ(a.top.size(), b.top.size());
          for (size_t k = 0; k < a.top.size(); ++k) {
            EXPECT_NEAR(a.top[k].logprob, b.top[k].logprob, 1e-4);
          }
        }
      }
    }
  }
}

TEST(TensorParallel, RefusesWhatItCannotSplit) {
  ModelConfig c;
  c.model_type = "qwen3";
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.intermediate_size = 96;
  EXPECT_TRUE(check_tensor_parallel(c, 2).ok());
  EXPECT_EQ(check_tensor_parallel(c, 4).message(),
            "config.json: num_attention_heads = 6 is not divisible by the tensor parallel size 4");
  c.num_attention_heads = 12;
  c.num_key_value_heads = 3;
  EXPECT_EQ(check_tensor_parallel(c, 4).message(),
            "config.json: num_key_value_heads = 3 and the tensor parallel size 4: one must divide "
            "the other (the heads are split, or replicated when fewer than the ranks)");
  c.num_key_value_heads = 4;
  c.intermediate_size = 90;
  EXPECT_EQ(check_tensor_parallel(c, 4).message(),
            "config.json: intermediate_size = 90 is not divisible by the tensor parallel size 4");
  c.intermediate_size = 96;
  // Gated DeltaNet heads: value heads split, key heads split or replicated.
  c.layer_types = {LayerType::kLinearAttention, LayerType::kFullAttention};
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 6;
  EXPECT_EQ(
      check_tensor_parallel(c, 4).message(),
      "config.json: linear_num_value_heads = 6 is not divisible by the tensor parallel size 4");
  c.linear_num_value_heads = 8;
  EXPECT_TRUE(check_tensor_parallel(c, 4).ok()) << "2 GDN key heads replicated over 4 ranks";
  EXPECT_EQ(tensor_parallel_rank_config(c, 4).linear_num_key_heads, 1);
  EXPECT_EQ(tensor_parallel_rank_config(c, 4).linear_num_value_heads, 2);
  c.linear_num_key_heads = 3;
  c.linear_num_value_heads = 12;
  EXPECT_NE(check_tensor_parallel(c, 4).message().find("linear_num_key_heads = 3"),
            std::string::npos);
  c.layer_types.clear();
  c.linear_num_key_heads = c.linear_num_value_heads = 0;
  c.num_experts = 8;  // MoE: the experts' and the shared expert's intermediate sizes
  c.moe_intermediate_size = 24;
  c.shared_expert_intermediate_size = 34;
  EXPECT_EQ(check_tensor_parallel(c, 4).message(),
            "config.json: shared_expert_intermediate_size = 34 is not divisible by the tensor "
            "parallel size 4");
  EXPECT_TRUE(check_tensor_parallel(c, 2).ok());
  EXPECT_FALSE(check_tensor_parallel(c, 0).ok());
  // The rank's shapes.
  c.num_experts = 0;
  const ModelConfig r = tensor_parallel_rank_config(c, 4);
  EXPECT_EQ(r.num_attention_heads, 3);
  EXPECT_EQ(r.num_key_value_heads, 1);
  EXPECT_EQ(r.intermediate_size, 24);
  c.num_key_value_heads = 2;
  EXPECT_EQ(tensor_parallel_rank_config(c, 4).num_key_value_heads, 1) << "replicated";
}

TEST(TensorParallel, RefusesBadSizesAtLoad) {
  auto backend = make_cpu_backend();
  std::vector<Backend*> backends = {backend.get(), backend.get(), backend.get()};
  auto prepared = prepare_model(std::string(SYV_SOURCE_DIR) + "/models/tiny-hybrid", *backend);
  ASSERT_TRUE(prepared.ok()) << prepared.message();
  auto model = load_tensor_parallel(prepared.value(), backends, LoadOptions{});  // 3 ranks
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.message(),
            "config.json: num_attention_heads = 2 is not divisible by the tensor parallel size 3");
}

}  // namespace
}  // namespace syv::testing
