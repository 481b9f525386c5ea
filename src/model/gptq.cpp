// The factor and the Gram matrix of model/gptq.h.
#include "model/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/check.h"

namespace syv {

InputGram::InputGram(int64_t k) : k_(k), upper_(static_cast<size_t>(k * k), 0.0) {
  SYV_CHECK(k > 0) << "InputGram of width " << k;
}

void InputGram::add(const float* x, int64_t t) {
  constexpr int64_t kRowsPerCall = 256;  // the double copy stays small
  for (int64_t r0 = 0; r0 < t; r0 += kRowsPerCall) {
    const int64_t rows = std::min(kRowsPerCall, t - r0);
    rows_.resize(static_cast<size_t>(rows * k_));
    std::copy_n(x + r0 * k_, rows * k_, rows_.data());
    // upper += rows^T rows
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(k_), static_cast<int>(rows),
                1.0, rows_.data(), static_cast<int>(k_), 1.0, upper_.data(), static_cast<int>(k_));
  }
  tokens_ += t;
}

std::vector<double> InputGram::symmetric() const {
  std::vector<double> h = upper_;
  for (int64_t i = 0; i < k_; ++i)
    for (int64_t j = i + 1; j < k_; ++j) h[j * k_ + i] = h[i * k_ + j];
  return h;
}

namespace {

// LAPACK's Cholesky factorization and inverse from it (OpenBLAS carries LAPACK: blocked and
// threaded). Column-major: on a row-major symmetric matrix, uplo 'L' works on its upper triangle.
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info);
}

}  // namespace

Result<GptqFactor> gptq_factor(std::vector<double> h, int64_t k, double damp, int64_t tokens,
                               bool act_order) {
  SYV_CHECK(k > 0 && static_cast<int64_t>(h.size()) == k * k)
      << "gptq_factor: H of " << h.size() << " for K " << k;
  GptqFactor f;
  f.k = k;
  f.tokens = tokens;
  f.dead.assign(static_cast<size_t>(k), 0);
  double mean_diag = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    double& d = h[i * k + i];
    if (d == 0.0) {
      f.dead[i] = 1;
      d = 1.0;
    }
    mean_diag += d;
  }
  mean_diag /= static_cast<double>(k);
  if (!std::isfinite(mean_diag)) {
    return Status::Error("the calibration inputs hold a non-finite value (H's diagonal sums to " +
                         std::to_string(mean_diag) + ")");
  }
  for (int64_t i = 0; i < k; ++i) h[i * k + i] += damp * mean_diag;
  if (act_order) {  // H[order][order], order by decreasing diagonal (after the dead columns' 1)
    f.order.resize(static_cast<size_t>(k));
    std::iota(f.order.begin(), f.order.end(), 0);
    std::stable_sort(f.order.begin(), f.order.end(),
                     [&](int32_t a, int32_t b) { return h[a * k + a] > h[b * k + b]; });
    std::vector<double> p(static_cast<size_t>(k * k));
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) p[i * k + j] = h[f.order[i] * k + f.order[j]];
    h = std::move(p);
  }
  // GPTQ's cholesky, cholesky_inverse, cholesky(upper=True), by LAPACK. H is symmetric, so the
  // row-major array is also H in column-major: dpotrf('L') leaves there the lower factor L of H
  // (H = L L^T), dpotri('L') the lower triangle of H^-1 from it, and dpotrf('L') again the lower
  // factor L' of H^-1; read row-major, that triangle is L'^T = U, the upper factor with H^-1 =
  // U^T U. Blocked and threaded: K = 4096 takes seconds where a scalar loop took minutes.
  const int n = static_cast<int>(k);
  int info = 0;
  dpotrf_("L", &n, h.data(), &n, &info);
  if (info > 0) {
    return Status::Error("H is not positive definite at column " + std::to_string(info - 1) +
                         " after a damping of " + std::to_string(damp) +
                         " x its mean diagonal; more calibration tokens or a larger damping");
  }
  SYV_CHECK(info == 0) << "dpotrf: argument " << -info;
  dpotri_("L", &n, h.data(), &n, &info);
  SYV_CHECK(info >= 0) << "dpotri: argument " << -info;
  if (info == 0) dpotrf_("L", &n, h.data(), &n, &info);
  if (info > 0) {
    return Status::Error("H^-1 is not positive definite at column " + std::to_string(info - 1) +
                         " (ill-conditioned calibration inputs); a larger damping");
  }
  SYV_CHECK(info == 0) << "dpotrf: argument " << -info;
  for (int64_t i = 0; i < k; ++i) std::fill(h.begin() + i * k, h.begin() + i * k + i, 0.0);
  f.u = std::move(h);
  return f;
}

}  // namespace syv
