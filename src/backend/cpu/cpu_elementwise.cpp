// CPU backend: row gathers and element-wise ops (embedding, gather_rows, add, silu_mul).
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace syv {

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  cpu::check_f32(out, "embedding", "out");
  const int64_t T = ids.numel();
  const int64_t V = table.dim(0);
  const int64_t H = table.dim(1);
  SYV_CHECK(out.numel() == T * H) << "embedding: out " << out.numel() << " vs " << T << "x" << H;
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(table.dtype);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids.as<const int32_t>()[t];
    SYV_CHECK(id >= 0 && id < V) << "embedding: token id " << id << " outside [0, " << V << ")";
    convert_to_f32(table.dtype, static_cast<const char*>(table.data) + id * row_bytes,
                   out.as<float>() + t * H, static_cast<size_t>(H));
  }
}

void CpuBackend::gather_rows(const Tensor& x, const BatchMeta& meta, Tensor& out) {
  const int64_t R = meta.logit_rows.numel();
  const int64_t H = x.dim(-1);
  SYV_CHECK(out.dtype == x.dtype && out.numel() == R * H) << "gather_rows: out shape/dtype";
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(x.dtype);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t row = meta.logit_rows.as<const int32_t>()[r];
    SYV_CHECK(row >= 0 && row < x.dim(0)) << "gather_rows: row " << row << " of " << x.dim(0);
    std::memcpy(static_cast<char*>(out.data) + r * row_bytes,
                static_cast<const char*>(x.data) + row * row_bytes, row_bytes);
  }
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  cpu::check_f32(a, "add", "a");
  cpu::check_f32(b, "add", "b");
  cpu::check_f32(out, "add", "out");
  SYV_CHECK(a.numel() == b.numel() && a.numel() == out.numel()) << "add: shapes differ";
  const float* pa = a.as<const float>();
  const float* pb = b.as<const float>();
  float* po = out.as<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  cpu::check_f32(gate_up, "silu_mul", "gate_up");
  cpu::check_f32(out, "silu_mul", "out");
  const int64_t T = gate_up.dim(0);
  const int64_t I = gate_up.dim(-1) / 2;
  SYV_CHECK(gate_up.dim(-1) == 2 * I && out.numel() == T * I)
      << "silu_mul: gate_up [T, 2I], out [T, I]";
  ThreadPool::global().parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* gate = gate_up.as<const float>() + t * 2 * I;
      const float* up = gate + I;
      float* o = out.as<float>() + t * I;
      for (int64_t i = 0; i < I; ++i) o[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  });
}

}  // namespace syv
