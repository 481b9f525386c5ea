// Bad model folders and bad CLI input: each error names the tensor / field / argument and says
// what was expected and what was found. Also random-weight loading from config.json alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "backend/backend.h"
#include "backend/random_fill.h"
#include "core/check.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "model/qwen3_next.h"
#include "model/weight_spec.h"
#include "unit/keep_dtype_backend.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

const std::string kFixture =
    std::string(SYV_SOURCE_DIR) + "/tests/fixtures/qwen3/tied_gqa4_kv1_hd64";

// A scratch copy of the fixture's config.json with the weights rewritten by `edit`.
class BadModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("syv_model_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kFixture + "/config.json", dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes model.safetensors from the fixture's tensors, letting `edit` drop or replace them.
  void write_weights(const std::function<bool(TensorToWrite&)>& edit) {
    auto store = WeightStore::open_dir(kFixture);
    ASSERT_TRUE(store.ok()) << store.message();
    std::vector<TensorToWrite> tensors;
    for (const std::string& name : store->names()) {
      const TensorInfo* info = store->find(name);
      TensorToWrite t{name, info->dtype, info->shape, info->data};
      if (edit(t)) tensors.push_back(t);
    }
    ASSERT_TRUE(write_safetensors((dir_ / "model.safetensors").string(), tensors).ok());
  }

  std::string load_error() {
    auto backend = make_cpu_backend();
    auto model = load_model(dir_.string(), *backend);
    EXPECT_FALSE(model.ok());
    return model.ok() ? "" : model.message();
  }

  fs::path dir_;
};

TEST_F(BadModel, MissingTensorIsNamed) {
  write_weights([](TensorToWrite& t) { return t.name != "model.layers.1.mlp.up_proj.weight"; });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("\"model.layers.1.mlp.up_proj.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("[112, 48]"), std::string::npos) << "expected shape: " << msg;
}

TEST_F(BadModel, WrongShapeSaysExpectedAndFound) {
  write_weights([&](TensorToWrite& t) {
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {32, 48};  // config: [64, 48]
    return true;
  });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("\"model.layers.0.self_attn.k_proj.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("[32, 48]"), std::string::npos) << "found shape: " << msg;
  EXPECT_NE(msg.find("[64, 48]"), std::string::npos) << "expected shape: " << msg;
}

TEST_F(BadModel, WrongDtypeIsRefusedByName) {
  write_weights([&](TensorToWrite& t) {
    if (t.name == "model.norm.weight") {  // 48 bf16 values -> 96 u8 values of the same bytes
      t.dtype = DType::U8;
      t.shape = {96};
    }
    return true;
  });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("U8"), std::string::npos) << "found dtype: " << msg;
  EXPECT_NE(msg.find("BF16"), std::string::npos) << "supported dtypes: " << msg;
}

TEST_F(BadModel, UnsupportedArchitectureIsRefused) {
  write_weights([](TensorToWrite&) { return true; });
  std::ifstream in(dir_ / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string config = ss.str();
  const std::string from = "\"model_type\": \"qwen3\"";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"model_type\": \"llama\"");
  std::ofstream(dir_ / "config.json") << config;
  const std::string msg = load_error();
  EXPECT_NE(msg.find("llama"), std::string::npos) << "found: " << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << "supported: " << msg;
}

TEST_F(BadModel, MissingFolderIsNamed) {
  auto backend = make_cpu_backend();
  auto model = load_model((dir_ / "nope").string(), *backend);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.message().find("nope"), std::string::npos) << model.message();
}

