// Typed weights and KV (backend/weight.h, backend/kv_cache_view.h, CacheConfig::kv_dtype): dense
// weights and float KV run exactly the ops they ran before (bit-identical to the Tensor
// overloads); every other format and KV dtype without kernels is refused by name where it would be
// used (the CPU's fp8 / int4 KV kernels: kv_quantized_test.cpp), and unknown quant_methods and fp8
// tensors without a quantization_config are refused at load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "kv/cache_store.h"
#include "model/model.h"
#include "unit/keep_dtype_backend.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Tensor t(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An fp8 block-scaled [N, K] weight over host buffers (never computed with: refused).
struct Fp8Weight {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  Weight w;
  Fp8Weight(int64_t N, int64_t K) : data(static_cast<size_t>(N * K)), scales(4) {
    w.tensor = Tensor(data.data(), DType::F8E4M3, {N, K});
    w.format = WeightFormat::kFp8Block;
    w.scales = Tensor(scales.data(), DType::F32, {1, 1});
    w.n = N;
    w.k = K;
    w.block_n = w.block_k = 128;
  }
};

// An int4 group-quantized [N, K] weight with zero points.
struct Int4Weight {
  std::vector<uint8_t> data, zeros;
  std::vector<float> scales;
  Weight w;
  Int4Weight(int64_t N, int64_t K, int32_t group)
      : data(static_cast<size_t>(N * K / 2)),
        zeros(static_cast<size_t>(N * K / group)),
        scales(static_cast<size_t>(N * K / group)) {
    w.tensor = Tensor(data.data(), DType::U4X2, {N, K / 2});
    w.format = WeightFormat::kInt4Group;
    w.scales = Tensor(scales.data(), DType::F32, {N, K / group});
    w.zeros = Tensor(zeros.data(), DType::U8, {N, K / group});
    w.n = N;
    w.k = K;
    w.group_size = group;
  }
};

class TypedWeights : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }  // the thread pool
  std::unique_ptr<Backend> b = make_cpu_backend();
};

TEST_F(TypedWeights, DenseWeightDescribesItsShape) {
  std::vector<float> w(6 * 4);
  const Weight dw = Weight::dense(t(w, {6, 4}));
  EXPECT_TRUE(dw.dense());
  EXPECT_EQ(dw.n, 6);
  EXPECT_EQ(dw.k, 4);
  EXPECT_TRUE(dw.scales.empty() && dw.zeros.empty());
  std::vector<float> e(3 * 6 * 4);
  const Weight experts = Weight::dense(t(e, {3, 6, 4}));
  EXPECT_EQ(experts.n, 6);
  EXPECT_EQ(experts.k, 4);
  const Weight vec = Weight::dense(t(w, {24}));
  EXPECT_EQ(vec.n, 1);
  EXPECT_EQ(vec.k, 24);
  EXPECT_EQ(dw.describe(), "dense weights (f32)");
  EXPECT_EQ(Fp8Weight(8, 16).w.describe(), "fp8 block-scaled weights (f8e4m3, 128x128 blocks)");
  EXPECT_EQ(Int4Weight(8, 16, 4).w.describe(),
            "int4 group-quantized weights (u4x2, groups of 4 with zero points)");
}

