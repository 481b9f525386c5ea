// cuBLASLt, opened with dlopen on first use instead of being linked. Loading libcublasLt runs its
// static constructors, about 0.5 s (0.8 s under ASan, 340 MB resident) in every process that links
// the CUDA backend, whether or not it ever touches a GPU: the syv binary for `--help`, and each of
// the ~750 test processes ctest starts (measured in the commit that added this file). Only the
// GEMMs (gemm.cpp) call it, so only a backend that runs one pays for it.
#pragma once

#include <cublasLt.h>

#include "backend/cuda/cuda_check.h"

namespace syv::cuda {

// Every cuBLASLt function syv calls. A member has the function's own name and type, so a call reads
// `lt.cublasLtMatmul(...)`; add a function here before calling it.
#define SYV_CUBLASLT_FUNCTIONS(X)         \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoCheck)              \
  X(cublasLtMatmulAlgoConfigGetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)

struct CublasLt {
#define SYV_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  SYV_CUBLASLT_FUNCTIONS(SYV_CUBLASLT_MEMBER)
#undef SYV_CUBLASLT_MEMBER
};

// The table, filled on the first call (thread-safe) from libcublasLt.so.<CUBLAS_VER_MAJOR>: first
// by name (the binary's run path, LD_LIBRARY_PATH, ld.so.cache), then in the toolkit's library
// folder found at configure time. A missing library or function aborts through cuda_fail with
// dlopen's message.
const CublasLt& cublaslt();

}  // namespace syv::cuda

#define SYV_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                  \
    cublasStatus_t syv_st_ = (expr);                                                    \
    if (syv_st_ != CUBLAS_STATUS_SUCCESS)                                               \
      ::syv::cuda::cuda_fail(__FILE__, __LINE__, #expr,                                 \
                             ::syv::cuda::cublaslt().cublasLtGetStatusString(syv_st_)); \
  } while (0)
