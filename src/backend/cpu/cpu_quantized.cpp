// CPU backend: linear() on quantized weights (backend/weight.h), the reference every quantized
// kernel is tested against. Row blocks of the weight are dequantized to f32 (dequantize_rows, one
// block per thread) and multiplied through the same linear() as dense weights (OpenBLAS, or the
// batch-invariant path),
// so a quantized model's logits equal the dense model's on the dequantized weights up to float
// rounding of the summation order (none when the row blocks cover N at once).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_hybrid_ops.h"
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

void CpuBackend::moe_experts_quantized(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                       const Weight& gate_up, const Weight& down, Tensor& out) {
  cpu::check_f32(x, "moe_experts", "x");
  SYV_CHECK(ids.dtype == DType::I32) << "moe ids must be i32";
  const int64_t H = x.dim(-1), I = down.k;
  SYV_CHECK(H > 0 && down.n % H == 0 && I > 0) << "moe_experts: quantized down " << down.describe()
                                               << " [" << down.n << ", " << I << "] for H " << H;
  const int64_t E = down.n / H;
  SYV_CHECK(gate_up.n == E * 2 * I && gate_up.k == H)
      << "moe_experts: quantized gate_up [" << gate_up.n << ", " << gate_up.k << "] for " << E
      << " experts of [" << 2 * I << ", " << H << "]";
  // The experts routed to, in order of first use; ids renumbered into that list.
  const int32_t* id = ids.as<const int32_t>();
  const int64_t n = ids.numel();
  std::vector<int32_t> slot(static_cast<size_t>(E), -1), used;
  std::vector<int32_t> renumbered(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SYV_CHECK(id[i] >= 0 && id[i] < E) << "expert id " << id[i] << " of " << E;
    int32_t& s = slot[static_cast<size_t>(id[i])];
    if (s < 0) {
      s = static_cast<int32_t>(used.size());
      used.push_back(id[i]);
    }
    renumbered[static_cast<size_t>(i)] = s;
  }
  const int64_t U = static_cast<int64_t>(used.size());
  std::vector<float> gu(static_cast<size_t>(U * 2 * I * H)), dn(static_cast<size_t>(U * H * I));
  ThreadPool::global().parallel_for(U, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t e = used[static_cast<size_t>(u)];
      dequantize_rows(gate_up, e * 2 * I, 2 * I, gu.data() + u * 2 * I * H);
      dequantize_rows(down, e * H, H, dn.data() + u * H * I);
    }
  });
  Tensor renumbered_ids(renumbered.data(), DType::I32, {ids.numel()});
  if (ids.ndim == 2) renumbered_ids = renumbered_ids.reshape({ids.dim(0), ids.dim(1)});
  cpu::moe_experts(x, renumbered_ids, weights, Tensor(gu.data(), DType::F32, {U, 2 * I, H}),
                   Tensor(dn.data(), DType::F32, {U, H, I}), out, batch_invariant_);
}

}  // namespace syv