TEST_F(BadModel, RandomWeightsNeedOnlyConfigAndAreSeeded) {
  auto logits_for = [&](uint64_t seed) {
    auto backend = make_cpu_backend();
    LoadOptions options;
    options.random_weights = true;
    options.seed = seed;
    auto model = load_model(dir_.string(), *backend, options);  // no safetensors in dir_
    EXPECT_TRUE(model.ok()) << model.message();
    CacheConfig cache;
    cache.page_size = 16;
    cache.num_pages = 1;
    auto store = make_cache_store(**model, cache);
    EXPECT_TRUE(store.ok());
    Batch b;
    b.token_ids = {1, 2, 3};
    b.positions = {0, 1, 2};
    b.seq_starts = {0, 3};
    b.context_lens = {3};
    b.page_table = {0};
    b.max_pages_per_seq = 1;
    b.logit_rows = {2};
    Tensor t = (*model)->forward(b);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend->download(host.data(), t.data, host.size() * 4);
    return host;
  };
  auto a = logits_for(7), again = logits_for(7), other = logits_for(8);
  ASSERT_EQ(a.size(), 640u);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

// Runs `syv <args>`; returns the exit status and stderr.
std::pair<int, std::string> run_syv(const std::string& args) {
  const std::string err =
      (fs::temp_directory_path() / ("syv_model_load_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(SYV_BIN) + " " + args + " >/dev/null 2>" + err;
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  return {status, ss.str()};
}

TEST(CliBadInput, TokensOutOfVocabulary) {
  auto [status, err] = run_syv("logits --model " + kFixture + " --tokens 1,2,640 --out /dev/null");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("640"), std::string::npos) << "found: " << err;
  EXPECT_NE(err.find("[0, 640)"), std::string::npos) << "expected: " << err;
  EXPECT_EQ(err.find("Abort"), std::string::npos) << err;
}

TEST(CliBadInput, TokensNotNumbers) {
  auto [status, err] = run_syv("generate --model " + kFixture + " --tokens 1,two --max-tokens 1");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("\"two\""), std::string::npos) << err;
}

TEST(CliBadInput, MissingModelFolder) {
  auto [status, err] = run_syv("logits --model /nonexistent/syv-model --tokens 1 --out /dev/null");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--model"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent/syv-model"), std::string::npos) << err;
}

// ---- WeightLoader: the fast path (mapped bytes -> staging -> backend, no f32 round trip) -------

// Host memory like the CPU backend, but weights stay in `keep` (bf16 / f16 / f32) the way the
// CUDA backend keeps bf16: exercises the copy and narrowing paths of the loader without a GPU.
std::vector<uint8_t> bytes_of(Backend& backend, const DeviceWeight& w) {
  std::vector<uint8_t> out(w.buffer.bytes());
  backend.download(out.data(), w.buffer.data(), out.size());
  return out;
}

// Element i of a tensor of `dtype` in raw bytes, as f32.
float element(DType dtype, const uint8_t* data, size_t i) {
  float f = 0;
  convert_to_f32(dtype, data + i * dtype_size(dtype), &f, 1);
  return f;
}

// A file with one tensor of each float dtype, the bf16 one larger than a staging chunk (16 MiB)
// so chunk boundaries and the reuse of staging buffers are crossed.
class WeightLoaderFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("syv_weight_loader_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.f, 1.f);
    big_.resize(big_rows_ * 96);
    for (auto& v : big_) v = f32_to_bf16(normal(rng));
    f32_.resize(40 * 96);
    for (auto& v : f32_) v = normal(rng);
    f16_.resize(24 * 96);
    for (auto& v : f16_) v = f32_to_f16(normal(rng));
    ASSERT_TRUE(write_safetensors((dir_ / "model.safetensors").string(),
                                  {{"big", DType::BF16, {big_rows_, 96}, big_.data()},
                                   {"f32", DType::F32, {40, 96}, f32_.data()},
                                   {"f16", DType::F16, {24, 96}, f16_.data()}})
                    .ok());
    auto store = WeightStore::open_dir(dir_.string());
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::make_unique<WeightStore>(std::move(*store));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Expected contents of tensor `name` stored as `dtype`.
  std::vector<uint8_t> expected(const std::string& name, DType dtype) {
    const TensorInfo* info = store_->find(name);
    const size_t n = static_cast<size_t>(info->numel());
    std::vector<uint8_t> out(n * dtype_size(dtype));
    for (size_t i = 0; i < n; ++i) {
      const float f = element(info->dtype, static_cast<const uint8_t*>(info->data), i);
      if (dtype == DType::F32) {
        std::memcpy(out.data() + 4 * i, &f, 4);
      } else {
        const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }

  const int64_t big_rows_ = 100000;  // 100000 x 96 bf16 = 19.2 MB
  fs::path dir_;
  std::vector<uint16_t> big_, f16_;
  std::vector<float> f32_;
  std::unique_ptr<WeightStore> store_;
};

TEST_F(WeightLoaderFile, EveryFileDtypeLandsAsTheBackendKeepsIt) {
  for (DType keep : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_name(keep));
    KeepDtypeBackend backend(keep);
    WeightLoader loader(backend, store_.get(), 0);
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"big", {big_rows_, 96}}, {"f32", {40, 96}}, {"f16", {24, 96}}}) {
      auto w = loader.load({name, shape});
      ASSERT_TRUE(w.ok()) << w.message();
      loader.finish();
      EXPECT_EQ(w->tensor.dtype, keep) << name;
      EXPECT_EQ(w->tensor.shape[0], shape[0]);
      EXPECT_TRUE(bytes_of(backend, *w) == expected(name, keep)) << name << " differs";
    }
  }
  // The bf16 file into a bf16 backend is a plain copy of the file's bytes.
  KeepDtypeBackend backend(DType::BF16);
  WeightLoader loader(backend, store_.get(), 0);
  auto w = loader.load({"big", {big_rows_, 96}});
  ASSERT_TRUE(w.ok());
  loader.finish();
  EXPECT_EQ(std::memcmp(bytes_of(backend, *w).data(), big_.data(), big_.size() * 2), 0);
}

