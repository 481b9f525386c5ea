// CPU backend: linear layers through OpenBLAS: sgemv row by row for small batches, sgemm above.
#include <cblas.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace syv {
namespace {

// Up to this many rows, linear() runs one sgemv per row instead of one sgemm. OpenBLAS's sgemm
// packs the whole weight on every call (sgemm_incopy): at T = 2-5 (a decode step of a few
// sequences, a verify step of k = 1-4 drafts) that copy cost more than the rows' arithmetic (the
// lm_head of models/tiny-hybrid, 8192 x 192: sgemm at T = 4 took 430-520 us against 250-400 us
// for four sgemv calls, docs/performance.md). Row by row, every row also equals the same token's
// row of a one-token step bit for bit, so a verify row is exactly the decode row it stands for.
constexpr int64_t kRowByRowMaxTokens = 8;

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  cpu::check_f32(x, "linear", "x");
  cpu::check_f32(out, "linear", "out");
  const int64_t K = x.dim(-1);
  const int64_t T = x.numel() / (K ? K : 1);
  SYV_CHECK(w.ndim == 2 && w.dim(1) == K)
      << "linear: w [" << w.dim(0) << ", " << w.dim(-1) << "] vs x [.., " << K << "]";
  const int64_t N = w.dim(0);
  SYV_CHECK(out.numel() == T * N) << "linear: out " << out.numel() << " vs " << T << "x" << N;
  if (T == 0 || N == 0) return;
  if (linear_observer_) linear_observer_(x, w);

  // Weights are f32 after load (weight_dtype()); other dtypes are widened here, one call at a time.
  const float* wf = w.as<const float>();
  std::vector<float> widened;
  if (w.dtype != DType::F32) {
    widened.resize(static_cast<size_t>(w.numel()));
    convert_to_f32(w.dtype, w.data, widened.data(), widened.size());
    wf = widened.data();
  }
  float* o = out.as<float>();
  if (batch_invariant_) {
    cpu::linear_invariant(x.as<const float>(), wf, o, T, N, K);
  } else if (T <= kRowByRowMaxTokens) {
    for (int64_t t = 0; t < T; ++t)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(N), static_cast<int>(K), 1.0f, wf,
                  static_cast<int>(K), x.as<const float>() + t * K, 1, 0.0f, o + t * N, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(N),
                static_cast<int>(K), 1.0f, x.as<const float>(), static_cast<int>(K), wf,
                static_cast<int>(K), 0.0f, o, static_cast<int>(N));
  }
  if (!bias.empty()) {
    SYV_CHECK(bias.numel() == N) << "linear: bias [" << bias.numel() << "] vs N " << N;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) o[t * N + n] += cpu::load_f32(bias, n);
  }
}

}  // namespace syv
