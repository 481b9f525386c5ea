// Quantized checkpoints: quantization_config parsing, each loader against hand-packed words (so
// the writer and the reader cannot agree on a wrong packing), `syv quantize` folders (values
// within each format's rounding bound; logits equal to the float model on the dequantized
// weights), greedy decoding through the model, and bad input refused by message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "io/quant_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/prepare_model.h"
#include "model/quant_weights.h"
#include "model/quantize_folder.h"
#include "unit/keep_dtype_backend.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- quantization_config ----------------------------------------------------------------------

std::string parse_error(const std::string& text) {
  auto r = parse_quant_config_text(text);
  return r.ok() ? "(accepted)" : r.message();
}

TEST(QuantConfig, AcceptsThePublishedBlocks) {
  auto fp8 = parse_quant_config_text(R"({"activation_scheme": "dynamic", "fmt": "e4m3",
      "quant_method": "fp8", "weight_block_size": [128, 128],
      "modules_to_not_convert": ["lm_head", "model.layers.0.linear_attn.in_proj_ba"]})");
  ASSERT_TRUE(fp8.ok()) << fp8.message();
  EXPECT_EQ(fp8->method, QuantMethod::kFp8);
  EXPECT_EQ(fp8->block_n, 128);
  EXPECT_EQ(fp8->not_converted.size(), 2u);
  EXPECT_EQ(describe_quant_config(*fp8), "fp8 (e4m3, 128x128 blocks)");

  auto awq = parse_quant_config_text(R"({"bits": 4, "group_size": 128, "quant_method": "awq",
      "version": "gemm", "zero_point": true, "modules_to_not_convert": null})");
  ASSERT_TRUE(awq.ok()) << awq.message();
  EXPECT_EQ(awq->group_size, 128);
  EXPECT_FALSE(awq->symmetric);

  auto gptq = parse_quant_config_text(R"({"bits": 4, "group_size": -1, "desc_act": true,
      "sym": false, "quant_method": "gptq", "checkpoint_format": "gptq_v2", "damp_percent": 0.01})");
  ASSERT_TRUE(gptq.ok()) << gptq.message();
  EXPECT_EQ(gptq->group_size, 0);
  EXPECT_TRUE(gptq->act_order && gptq->gptq_v2 && !gptq->symmetric);

  auto ct = parse_quant_config_text(R"({"quant_method": "compressed-tensors",
      "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
      "group_size": 128, "dynamic": false, "actorder": null}, "input_activations": null,
      "output_activations": null}}, "ignore": ["lm_head"], "kv_cache_scheme": null,
      "quantization_status": "compressed", "sparsity_config": {}})");
  ASSERT_TRUE(ct.ok()) << ct.message();
  EXPECT_EQ(ct->method, QuantMethod::kCtPackInt4);
  EXPECT_EQ(ct->not_converted, std::vector<std::string>{"lm_head"});

  auto ctf = parse_quant_config_text(R"({"quant_method": "compressed-tensors",
      "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "symmetric": true, "strategy": "channel",
      "dynamic": false}, "input_activations": {"num_bits": 8, "type": "float",
      "strategy": "token", "dynamic": true}}}})");
  ASSERT_TRUE(ctf.ok()) << ctf.message();
  EXPECT_EQ(ctf->fp8_strategy, Fp8ScaleStrategy::kChannel);
}

