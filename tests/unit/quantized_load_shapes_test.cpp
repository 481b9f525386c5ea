// What `syv inspect` counts for a quantized model on CUDA against what the load really does:
// quantized_load_shapes (model/prepare_model.h) lists the weights the loader keeps quantized, as
// it fuses and stacks the checkpoint's modules, and must be exactly the weights the loader
// announces to the backend (Backend::reserve_quantized_scratch, for which CUDA sizes its
// dequantization scratch: its largest, backend/cuda_choices.h); the start-up count of the
// weights (prepare_model's weight_bytes, the hybrids' included) must be what the load allocates
// with CUDA's dtypes; and the figures `syv inspect --config --weights-format` takes from a
// config.json alone must be those of the folder `syv quantize` writes. `syv serve` of the
// Qwen3.5-27B gptq folder on an H200 planned with 18.4521 GB of "weights" (allocated_bytes(),
// scratch included) where inspect counted 18.06 GB: pinned below to the byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_choices.h"
#include "core/log.h"
#include "io/hf_config.h"
#include "model/prepare_model.h"
#include "model/quantize_folder.h"
#include "model/registry.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

// The CPU backend keeping float weights in bf16 as CUDA does, counting what it allocates and
// noting the quantized weights the loader announces; MoE experts kept quantized or not.
class AnnouncedCpuBackend final : public CpuBackend {
 public:
  explicit AnnouncedCpuBackend(bool keep_moe_quantized)
      : CpuBackend(/*keep_float_weights=*/true), keep_(keep_moe_quantized) {}
  DType weight_dtype(DType file) const override {  // CudaBackend's
    return file == DType::F32 || file == DType::F16 ? DType::BF16 : file;
  }
  bool keeps_moe_experts_quantized() const override { return keep_; }
  DeviceBuffer allocate(size_t bytes) override {
    allocated_ += static_cast<int64_t>(bytes);
    return CpuBackend::allocate(bytes);
  }
  void reserve_quantized_scratch(const Weight& w, QuantWeightRole role) override {
    announced_.push_back({w.n, w.k, role, w.format == WeightFormat::kInt4Group});
  }
  int64_t allocated() const { return allocated_; }
  const std::vector<WeightShape2d>& announced() const { return announced_; }

 private:
  bool keep_;
  int64_t allocated_ = 0;
  std::vector<WeightShape2d> announced_;
};

std::vector<WeightShape2d> sorted(std::vector<WeightShape2d> v) {
  std::sort(v.begin(), v.end(), [](const WeightShape2d& a, const WeightShape2d& b) {
    return std::tie(a.n, a.k, a.role) < std::tie(b.n, b.k, b.role);
  });
  return v;
}

std::string describe(const std::vector<WeightShape2d>& v) {
  std::string s;
  for (const WeightShape2d& w : v)
    s += "[" + std::to_string(w.n) + ", " + std::to_string(w.k) + "]" +
         (w.role == QuantWeightRole::kOutputProjection ? " output"
          : w.role == QuantWeightRole::kStackedExperts ? " experts"
                                                       : "") +
         (w.int4 ? " int4 " : " fp8 ");
  return s;
}

QuantizeOptions options(const std::string& fixture, QuantizeFormat format, const fs::path& out,
                        bool lm_head = false) {
  QuantizeOptions o;
  o.in_dir = std::string(SYV_SOURCE_DIR) + "/tests/fixtures/" + fixture;
  o.out_dir = out.string();
  o.format = format;
  o.group_size = 8;  // divides every K of the fixtures (widths 24 to 128)
  // fp8: every fused part's rows (head slices, shared experts of 40 rows) fall on tile
  // boundaries; a part that does not gets a scale row per weight row (concat_quantized), which
  // the count leaves out (a few scales; none for Qwen's shapes in 128-row tiles).
  o.block = 8;
  o.lm_head = lm_head;
  return o;
}

