// CPU backend: RMSNorm (plain x̂·w and zero-centred x̂·(1 + w)), the fused residual-add form, and
// per-head q/k norm + rotate-half RoPE.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace syv {

namespace cpu {

void rmsnorm_row(const float* x, const Tensor& w, float eps, NormKind kind, int64_t n, float* y) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float wi = load_f32(w, i);
    y[i] = x[i] * inv_rms * (kind == NormKind::kOnePlus ? 1.0f + wi : wi);
  }
}

}  // namespace cpu

void CpuBackend::rmsnorm(const Tensor& x, const Tensor& w, float eps, NormKind kind, Tensor& out) {
  cpu::check_f32(x, "rmsnorm", "x");
  cpu::check_f32(out, "rmsnorm", "out");
  const int64_t H = x.dim(-1);
  SYV_CHECK(w.numel() == H && out.numel() == x.numel())
      << "rmsnorm: w [" << w.numel() << "] vs H " << H;
  const int64_t rows = x.numel() / H;
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      cpu::rmsnorm_row(x.as<const float>() + r * H, w, eps, kind, H, out.as<float>() + r * H);
  });
}

void CpuBackend::add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                             NormKind kind, Tensor& out) {
  cpu::check_f32(residual, "add_rmsnorm", "residual");
  cpu::check_f32(x, "add_rmsnorm", "x");
  cpu::check_f32(out, "add_rmsnorm", "out");
  const int64_t H = residual.dim(-1);
  SYV_CHECK(w.numel() == H && x.numel() == residual.numel() && out.numel() == residual.numel())
      << "add_rmsnorm: shapes";
  const int64_t rows = residual.numel() / H;
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* h = residual.as<float>() + r * H;
      const float* d = x.as<const float>() + r * H;
      for (int64_t i = 0; i < H; ++i) h[i] += d[i];
      cpu::rmsnorm_row(h, w, eps, kind, H, out.as<float>() + r * H);
    }
  });
}

// Rotate-half RoPE on the first `rotary_dim` lanes of one head, as transformers computes it:
// inv_freq[i] = theta^(-2i/rotary_dim) and the angle pos * inv_freq[i] in fp32.
static void rope_head(float* x, int32_t pos, const std::vector<float>& inv_freq) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle);
    const float s = std::sin(angle);
    const float x1 = x[i];
    const float x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

void CpuBackend::qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                              float eps, NormKind kind, const RopeParams& rope,
                              const BatchMeta& meta) {
  cpu::check_f32(q, "qk_norm_rope", "q");
  cpu::check_f32(k, "qk_norm_rope", "k");
  const int64_t T = meta.positions.numel();
  const int64_t D = q.dim(-1);
  const int64_t Hq = q.numel() / (T * D);
  const int64_t Hk = k.numel() / (T * D);
  SYV_CHECK(q.numel() == T * Hq * D && k.numel() == T * Hk * D)
      << "qk_norm_rope: q/k not [T, H, D]";
  SYV_CHECK(rope.rotary_dim >= 0 && rope.rotary_dim <= D && rope.rotary_dim % 2 == 0)
      << "qk_norm_rope: rotary_dim " << rope.rotary_dim << " with head_dim " << D;
  std::vector<float> inv_freq(static_cast<size_t>(rope.rotary_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope.rotary_dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(rope.theta), exponent);
  }
  const int32_t* positions = meta.positions.as<const int32_t>();
  ThreadPool::global().parallel_for(T, [&](int64_t begin, int64_t end) {
    std::vector<float> tmp(static_cast<size_t>(D));
    for (int64_t t = begin; t < end; ++t) {
      for (int pass = 0; pass < 2; ++pass) {
        Tensor& x = pass == 0 ? q : k;
        const Tensor& w = pass == 0 ? q_norm : k_norm;
        const int64_t heads = pass == 0 ? Hq : Hk;
        for (int64_t h = 0; h < heads; ++h) {
          float* head = x.as<float>() + (t * heads + h) * D;
          if (!w.empty()) {
            cpu::rmsnorm_row(head, w, eps, kind, D, tmp.data());
            std::copy(tmp.begin(), tmp.end(), head);
          }
          rope_head(head, positions[t], inv_freq);
        }
      }
    }
  });
}

}  // namespace syv
