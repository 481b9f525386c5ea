// Model loading on the GPU: CudaBackend::fill_random draws exactly the host values of
// backend/random_fill.h; checkpoint tensors reach the device bit-exact through the pinned,
// double-buffered bulk uploader (bf16 copied, f32/f16 narrowed to bf16), concatenations land in
// their slices; and the 8B shape loads with random weights in about a second (printed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/random_fill.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/weight_spec.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

class WeightLoadGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    gpu_ = make_cuda_backend(0);
  }
  std::vector<uint16_t> download16(const DeviceWeight& w) {
    std::vector<uint16_t> out(w.buffer.bytes() / 2);
    gpu_->download(out.data(), w.buffer.data(), w.buffer.bytes());
    return out;
  }
  std::unique_ptr<CudaBackend> gpu_;
};

TEST_F(WeightLoadGpu, FillRandomEqualsTheHostFormula) {
  const int64_t n = (int64_t{1} << 21) + 13;
  DeviceBuffer buf = gpu_->allocate(static_cast<size_t>(n) * 4);
  Backend& backend = *gpu_;  // through the generic interface
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    backend.fill_random(buf.data(), dt, n, 0xabcdef12345ull, 0.037f);
    std::vector<uint8_t> got(static_cast<size_t>(n) * dtype_size(dt));
    gpu_->download(got.data(), buf.data(), got.size());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = random_uniform(0xabcdef12345ull, static_cast<uint64_t>(i), 0.037f);
      if (dt == DType::F32) {
        float f;
        std::memcpy(&f, got.data() + 4 * i, 4);
        mismatches += f != want;
      } else {
        uint16_t h;
        std::memcpy(&h, got.data() + 2 * i, 2);
        mismatches += h != (dt == DType::BF16 ? f32_to_bf16(want) : f32_to_f16(want));
      }
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(dt);
  }
}

TEST_F(WeightLoadGpu, RandomWeightsEqualTheHostDraws) {
  const std::vector<WeightSpec> specs = {{"proj", {1000, 384}, WeightInit::kProjection},
                                         {"norm", {384}, WeightInit::kNorm},
                                         {"gate", {700, 384}, WeightInit::kProjection},
                                         {"up", {700, 384}, WeightInit::kProjection},
                                         {"bias", {384}, WeightInit::kZero}};
  WeightLoader loader(*gpu_, nullptr, 77);
  std::vector<DeviceWeight> w;
  for (size_t k : {0, 1}) {
    auto r = loader.load(specs[k]);
    ASSERT_TRUE(r.ok());
    w.push_back(std::move(*r));
  }
  auto gate_up = loader.load_concat({specs[2], specs[3]});
  ASSERT_TRUE(gate_up.ok());
  w.push_back(std::move(*gate_up));
  auto bias = loader.load(specs[4]);
  ASSERT_TRUE(bias.ok());
  w.push_back(std::move(*bias));
  loader.finish();
  // Expected: weight k's draw, bf16-rounded, in load order (gate and up are weights 2 and 3).
  std::vector<std::vector<uint16_t>> want(4);
  for (size_t k = 0; k < specs.size(); ++k) {
    const RandomWeightDraw d = random_weight_draw(specs[k], 77, k);
    std::vector<uint16_t>& out = want[k <= 1 ? k : (k <= 3 ? 2 : 3)];
    for (int64_t i = 0; i < specs[k].numel(); ++i) out.push_back(f32_to_bf16(d.value(i)));
  }
  for (size_t j = 0; j < w.size(); ++j) {
    EXPECT_EQ(w[j].tensor.dtype, DType::BF16);
    EXPECT_TRUE(download16(w[j]) == want[j]) << "weight " << j;
  }
}

TEST_F(WeightLoadGpu, CheckpointTensorsArriveBitExact) {
  const fs::path dir = fs::temp_directory_path() / ("syv_gpu_load_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t rows = 30011, cols = 1024;  // 61 MB of bf16: many 16 MiB chunks, slots reused
  std::vector<uint16_t> big(static_cast<size_t>(rows * cols)), half(96 * 1024);
  std::vector<float> f32(77 * 1024);
  for (auto& v : big) v = f32_to_bf16(normal(rng));
  for (auto& v : half) v = f32_to_f16(normal(rng));
  for (auto& v : f32) v = normal(rng);
  ASSERT_TRUE(write_safetensors((dir / "model.safetensors").string(),
                                {{"big", DType::BF16, {rows, cols}, big.data()},
                                 {"half", DType::F16, {96, cols}, half.data()},
                                 {"f32", DType::F32, {77, cols}, f32.data()}})
                  .ok());
  auto store = WeightStore::open_dir(dir.string());
  ASSERT_TRUE(store.ok()) << store.message();
  WeightLoader loader(*gpu_, &*store, 0);
  auto a = loader.load({"big", {rows, cols}});
  auto b = loader.load_concat({{"f32", {77, cols}}, {"big", {rows, cols}}, {"half", {96, cols}}});
  ASSERT_TRUE(a.ok() && b.ok());
  loader.finish();
  EXPECT_TRUE(download16(*a) == big);
  std::vector<uint16_t> want;
  for (float v : f32) want.push_back(f32_to_bf16(v));
  want.insert(want.end(), big.begin(), big.end());
  for (uint16_t v : half) want.push_back(f32_to_bf16(f16_to_f32(v)));
  EXPECT_EQ(b->tensor.shape[0], 77 + rows + 96);
  EXPECT_TRUE(download16(*b) == want);
  fs::remove_all(dir);
}

// The target: random weights of the 8B shape in about a second (host drawing took 42-59 s).
TEST_F(WeightLoadGpu, RandomWeights8BLoadTime) {
  const std::string config = std::string(SYV_SOURCE_DIR) + "/tools/bench/configs/qwen3-8b";
  if (!fs::exists(config + "/config.json")) GTEST_SKIP() << "no " << config;
  for (int run = 0; run < 2; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    LoadOptions options;
    options.random_weights = true;
    options.seed = 1;
    auto model = load_model(config, *gpu_, options);
    ASSERT_TRUE(model.ok()) << model.message();
    gpu_->synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  8B random weights: loaded in %.2f s (run %d, %.2f GB on the device)\n", s, run,
                gpu_->allocated_bytes() / 1e9);
    EXPECT_LT(s, 10.0);
  }
}

}  // namespace
}  // namespace syv