TEST_F(WeightLoaderFile, LoadConcatStacksThePartsInOneBuffer) {
  for (DType keep : {DType::BF16, DType::F32}) {
    KeepDtypeBackend backend(keep);
    WeightLoader loader(backend, store_.get(), 0);
    auto w = loader.load_concat({{"f32", {40, 96}}, {"big", {big_rows_, 96}}, {"f16", {24, 96}}});
    ASSERT_TRUE(w.ok()) << w.message();
    loader.finish();
    EXPECT_EQ(w->tensor.shape[0], 40 + big_rows_ + 24);
    EXPECT_EQ(w->tensor.shape[1], 96);
    EXPECT_EQ(w->tensor.dtype, keep);  // weight_dtype() of the first part's dtype
    std::vector<uint8_t> want = expected("f32", keep), big = expected("big", keep),
                         f16 = expected("f16", keep);
    want.insert(want.end(), big.begin(), big.end());
    want.insert(want.end(), f16.begin(), f16.end());
    EXPECT_TRUE(bytes_of(backend, *w) == want);
    EXPECT_EQ(loader.parameters_loaded(), (40 + big_rows_ + 24) * 96);
  }
}

// Row ranges of several weights in the order given (a gated q_proj's per-head halves), as the
// rows of load_concat()'s whole weights would be; read_f32() / upload() serve random weights.
TEST_F(WeightLoaderFile, LoadRowsStacksTheRangesInOrder) {
  const std::vector<WeightSpec> specs = {{"big", {big_rows_, 96}}, {"f16", {24, 96}}};
  const std::vector<WeightLoader::RowRange> ranges = {
      {0, 8, 8}, {1, 0, 24}, {0, 0, 8}, {0, big_rows_ - 70000, 70000}, {1, 5, 3}};
  for (DType keep : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(keep));
    KeepDtypeBackend backend(keep);
    WeightLoader loader(backend, store_.get(), 0);
    ASSERT_TRUE(loader.slices_rows(specs));
    auto w = loader.load_rows(specs, ranges);
    ASSERT_TRUE(w.ok()) << w.message();
    loader.finish();
    EXPECT_EQ(w->tensor.shape[0], 8 + 24 + 8 + 70000 + 3);
    EXPECT_EQ(w->tensor.shape[1], 96);
    EXPECT_EQ(w->tensor.dtype, keep);
    const std::vector<uint8_t> whole[2] = {expected("big", keep), expected("f16", keep)};
    const size_t row_bytes = 96 * dtype_size(keep);
    std::vector<uint8_t> want;
    for (const auto& r : ranges) {
      const auto* first = whole[r.part].data() + r.first * row_bytes;
      want.insert(want.end(), first, first + r.count * row_bytes);
    }
    EXPECT_TRUE(bytes_of(backend, *w) == want);
  }
  auto backend = make_cpu_backend();
  WeightLoader random(*backend, nullptr, 1);
  EXPECT_FALSE(random.slices_rows(specs));
  WeightLoader files(*backend, store_.get(), 0);
  auto missing = files.load_rows({{"nope", {3, 96}}}, {{0, 0, 3}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing tensor \"nope\""), std::string::npos)
      << missing.message();
}

