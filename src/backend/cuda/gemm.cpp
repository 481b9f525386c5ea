#include "backend/cuda/gemm.h"

#include <sstream>

#include "backend/cuda/cublaslt_api.h"
#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/log.h"

namespace syv::cuda {

void LtGemm::destroy(Plan& p) {
  const CublasLt& lt = cublaslt();
  if (p.desc) lt.cublasLtMatmulDescDestroy(p.desc);
  if (p.a) lt.cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) lt.cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) lt.cublasLtMatrixLayoutDestroy(p.c);
  p = Plan();
}

LtGemm::~LtGemm() {
  if (!handle_) return;  // never initialised: no plan exists, and cuBLASLt need not be opened
  for (auto& [key, p] : plans_) destroy(p);
  for (auto& [key, p] : fp8_plans_) destroy(p);
  cublaslt().cublasLtDestroy(handle_);
}

std::string LtGemm::fp8_algorithm(int64_t tokens, int64_t n, int64_t k, DType out_t,
                                  Fp8WeightScales w_scales_kind) {
  if (!fp8_runs(tokens, n, k, out_t, w_scales_kind)) return "";
  const Plan& p = fp8_plan(tokens, n, k, out_t, w_scales_kind);
  const CublasLt& lt = cublaslt();
  auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
    uint32_t v = 0;  // (every attribute read here is 32 bits wide, some signed)
    size_t written = 0;
    lt.cublasLtMatmulAlgoConfigGetAttribute(&p.algo, a, &v, sizeof(v), &written);
    return v;
  };
  std::ostringstream os;
  os << "id " << attr(CUBLASLT_ALGO_CONFIG_ID) << " tile " << attr(CUBLASLT_ALGO_CONFIG_TILE_ID)
     << " stages " << attr(CUBLASLT_ALGO_CONFIG_STAGES_ID) << " splitk "
     << attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) << " reduction "
     << attr(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) << " swizzle "
     << attr(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) << " cluster "
     << attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) << " waves " << p.waves;
  return os.str();
}

void LtGemm::init(void* workspace, size_t workspace_bytes) {
  const CublasLt& lt = cublaslt();
  SYV_CUBLAS_CHECK(lt.cublasLtCreate(&handle_));
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
}

// Column-major view of the row-major product: C (N x T, ld N) = op(A) · B with A = w stored as
// K x N (ld K), transposed, and B = x stored as K x T (ld K).
LtGemm::Plan& LtGemm::plan(int64_t tokens, int64_t n, int64_t k, DType out_t, int64_t ldc) {
  auto key = std::make_tuple(tokens, n, k, static_cast<int>(out_t), ldc);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];
  create_plan(p, CUDA_R_16BF, tokens, n, k, out_t, nullptr, nullptr, ldc);
  return p;
}

// The same view with e4m3 operands: A (the weight) scaled per 128 x 128 tile or per row and 128
// columns, B (the activations) per token and 128 columns.
LtGemm::Plan& LtGemm::fp8_plan(int64_t tokens, int64_t n, int64_t k, DType out_t,
                               Fp8WeightScales ws) {
  auto key = std::make_tuple(tokens, n, k, static_cast<int>(out_t), static_cast<int>(ws));
  auto it = fp8_plans_.find(key);
  if (it != fp8_plans_.end()) return it->second;
  Plan& p = fp8_plans_[key];
#if CUBLAS_VERSION >= 120900  // the 1x128 / 128x128 scale modes came with cuBLAS 12.9
  const int32_t a_mode = ws == Fp8WeightScales::kTile128
                             ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                             : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  create_plan(p, CUDA_R_8F_E4M3, tokens, n, k, out_t, &a_mode, &b_mode, n);
#else
  (void)ws;  // no plan (p.ok false): linear_quantized() dequantizes instead
#endif
  return p;
}

void LtGemm::create_plan(Plan& p, cudaDataType_t in_t, int64_t tokens, int64_t n, int64_t k,
                         DType out_t, const int32_t* a_scale_mode, const int32_t* b_scale_mode,
                         int64_t ldc) {
  const CublasLt& lt = cublaslt();
  const cudaDataType_t ct = out_t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  SYV_CUBLAS_CHECK(
      lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  SYV_CUBLAS_CHECK(
      lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // Scaled operands: the heuristic refuses block scales without scale pointers (INVALID_VALUE,
  // measured), so the plan carries a placeholder (the workspace) until run_fp8 sets the real ones.
  const void* placeholder = workspace_;
#if CUBLAS_VERSION >= 120900
  // A cuBLASLt older than the headers (same major version) refuses the scale-mode attributes:
  // then there is no plan, and linear_quantized() dequantizes instead.
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* value, size_t bytes) {
    return lt.cublasLtMatmulDescSetAttribute(p.desc, attr, value, bytes) == CUBLAS_STATUS_SUCCESS;
  };
  if (a_scale_mode &&
      !(set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_scale_mode, sizeof(int32_t)) &&
        set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder))))
    return;
  if (b_scale_mode &&
      !(set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_scale_mode, sizeof(int32_t)) &&
        set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder))))
    return;
#else
  (void)placeholder, (void)a_scale_mode, (void)b_scale_mode;  // fp8_plan() makes none
