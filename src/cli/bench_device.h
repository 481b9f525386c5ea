// What the one-GPU kernel benches (`syv bench kernels`, `syv bench quant-kernels`) start from: the
// config of --config, a backend on device 0, the copy rate measured now (printed), and the
// config's projection shapes.
#pragma once

#if SYV_HAVE_CUDA
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/status.h"
#include "io/hf_config.h"

namespace syv::cli {

struct BenchDevice {
  ModelConfig config;
  std::unique_ptr<CudaBackend> gpu;
  double copy_gbps = 0;
};
// --config: a model folder or the path of its config.json. Errors name the flag; no CUDA device
// is an error too.
Result<BenchDevice> open_bench_device(const std::string& config_path);

struct LinearShape {
  const char* name;
  int64_t n, k;
};
// q_proj, k_proj, q|k|v, o_proj, gate|up, down and lm_head of a dense decoder layer of `c`.
std::vector<LinearShape> linear_shapes(const ModelConfig& c);

}  // namespace syv::cli
#endif