TEST(QuantConfig, RefusesNamingTheFieldAndValue) {
  EXPECT_EQ(parse_error(R"({"quant_method": "bitsandbytes"})"),
            "config.json: field \"quantization_config.quant_method\": \"bitsandbytes\" is not "
            "supported (supported: \"fp8\", \"awq\", \"gptq\", \"compressed-tensors\")");
  EXPECT_EQ(parse_error(R"({"bits": 4})"),
            "config.json: field \"quantization_config.quant_method\": expected a string, found "
            "nothing (missing)");
  EXPECT_EQ(
      parse_error(R"({"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]})"),
      "config.json: field \"quantization_config.fmt\": \"e5m2\" is not supported (syv reads "
      "\"e4m3\" fp8 weights)");
  EXPECT_NE(parse_error(R"({"quant_method": "fp8"})")
                .find("\"quantization_config.weight_block_size\""
                      ": expected [block_n, block_k]"),
            std::string::npos);
  EXPECT_EQ(parse_error(R"({"quant_method": "awq", "bits": 8, "group_size": 128})"),
            "config.json: field \"quantization_config.bits\": 8 is not supported (syv reads 4-bit "
            "weights)");
  EXPECT_NE(
      parse_error(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
                           "checkpoint_format": "marlin"})")
          .find("field \"quantization_config.checkpoint_format\": \"marlin\" is not supported"),
      std::string::npos);
  EXPECT_NE(parse_error(R"({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                           "config_groups": {}})")
                .find("\"quantization_config.format\": \"nvfp4-pack-quantized\" is not supported"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"quant_method": "awq", "bits": 4, "group_size": 0})")
                .find("\"quantization_config.group_size\": expected a positive group size or -1, "
                      "found 0"),
            std::string::npos);
  // The parser sees it through config.json too.
  auto cfg = parse_model_config(R"({"model_type": "qwen3", "vocab_size": 8, "hidden_size": 8,
      "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1,
      "quantization_config": {"quant_method": "hqq"}})",
                                "m/config.json");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(
      cfg.message().find("m/config.json: field \"quantization_config.quant_method\": \"hqq\""),
      std::string::npos)
      << cfg.message();
}

// ---- loaders against hand-packed words --------------------------------------------------------

constexpr int64_t N = 8, K = 16;

class HandPacked : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::WARN);
    dir_ = fs::path(::testing::TempDir()) /
           ("syv_qhand_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  WeightStore write(const std::vector<TensorToWrite>& tensors) {
    const std::string path = (dir_ / "model.safetensors").string();
    EXPECT_TRUE(write_safetensors(path, tensors).ok());
    auto s = WeightStore::open_dir(dir_.string());
    EXPECT_TRUE(s.ok()) << s.message();
    return *s;
  }
  // A GPTQ module "m" [N, K] of 2 groups: qweight [K / 8, N], qzeros [2, N / 8], f16 scales
  // [2, N], g_idx [K].
  WeightStore write_gptq(const int32_t* qweight, const int32_t* qzeros, const uint16_t* scales,
                         const int32_t* g_idx) {
    return write({{"m.qweight", DType::I32, {K / 8, N}, qweight},
                  {"m.qzeros", DType::I32, {2, N / 8}, qzeros},
                  {"m.scales", DType::F16, {2, N}, scales},
                  {"m.g_idx", DType::I32, {K}, g_idx}});
  }
  fs::path dir_;
};

const uint16_t kF16One = 0x3C00, kF16Half = 0x3800;

QuantConfig int4_config(const char* text) {
  auto q = parse_quant_config_text(text);
  EXPECT_TRUE(q.ok()) << q.message();
  return *q;
}

TEST_F(HandPacked, AwqInterleavedNibbles) {
  // q[n, k] = n for every k: each word holds columns 8j + [0, 2, 4, 6, 1, 3, 5, 7] in nibbles
  // 0..7, i.e. 0x75316420. Zeros: column n's zero is n / 2 -> nibbles [0, 1, 2, 3, 0, 1, 2, 3].
  std::vector<int32_t> qweight(K * N / 8, 0x75316420), qzeros(1 * N / 8, 0x32103210);
  std::vector<uint16_t> scales(N, kF16Half);
  WeightStore s = write({{"m.qweight", DType::I32, {K, N / 8}, qweight.data()},
                         {"m.qzeros", DType::I32, {1, N / 8}, qzeros.data()},
                         {"m.scales", DType::F16, {1, N}, scales.data()}});
  const QuantConfig q = int4_config(R"({"quant_method": "awq", "bits": 4, "group_size": 16})");
  ASSERT_TRUE(stored_quantized("m.weight", s, q));
  auto w = read_quantized("m.weight", {N, K}, s, q);
  ASSERT_TRUE(w.ok()) << w.message();
  const std::vector<float> d = w->dequantize();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      ASSERT_EQ(d[n * K + k], 0.5f * static_cast<float>(n - n / 2)) << n << "," << k;
}