TEST_F(TypedWeights, DenseDispatchIsTheTensorOp) {
  const int64_t T = 3, K = 16, N = 8, H = K;
  auto x = random_vec(T * K, 1), w = random_vec(N * K, 2), bias = random_vec(N, 3);
  const Weight dw = Weight::dense(t(w, {N, K}));
  std::vector<float> a(T * N), c(T * N);
  Tensor ta = t(a, {T, N}), tc = t(c, {T, N});
  b->linear(t(x, {T, K}), t(w, {N, K}), t(bias, {N}), ta);
  b->linear(t(x, {T, K}), dw, t(bias, {N}), tc);
  EXPECT_TRUE(same_bits(a, c));

  // linear_silu_mul: w is [2I, H].
  const int64_t I = N / 2;
  std::vector<float> gu_a(T * N), gu_c(T * N), out_a(T * I), out_c(T * I);
  Tensor tgu_a = t(gu_a, {T, N}), tgu_c = t(gu_c, {T, N}), to_a = t(out_a, {T, I}),
         to_c = t(out_c, {T, I});
  b->linear_silu_mul(t(x, {T, K}), t(w, {N, K}), tgu_a, to_a);
  b->linear_silu_mul(t(x, {T, K}), dw, tgu_c, to_c);
  EXPECT_TRUE(same_bits(out_a, out_c));

  // add_rmsnorm_linear and add_rmsnorm_linear_silu_mul.
  auto res = random_vec(T * H, 4), norm = random_vec(H, 5);
  std::vector<float> r_a(T * H), r_c(T * H), n_a(T * H), n_c(T * H);
  Tensor tr_a = t(r_a, {T, H}), tr_c = t(r_c, {T, H}), tn_a = t(n_a, {T, H}), tn_c = t(n_c, {T, H});
  b->add_rmsnorm_linear(t(res, {T, H}), t(x, {T, H}), t(norm, {H}), 1e-6f, NormKind::kPlain, tr_a,
                        tn_a, t(w, {N, K}), t(bias, {N}), ta);
  b->add_rmsnorm_linear(t(res, {T, H}), t(x, {T, H}), t(norm, {H}), 1e-6f, NormKind::kPlain, tr_c,
                        tn_c, dw, t(bias, {N}), tc);
  EXPECT_TRUE(same_bits(a, c));
  EXPECT_TRUE(same_bits(r_a, r_c));
  b->add_rmsnorm_linear_silu_mul(t(res, {T, H}), t(x, {T, H}), t(norm, {H}), 1e-6f,
                                 NormKind::kOnePlus, tr_a, tn_a, t(w, {N, K}), tgu_a, to_a);
  b->add_rmsnorm_linear_silu_mul(t(res, {T, H}), t(x, {T, H}), t(norm, {H}), 1e-6f,
                                 NormKind::kOnePlus, tr_c, tn_c, dw, tgu_c, to_c);
  EXPECT_TRUE(same_bits(out_a, out_c));
}

TEST_F(TypedWeights, QuantizedWeightsRunAsTheirDequantizedDenseWeights) {
  const int64_t T = 2, K = 16, N = 8;
  auto x = random_vec(T * K, 1);
  Fp8Weight fp8(N, K);
  Int4Weight int4(N, K, 4);
  for (size_t i = 0; i < fp8.data.size(); ++i) fp8.data[i] = static_cast<uint8_t>(0x20 + i % 64);
  fp8.scales[0] = 0.5f;
  for (size_t i = 0; i < int4.data.size(); ++i) int4.data[i] = static_cast<uint8_t>(i * 37);
  for (size_t i = 0; i < int4.zeros.size(); ++i) int4.zeros[i] = static_cast<uint8_t>(i % 16);
  for (size_t i = 0; i < int4.scales.size(); ++i)
    int4.scales[i] = 0.01f * static_cast<float>(i + 1);
  for (Weight* w : {&fp8.w, &int4.w}) {
    std::vector<float> dense(N * K);
    dequantize_rows(*w, 0, N, dense.data());
    std::vector<float> a(T * N), c(T * N);
    Tensor ta = t(a, {T, N}), tc = t(c, {T, N});
    b->linear(t(x, {T, K}), t(dense, {N, K}), Tensor(), ta);
    b->linear(t(x, {T, K}), *w, Tensor(), tc);
    EXPECT_TRUE(same_bits(a, c)) << w->describe();
    // The fused ops run their sequence with the quantized projection.
    std::vector<float> gu_a(T * N), gu_c(T * N), o_a(T * N / 2), o_c(T * N / 2);
    Tensor tga = t(gu_a, {T, N}), tgc = t(gu_c, {T, N}), toa = t(o_a, {T, N / 2}),
           toc = t(o_c, {T, N / 2});
    b->linear_silu_mul(t(x, {T, K}), t(dense, {N, K}), tga, toa);
    b->linear_silu_mul(t(x, {T, K}), *w, tgc, toc);
    EXPECT_TRUE(same_bits(o_a, o_c)) << w->describe();
    auto res = random_vec(T * K, 4), norm = random_vec(K, 5);
    std::vector<float> r_a(T * K), r_c(T * K), n_a(T * K), n_c(T * K);
    Tensor tra = t(r_a, {T, K}), trc = t(r_c, {T, K}), tna = t(n_a, {T, K}), tnc = t(n_c, {T, K});
    b->add_rmsnorm_linear_silu_mul(t(res, {T, K}), t(x, {T, K}), t(norm, {K}), 1e-6f,
                                   NormKind::kOnePlus, tra, tna, t(dense, {N, K}), tga, toa);
    b->add_rmsnorm_linear_silu_mul(t(res, {T, K}), t(x, {T, K}), t(norm, {K}), 1e-6f,
                                   NormKind::kOnePlus, trc, tnc, *w, tgc, toc);
    EXPECT_TRUE(same_bits(o_a, o_c) && same_bits(r_a, r_c)) << w->describe();
  }
  // Quantized MoE experts (Backend::moe_experts' stacked layout) run on the CPU
  // (tests/unit/moe_quantized_test.cpp: whole models against their dequantized experts); a
  // backend without moe_experts_quantized() refuses them by name.
  std::vector<float> out(T * N);
  Tensor to = t(out, {T, N});
  std::vector<int32_t> ids(T, 0);
  std::vector<float> wts(T, 1.0f);
  Tensor tids(ids.data(), DType::I32, {T, 1});
  KeepDtypeBackend plain(DType::F32);
  EXPECT_DEATH(plain.moe_experts(t(x, {T, K}), tids, t(wts, {T, 1}), fp8.w, int4.w, to),
               "backend keep-f32 moe_experts: fp8 block-scaled weights");
}

