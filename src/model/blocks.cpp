#include "model/blocks.h"

#include "backend/tp_comm.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

namespace syv {

Fusions fusions_from_env() {
  auto value = [](const char* name) {
    const char* e = std::getenv(name);
    return std::string(e != nullptr ? e : "1");
  };
  Fusions f;
  f.qkv = value("SYV_FUSED_QKV") != "0";
  const std::string norm = value("SYV_FUSED_NORM");
  f.norm_qkv = norm != "0" && norm != "mlp";
  f.norm_mlp = norm != "0" && norm != "qkv";
  f.silu = value("SYV_FUSED_SILU") != "0";
  f.moe = value("SYV_FUSED_MOE") != "0";
  return f;
}

void all_reduce_partial(BlockContext& c, Tensor& t) {
  if (c.tp != nullptr) c.tp->all_reduce_sum(c.backend, t);
}

void add_norm(BlockContext& c, Residual& r, const Tensor& norm_w, Tensor& x) {
  if (r.pending.empty()) {
    c.backend.rmsnorm(*r.h, norm_w, c.eps, c.norm, x);
  } else {
    c.backend.add_rmsnorm(*r.h, r.pending, norm_w, c.eps, c.norm, x);
    r.pending = Tensor();
  }
}

void add_norm_linear(BlockContext& c, Residual& r, const Tensor& norm_w, Tensor& x, const Weight& w,
                     const Tensor& bias, Tensor& out, bool fused) {
  if (fused && !r.pending.empty()) {
    c.backend.add_rmsnorm_linear(*r.h, r.pending, norm_w, c.eps, c.norm, *r.h_alt, x, w, bias, out);
    std::swap(r.h, r.h_alt);
    r.pending = Tensor();
    return;
  }
  add_norm(c, r, norm_w, x);
  c.backend.linear(x, w, bias, out);
}

// ---- attention
// -----------------------------------------------------------------------------------

int64_t attention_bytes(const AttentionShape& s, DType act, int64_t T) {
  const int64_t q = s.q_heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  int64_t b = Workspace::bytes(act, T * (q + 2 * kv)) + 2 * Workspace::bytes(act, T * q) +
              2 * Workspace::bytes(act, T * kv);       // qkv, q, attn, k, v
  if (s.gated) b += 2 * Workspace::bytes(act, T * q);  // gate, gated
  return b;
}

void attention_block(BlockContext& c, Residual& r, const Tensor& norm_w, const AttentionWeights& w,
                     const AttentionShape& s, const KvCacheView& kv, Tensor& x, Tensor& out) {
  Backend& b = c.backend;
  const int64_t T = x.dim(0), Hq = s.q_heads, Hk = s.kv_heads, D = s.head_dim;
  Tensor qkv = c.ws.take(c.act, {T, (Hq + 2 * Hk) * D});
  Tensor q = c.ws.take(c.act, {T, Hq * D});
  Tensor k = c.ws.take(c.act, {T, Hk * D});
  Tensor v = c.ws.take(c.act, {T, Hk * D});
  Tensor attn = c.ws.take(c.act, {T, Hq * D});
  Tensor q3 = q.reshape({T, Hq, D});
  Tensor k3 = k.reshape({T, Hk, D});
  Tensor v3 = v.reshape({T, Hk, D});
  Tensor attn3 = attn.reshape({T, Hq, D});
  if (c.fuse.qkv) {
    add_norm_linear(c, r, norm_w, x, w.qkv, w.qkv_bias.tensor, qkv, c.fuse.norm_qkv);
    b.qkv_norm_rope_write(qkv, w.q_norm.tensor, w.k_norm.tensor, c.eps, c.norm, s.rope, c.meta, q3,
                          k3, v3, kv);
  } else {  // the same rows of the fused weight, one linear each
    // Row slices of a quantized weight would need their scales sliced too: dense only.
    SYV_CHECK(w.qkv.dense()) << "unfused q|k|v projections (SYV_FUSED_QKV=0) of "
                             << w.qkv.describe() << " are not supported yet";
    add_norm(c, r, norm_w, x);
    const Tensor& wqkv = w.qkv.tensor;
    const Tensor& bqkv = w.qkv_bias.tensor;
    auto part = [&](const Tensor& t, int64_t begin, int64_t count) {
      return t.empty() ? Tensor() : t.rows(begin, count);
    };
    b.linear(x, part(wqkv, 0, Hq * D), part(bqkv, 0, Hq * D), q);
    b.linear(x, part(wqkv, Hq * D, Hk * D), part(bqkv, Hq * D, Hk * D), k);
    b.linear(x, part(wqkv, (Hq + Hk) * D, Hk * D), part(bqkv, (Hq + Hk) * D, Hk * D), v);
    b.qk_norm_rope(q3, k3, w.q_norm.tensor, w.k_norm.tensor, c.eps, c.norm, s.rope, c.meta);
    b.kv_write(k3, v3, kv, c.meta);
  }
  b.paged_attention(q3, kv, 1.0f / std::sqrt(static_cast<float>(D)), c.meta, attn3);
  if (w.gate.tensor.empty()) {
    b.linear(attn, w.o, w.o_bias.tensor, out);
    all_reduce_partial(c, out);
    return;
  }
  SYV_CHECK(s.gated) << "gated attention weights with an ungated AttentionShape";
  Tensor gate = c.ws.take(c.act, {T, Hq * D});
  Tensor gated = c.ws.take(c.act, {T, Hq * D});
  b.linear(x, w.gate, Tensor(), gate);
  b.sigmoid_mul(attn, gate, gated);
  b.linear(gated, w.o, w.o_bias.tensor, out);
  all_reduce_partial(c, out);
}

// ---- Gated DeltaNet
// --------------------------------------------------------------------------------

int64_t gdn_bytes(const GdnShape& g, DType act, int64_t T) {
  const int64_t C = g.conv_dim(), Vd = g.value_dim();
  return 2 * Workspace::bytes(act, T * C) + 3 * Workspace::bytes(act, T * Vd) +
         Workspace::bytes(DType::F32, T * 2 * g.num_v_heads);
}

void gdn_block(BlockContext& c, Residual& r, const Tensor& norm_w, const GdnWeights& w,
               const GdnShape& g, const CacheStore::StateView& state, Tensor& x, Tensor& out) {
  Backend& b = c.backend;
  const int64_t T = x.dim(0), C = g.conv_dim(), Vd = g.value_dim();
  const int64_t Hv = g.num_v_heads, dv = g.v_head_dim;
  Tensor qkv = c.ws.take(c.act, {T, C});
  Tensor z = c.ws.take(c.act, {T, Vd});
  // The gate inputs in f32: the decay exp(-exp(A_log) softplus(a + dt_bias)) compounds over every
  // later token, and a bf16-rounded `a` moved a fixture's logits by 17% (relative L2) on CUDA.
  Tensor ba = c.ws.take(DType::F32, {T, 2 * Hv});
  Tensor mixed = c.ws.take(c.act, {T, C});
  Tensor core = c.ws.take(c.act, {T, Vd});
  Tensor normed = c.ws.take(c.act, {T, Vd});
  add_norm_linear(c, r, norm_w, x, w.qkv, Tensor(), qkv, c.fuse.norm_qkv);
  b.linear_pair(x, w.z, z, w.ba, ba);
  Tensor conv_state = state.conv, ssm_state = state.ssm;
  Tensor conv_saves = state.conv_checkpoints, ssm_saves = state.ssm_checkpoints;
  b.causal_conv1d_silu(qkv, w.conv.tensor, conv_state, conv_saves, c.meta, mixed);
  b.gated_delta_rule(mixed, ba, w.a_log.tensor, w.dt_bias.tensor, g, ssm_state, ssm_saves, c.meta,
                     core);
  Tensor core_rows = core.reshape({T * Hv, dv});
  Tensor z_rows = z.reshape({T * Hv, dv});
  b.gated_rmsnorm_linear(core_rows, z_rows, w.norm.tensor, c.eps, w.out, normed, out);
  all_reduce_partial(c, out);
}

// ---- MLP
// --------------------------------------------------------------------------------------------

namespace {

int64_t dense_bytes(const Weight& down, DType act, int64_t T) {
  const int64_t I = down.k;
  return Workspace::bytes(act, T * 2 * I) + Workspace::bytes(act, T * I);
}

// out = down · silu_mul(x · gate_upᵀ) on an already normed x.
void dense_mlp(BlockContext& c, const Weight& gate_up_w, const Weight& down_w, const Tensor& x,
               Tensor& out) {
  const int64_t T = x.dim(0), I = down_w.k;
  Tensor gate_up = c.ws.take(c.act, {T, 2 * I});
  Tensor a = c.ws.take(c.act, {T, I});
  if (c.fuse.silu) {
    c.backend.linear_silu_mul(x, gate_up_w, gate_up, a);
  } else {
    c.backend.linear(x, gate_up_w, Tensor(), gate_up);
    c.backend.silu_mul(gate_up, a);
  }
  c.backend.linear(a, down_w, Tensor(), out);
}

}  // namespace

int64_t mlp_bytes(const MlpWeights& w, const MoeRouting& routing, DType act, int64_t T, int64_t H) {
  if (!w.moe) return dense_bytes(w.down, act, T);
  const int64_t E = w.router.tensor.dim(0), k = routing.top_k;
  return Workspace::bytes(DType::F32, T * E) + Workspace::bytes(DType::I32, T * k) +
         Workspace::bytes(DType::F32, T * k) + Workspace::bytes(act, T * H) +
         dense_bytes(w.shared_down, act, T) + Workspace::bytes(act, T);
}

void mlp_block(BlockContext& c, Residual& r, const Tensor& norm_w, const MlpWeights& w,
               const MoeRouting& routing, Tensor& x, Tensor& out) {
  Backend& b = c.backend;
  const int64_t T = x.dim(0);
  if (!w.moe) {
    if (r.pending.empty() || !c.fuse.norm_mlp) {
      add_norm(c, r, norm_w, x);
      dense_mlp(c, w.gate_up, w.down, x, out);
      all_reduce_partial(c, out);
      return;
    }
    const int64_t I = w.down.k;
    Tensor gate_up = c.ws.take(c.act, {T, 2 * I});
    Tensor a = c.ws.take(c.act, {T, I});
    if (c.fuse.silu) {
      b.add_rmsnorm_linear_silu_mul(*r.h, r.pending, norm_w, c.eps, c.norm, *r.h_alt, x, w.gate_up,
                                    gate_up, a);
    } else {
      b.add_rmsnorm_linear(*r.h, r.pending, norm_w, c.eps, c.norm, *r.h_alt, x, w.gate_up, Tensor(),
                           gate_up);
      b.silu_mul(gate_up, a);
    }
    std::swap(r.h, r.h_alt);
    r.pending = Tensor();
    b.linear(a, w.down, Tensor(), out);
    all_reduce_partial(c, out);
    return;
  }
  // Routed experts + sigmoid-gated shared expert: out = moe(x) + sigmoid(g · x) * shared(x), one op
  // (Backend::moe_block) with SYV_FUSED_MOE=1.
  add_norm(c, r, norm_w, x);
  const int64_t E = w.router.tensor.dim(0), H = x.dim(1);
  const int32_t k = routing.top_k;
  Tensor router_logits = c.ws.take(DType::F32, {T, E});
  Tensor ids = c.ws.take(DType::I32, {T, k});
  Tensor weights = c.ws.take(DType::F32, {T, k});
  if (c.fuse.moe) {
    // The buffers of the sequence below (dense_mlp's first, as mlp_bytes() counts them).
    const int64_t Is = w.shared_down.k;
    MoeBlockBuffers buf;
    buf.logits = router_logits;
    buf.ids = ids;
    buf.weights = weights;
    buf.shared = c.ws.take(c.act, {T, H});
    buf.shared_gate_up = c.ws.take(c.act, {T, 2 * Is});
    buf.shared_act = c.ws.take(c.act, {T, Is});
    buf.gate = c.ws.take(c.act, {T, 1});
    MoeBlockWeights mw;
    mw.router = &w.router;
    mw.experts_gate_up = &w.experts_gate_up;
    mw.experts_down = &w.experts_down;
    mw.shared_gate_up = &w.shared_gate_up;
    mw.shared_down = &w.shared_down;
    mw.shared_gate = &w.shared_gate;
    b.moe_block(x, mw, k, routing.renormalize, buf, out);
    all_reduce_partial(c, out);  // routed and shared experts' partial sums together
    return;
  }
  b.linear(x, w.router, Tensor(), router_logits);
  b.moe_topk(router_logits, k, routing.renormalize, ids, weights);
  b.moe_experts(x, ids, weights, w.experts_gate_up, w.experts_down, out);
  Tensor shared = c.ws.take(c.act, {T, H});
  dense_mlp(c, w.shared_gate_up, w.shared_down, x, shared);
  Tensor g = c.ws.take(c.act, {T, 1});
  b.linear(x, w.shared_gate, Tensor(), g);
  b.sigmoid_mul(shared, g, shared);
  b.add(out, shared, out);
  all_reduce_partial(c, out);  // routed and shared experts' partial sums together
}

}  // namespace syv