TEST_F(HandPacked, GptqSequentialNibblesV1V2AndActOrder) {
  // q[n, k] = k % 8: each word of qweight [K/8, N] holds rows 8r..8r+7 -> 0x76543210.
  std::vector<int32_t> qweight(K / 8 * N, 0x76543210);
  std::vector<int32_t> v1_sym(2 * N / 8, 0x77777777),
      v2_sym(2 * N / 8, static_cast<int32_t>(0x88888888u));
  std::vector<uint16_t> scales(2 * N, kF16One);
  std::vector<int32_t> g_idx(K);
  for (int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<int32_t>(k / 8);
  for (const char* format : {"gptq", "gptq_v2"}) {
    const bool v2 = std::string(format) == "gptq_v2";
    WeightStore s =
        write_gptq(qweight.data(), v2 ? v2_sym.data() : v1_sym.data(), scales.data(), g_idx.data());
    const QuantConfig q = int4_config(
        (std::string(
             R"({"quant_method": "gptq", "bits": 4, "group_size": 8, "checkpoint_format": ")") +
         format + "\"}")
            .c_str());
    auto w = read_quantized("m.weight", {N, K}, s, q);
    ASSERT_TRUE(w.ok()) << w.message();
    EXPECT_TRUE(w->zeros.empty()) << "zero 8 everywhere is symmetric";
    EXPECT_TRUE(w->g_idx.empty()) << "g_idx = k / G is the plain layout";
    const std::vector<float> d = w->dequantize();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(d[n * K + k], static_cast<float>(k % 8 - 8));
  }
  // Act-order: rows alternate groups; v1 zeros 0x10101010 -> z = stored + 1 = [1, 2, 1, 2, ...]
  // along N in group 0; group 1 keeps 8 (stored 7).
  for (int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<int32_t>(k % 2);
  std::vector<int32_t> qz = {0x10101010, 0x77777777};
  WeightStore s = write_gptq(qweight.data(), qz.data(), scales.data(), g_idx.data());
  const QuantConfig q = int4_config(
      R"({"quant_method": "gptq", "bits": 4, "group_size": 8, "desc_act": true, "sym": false})");
  auto w = read_quantized("m.weight", {N, K}, s, q);
  ASSERT_TRUE(w.ok()) << w.message();
  ASSERT_EQ(w->g_idx.size(), static_cast<size_t>(K));
  const std::vector<float> d = w->dequantize();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int z = k % 2 == 0 ? 1 + static_cast<int>(n % 2) : 8;
      ASSERT_EQ(d[n * K + k], static_cast<float>(k % 8 - z)) << n << "," << k;
    }
  }
  // A g_idx entry outside the groups is refused naming the tensor.
  g_idx[3] = 5;
  WeightStore bad = write_gptq(qweight.data(), qz.data(), scales.data(), g_idx.data());
  auto e = read_quantized("m.weight", {N, K}, bad, q);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("tensor \"m.g_idx\": entry 3 is group 5, expected a group in [0, 2)"),
            std::string::npos)
      << e.message();
}