// ---- KV ----------------------------------------------------------------------------------------

CacheSpec one_kv_layer(DType dtype) {
  CacheSpec spec;
  spec.add_kv_layer({2, 8, dtype});
  return spec;
}

CacheConfig small_config() {
  CacheConfig c;
  c.page_size = 4;
  c.num_pages = 3;
  return c;
}

TEST(TypedKv, StoreViewsAreKvCacheViews) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto store = CacheStore::create(one_kv_layer(DType::F32), small_config(), *cpu);
  ASSERT_TRUE(store.ok()) << store.message();
  const KvCacheView kv = (*store)->kv_view(0);
  EXPECT_EQ(kv.dtype, DType::F32);
  EXPECT_EQ(kv.k.dtype, DType::F32);
  EXPECT_EQ(kv.num_pages(), 3);
  EXPECT_EQ(kv.page_size(), 4);
  EXPECT_EQ(kv.num_kv_heads(), 2);
  EXPECT_EQ(kv.head_dim(), 8);
  ASSERT_EQ(kv.v.ndim, 4);
  EXPECT_EQ(kv.v.dim(3), 8);
  EXPECT_FALSE(kv.scaled());
  EXPECT_TRUE(kv.k_scales.empty() && kv.v_scales.empty());
}

TEST(TypedKv, KvDtypesWithoutKernelsAreRefusedAtCreation) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  CacheConfig c = small_config();
  // Unset: the spec as declared (as before the field existed).
  EXPECT_TRUE(CacheStore::create(one_kv_layer(DType::F32), c, *cpu).ok());
  // The backend's own dtype and the quantized ones it has kernels for (Backend::supports_kv_dtype;
  // one_kv_layer's head_dim 8 is too small for int4, kv_quantized_test covers it).
  for (DType d : {DType::F32, DType::F8E4M3}) {
    c.kv_dtype = d;
    auto same = CacheStore::create(one_kv_layer(DType::F32), c, *cpu);
    ASSERT_TRUE(same.ok()) << same.message();
    EXPECT_EQ((*same)->spec().kv_layers[0].dtype, d);
    EXPECT_EQ((*same)->kv_view(0).scaled(), d == DType::F8E4M3);
  }
  for (DType d : {DType::BF16, DType::F16}) {
    c.kv_dtype = d;
    auto r = CacheStore::create(one_kv_layer(DType::F32), c, *cpu);
    ASSERT_FALSE(r.ok()) << dtype_name(d);
    EXPECT_NE(r.message().find("KV cache dtype " + std::string(dtype_name(d)) +
                               " is not supported on backend cpu (it stores KV in f32)"),
              std::string::npos)
        << r.message();
  }
  c.kv_dtype = DType::F8E5M2;
  auto r = CacheStore::create(one_kv_layer(DType::F32), c, *cpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("KV cache dtype f8e5m2 is not supported (float KV, fp8 e4m3 or int4"),
            std::string::npos)
      << r.message();
  c.kv_dtype = DType::U4X2;
  r = CacheStore::create(one_kv_layer(DType::F32), c, *cpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("int4 needs head_dim % 32 == 0 (one scale per group of 32), found "
                             "head_dim 8"),
            std::string::npos)
      << r.message();
  // A backend without quantized-KV kernels (CUDA until they land) refuses fp8 by name.
  KeepDtypeBackend plain(DType::F32);
  c.kv_dtype = DType::F8E4M3;
  r = CacheStore::create(one_kv_layer(DType::F32), c, plain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("KV cache dtype f8e4m3 is not supported on backend keep-f32 (it "
                             "stores KV in f32; its quantized-KV kernels are not there yet)"),
            std::string::npos)
      << r.message();
}