// fixture, format, lm_head quantized too (gptq, untied)
using Case = std::tuple<const char*, QuantizeFormat, bool>;
class QuantizedLoadShapes : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizedLoadShapes, AreTheWeightsTheLoaderAnnouncesAndTheCountIsTheLoad) {
  set_log_level(LogLevel::WARN);
  const auto [fixture, format, quantize_lm_head] = GetParam();
  const bool lm_head = quantize_lm_head;  // (a lambda below takes it; bindings it cannot)
  const fs::path out =
      fs::path(::testing::TempDir()) / ("syv_qshapes_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(static_cast<int>(format)));
  fs::remove_all(out);
  const QuantizeOptions o = options(fixture, format, out, lm_head);
  ASSERT_TRUE(quantize_folder(o).ok());
  for (bool keep_moe : {true, false}) {
    SCOPED_TRACE(keep_moe ? "experts kept quantized" : "experts dequantized");
    AnnouncedCpuBackend backend(keep_moe);
    auto prepared = prepare_model(out.string(), backend);
    ASSERT_TRUE(prepared.ok()) << prepared.message();
    auto model = load_prepared_model(*prepared, backend);
    ASSERT_TRUE(model.ok()) << model.message();
    const std::vector<WeightShape2d> counted =
        quantized_load_shapes(*prepared->arch, prepared->config, *prepared->store, keep_moe);
    EXPECT_EQ(sorted(counted), sorted(backend.announced()))
        << "counted " << describe(sorted(counted)) << "\nannounced "
        << describe(sorted(backend.announced()));
    EXPECT_FALSE(counted.empty());
    // The count is every tensor of the files: a vision tower (q35_nested_r2's) too, in bf16.
    int64_t unloaded = 0;
    for (const std::string& name : prepared->store->names()) {
      if (name.find("visual.") != std::string::npos)
        unloaded += 2 * prepared->store->find(name)->numel();
    }
    EXPECT_EQ(prepared->weight_bytes, backend.allocated() + unloaded);

    // A config.json alone, as `syv inspect --config --weights-format` counts it (not MoE configs:
    // their experts' quantized bytes are the backend's choice at load, and inspect refuses them;
    // config_weight_specs refuses model types it has no tensor list for).
    auto specs = config_weight_specs(prepared->config);
    if (!specs.ok() || prepared->config.is_moe()) continue;
    const std::vector<WeightShape2d> planned = quantized_load_shapes(
        *prepared->arch, prepared->config, *specs,
        [&](const WeightSpec& w) { return quantizes_spec(w, lm_head); }, false,
        format != QuantizeFormat::kFp8);
    EXPECT_EQ(sorted(planned), sorted(backend.announced())) << describe(sorted(planned));
    auto bytes = quantized_device_bytes(*specs, o);
    ASSERT_TRUE(bytes.ok()) << bytes.message();
    EXPECT_EQ(*bytes, backend.allocated());
  }
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, QuantizedLoadShapes,
    ::testing::Values(Case{"qwen3/untied_gqa4_hd24", QuantizeFormat::kGptq, false},
                      Case{"qwen3/untied_gqa4_hd24", QuantizeFormat::kGptq, true},
                      Case{"qwen3/tied_gqa2", QuantizeFormat::kFp8, false},
                      Case{"hybrid/q35_r1_lllf", QuantizeFormat::kGptq, false},
                      Case{"hybrid/q35_r1_lllf", QuantizeFormat::kGptq, true},
                      Case{"hybrid/q35_r1_lllf", QuantizeFormat::kAwq, false},
                      Case{"hybrid/q35_r1_lllf", QuantizeFormat::kFp8, false},
                      Case{"hybrid/q35_r2_flfl_tied", QuantizeFormat::kGptq, false},
                      Case{"hybrid/q35_nested_r2", QuantizeFormat::kAwq, false},
                      Case{"hybrid/q35moe_top2_r2", QuantizeFormat::kGptq, false},
                      Case{"hybrid/q35moe_top2_r2", QuantizeFormat::kFp8, false},
                      Case{"hybrid/qnext_top1_r2", QuantizeFormat::kAwq, false},
                      Case{"hybrid/qnext_top2_r1", QuantizeFormat::kFp8, false}));

// The traced case: `syv inspect --config tools/bench/configs/qwen3.5-27b --weights-format gptq`
// counted 18,061,769,728 bytes; `syv serve` of the folder `syv demo-model` + `syv quantize
// --format gptq --group-size 128` write planned with 18.4521 GB, CudaBackend::allocated_bytes():
// those weights plus 390,332,428 bytes of scratch, the bf16 dequantization buffer of the fused
// gate|up [2 x 17408, 5120] (356,515,840) and the constructor's cuBLASLt workspace and counters
// (33,816,588). Since 2026-12-07 an int4 linear (W4A16) and the output projection dequantize in
// row chunks, each counting at most kCudaDequantRowChunkCap: 64 MiB of buffer instead of 357 MB.
TEST(QuantizedLoadShapes, Qwen35At27BPlansServesWeightsAndScratch) {
  auto config = load_model_config(std::string(SYV_SOURCE_DIR) + "/tools/bench/configs/qwen3.5-27b");
  ASSERT_TRUE(config.ok()) << config.message();
  const ModelArch* arch = find_model_arch(config->model_type);
  ASSERT_NE(arch, nullptr);
  auto specs = config_weight_specs(*config);
  ASSERT_TRUE(specs.ok()) << specs.message();
  QuantizeOptions o;
  o.format = QuantizeFormat::kGptq;
  auto bytes = quantized_device_bytes(*specs, o);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  EXPECT_EQ(*bytes, 18061769728);
  auto shapes_of = [&](bool lm_head, bool int4) {
    return quantized_load_shapes(
        *arch, *config, *specs, [&](const WeightSpec& w) { return quantizes_spec(w, lm_head); },
        false, int4);
  };
  const WeightShape2d gate_up{2 * 17408, 5120, QuantWeightRole::kLinear, true};
  EXPECT_EQ(largest_weight(shapes_of(false, true)), gate_up);
  EXPECT_EQ(kCudaConstructionScratchBytes, 33816588);
  // In row chunks now: gate|up counts the cap, and so does a quantized lm_head [248320, 5120]
  // (2.54 GB in bf16).
  EXPECT_EQ(dequant_scratch_bytes(gate_up), kCudaDequantRowChunkCap);
  EXPECT_EQ(cuda_load_scratch_bytes(dequant_scratch_bytes(largest_weight(shapes_of(false, true)))),
            kCudaConstructionScratchBytes + kCudaDequantRowChunkCap);  // 390,332,428 before
  const std::vector<WeightShape2d> with_lm_head = shapes_of(true, true);
  const WeightShape2d lm_head{248320, 5120, QuantWeightRole::kOutputProjection, true};
  EXPECT_NE(std::find(with_lm_head.begin(), with_lm_head.end(), lm_head), with_lm_head.end());
  EXPECT_EQ(dequant_scratch_bytes(lm_head), kCudaDequantRowChunkCap);
  EXPECT_EQ(dequant_scratch_bytes(largest_weight(with_lm_head)), kCudaDequantRowChunkCap);
  // fp8 linears keep their whole share (the W8A8 GEMM's activation rows live in the buffer); the
  // output projection is capped in every format.
  EXPECT_EQ(dequant_scratch_bytes(largest_weight(shapes_of(true, false))),
            int64_t{2} * 17408 * 5120 * 2);
  EXPECT_EQ(dequant_scratch_bytes({248320, 5120, QuantWeightRole::kOutputProjection, false}),
            kCudaDequantRowChunkCap);
  // A MoE layer's stacked experts: whole in either format.
  EXPECT_EQ(dequant_scratch_bytes({512 * 1024, 2048, QuantWeightRole::kStackedExperts, true}),
            int64_t{512} * 1024 * 2048 * 2);
  // bf16: nothing stays quantized, no dequantization buffer.
  EXPECT_EQ(largest_weight(quantized_load_shapes(
                *arch, *config, *specs, [](const WeightSpec&) { return false; }, false, false)),
            WeightShape2d{});
}

}  // namespace
}  // namespace syv