// Act-order re-laid with contiguous groups (permute_act_order, what the loader does where the
// backend takes it, e.g. the CPU): the same logical weight, the groups contiguous, perm the
// stable order by group; loaded through the WeightLoader on the CPU, the weight carries perm
// and its product with x equals the product with the dequantized weight.
TEST_F(HandPacked, ActOrderPermutedAtLoadIsTheSameWeight) {
  std::vector<int32_t> qweight(K / 8 * N);
  for (size_t i = 0; i < qweight.size(); ++i)
    qweight[i] = static_cast<int32_t>(0x9e3779b9u * static_cast<uint32_t>(i + 1));  // all codes
  std::vector<int32_t> qz = {0x10101010, 0x76543210};
  std::vector<uint16_t> scales(2 * N);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = i % 2 ? kF16One : kF16Half;
  std::vector<int32_t> g_idx(K);
  for (int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<int32_t>((k / 2) % 2);  // 8 and 8
  WeightStore s = write_gptq(qweight.data(), qz.data(), scales.data(), g_idx.data());
  const QuantConfig q = int4_config(
      R"({"quant_method": "gptq", "bits": 4, "group_size": 8, "desc_act": true, "sym": false})");
  auto w = read_quantized("m.weight", {N, K}, s, q);
  ASSERT_TRUE(w.ok()) << w.message();
  const std::vector<float> want = w->dequantize();
  HostQuantWeight permuted = *w;
  ASSERT_TRUE(permute_act_order(permuted));
  EXPECT_TRUE(permuted.g_idx.empty());
  ASSERT_EQ(permuted.perm.size(), static_cast<size_t>(K));
  for (int64_t j = 0; j < K; ++j) {
    EXPECT_EQ(g_idx[permuted.perm[j]], j / 8) << "stored column " << j;
    if (j > 0 && j % 8 != 0) EXPECT_LT(permuted.perm[j - 1], permuted.perm[j]) << "stable";
  }
  EXPECT_EQ(permuted.dequantize(), want);
  // Groups of unequal size stay as they are.
  HostQuantWeight uneven = *w;
  uneven.g_idx[0] = 1;
  EXPECT_FALSE(permute_act_order(uneven));
  EXPECT_EQ(uneven.g_idx.size(), static_cast<size_t>(K));

  // Through the loader on the CPU, which takes the permuted layout.
  auto cpu = make_cpu_backend();
  ASSERT_TRUE(cpu->takes_permuted_act_order());
  WeightLoader loader(*cpu, &s, 0, q);
  auto loaded = loader.load({"m.weight", {N, K}});
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_FALSE(loaded->perm.empty());
  EXPECT_TRUE(loaded->g_idx.empty());
  std::vector<float> x(3 * K), out(3 * N), ref(3 * N);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  Tensor xt(x.data(), DType::F32, {3, K}), ot(out.data(), DType::F32, {3, N});
  Tensor rt(ref.data(), DType::F32, {3, N});
  cpu->linear(xt, *loaded, Tensor(), ot);
  cpu->linear(xt, Tensor(const_cast<float*>(want.data()), DType::F32, {N, K}), Tensor(), rt);
  EXPECT_EQ(out, ref);
}

TEST_F(HandPacked, CompressedTensorsPackQuantized) {
  // weight_packed [N, K/8]: nibble i = column 8j + i, stored as signed q + 8: q_u = k % 8.
  std::vector<int32_t> packed(N * K / 8, 0x76543210);
  std::vector<uint16_t> scale(N * 1, kF16One);  // channel strategy: [N, 1]
  std::vector<int64_t> shape = {N, K};
  // Asymmetric zero points packed along N: [ceil(N/8), G] = [1, 1], zp_u of row n = n.
  std::vector<int32_t> zp = {0x76543210};
  WeightStore s = write({{"m.weight_packed", DType::I32, {N, K / 8}, packed.data()},
                         {"m.weight_scale", DType::F16, {N, 1}, scale.data()},
                         {"m.weight_shape", DType::I64, {2}, shape.data()},
                         {"m.weight_zero_point", DType::I32, {1, 1}, zp.data()}});
  const char* base = R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "channel",
      "symmetric": %s}}}})";
  for (bool sym : {true, false}) {
    char text[512];
    std::snprintf(text, sizeof text, base, sym ? "true" : "false");
    const QuantConfig q = int4_config(text);
    auto w = read_quantized("m.weight", {N, K}, s, q);
    ASSERT_TRUE(w.ok()) << w.message();
    const std::vector<float> d = w->dequantize();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(d[n * K + k], static_cast<float>(k % 8 - (sym ? 8 : n))) << sym << n << k;
  }
}