TEST(TypedKv, ASpecDeclaringFp8E5m2KvIsRefusedAtCreation) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto r = CacheStore::create(one_kv_layer(DType::F8E5M2), small_config(), *cpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("KV cache dtype f8e5m2 is not supported"), std::string::npos)
      << r.message();
}

TEST(TypedKv, ByteFormulasFollowTheKvDtype) {
  const CacheSpec f32 = one_kv_layer(DType::F32);
  EXPECT_EQ(f32.kv_bytes_per_token, 2 * 2 * 8 * 4);
  CacheSpec mixed;
  mixed.add_kv_layer({2, 8, DType::F32});
  mixed.add_state_layer({3, 12, 2, 4, 4});
  mixed.add_kv_layer({1, 4, DType::F32});
  const CacheSpec fp8 = mixed.with_kv_dtype(DType::F8E4M3);
  // fp8: one byte a value plus an f32 scale per (token, kv head) for K and for V.
  EXPECT_EQ(fp8.kv_bytes_per_token, (2 * 2 * 8 + 2 * 2 * 4) + (2 * 1 * 4 + 2 * 1 * 4));
  EXPECT_EQ(fp8.state_bytes_per_seq, mixed.state_bytes_per_seq);
  EXPECT_EQ(fp8.layer_kinds, mixed.layer_kinds);
  const CacheSpec bf16 = mixed.with_kv_dtype(DType::BF16);
  EXPECT_EQ(bf16.kv_bytes_per_token, 2 * 2 * 8 * 2 + 2 * 1 * 4 * 2);
  EXPECT_EQ(bf16.kv_layers[1].dtype, DType::BF16);
  // int4: D / 2 bytes a row plus an f16 scale per 32 elements, for K and for V.
  CacheSpec wide;
  wide.add_kv_layer({2, 128, DType::F32});
  const CacheSpec int4 = wide.with_kv_dtype(DType::U4X2);
  EXPECT_EQ(int4.kv_bytes_per_token, 2 * 2 * (128 / 2 + 2 * 128 / 32));
  EXPECT_EQ(int4.kv_layers[0].row_elems(), 64);
  EXPECT_EQ(int4.kv_layers[0].scale_groups(), 4);
  // The pool grows: bf16 -> fp8 about 2x (1.94x at head_dim 128), -> int4 32 / 9 = 3.56x at any
  // head_dim (D / 2 bytes + D / 32 f16 scales against 2 D).
  const int64_t b16 = wide.with_kv_dtype(DType::BF16).kv_bytes_per_token;
  EXPECT_NEAR(static_cast<double>(b16) / wide.with_kv_dtype(DType::F8E4M3).kv_bytes_per_token, 1.94,
              0.01);
  EXPECT_NEAR(static_cast<double>(b16) / int4.kv_bytes_per_token, 32.0 / 9.0, 1e-9);
}

