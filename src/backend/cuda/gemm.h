// cuBLASLt GEMMs for prefill and larger batches: row-major out[T, N] = x[T, K] · w[N, K]ᵀ with bf16
// operands, fp32 accumulation, bf16 or f32 output. Plans (layouts + the heuristic's algorithm) are
// cached per shape, so a step pays the heuristic once.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/dtype.h"

namespace syv::cuda {

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void init(void* workspace, size_t workspace_bytes);
  // Returns false (running nothing) when cuBLASLt has no algorithm for the shape.
  bool run(const void* x, const void* w, void* out, DType out_t, int64_t tokens, int64_t n,
           int64_t k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
  };
  Plan& plan(int64_t tokens, int64_t n, int64_t k, DType out_t);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> plans_;
};

}  // namespace syv::cuda