TEST_F(WeightLoaderFile, LoadConcatChecksEveryPart) {
  auto backend = make_cpu_backend();
  WeightLoader loader(*backend, store_.get(), 0);
  auto missing = loader.load_concat({{"f32", {40, 96}}, {"nope", {3, 96}}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing tensor \"nope\" (expected shape [3, 96])"),
            std::string::npos)
      << missing.message();
  auto shape = loader.load_concat({{"f32", {40, 96}}, {"f16", {25, 96}}});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.message().find("model.safetensors: tensor \"f16\" has shape [24, 96], config "
                                 "expects [25, 96]"),
            std::string::npos)
      << shape.message();
}

TEST(WeightLoaderRandom, BackendDrawsTheHostValues) {
  // Random weights are drawn by Backend::fill_random (on the device for CUDA); read_f32 and
  // `syv demo-model` compute the same values on the host.
  const std::vector<WeightSpec> specs = {{"proj", {64, 48}, WeightInit::kProjection},
                                         {"norm", {48}, WeightInit::kNorm},
                                         {"embed", {70, 48}, WeightInit::kEmbedding},
                                         {"bias", {48}, WeightInit::kZero}};
  for (DType keep : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(keep));
    KeepDtypeBackend backend(keep);
    WeightLoader loader(backend, nullptr, 42);
    WeightLoader host(backend, nullptr, 42);
    for (size_t k = 0; k < specs.size(); ++k) {
      auto w = loader.load(specs[k]);
      ASSERT_TRUE(w.ok()) << w.message();
      DType file_dtype = DType::F32;
      auto values = host.read_f32(specs[k], &file_dtype);
      ASSERT_TRUE(values.ok());
      EXPECT_EQ(file_dtype, DType::BF16);  // random weights count as bf16 checkpoint weights
      const std::vector<uint8_t> got = bytes_of(backend, *w);
      const RandomWeightDraw draw = random_weight_draw(specs[k], 42, k);
      for (int64_t i = 0; i < specs[k].numel(); ++i) {
        const float want = draw.value(i);
        ASSERT_EQ((*values)[static_cast<size_t>(i)], want) << specs[k].name << " " << i;
        const float stored = element(keep, got.data(), static_cast<size_t>(i));
        const float rounded = keep == DType::F32 ? want : bf16_to_f32(f32_to_bf16(want));
        ASSERT_EQ(stored, rounded) << specs[k].name << " element " << i;
      }
    }
  }
  // The draw itself: projections uniform in +-sqrt(3 / fan_in), norms around 1, zeros exact.
  const RandomWeightDraw proj = random_weight_draw(specs[0], 1, 0);
  EXPECT_FLOAT_EQ(proj.scale, std::sqrt(3.0f / 48));
  EXPECT_NE(random_weight_draw(specs[0], 1, 0).stream, random_weight_draw(specs[0], 2, 0).stream);
  EXPECT_NE(random_weight_draw(specs[0], 1, 0).stream, random_weight_draw(specs[0], 1, 1).stream);
  EXPECT_EQ(random_weight_draw(specs[3], 1, 3).value(5), 0.0f);
  EXPECT_EQ(random_uniform(9, 17, 0.5f), random_uniform(9, 17, 0.5f));
}

TEST(BackendFillRandom, DefaultMatchesTheFormulaInEveryDtype) {
  auto cpu = make_cpu_backend();
  const int64_t n = (int64_t{1} << 22) + 77;  // more than one host chunk
  DeviceBuffer buf = cpu->allocate(static_cast<size_t>(n) * 4);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    cpu->fill_random(buf.data(), dt, n, 1234, 0.25f);
    const auto* p = static_cast<const uint8_t*>(buf.data());
    for (int64_t i = 0; i < n; i += 997) {
      const float want = random_uniform(1234, static_cast<uint64_t>(i), 0.25f);
      const float rounded = dt == DType::F32    ? want
                            : dt == DType::BF16 ? bf16_to_f32(f32_to_bf16(want))
                                                : f16_to_f32(f32_to_f16(want));
      ASSERT_EQ(element(dt, p, static_cast<size_t>(i)), rounded) << dtype_name(dt) << " " << i;
      ASSERT_LE(std::fabs(want), 0.25f);
    }
  }
}

