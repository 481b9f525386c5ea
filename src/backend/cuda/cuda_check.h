// Every CUDA runtime call and kernel launch in the CUDA backend is checked here (cuBLASLt calls by
// SYV_CUBLAS_CHECK, backend/cuda/cublaslt_api.h); a failure aborts with the file, the line, the
// call's text and the library's error string.
#pragma once

#include <cuda_runtime.h>

namespace syv::cuda {

[[noreturn]] void cuda_fail(const char* file, int line, const char* expr, const char* what);

}  // namespace syv::cuda

#define SYV_CUDA_CHECK(expr)                                                           \
  do {                                                                                 \
    cudaError_t syv_err_ = (expr);                                                     \
    if (syv_err_ != cudaSuccess)                                                       \
      ::syv::cuda::cuda_fail(__FILE__, __LINE__, #expr, cudaGetErrorString(syv_err_)); \
  } while (0)

// After every <<<...>>> launch: catches bad launch configurations at the launch site.
#define SYV_CUDA_LAUNCH_CHECK() SYV_CUDA_CHECK(cudaPeekAtLastError())
