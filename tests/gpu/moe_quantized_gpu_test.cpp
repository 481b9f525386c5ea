// Quantized MoE experts kept quantized on CUDA (SYV_QUANT_MOE=1: CudaBackend::
// moe_experts_quantized, the routed experts' rows dequantized into bf16 scratch by an expert mask,
// then the dense MoE kernels) against the same folder with its experts dequantized at load (the
// default): both give the dense kernels the same bf16 weights (each dequantized value rounded to
// bf16 once, the load's on the host, the kernel's on the device), so the logits must be equal bit
// for bit, at prefill (a grouped GEMM) and at one token (the GEMV path); the kept load's weights
// take fewer bytes (its dequantization scratch, one layer's experts in bf16, aside); the same with
// the rows dequantized 8 columns a thread. `syv
// quantize`d MoE fixtures (Qwen3.5-MoE, Qwen3-Next; fp8, awq, gptq). The small-batch grouped
// GEMVs that read the quantized rows directly (moe_quant_gemv.cu) are off here (SYV_QUANT_MOE_GEMV
// =0): they take the exact dequantized values, not bf16-rounded ones, so their bits differ;
// moe_quant_gemv_gpu_test.cpp holds them to the CPU reference. Skips cleanly without a CUDA
// device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/log.h"
#include "kv/cache_store.h"
#include "model/model.h"
#include "model/quantize_folder.h"
#include "unit/quantized_fixture.h"

namespace syv {
namespace {

namespace fs = std::filesystem;

struct LoadRun {
  std::vector<float> prefill, decode;  // logits of every prompt position; of one more token
  size_t weights = 0;       // the backend's bytes after the load, its scratch buffers not counted
  uint64_t vectorized = 0;  // dequantizations by the 8-column kernel
};

// vectorized: the experts' rows dequantized 8 columns a thread (set_quant_dequant_vectorized).
LoadRun run(const fs::path& dir, bool keep_quantized, bool vectorized = false) {
  setenv("SYV_QUANT_MOE", keep_quantized ? "1" : "0", 1);
  setenv("SYV_QUANT_MOE_GEMV", "0", 1);  // its grouped GEMVs have their own bounds (see above)
  std::unique_ptr<CudaBackend> gpu = make_cuda_backend(0);
  unsetenv("SYV_QUANT_MOE");
  unsetenv("SYV_QUANT_MOE_GEMV");
  gpu->set_quant_dequant_vectorized(vectorized);
  gpu->set_quant_moe_gemm(false);  // the tiled path on packed rows: exact weights, other bits
  EXPECT_EQ(gpu->keeps_moe_experts_quantized(), keep_quantized);
  auto model = load_model(dir.string(), *gpu);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return {};
  LoadRun r;
  r.weights = gpu->allocated_bytes() - gpu->peak_scratch_bytes();
  CacheConfig cache;
  cache.page_size = 16;
  cache.num_pages = 2;
  cache.num_state_slots = 1;
  auto store = make_cache_store(**model, cache);
  EXPECT_TRUE(store.ok()) << store.message();
  const std::vector<int32_t> tokens = {3, 17, 40, 9, 25, 1, 77, 5, 60, 2, 11, 30, 8};
  auto step = [&](const std::vector<int32_t>& ids, int32_t first) {
    Batch b;
    const int32_t T = static_cast<int32_t>(ids.size());
    b.token_ids = ids;
    for (int32_t i = 0; i < T; ++i) b.positions.push_back(first + i), b.logit_rows.push_back(i);
    b.seq_starts = {0, T};
    b.context_lens = {first + T};
    b.page_table = {0, 1};
    b.max_pages_per_seq = 2;
    b.state_slots = {0};
    Tensor t = (*model)->forward(b);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    gpu->download(host.data(), t.data, host.size() * sizeof(float));
    return host;
  };
  r.prefill = step(tokens, 0);
  r.decode = step({42}, static_cast<int32_t>(tokens.size()));
  r.vectorized = gpu->quant_path_calls().dequant_vectorized;
  return r;
}

class MoeQuantizedGpu : public ::testing::TestWithParam<std::tuple<const char*, QuantizeFormat>> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    set_log_level(LogLevel::WARN);
  }
};

TEST_P(MoeQuantizedGpu, KeptQuantizedEqualsDequantizedAtLoadBitForBit) {
  const auto [fixture, format] = GetParam();
  const fs::path out =
      fs::path(::testing::TempDir()) / ("syv_moeqgpu_" + std::to_string(::getpid()) + "_" +
                                        fixture + "_" + std::to_string(static_cast<int>(format)));
  ASSERT_TRUE(testing::quantize_fixture(std::string("hybrid/") + fixture, format, 8, out, 32));
  const LoadRun kept = run(out, true), dense = run(out, false);
  ASSERT_FALSE(kept.prefill.empty());
  ASSERT_EQ(kept.prefill, dense.prefill) << fixture;
  ASSERT_EQ(kept.decode, dense.decode) << fixture;
  const LoadRun vectorized = run(out, true, true);
  EXPECT_EQ(vectorized.prefill, dense.prefill) << fixture << ", vectorized dequantize";
  EXPECT_EQ(vectorized.decode, dense.decode) << fixture << ", vectorized dequantize";
  EXPECT_GT(vectorized.vectorized, 0u) << fixture << ": the 8-column kernel did not run";
  EXPECT_EQ(kept.vectorized, 0u) << fixture;
  EXPECT_LT(kept.weights, dense.weights) << fixture;
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeQuantizedGpu,
                         ::testing::Combine(::testing::Values("q35moe_top2_r2", "qnext_top2_r1"),
                                            ::testing::Values(QuantizeFormat::kFp8,
                                                              QuantizeFormat::kAwq,
                                                              QuantizeFormat::kGptq)));

}  // namespace
}  // namespace syv