TEST(TypedKv, KvWriteThroughTheViewIsTheTensorOpAndQuantizedKvNeedsKernels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::unique_ptr<Backend> b = make_cpu_backend();
  const int64_t Hk = 2, D = 8, P = 4, pages = 3;
  Batch batch;
  batch.token_ids = {1, 2, 3};
  batch.positions = {0, 1, 2};
  batch.seq_starts = {0, 3};
  batch.context_lens = {3};
  batch.page_table = {2};
  batch.max_pages_per_seq = 1;
  batch.logit_rows = {2};
  BatchMeta meta = b->prepare_batch(batch, static_cast<int32_t>(P));
  const int64_t T = 3;
  auto k = random_vec(T * Hk * D, 7), v = random_vec(T * Hk * D, 8);
  std::vector<float> kc_a(pages * P * Hk * D, 0), vc_a(kc_a.size(), 0), kc_b(kc_a.size(), 0),
      vc_b(kc_a.size(), 0);
  Tensor tka = t(kc_a, {pages, P, Hk, D}), tva = t(vc_a, {pages, P, Hk, D});
  b->kv_write(t(k, {T, Hk, D}), t(v, {T, Hk, D}), tka, tva, meta);
  KvCacheView view;
  view.k = t(kc_b, {pages, P, Hk, D});
  view.v = t(vc_b, {pages, P, Hk, D});
  view.dtype = DType::F32;
  b->kv_write(t(k, {T, Hk, D}), t(v, {T, Hk, D}), view, meta);
  EXPECT_TRUE(same_bits(kc_a, kc_b));
  EXPECT_TRUE(same_bits(vc_a, vc_b));

  std::vector<float> q = random_vec(T * 2 * Hk * D, 9), out_a(T * 2 * Hk * D),
                     out_b(T * 2 * Hk * D);
  Tensor toa = t(out_a, {T, 2 * Hk, D}), tob = t(out_b, {T, 2 * Hk, D});
  b->paged_attention(t(q, {T, 2 * Hk, D}), tka, tva, 0.25f, meta, toa);
  b->paged_attention(t(q, {T, 2 * Hk, D}), view, 0.25f, meta, tob);
  EXPECT_TRUE(same_bits(out_a, out_b));

  // fp8 pages on a backend without quantized-KV kernels: the default hooks refuse by name (the
  // CPU backend's own fp8 / int4 kernels are kv_quantized_test's).
  std::vector<uint8_t> k8(kc_a.size()), v8(kc_a.size());
  std::vector<float> ks(static_cast<size_t>(pages * P * Hk)), vs(ks.size());
  KvCacheView fp8;
  fp8.k = Tensor(k8.data(), DType::F8E4M3, {pages, P, Hk, D});
  fp8.v = Tensor(v8.data(), DType::F8E4M3, {pages, P, Hk, D});
  fp8.dtype = DType::F8E4M3;
  fp8.k_scales = Tensor(ks.data(), DType::F32, {pages, P, Hk, 1});
  fp8.v_scales = Tensor(vs.data(), DType::F32, {pages, P, Hk, 1});
  EXPECT_TRUE(fp8.scaled());
  KeepDtypeBackend keep(DType::F32);
  Backend& plain = keep;  // the KvCacheView overloads (KeepDtypeBackend's own hide them)
  EXPECT_FALSE(plain.supports_kv_dtype(DType::F8E4M3));
  EXPECT_TRUE(b->supports_kv_dtype(DType::F8E4M3) && b->supports_kv_dtype(DType::U4X2));
  EXPECT_DEATH(plain.kv_write(t(k, {T, Hk, D}), t(v, {T, Hk, D}), fp8, meta),
               "backend keep-f32 kv_write: KV cache dtype f8e4m3 with scales is not supported yet");
  EXPECT_DEATH(plain.paged_attention(t(q, {T, 2 * Hk, D}), fp8, 0.25f, meta, tob),
               "backend keep-f32 paged_attention: KV cache dtype f8e4m3");
}

