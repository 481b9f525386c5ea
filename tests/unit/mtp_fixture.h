// Hybrid fixtures with an MTP head, for the MTP tests: transformers drops mtp.* tensors when it
// saves, so tests/fixtures/hybrid has none. make_mtp_fixture() copies a fixture into a temporary
// folder with config.json's mtp_num_hidden_layers = 1 and model.safetensors = the fixture's
// tensors plus seeded random mtp.* tensors (bf16; norm weights off zero, as the fixtures').
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/hf_config.h"
#include "io/safetensors.h"

namespace syv::testing {

// The mtp.* tensors a head of `config` has (names and shapes as in the checkpoints, B.2).
inline std::vector<std::pair<std::string, std::vector<int64_t>>> mtp_tensor_shapes(
    const ModelConfig& c) {
  const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const int64_t D = c.head_dim;
  const std::string p = "mtp.layers.0.";
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {
      {"mtp.fc.weight", {H, 2 * H}},
      {"mtp.pre_fc_norm_embedding.weight", {H}},
      {"mtp.pre_fc_norm_hidden.weight", {H}},
      {"mtp.norm.weight", {H}},
      {p + "input_layernorm.weight", {H}},
      {p + "post_attention_layernorm.weight", {H}},
      {p + "self_attn.q_proj.weight", {2 * Hq * D, H}},
      {p + "self_attn.k_proj.weight", {Hk * D, H}},
      {p + "self_attn.v_proj.weight", {Hk * D, H}},
      {p + "self_attn.o_proj.weight", {H, Hq * D}},
      {p + "self_attn.q_norm.weight", {D}},
      {p + "self_attn.k_norm.weight", {D}},
  };
  const std::string m = p + "mlp.";
  if (c.num_experts > 0) {
    const int64_t E = c.num_experts, I = c.moe_intermediate_size;
    const int64_t Is = c.shared_expert_intermediate_size;
    t.push_back({m + "gate.weight", {E, H}});
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = m + "experts." + std::to_string(e) + ".";
      t.push_back({q + "gate_proj.weight", {I, H}});
      t.push_back({q + "up_proj.weight", {I, H}});
      t.push_back({q + "down_proj.weight", {H, I}});
    }
    t.push_back({m + "shared_expert.gate_proj.weight", {Is, H}});
    t.push_back({m + "shared_expert.up_proj.weight", {Is, H}});
    t.push_back({m + "shared_expert.down_proj.weight", {H, Is}});
    t.push_back({m + "shared_expert_gate.weight", {1, H}});
  } else {
    const int64_t I = c.intermediate_size;
    t.push_back({m + "gate_proj.weight", {I, H}});
    t.push_back({m + "up_proj.weight", {I, H}});
    t.push_back({m + "down_proj.weight", {H, I}});
  }
  return t;
}

// tests/fixtures/hybrid/<name> + a random MTP head, in a fresh folder under the temp dir.
// `with_tensors` false: only config.json says there is a head (the refusal test).
inline std::string make_mtp_fixture(const std::string& name, uint32_t seed,
                                    bool with_tensors = true) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/hybrid" / name;
  const fs::path dst =
      fs::temp_directory_path() / ("syv_mtp_" + name + "_" + std::to_string(seed) + "_" +
                                   std::to_string(with_tensors) + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  std::ifstream in(src / "config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  (j.contains("text_config") ? j["text_config"] : j)["mtp_num_hidden_layers"] = 1;
  std::ofstream(dst / "config.json") << j.dump(2);

  auto config = load_model_config(dst.string());
  EXPECT_TRUE(config.ok()) << config.message();
  auto store = WeightStore::open_dir(src.string());
  EXPECT_TRUE(store.ok()) << store.message();
  if (!config.ok() || !store.ok()) return dst.string();
  std::vector<TensorToWrite> tensors;
  for (const std::string& n : store->names()) {
    const TensorInfo* t = store->find(n);
    tensors.push_back({n, t->dtype, t->shape, t->data});
  }
  std::vector<std::vector<uint16_t>> data;
  if (with_tensors) {
    std::mt19937 rng(seed);
    const auto shapes = mtp_tensor_shapes(*config);
    data.reserve(shapes.size());
    for (const auto& [n, shape] : shapes) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      // Norms (1-D, zero-centred) around 0; projections ~ U(-a, a), std 1/sqrt(fan_in).
      const float a = shape.size() == 1 ? 0.3f : std::sqrt(3.0f / static_cast<float>(shape.back()));
      std::uniform_real_distribution<float> u(-a, a);
      std::vector<uint16_t> v(static_cast<size_t>(count));
      for (uint16_t& x : v) x = f32_to_bf16(u(rng));
      data.push_back(std::move(v));
      tensors.push_back({n, DType::BF16, shape, data.back().data()});
    }
  }
  const Status s = write_safetensors((dst / "model.safetensors").string(), tensors);
  EXPECT_TRUE(s.ok()) << s.message();
  return dst.string();
}

}  // namespace syv::testing