TEST_F(HandPacked, Fp8BlockAndChannelScales) {
  // 0x38 is 1.0 in e4m3 (exponent 7 = bias, mantissa 0); 0xB0 is -0.5.
  std::vector<uint8_t> q(3 * 4, 0x38);
  q[5] = 0xB0;
  std::vector<float> inv = {2.0f};
  WeightStore s = write({{"m.weight", DType::F8E4M3, {3, 4}, q.data()},
                         {"m.weight_scale_inv", DType::F32, {1, 1}, inv.data()}});
  const QuantConfig fp8 =
      int4_config(R"({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})");
  auto w = read_quantized("m.weight", {3, 4}, s, fp8);
  ASSERT_TRUE(w.ok()) << w.message();
  std::vector<float> d = w->dequantize();
  EXPECT_EQ(d[0], 2.0f);
  EXPECT_EQ(d[5], -1.0f);
  std::vector<uint16_t> rows = {0x3F80, 0x4000, 0x4040};  // bf16 1, 2, 3
  WeightStore c = write({{"m.weight", DType::F8E4M3, {3, 4}, q.data()},
                         {"m.weight_scale", DType::BF16, {3, 1}, rows.data()}});
  const QuantConfig ch = int4_config(R"({"quant_method": "compressed-tensors",
      "format": "float-quantized", "config_groups": {"g": {"weights": {"num_bits": 8,
      "type": "float", "strategy": "channel"}}}})");
  w = read_quantized("m.weight", {3, 4}, c, ch);
  ASSERT_TRUE(w.ok()) << w.message();
  d = w->dequantize();
  EXPECT_EQ(d[4 * 2 + 3], 3.0f);
  EXPECT_EQ(d[5], -1.0f);
}

TEST_F(HandPacked, BadShapesNameTheTensor) {
  std::vector<uint8_t> q(8 * 16, 0x38);
  std::vector<float> inv(4, 1.0f);
  WeightStore s = write({{"m.weight", DType::F8E4M3, {8, 16}, q.data()},
                         {"m.weight_scale_inv", DType::F32, {2, 2}, inv.data()}});
  const QuantConfig fp8 = int4_config(R"({"quant_method": "fp8", "weight_block_size": [8, 8]})");
  EXPECT_EQ(check_quantized("m.weight", {8, 16}, s, fp8).message(),
            (dir_ / "model.safetensors").string() +
                ": tensor \"m.weight_scale_inv\" (fp8 scales) has shape [2, 2], expected [1, 2]");
  WeightStore missing = write({{"m.weight", DType::F8E4M3, {8, 16}, q.data()}});
  EXPECT_EQ(check_quantized("m.weight", {8, 16}, missing, fp8).message(),
            "missing tensor \"m.weight_scale_inv\" (fp8 scales, expected shape [1, 2]) in the "
            "model's safetensors files");
  std::vector<int32_t> words(16 * 8 / 8);
  WeightStore awq = write({{"m.qweight", DType::I32, {16, 1}, words.data()}});
  const QuantConfig g6 = int4_config(R"({"quant_method": "awq", "bits": 4, "group_size": 6})");
  EXPECT_EQ(check_quantized("m.weight", {8, 16}, awq, g6).message(),
            "tensor \"m.qweight\": group size 6 (quantization_config) does not divide K = 16");
}

// ---- the CUDA-style refusal stays for backends without the quantized path ---------------------

TEST(QuantizedRefusal, BackendsWithoutKernelsRefuseByName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  KeepDtypeBackend keep(DType::BF16);
  std::vector<uint8_t> q(4 * 4, 0x38);
  std::vector<float> s = {1.0f}, x(4), out(4);
  Weight w;
  w.format = WeightFormat::kFp8Block;
  w.tensor = Tensor(q.data(), DType::F8E4M3, {4, 4});
  w.scales = Tensor(s.data(), DType::F32, {1, 1});
  w.n = w.k = 4;
  w.block_n = w.block_k = 128;
  Tensor tx(x.data(), DType::F32, {1, 4}), to(out.data(), DType::F32, {1, 4});
  Backend& backend = keep;  // the Weight overload (KeepDtypeBackend hides it)
  EXPECT_DEATH(backend.linear(tx, w, Tensor(), to),
               "backend keep-bf16 linear: fp8 block-scaled weights \\(f8e4m3, 128x128 blocks\\) "
               "are not supported yet");
}

