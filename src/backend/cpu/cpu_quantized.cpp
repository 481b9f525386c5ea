// CPU backend: linear() on quantized weights (backend/weight.h), the reference every quantized
// kernel is tested against. Row blocks of the weight are dequantized to f32 (dequantize_rows, one
// block per thread) and multiplied through the same linear() as dense weights (OpenBLAS, or the
// batch-invariant path),
// so a quantized model's logits equal the dense model's on the dequantized weights up to float
// rounding of the summation order (none when the row blocks cover N at once).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace syv {

void CpuBackend::linear_quantized(const Tensor& x, const Weight& w, const Tensor& bias,
                                  Tensor& out) {
  cpu::check_f32(x, "linear", "x");
  cpu::check_f32(out, "linear", "out");
  const int64_t K = w.k, N = w.n;
  SYV_CHECK(x.dim(-1) == K) << "linear: " << w.describe() << " [" << N << ", " << K
                            << "] vs x [.., " << x.dim(-1) << "]";
  const int64_t T = x.numel() / (K ? K : 1);
  SYV_CHECK(out.numel() == T * N) << "linear: out " << out.numel() << " vs " << T << "x" << N;
  if (T == 0 || N == 0) return;
  // The whole weight at once: one linear() over all rows keeps the summation order of the dense
  // path.
  // (A GPU kernel dequantizes per tile; this is the readable reference.)
  // (thread_local: the buffer is reused across calls; the workers write through `base`, never
  // through their own thread's instance.)
  thread_local std::vector<float> dense;
  dense.resize(static_cast<size_t>(N * K));
  float* base = dense.data();
  ThreadPool::global().parallel_for(
      N,
      [&](int64_t begin, int64_t end) { dequantize_rows(w, begin, end - begin, base + begin * K); },
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(K, 1)));
  linear(x, Tensor(base, DType::F32, {N, K}), bias, out);
}

}  // namespace syv