// `syv demo-model --config DIR`: random bf16 weights of the config's shapes, sharded like Hugging
// Face, equal to the loader's random draws, loadable through the index.
TEST(DemoModelConfig, WritesShardsWithAnIndexThatLoad) {
  const fs::path out =
      fs::temp_directory_path() / ("syv_demo_config_" + std::to_string(::getpid()));
  fs::remove_all(out);
  // ~0.2 MB of weights, shards of at most 50 kB: several shards.
  auto [status, err] = run_syv("demo-model --config " + kFixture + " --out " + out.string() +
                               " --seed 3 --max-shard-size 0.00005");
  ASSERT_EQ(status, 0) << err;
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / "tokenizer.json"));  // no --tokenizer given
  EXPECT_NE(err.find("no --tokenizer"), std::string::npos) << err;
  auto store = WeightStore::open_dir(out.string());
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_GT(store->files().size(), 2u);
  EXPECT_NE(store->files()[0].find("model-00001-of-0000"), std::string::npos);

  auto config = load_model_config(kFixture);
  ASSERT_TRUE(config.ok());
  const std::vector<WeightSpec> specs = qwen3_weight_specs(*config);
  EXPECT_EQ(store->names().size(), specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    auto t = store->get(specs[k].name, specs[k].shape);
    ASSERT_TRUE(t.ok()) << t.message();
    ASSERT_EQ((*t)->dtype, DType::BF16);
    const RandomWeightDraw draw = random_weight_draw(specs[k], 3, k);
    const auto* data = static_cast<const uint16_t*>((*t)->data);
    for (int64_t i = 0; i < specs[k].numel(); ++i)
      ASSERT_EQ(data[i], f32_to_bf16(draw.value(i))) << specs[k].name << " element " << i;
  }

  // The sharded folder loads and runs; re-writing it as one file replaces the shards.
  auto backend = make_cpu_backend();
  auto model = load_model(out.string(), *backend);
  ASSERT_TRUE(model.ok()) << model.message();
  auto [status1, err1] =
      run_syv("demo-model --config " + kFixture + " --out " + out.string() + " --seed 3");
  ASSERT_EQ(status1, 0) << err1;
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out / "model-00001-of-00002.safetensors"));
  auto single = WeightStore::open_dir(out.string());
  ASSERT_TRUE(single.ok()) << single.message();
  EXPECT_EQ(single->files().size(), 1u);
  fs::remove_all(out);
}

TEST(DemoModelConfig, RefusesNonQwen3AndBadArguments) {
  auto [status, err] = run_syv("demo-model --out /tmp/syv-never-written");
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
  auto [status2, err2] = run_syv("demo-model --config /nonexistent/cfg --out /tmp/syv-never");
  EXPECT_NE(status2, 0);
  EXPECT_NE(err2.find("--config"), std::string::npos) << err2;
  EXPECT_NE(err2.find("/nonexistent/cfg"), std::string::npos) << err2;
  // Qwen3-Next (MoE) and the nested qwen3_5 (vision-language) form are refused by name.
  const std::string hybrid = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/";
  for (const char* name : {"qnext_top1_r2", "q35_nested_r2"}) {
    auto [status3, err3] =
        run_syv("demo-model --config " + hybrid + name + " --out /tmp/syv-never");
    EXPECT_NE(status3, 0) << name;
    EXPECT_NE(err3.find("dense qwen3 and qwen3_5_text weights only"), std::string::npos) << err3;
  }
}

// The hybrid families' tensor lists without a checkpoint (`syv inspect --config`) are exactly the
// fixtures' tensors, names and shapes, but the MTP head's: Qwen3.5 dense and MoE, Qwen3-Next with
// one and two experts a token (each made by transformers, tools/fixtures/).
TEST(HybridWeightSpecs, AreTheFixturesTensors) {
  const std::string hybrid = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/";
  for (const char* name : {"q35_r1_lllf", "q35moe_top2_r2", "qnext_top1_r2", "qnext_top2_r1"}) {
    SCOPED_TRACE(name);
    auto config = load_model_config(hybrid + name);
    ASSERT_TRUE(config.ok()) << config.message();
    auto store = WeightStore::open_dir(hybrid + name);
    ASSERT_TRUE(store.ok()) << store.message();
    const std::vector<WeightSpec> specs = config->model_type == "qwen3_next"
                                              ? qwen3_next_weight_specs(*config)
                                              : qwen3_5_weight_specs(*config);
    std::vector<std::string> files;
    for (const std::string& n : store->names())
      if (n.rfind("mtp.", 0) != 0) files.push_back(n);
    EXPECT_EQ(specs.size(), files.size());
    for (const WeightSpec& spec : specs) {
      const TensorInfo* t = store->find(spec.name);
      ASSERT_NE(t, nullptr) << spec.name << " is not in the fixture";
      EXPECT_EQ(t->shape, spec.shape) << spec.name;
    }
  }
}