// A backend without quantized kernels (CUDA today) refuses a quantized folder at prepare_model(),
// before a byte is allocated, naming the format and a tensor; a folder whose quantization_config
// leaves every module in float is not refused.
TEST(QuantizedRefusal, BackendsWithoutKernelsRefuseTheFolderAtPrepare) {
  set_log_level(LogLevel::WARN);
  const fs::path src = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";
  const fs::path out = fs::path(::testing::TempDir()) / ("syv_qprep_" + std::to_string(::getpid()));
  fs::remove_all(out);
  QuantizeOptions o{src.string(), out.string(), QuantizeFormat::kGptq, 32, 128};
  ASSERT_TRUE(quantize_folder(o).ok());
  KeepDtypeBackend keep(DType::BF16);
  auto p = prepare_model(out.string(), keep);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.message(),
            out.string() +
                ": the weights are quantized (gptq (int4, groups of 32, symmetric): 14 "
                "tensors, e.g. \"model.layers.0.mlp.down_proj.qweight\"), which the "
                "keep-bf16 backend cannot run yet (no quantized kernels); use the CPU "
                "backend (--device cpu) or the float folder they were made from");
  auto cpu = make_cpu_backend();
  EXPECT_TRUE(prepare_model(out.string(), *cpu).ok());
  // Every module kept in float: nothing to refuse.
  fs::remove(out / "model.safetensors");
  fs::copy_file(src / "model.safetensors", out / "model.safetensors");
  auto all_float = prepare_model(out.string(), keep);
  EXPECT_TRUE(all_float.ok()) << all_float.message();
  fs::remove_all(out);
}

// The start-up memory check's figure for a quantized folder (prepare_model's weight_bytes: the
// quantized modules in their canonical layouts, the rest in the backend's dtype) is what the load
// allocates. (fp8 with 32x32 tiles: every fused part's N falls on a tile boundary; with 128x128
// the q|k|v of this fixture would get one scale row per weight row, slightly more.)
TEST(QuantizedBytes, PreparedBytesEqualTheLoadsAllocations) {
  set_log_level(LogLevel::WARN);
  const fs::path src = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";
  for (QuantizeFormat format :
       {QuantizeFormat::kFp8, QuantizeFormat::kAwq, QuantizeFormat::kGptq}) {
    SCOPED_TRACE(static_cast<int>(format));
    const fs::path out =
        fs::path(::testing::TempDir()) / ("syv_qbytes_" + std::to_string(::getpid()));
    fs::remove_all(out);
    ASSERT_TRUE(quantize_folder({src.string(), out.string(), format, 32, 32}).ok());
    for (DType keep : {DType::F32, DType::BF16}) {
      KeepDtypeBackend backend(keep);
      backend.set_quantized_weights(true);
      auto prepared = prepare_model(out.string(), backend);
      ASSERT_TRUE(prepared.ok()) << prepared.message();
      EXPECT_EQ(backend.allocated_bytes(), 0);
      auto model = load_prepared_model(*prepared, backend);
      ASSERT_TRUE(model.ok()) << model.message();
      EXPECT_EQ(backend.allocated_bytes(), prepared->weight_bytes) << dtype_name(keep);
    }
    fs::remove_all(out);
  }
}

// ---- `syv quantize` folders -------------------------------------------------------------------

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return e;
}

// w [N, K] quantized to int4 groups of `group` over each group's whole range (round to nearest,
// f16 scales: awq min/max with a zero point, gptq symmetric), dequantized.
std::vector<float> full_range_int4(const std::vector<float>& w, int64_t group, QuantizeFormat f) {
  std::vector<float> d(w.size());
  auto f16 = [](float x) { return f16_to_f32(f32_to_f16(x)); };
  auto q = [](float x) { return std::clamp(std::nearbyint(x), 0.0f, 15.0f); };
  for (size_t g0 = 0; g0 < w.size(); g0 += static_cast<size_t>(group)) {
    const auto [lo, hi] = std::minmax_element(w.begin() + g0, w.begin() + g0 + group);
    float s, z;
    if (f == QuantizeFormat::kAwq) {
      s = f16(std::max(*hi - *lo, 1e-5f) / 15.0f);
      z = q(-*lo / s);
    } else {
      const float amax = std::max(std::fabs(*lo), std::fabs(*hi));
      s = amax > 0.0f ? f16(amax * 2.0f / 15.0f) : 1.0f;
      z = 8.0f;
    }
    for (size_t i = g0; i < g0 + static_cast<size_t>(group); ++i) d[i] = (q(w[i] / s + z) - z) * s;
  }
  return d;
}