// ---- the loader -------------------------------------------------------------------------------

class QuantizedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::WARN);
    dir_ = fs::path(::testing::TempDir()) /
           ("syv_quant_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path fixture = fs::path(SYV_SOURCE_DIR) / "tests/fixtures/qwen3/tied_gqa2";
    fs::copy_file(fixture / "model.safetensors", dir_ / "model.safetensors");
    std::ifstream in(fixture / "config.json");
    config_ = nlohmann::json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_config(const nlohmann::json& j) { std::ofstream(dir_ / "config.json") << j.dump(); }
  fs::path dir_;
  nlohmann::json config_;
};

TEST_F(QuantizedCheckpoint, TheUnquantizedFixtureLoads) {
  write_config(config_);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto model = load_model(dir_.string(), *cpu);
  EXPECT_TRUE(model.ok()) << model.message();
}

TEST_F(QuantizedCheckpoint, OtherMethodsAreRefusedByFieldAndValue) {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  for (const char* method : {"bitsandbytes", "hqq", "exl2"}) {
    nlohmann::json c = config_;
    c["quantization_config"] = {{"quant_method", method}, {"weight_block_size", {128, 128}}};
    write_config(c);
    auto model = load_model(dir_.string(), *cpu);
    ASSERT_FALSE(model.ok()) << method;
    EXPECT_NE(model.message().find("config.json: field \"quantization_config.quant_method\": \"" +
                                   std::string(method) + "\" is not supported"),
              std::string::npos)
        << model.message();
  }
  nlohmann::json c = config_;
  c["quantization_config"] = {{"bits", 4}};
  write_config(c);
  auto cfg = load_model_config(dir_.string());
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.message().find("\"quantization_config.quant_method\": expected a string, found "
                               "nothing (missing)"),
            std::string::npos)
      << cfg.message();
  // A quantization_config whose modules are all kept in float loads (every module is read by
  // which tensors it has).
  c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  write_config(c);
  EXPECT_TRUE(load_model(dir_.string(), *cpu).ok());
}

TEST_F(QuantizedCheckpoint, QuantizationConfigInsideTextConfigIsRead) {
  nlohmann::json c = nlohmann::json::parse(R"({
    "model_type": "qwen3_5", "tie_word_embeddings": true,
    "text_config": {"model_type": "qwen3_5_text",
                    "quantization_config": {"quant_method": "fp8"}}})");
  auto r = parse_model_config(c.dump(), "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("x/config.json: field \"quantization_config.weight_block_size\""),
            std::string::npos)
      << r.message();
}

TEST_F(QuantizedCheckpoint, Fp8TensorsWithoutQuantizationConfigAreRefusedByName) {
  write_config(config_);
  auto specs_store = WeightStore::open_dir(dir_.string());
  ASSERT_TRUE(specs_store.ok());
  std::vector<TensorToWrite> tensors;
  std::vector<uint8_t> fp8;
  for (const std::string& name : specs_store->names()) {
    const TensorInfo& t = *specs_store->find(name);
    if (name == "model.layers.0.mlp.down_proj.weight") {
      fp8.assign(static_cast<size_t>(t.numel()), 0x38);
      tensors.push_back({name, DType::F8E4M3, t.shape, fp8.data()});
    } else {
      tensors.push_back({name, t.dtype, t.shape, t.data});
    }
  }
  const fs::path other = dir_ / "fp8";
  fs::create_directories(other);
  ASSERT_TRUE(write_safetensors((other / "model.safetensors").string(), tensors).ok());
  std::ofstream(other / "config.json") << config_.dump();
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  auto model = load_model(other.string(), *cpu);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.message().find("tensor \"model.layers.0.mlp.down_proj.weight\" has dtype "
                                 "f8e4m3, expected f32, f16 or bf16 (quantized weights are read "
                                 "only as config.json's quantization_config describes)"),
            std::string::npos)
      << model.message();
}

}  // namespace
}  // namespace syv