#endif
  SYV_CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&p.a, in_t, static_cast<uint64_t>(k),
                                                 static_cast<uint64_t>(n), k));
  SYV_CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&p.b, in_t, static_cast<uint64_t>(k),
                                                 static_cast<uint64_t>(tokens), k));
  SYV_CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&p.c, ct, static_cast<uint64_t>(n),
                                                 static_cast<uint64_t>(tokens), ldc));
  cublasLtMatmulPreference_t pref;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceCreate(&pref));
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // A scaled fp8 shape the library cannot run answers NOT_SUPPORTED rather than zero results
  // (on the H200 with CUDA 13.0: token counts not a multiple of 8).
  const cublasStatus_t st = lt.cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c,
                                                              pref, 1, &result, &found);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) SYV_CUBLAS_CHECK(st);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.waves = result.wavesCount;
    p.ok = true;
  }
}

// The heuristic's first algorithm at kFixedAlgoTokens tokens that neither splits K nor reduces
// partial results: each output element is then summed by one block in the kernel's own order.
LtGemm::Fixed& LtGemm::fixed(int64_t n, int64_t k, DType out_t) {
  const CublasLt& lt = cublaslt();
  auto key = std::make_tuple(n, k, static_cast<int>(out_t));
  auto it = fixed_.find(key);
  if (it != fixed_.end()) return it->second;
  Fixed& f = fixed_[key];
  Plan& p = plan(kFixedAlgoTokens, n, k, out_t, n);  // its descriptor and layouts
  cublasLtMatmulPreference_t pref;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceCreate(&pref));
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction, sizeof(no_reduction)));
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref,
                                                     kCandidates, results, &found));
  lt.cublasLtMatmulPreferenceDestroy(pref);
  for (int i = 0; i < found && !f.ok; ++i) {
    int32_t splits = 1;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t written = 0;
    SYV_CUBLAS_CHECK(lt.cublasLtMatmulAlgoConfigGetAttribute(
        &results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written));
    SYV_CUBLAS_CHECK(lt.cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo,
                                                             CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                             &scheme, sizeof(scheme), &written));
    if (splits <= 1 && scheme == CUBLASLT_REDUCTION_SCHEME_NONE) {
      f.algo = results[i].algo;
      f.ok = true;
    }
  }
  // The same algorithm must serve every token count: refuse the shape (all of its T then take
  // gemm_invariant.cu) unless it runs a few far apart.
  for (int64_t t : {int64_t{1}, int64_t{3}, int64_t{2048}})
    if (f.ok && !algo_runs(f, t, n, k, out_t, /*warn=*/false)) f.ok = false;
  return f;
}

bool LtGemm::algo_runs(Fixed& f, int64_t tokens, int64_t n, int64_t k, DType out_t, bool warn) {
  const CublasLt& lt = cublaslt();
  auto key = std::make_tuple(tokens, n, k, static_cast<int>(out_t));
  auto it = fixed_ok_.find(key);
  if (it == fixed_ok_.end()) {
    Plan& p = plan(tokens, n, k, out_t, n);
    cublasLtMatmulHeuristicResult_t check{};
    const bool ok = lt.cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &f.algo,
                                               &check) == CUBLAS_STATUS_SUCCESS &&
                    check.workspaceSize <= workspace_bytes_;
    if (!ok && warn) {
      SYV_LOG(WARN) << "batch-invariant GEMM: the fixed cuBLASLt algorithm for [" << n << ", " << k
                    << "] does not run " << tokens << " tokens; that call takes another kernel, "
                    << "so rows of this shape may differ between token counts";
    }
    it = fixed_ok_.emplace(key, ok).first;
  }
  return it->second;
}

bool LtGemm::run_fixed(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                       int64_t n, int64_t k, cudaStream_t stream) {
  const CublasLt& lt = cublaslt();
  if (out_t != DType::F32 && out_t != DType::BF16) return false;
  Fixed& f = fixed(n, k, out_t);
  if (!f.ok || !algo_runs(f, tokens, n, k, out_t, /*warn=*/true)) return false;
  Plan& p = plan(tokens, n, k, out_t, n);
  const float alpha = 1.f, beta = 0.f;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c, out,
                                     p.c, &f.algo, workspace_, workspace_bytes_, stream));
  return true;
}

bool LtGemm::run(const void* x, const void* w, void* out, DType out_t, int64_t tokens, int64_t n,
                 int64_t k, cudaStream_t stream, int64_t ldc) {
  const CublasLt& lt = cublaslt();
  if (out_t != DType::F32 && out_t != DType::BF16) return false;
  Plan& p = plan(tokens, n, k, out_t, ldc == 0 ? n : ldc);
  if (!p.ok) return false;
  const float alpha = 1.f, beta = 0.f;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c, out,
                                     p.c, &p.algo, workspace_, workspace_bytes_, stream));
  return true;
}

void LtGemm::run_fp8(const void* x8, const float* x_scales, const void* w8, const float* w_scales,
                     Fp8WeightScales w_scales_kind, void* out, DType out_t, int64_t tokens,
                     int64_t n, int64_t k, cudaStream_t stream) {
  const CublasLt& lt = cublaslt();
  Plan& p = fp8_plan(tokens, n, k, out_t, w_scales_kind);
  SYV_CHECK(p.ok) << "fp8 GEMM [" << n << ", " << k << "] x " << tokens
                  << " tokens: no algorithm (call fp8_runs() first)";
  // The scale pointers are per call (the plan is per shape): cublasLtMatmul reads them now.
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                     &w_scales, sizeof(w_scales)));
  SYV_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                     &x_scales, sizeof(x_scales)));
  const float alpha = 1.f, beta = 0.f;
  SYV_CUBLAS_CHECK(lt.cublasLtMatmul(handle_, p.desc, &alpha, w8, p.a, x8, p.b, &beta, out, p.c,
                                     out, p.c, &p.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace syv::cuda