class QuantizedModel : public ::testing::TestWithParam<QuantizeFormat> {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::WARN);
    base_ = fs::path(::testing::TempDir()) / ("syv_qmodel_" + std::to_string(::getpid()) + "_" +
                                              std::to_string(static_cast<int>(GetParam())));
    fs::remove_all(base_);
    fs::create_directories(base_);
    src_ = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";
  }
  void TearDown() override { fs::remove_all(base_); }

  // Logits of `dir`'s model at every position of `tokens` (one sequence).
  static std::vector<float> logits(const fs::path& dir, const std::vector<int32_t>& tokens) {
    auto backend = make_cpu_backend();
    auto model = load_model(dir.string(), *backend);
    EXPECT_TRUE(model.ok()) << model.message();
    if (!model.ok()) return {};
    return testing::sequence_logits(**model, *backend, tokens);
  }

  fs::path base_, src_;
};

TEST_P(QuantizedModel, RoundTripsWithinTheFormatsBoundAndMatchesTheDequantizedModel) {
  QuantizeOptions o;
  o.in_dir = src_.string();
  o.out_dir = (base_ / "q").string();
  o.format = GetParam();
  o.group_size = 32;
  ASSERT_TRUE(quantize_folder(o).ok());
  auto cfg = load_model_config(o.out_dir);
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  ASSERT_TRUE(cfg->quant.quantized());
  auto qs = WeightStore::open_dir(o.out_dir);
  auto fs_ = WeightStore::open_dir(o.in_dir);
  ASSERT_TRUE(qs.ok() && fs_.ok());
  // Every quantized module within its bound; the dequantized weights make a float folder.
  std::vector<std::vector<float>> keep;
  std::vector<TensorToWrite> dense;
  int quantized = 0;
  for (const std::string& name : fs_->names()) {
    const TensorInfo& t = *fs_->find(name);
    std::vector<float> w(static_cast<size_t>(t.numel()));
    convert_to_f32(t.dtype, t.data, w.data(), w.size());
    if (stored_quantized(name, *qs, cfg->quant)) {
      ++quantized;
      auto q = read_quantized(name, t.shape, *qs, cfg->quant);
      ASSERT_TRUE(q.ok()) << q.message();
      const std::vector<float> d = q->dequantize();
      const Weight v = q->view();
      for (int64_t n = 0; n < t.shape[0]; ++n) {
        for (int64_t k = 0; k < t.shape[1]; ++k) {
          const size_t i = static_cast<size_t>(n * t.shape[1] + k);
          float bound;
          if (GetParam() == QuantizeFormat::kFp8) {  // 3 mantissa bits; subnormals below 2^-6
            bound =
                std::fabs(w[i]) / 16.0f +
                q->scales[static_cast<size_t>((n / v.block_n) * q->scale_cols + k / v.block_k)] *
                    std::ldexp(1.0f, -10);
          } else {
            // The group's grid is (0 - z) s .. (15 - z) s. A weight inside it is within half a
            // step (f16 scale rounding: 0.51); one outside (the range clipped for the rest of
            // the group's sake) dequantizes to the grid's nearer end. And the grid spans at least
            // the clip search's narrowest fraction, 70% of the group's range, less a step for
            // awq's rounded zero point.
            const size_t gi = static_cast<size_t>(n * q->scale_cols + k / 32);
            const float s = q->scales[gi];
            const float z = q->zeros.empty() ? 8.0f : static_cast<float>(q->zeros[gi]);
            const float lo = -z * s, hi = (15.0f - z) * s;
            const float outside = std::max({lo - w[i], w[i] - hi, 0.0f});
            bound = 0.51f * s + outside;
            const float* group = &w[static_cast<size_t>(n * t.shape[1] + k / 32 * 32)];
            const auto [g_lo, g_hi] = std::minmax_element(group, group + 32);
            const float span = GetParam() == QuantizeFormat::kAwq
                                   ? *g_hi - *g_lo
                                   : 2.0f * std::max(std::fabs(*g_lo), std::fabs(*g_hi));
            ASSERT_GE(hi - lo + 2.0f * s, 0.7f * span * (14.0f / 15.0f))
                << name << " [" << n << ", " << k << "]: clipped beyond 70%";
          }
          ASSERT_LE(std::fabs(d[i] - w[i]), bound) << name << " [" << n << ", " << k << "]";
        }
      }
      if (GetParam() != QuantizeFormat::kFp8) {
        // The clip search keeps the full range unless a clip is nearer the weights: the
        // tensor's squared error is at most the full range's round to nearest.
        EXPECT_LE(squared_error(d, w), squared_error(full_range_int4(w, 32, GetParam()), w) + 1e-12)
            << name;
      }
      keep.push_back(d);
    } else {
      keep.push_back(std::move(w));
    }
    dense.push_back({name, DType::F32, t.shape, keep.back().data()});
  }
  EXPECT_EQ(quantized, 2 * 7);  // q, k, v, o, gate, up, down of two layers
  fs::create_directories(base_ / "d");
  ASSERT_TRUE(write_safetensors((base_ / "d/model.safetensors").string(), dense).ok());
  fs::copy_file(src_ / "config.json", base_ / "d/config.json");

  const std::vector<int32_t> tokens = {3, 17, 400, 9, 250, 1};
  const std::vector<float> a = logits(base_ / "q", tokens), b = logits(base_ / "d", tokens);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::fabs(b[i])));

  // Greedy decoding: each next token from the quantized model's last row, fed back, equals the
  // dequantized model's choice.
  std::vector<int32_t> seq = {5, 6};
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> la = logits(base_ / "q", seq), lb = logits(base_ / "d", seq);
    const size_t V = 512, last = la.size() - V;
    auto argmax = [&](const std::vector<float>& l) {
      return static_cast<int32_t>(std::max_element(l.begin() + last, l.end()) - l.begin() - last);
    };
    ASSERT_EQ(argmax(la), argmax(lb)) << "step " << step;
    seq.push_back(argmax(la));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedModel,
                         ::testing::Values(QuantizeFormat::kFp8, QuantizeFormat::kAwq,
                                           QuantizeFormat::kGptq));

