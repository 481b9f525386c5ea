// The factor and the Gram matrix of model/gptq.h.
#include "model/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/check.h"
#include "core/thread_pool.h"

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

int64_t cholesky_lower(double* a, int64_t n) {
  // Row by row (Cholesky-Banachiewicz): each entry of row i is a dot product of two row prefixes
  // (contiguous in row-major) and needs the entries before it in its row, so a row runs in order.
  for (int64_t i = 0; i < n; ++i) {
    double* ri = a + i * n;
    for (int64_t j = 0; j < i; ++j) {
      const double* rj = a + j * n;
      double s = ri[j];
      for (int64_t k = 0; k < j; ++k) s -= ri[k] * rj[k];
      ri[j] = s / rj[j];
    }
    double d = ri[i];
    for (int64_t k = 0; k < i; ++k) d -= ri[k] * ri[k];
    if (!(d > 0.0)) return i;
    ri[i] = std::sqrt(d);
    std::fill(ri + i + 1, ri + n, 0.0);
  }
  return -1;
}

namespace {

// L^-1 of a lower triangular L, in place (lower triangular), by columns: column j of L^-1 solves
// L y = e_j, independent of the others, so columns run in parallel.
void invert_lower(double* l, int64_t n) {
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  ThreadPool::global().parallel_for(n, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      inv[j * n + j] = 1.0 / l[j * n + j];
      for (int64_t i = j + 1; i < n; ++i) {
        const double* li = l + i * n;
        double s = 0.0;
        for (int64_t k = j; k < i; ++k) s -= li[k] * inv[k * n + j];
        inv[i * n + j] = s / li[i];
      }
    }
  });
  std::copy(inv.begin(), inv.end(), l);
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
  // H = L L^T;  H^-1 = L^-T L^-1;  H^-1 = U^T U with U = (lower factor of H^-1)^T.
  int64_t bad = cholesky_lower(h.data(), k);
  if (bad >= 0) {
    return Status::Error("H is not positive definite at column " + std::to_string(bad) +
                         " after a damping of " + std::to_string(damp) +
                         " x its mean diagonal; more calibration tokens or a larger damping");
  }
  invert_lower(h.data(), k);  // M = L^-1
  std::vector<double> hinv(static_cast<size_t>(k * k), 0.0);
  // hinv (lower triangle) = M^T M
  cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, static_cast<int>(k), static_cast<int>(k), 1.0,
              h.data(), static_cast<int>(k), 0.0, hinv.data(), static_cast<int>(k));
  bad = cholesky_lower(hinv.data(), k);
  if (bad >= 0) {
    return Status::Error("H^-1 is not positive definite at column " + std::to_string(bad) +
                         " (ill-conditioned calibration inputs); a larger damping");
  }
  f.u.assign(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j <= i; ++j) f.u[j * k + i] = hinv[i * k + j];
  return f;
}

}  // namespace syv
