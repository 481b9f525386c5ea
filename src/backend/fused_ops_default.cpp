// Default bodies of the fused ops (backend.h): each runs the sequence of plain ops it stands for,
// so a backend that does not fuse (the CPU backend) computes exactly what the sequence computes.
#include "backend/backend.h"
#include "core/check.h"

namespace syv {

namespace {

// qkv [T, (Hq + 2 Hk) * D] -> q, k, v, then qk_norm_rope(q, k): the part of qkv_norm_rope_write
// before the cache write.
void split_qkv_norm_rope(Backend& be, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                         float eps, NormKind kind, const RopeParams& rope, const BatchMeta& meta,
                         Tensor& q, Tensor& k, Tensor& v) {
  const int64_t T = meta.positions.numel();
  const size_t q_row = T ? q.bytes() / static_cast<size_t>(T) : 0;
  const size_t kv_row = T ? k.bytes() / static_cast<size_t>(T) : 0;
  SYV_CHECK(qkv.dtype == q.dtype && qkv.dtype == k.dtype && qkv.dtype == v.dtype)
      << "qkv_norm_rope_write: qkv, q, k, v dtypes differ";
  SYV_CHECK_EQ(k.numel(), v.numel()) << "qkv_norm_rope_write: k vs v";
  SYV_CHECK_EQ(qkv.bytes(), static_cast<size_t>(T) * (q_row + 2 * kv_row))
      << "qkv_norm_rope_write: qkv must be [T, (Hq + 2 Hk) * D] for q [T, Hq, D], k/v [T, Hk, D]";
  const char* src = static_cast<const char*>(qkv.data);
  for (int64_t t = 0; t < T; ++t) {
    const char* row = src + static_cast<size_t>(t) * (q_row + 2 * kv_row);
    const size_t st = static_cast<size_t>(t);
    be.copy(static_cast<char*>(q.data) + st * q_row, row, q_row);
    be.copy(static_cast<char*>(k.data) + st * kv_row, row + q_row, kv_row);
    be.copy(static_cast<char*>(v.data) + st * kv_row, row + q_row + kv_row, kv_row);
  }
  be.qk_norm_rope(q, k, q_norm, k_norm, eps, kind, rope, meta);
}

}  // namespace

void Backend::qkv_norm_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                                  float eps, NormKind kind, const RopeParams& rope,
                                  const BatchMeta& meta, Tensor& q, Tensor& k, Tensor& v,
                                  Tensor& k_cache, Tensor& v_cache) {
  split_qkv_norm_rope(*this, qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v);
  kv_write(k, v, k_cache, v_cache, meta);
}

void Backend::qkv_norm_rope_write_quantized(const Tensor& qkv, const Tensor& q_norm,
                                            const Tensor& k_norm, float eps, NormKind kind,
                                            const RopeParams& rope, const BatchMeta& meta,
                                            Tensor& q, Tensor& k, Tensor& v,
                                            const KvCacheView& cache) {
  split_qkv_norm_rope(*this, qkv, q_norm, k_norm, eps, kind, rope, meta, q, k, v);
  kv_write_quantized(k, v, cache, meta);
}

void Backend::add_rmsnorm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                 float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                 const Tensor& w, const Tensor& bias, Tensor& out) {
  SYV_CHECK(residual.dtype == residual_out.dtype && residual.numel() == residual_out.numel())
      << "add_rmsnorm_linear: residual_out must match residual";
  if (residual_out.data != residual.data) copy(residual_out.data, residual.data, residual.bytes());
  add_rmsnorm(residual_out, x, norm_w, eps, kind, normed);
  linear(normed, w, bias, out);
}

void Backend::add_rmsnorm_quantized(const Tensor& residual, const Tensor& x, const Tensor& norm_w,
                                    float eps, NormKind kind, Tensor& residual_out, Tensor& normed,
                                    const Weight& w, const Tensor& bias, Tensor& out, Tensor* act) {
  SYV_CHECK(residual.dtype == residual_out.dtype && residual.numel() == residual_out.numel())
      << "add_rmsnorm_linear: residual_out must match residual";
  if (residual_out.data != residual.data) copy(residual_out.data, residual.data, residual.bytes());
  add_rmsnorm(residual_out, x, norm_w, eps, kind, normed);
  linear_quantized(normed, w, bias, out);
  if (act != nullptr) silu_mul(out, *act);
}

void Backend::linear_quantized_silu_mul(const Tensor& x, const Weight& w, Tensor& gate_up,
                                        Tensor& out) {
  linear_quantized(x, w, Tensor(), gate_up);
  silu_mul(gate_up, out);
}

void Backend::linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& gate_up, Tensor& out) {
  linear(x, w, Tensor(), gate_up);
  silu_mul(gate_up, out);
}

void Backend::gated_rmsnorm_linear(const Tensor& x, const Tensor& z, const Tensor& norm_w,
                                   float eps, const Tensor& w, Tensor& normed, Tensor& out) {
  gated_rmsnorm(x, z, norm_w, eps, normed);
  linear(normed.reshape({out.numel() / w.dim(0), w.dim(1)}), w, Tensor(), out);
}

void Backend::linear_pair(const Tensor& x, const Tensor& w1, Tensor& out1, const Tensor& w2,
                          Tensor& out2) {
  linear(x, w1, Tensor(), out1);
  linear(x, w2, Tensor(), out2);
}

void Backend::add_rmsnorm_linear_silu_mul(const Tensor& residual, const Tensor& x,
                                          const Tensor& norm_w, float eps, NormKind kind,
                                          Tensor& residual_out, Tensor& normed, const Tensor& w,
                                          Tensor& gate_up, Tensor& out) {
  add_rmsnorm_linear(residual, x, norm_w, eps, kind, residual_out, normed, w, Tensor(), gate_up);
  silu_mul(gate_up, out);
}

void Backend::moe_block(const Tensor& x, const MoeBlockWeights& w, int32_t top_k, bool renormalize,
                        MoeBlockBuffers& b, Tensor& out) {
  SYV_CHECK(w.router && w.experts_gate_up && w.experts_down && w.shared_gate_up && w.shared_down &&
            w.shared_gate)
      << "moe_block: every weight of MoeBlockWeights is needed";
  linear(x, *w.router, Tensor(), b.logits);
  moe_topk(b.logits, top_k, renormalize, b.ids, b.weights);
  moe_experts(x, b.ids, b.weights, *w.experts_gate_up, *w.experts_down, out);
  linear_silu_mul(x, *w.shared_gate_up, b.shared_gate_up, b.shared_act);
  linear(b.shared_act, *w.shared_down, Tensor(), b.shared);
  linear(x, *w.shared_gate, Tensor(), b.gate);
  sigmoid_mul(b.shared, b.gate, b.shared);
  add(out, b.shared, out);
}

}  // namespace syv