// tools/bench/configs/qwen3.5-moe (issue 14's benchmark shape) is transformers' default
// Qwen3_5MoeTextConfig, which its docstring names the Qwen3.5-35B-A3B style: the tensor list of
// that config holds ~35 B parameters of which a token runs through ~3 B (8 of 256 experts).
TEST(BenchConfigs, Qwen35MoeIsThe35bA3bShape) {
  auto config = load_model_config(std::string(SYV_SOURCE_DIR) + "/tools/bench/configs/qwen3.5-moe");
  ASSERT_TRUE(config.ok()) << config.message();
  const ModelConfig& c = *config;
  EXPECT_EQ(c.model_type, "qwen3_5_moe_text");
  ASSERT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.num_full_attention_layers(), 10);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.layer_is_moe(l)) << l;
  ASSERT_EQ(c.num_experts, 256);
  ASSERT_EQ(c.num_experts_per_tok, 8);
  int64_t total = 0, experts = 0;
  for (const WeightSpec& w : qwen3_5_weight_specs(c)) {
    total += w.numel();
    if (w.name.find(".mlp.experts.") != std::string::npos) experts += w.numel();
  }
  const int64_t active = total - experts + experts / c.num_experts * c.num_experts_per_tok;
  EXPECT_NEAR(static_cast<double>(total) / 1e9, 35.0, 0.5);
  EXPECT_NEAR(static_cast<double>(active) / 1e9, 3.0, 0.5);
}

// A qwen3_5_text config gives a hybrid folder with every tensor of qwen3_5_weight_specs, which
// loads and runs (tools/bench/configs/qwen3.5-9b-class is written the same way).
TEST(DemoModelConfig, WritesAQwen35TextFolderThatLoads) {
  const std::string fixture = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/hybrid/q35_r1_lllf";
  const fs::path out = fs::temp_directory_path() / "syv-demo-q35";
  fs::remove_all(out);
  auto [status, err] = run_syv("demo-model --config " + fixture + " --out " + out.string());
  ASSERT_EQ(status, 0) << err;
  auto config = load_model_config(fixture);
  ASSERT_TRUE(config.ok());
  auto store = WeightStore::open_dir(out.string());
  ASSERT_TRUE(store.ok()) << store.message();
  const std::vector<WeightSpec> specs = qwen3_5_weight_specs(*config);
  EXPECT_EQ(store->names().size(), specs.size());
  for (const WeightSpec& spec : specs) {
    auto t = store->get(spec.name, spec.shape);
    ASSERT_TRUE(t.ok()) << t.message();
  }
  auto backend = make_cpu_backend();
  auto model = load_model(out.string(), *backend);
  ASSERT_TRUE(model.ok()) << model.message();
  CacheConfig cache;
  cache.page_size = 16;
  cache.num_pages = 4;
  cache.num_state_slots = 1;
  auto cs = make_cache_store(**model, cache);
  ASSERT_TRUE(cs.ok()) << cs.message();
  Batch b;
  b.token_ids = {1, 2, 3};
  b.positions = {0, 1, 2};
  b.seq_starts = {0, 3};
  b.context_lens = {3};
  b.max_pages_per_seq = 1;
  b.page_table = {0};
  b.logit_rows = {2};
  b.state_slots = {0};
  Tensor logits = (*model)->forward(b);
  std::vector<float> host(static_cast<size_t>(logits.numel()));
  backend->download(host.data(), logits.data, host.size() * 4);
  for (float v : host) ASSERT_TRUE(std::isfinite(v));
  fs::remove_all(out);
}

}  // namespace
}  // namespace syv