TEST(QuantizeFolder, WritesThePublishedConfigAndRefusesWhatItCannotPack) {
  set_log_level(LogLevel::WARN);
  const fs::path src = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";
  const fs::path out = fs::path(::testing::TempDir()) / ("syv_qcfg_" + std::to_string(::getpid()));
  fs::remove_all(out);
  QuantizeOptions o{src.string(), out.string(), QuantizeFormat::kAwq, 48, 128};
  Status s = quantize_folder(o);
  EXPECT_NE(s.message().find("tensor \"model.layers.0.mlp.down_proj.weight\" [64, 128] cannot "
                             "be quantized: --group-size 48 does not divide K = 128"),
            std::string::npos)
      << s.message();
  o.format = QuantizeFormat::kFp8;
  ASSERT_TRUE(quantize_folder(o).ok());
  std::ifstream in(out / "config.json");
  const json c = json::parse(in);
  EXPECT_EQ(c["quantization_config"],
            json::parse(R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128], "modules_to_not_convert": []})"));
  auto store = WeightStore::open_dir(out.string());
  ASSERT_TRUE(store.ok());
  const TensorInfo* sc = store->find("model.layers.1.mlp.down_proj.weight_scale_inv");
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->dtype, DType::F32);
  EXPECT_EQ(sc->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(store->find("model.embed_tokens.weight")->dtype, DType::BF16);
  o.in_dir = out.string();
  o.out_dir = out.string() + "_again";
  EXPECT_NE(quantize_folder(o).message().find("the model is already quantized"), std::string::npos);
  EXPECT_TRUE(quantize_tensor_name("model.layers.3.linear_attn.in_proj_qkv.weight"));
  EXPECT_FALSE(quantize_tensor_name("model.layers.3.linear_attn.in_proj_ba.weight"));
  EXPECT_FALSE(quantize_tensor_name("model.layers.3.linear_attn.in_proj_a.weight"));
  EXPECT_FALSE(quantize_tensor_name("model.layers.3.mlp.gate.weight"));
  EXPECT_FALSE(quantize_tensor_name("model.layers.3.mlp.shared_expert_gate.weight"));
  EXPECT_FALSE(quantize_tensor_name("lm_head.weight"));
  EXPECT_TRUE(quantize_tensor_name("lm_head.weight", /*lm_head=*/true));  // gptq --lm-head
  EXPECT_FALSE(quantize_tensor_name("model.embed_tokens.weight", /*lm_head=*/true));
  fs::remove_all(out);
}

}  // namespace
}  // namespace syv
