#include "backend/cuda/gemm.h"

#include "backend/cuda/cuda_check.h"

namespace syv::cuda {

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  }
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::init(void* workspace, size_t workspace_bytes) {
  SYV_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
}

// Column-major view of the row-major product: C (N x T, ld N) = op(A) · B with A = w stored as
// K x N (ld K), transposed, and B = x stored as K x T (ld K).
LtGemm::Plan& LtGemm::plan(int64_t tokens, int64_t n, int64_t k, DType out_t) {
  auto key = std::make_tuple(tokens, n, k, static_cast<int>(out_t));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];
  const cudaDataType_t ct = out_t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
  SYV_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  SYV_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  SYV_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  SYV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k),
                                              static_cast<uint64_t>(n), k));
  SYV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, static_cast<uint64_t>(k),
                                              static_cast<uint64_t>(tokens), k));
  SYV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, ct, static_cast<uint64_t>(n),
                                              static_cast<uint64_t>(tokens), n));
  cublasLtMatmulPreference_t pref;
  SYV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  SYV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  SYV_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1,
                                                  &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

bool LtGemm::run(const void* x, const void* w, void* out, DType out_t, int64_t tokens, int64_t n,
                 int64_t k, cudaStream_t stream) {
  if (out_t != DType::F32 && out_t != DType::BF16) return false;
  Plan& p = plan(tokens, n, k, out_t);
  if (!p.ok) return false;
  const float alpha = 1.f, beta = 0.f;
  SYV_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c, out,
                                  p.c, &p.algo, workspace_, workspace_bytes_, stream));
  return true;
}

}  // namespace syv::cuda
