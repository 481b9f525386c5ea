// `syv bench quant-kernels`: the quantized linear's paths on every projection shape of a config,
// random packed weights made on the device (no model folder, no `syv quantize`), at several token
// counts: the GEMVs (up to 16 tokens), the tensor-core GEMM (set_quant_gemm_max_tokens), the
// dequantize path with each dequantization kernel (set_quant_dequant_vectorized), the fp8 GEMM
// (W8A8 / W4A8 on Hopper, cuBLASLt), and the bf16 weight of the same shape for reference. Each call
// rotates over weight copies that together exceed the L2, as consecutive layers would. Reports
// microseconds a call, the packed bytes' rate against the copy rate measured in the same run, and
// TFLOP/s. docs/benchmarking.md.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_device.h"  // (with CUDA) the backend

namespace syv::cli {
namespace {

struct Options {
  std::string config;
  std::vector<std::string> formats = {"int4", "fp8"};
  std::vector<int> tokens = {1, 8, 16, 17, 32, 64, 128, 256};
  std::vector<std::string> paths;  // empty: all
};

#if SYV_HAVE_CUDA

// A weight of `copies` rotating copies on the device: int4 groups of 128 (symmetric) or fp8
// 128 x 128 tiles, random data, scales of 1/64; or bf16 (format kDense).
struct Copies {
  DeviceBuffer data, scales;
  std::vector<Weight> w;
  size_t bytes = 0;  // one copy's packed data + scales
};

Copies make_copies(CudaBackend& gpu, WeightFormat format, int64_t n, int64_t k) {
  Copies c;
  const bool int4 = format == WeightFormat::kInt4Group, fp8 = format == WeightFormat::kFp8Block;
  const int64_t data_bytes = int4 ? n * k / 2 : fp8 ? n * k : n * k * 2;
  const int64_t scale_rows = int4 ? n : (n + 127) / 128, scale_cols = k / 128;
  const int64_t scale_bytes = int4 || fp8 ? scale_rows * scale_cols * 4 : 0;
  const auto stride = static_cast<size_t>((data_bytes + 255) / 256 * 256);
  const auto sstride = static_cast<size_t>((scale_bytes + 255) / 256 * 256);
  c.bytes = static_cast<size_t>(data_bytes + scale_bytes);
  const int copies = static_cast<int>(std::max<size_t>(2, (size_t{1} << 30) / c.bytes + 1));
  c.data = gpu.allocate(stride * copies);
  // Random bf16 values' bytes: any byte is an int4 pair; e4m3 NaN codes change no timing.
  gpu.fill_random(c.data.data(), DType::BF16, static_cast<int64_t>(stride / 2) * copies, 7, 1.f);
  if (scale_bytes > 0) {
    c.scales = gpu.allocate(sstride * copies);
    const std::vector<float> ones(static_cast<size_t>(scale_rows * scale_cols), 1.f / 64);
    for (int i = 0; i < copies; ++i)
      gpu.upload(static_cast<char*>(c.scales.data()) + sstride * i, ones.data(),
                 static_cast<size_t>(scale_bytes));
  }
  for (int i = 0; i < copies; ++i) {
    void* d = static_cast<char*>(c.data.data()) + stride * i;
    Weight w;
    if (!int4 && !fp8) {
      w = Weight::dense(Tensor(d, DType::BF16, {n, k}));
    } else {
      w.format = format;
      w.n = n;
      w.k = k;
      w.tensor = int4 ? Tensor(d, DType::U4X2, {n, k / 2}) : Tensor(d, DType::F8E4M3, {n, k});
      w.scales = Tensor(static_cast<char*>(c.scales.data()) + sstride * i, DType::F32,
                        {scale_rows, scale_cols});
      if (int4) {
        w.group_size = 128;
      } else {
        w.block_n = w.block_k = 128;
      }
      gpu.reserve_quantized_scratch(w, QuantWeightRole::kLinear);
    }
    c.w.push_back(w);
  }
  return c;
}

int run(const Options& o) {
  for (const std::string& f : o.formats)
    if (f != "int4" && f != "fp8") return fail("--formats: expected int4 or fp8, found " + f);
  for (int t : o.tokens)
    if (t < 1) return fail("--tokens: expected counts >= 1, found " + std::to_string(t));
  const std::vector<std::string> all_paths = {"default",     "gemv",     "gemm",       "dequant",
                                              "dequant-vec", "fp8-gemm", "fp8-skinny", "bf16"};
  for (const std::string& p : o.paths)
    if (std::find(all_paths.begin(), all_paths.end(), p) == all_paths.end())
      return fail(
          "--paths: expected default, gemv, gemm, dequant, dequant-vec, fp8-gemm, "
          "fp8-skinny or bf16, found " +
          p);
  auto wanted = [&o](const char* path) {
    return o.paths.empty() || std::find(o.paths.begin(), o.paths.end(), path) != o.paths.end();
  };
  auto dev = open_bench_device(o.config);
  if (!dev.ok()) return fail(dev.message());
  CudaBackend* gpu = dev->gpu.get();
  const double copy_gbps = dev->copy_gbps;
  struct Variant {
    const char* name;
    int gemv_max, gemm_max;
    bool vectorized;
    Backend::QuantizedActivations acts;
    bool bf16;  // the bf16 weight instead
  };
  using QA = Backend::QuantizedActivations;
  // "default": what linear() runs under the defaults (auto activations; fp8 weights' W8A16 GEMM
  // before the fp8 GEMM where quant_gemm_before_fp8 says so).
  const Variant variants[] = {{"default", CudaBackend::kQuantGemvMaxTokens,
                               CudaBackend::kQuantGemmMaxTokens, true, QA::kAuto, false},
                              {"gemv", CudaBackend::kQuantGemvMaxTokens, 0, false, QA::kOff, false},
                              {"gemm", 0, 1 << 20, false, QA::kOff, false},
                              {"dequant", 0, 0, false, QA::kOff, false},
                              {"dequant-vec", 0, 0, true, QA::kOff, false},
                              {"fp8-gemm", 0, 0, false, QA::kFp8, false},
                              {"fp8-skinny", 0, 0, false, QA::kFp8, false},
                              {"bf16", 0, 0, false, QA::kOff, true}};
  std::printf(
      "| format | shape    | N      | K      | T    | path        | us a call | GB/s (packed) | "
      "of copy | TFLOP/s |\n");
  for (const std::string& f : o.formats) {
    const WeightFormat format = f == "int4" ? WeightFormat::kInt4Group : WeightFormat::kFp8Block;
    for (const LinearShape& sh : linear_shapes(dev->config)) {
      const std::string name = sh.name;
      if (name != "qkv" && name != "o_proj" && name != "gate_up" && name != "down") continue;
      if (sh.k % 128 != 0) {
        std::printf("| %s | %-8s | K %lld is not a multiple of 128: skipped |\n", f.c_str(),
                    sh.name, static_cast<long long>(sh.k));
        continue;
      }
      Copies quant = make_copies(*gpu, format, sh.n, sh.k);
      Copies dense = make_copies(*gpu, WeightFormat::kDense, sh.n, sh.k);
      for (int tokens : o.tokens) {
        DeviceBuffer xb = gpu->allocate(static_cast<size_t>(tokens) * sh.k * 2);
        DeviceBuffer ob = gpu->allocate(static_cast<size_t>(tokens) * sh.n * 2);
        gpu->fill_random(xb.data(), DType::BF16, tokens * sh.k, 6, 1.f);
        Tensor x(xb.data(), DType::BF16, {tokens, sh.k});
        Tensor out(ob.data(), DType::BF16, {tokens, sh.n});
        for (const Variant& v : variants) {
          if (!wanted(v.name)) continue;
          const bool defaults = std::string(v.name) == "default";
          // The GEMVs stop at 16 tokens.
          if (v.gemv_max > 0 && !defaults && tokens > v.gemv_max) continue;
          // The fp8 GEMM: Hopper (set_quantized_activations refuses fp8 elsewhere), from the 8
          // rows its cuBLASLt kernels pad a step to (fp8 weights take it from
          // kFp8GemvMaxTokens + 1 tokens, before the GEMV: this table is that crossover's).
          const bool skinny = std::string(v.name) == "fp8-skinny";
          if (skinny && format != WeightFormat::kFp8Block) continue;
          if (v.acts == QA::kFp8 && tokens < 8 && !skinny) continue;
          if (!gpu->set_quantized_activations(v.acts).ok()) continue;
          gpu->set_quant_gemv_max_tokens(v.gemv_max);
          gpu->set_quant_gemm_max_tokens(v.gemm_max);
          gpu->set_quant_dequant_vectorized(v.vectorized);
          // Each path alone: the GEMM's W8A16 share before the fp8 GEMM off.
          gpu->set_quant_gemm_before_fp8_max_tokens(
              defaults ? CudaBackend::kQuantGemmBeforeFp8MaxTokens : 0);
          // fp8-gemm: cuBLASLt's kernel alone; fp8-skinny: fp8_skinny_gemm.cu's wherever it goes.
          gpu->set_fp8_skinny_max_tokens(skinny     ? 1 << 20
                                         : defaults ? CudaBackend::kFp8SkinnyMaxTokens
                                                    : 0);
          // The fp8 GEMM's rows end with its algorithm in words (cuBLASLt's, or the skinny
          // kernel's plan).
          const std::string algorithm =
              v.acts == QA::kFp8
                  ? gpu->fp8_gemm_algorithm(tokens, sh.n, sh.k, format == WeightFormat::kInt4Group)
                  : "";
          const Copies& cw = v.bf16 ? dense : quant;
          size_t next = 0;
          auto step = [&] {  // 8 calls on successive copies, as consecutive layers would
            for (int r = 0; r < 8; ++r) gpu->linear(x, cw.w[next++ % cw.w.size()], Tensor(), out);
          };
          const CudaBackend::QuantPathCalls before = gpu->quant_path_calls();
          std::vector<float> ms = gpu->time_ms(step, 3, 20);
          // A path the shape or token count does not take falls back to another (the dequantize
          // path, or cuBLASLt past the skinny kernel's 64 tokens): not timed as it.
          const CudaBackend::QuantPathCalls after = gpu->quant_path_calls();
          if ((!defaults && v.gemm_max > 0 && after.gemm == before.gemm) ||
              (v.acts == QA::kFp8 && after.fp8_gemm == before.fp8_gemm) ||
              (skinny && after.fp8_skinny == before.fp8_skinny)) {
            std::printf("| %-6s | %-8s | T %d | %s: not taken (another path ran) |\n", f.c_str(),
                        sh.name, tokens, v.name);
            continue;
          }
          std::sort(ms.begin(), ms.end());
          const double us = ms[ms.size() / 2] * 1e3 / 8;
          const double gbps = static_cast<double>(cw.bytes) / (us * 1e3);
          const double tflops = 2.0 * tokens * sh.n * sh.k / (us * 1e6);
          std::printf(
              "| %-6s | %-8s | %6lld | %6lld | %4d | %-11s | %9.2f | %13.0f | %6.1f%% | %7.1f "
              "|%s\n",
              f.c_str(), sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k),
              tokens, v.name, us, gbps, 100.0 * gbps / copy_gbps, tflops,
              algorithm.empty() ? "" : (" " + algorithm).c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

#else

int run(const Options&) {
  return fail("`syv bench quant-kernels` needs the CUDA backend; this syv was built without CUDA",
              "configure with -DSYV_CUDA=ON on a machine with nvcc");
}

#endif

BenchRegistration quant_kernels_reg{
    "quant-kernels",
    "Quantized linear paths (GEMVs, tensor-core GEMM, dequantize + GEMM, fp8 GEMMs) vs bf16 on "
    "every projection shape of a config, random packed weights (us, GB/s, TFLOP/s)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--config", o->config, "A model folder, or the path of its config.json")
          ->required();
      app.add_option("--formats", o->formats, "int4 (groups of 128) and / or fp8 (128 x 128)")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--tokens", o->tokens, "Token counts, comma-separated")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--paths", o->paths,
                     "Only these paths, comma-separated: default (what linear() runs under the "
                     "defaults), gemv, gemm, dequant, dequant-vec, fp8-gemm, fp8-skinny, bf16 "
                     "(default: all)")
          ->delimiter(',');
      return [o]() -> int { return run(*o); };
    }};

}  // namespace
}  // namespace syv::cli
