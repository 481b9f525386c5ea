// The model kit: the blocks every syv model is built from, written once against backend ops.
// Qwen3 (qwen3.cpp) and the hybrids (hybrid_layers.cpp) are a loop over these:
//
//   h = embed[ids]                                  (the residual stream, Residual below)
//   per layer:  mixer:  attention_block (plain or gated) | gdn_block (Gated DeltaNet)
//               mlp:    mlp_block (SwiGLU, or MoE + shared expert)
//   x = norm(h) -> logits rows                      (final_norm, then the lm_head)
//
// Each block starts with the pre-norm of its input: it adds the previous block's output (still
// pending in the Residual) to h and normalises, fused with its first linear where the backend can
// (Fusions). Each block takes its scratch from the model's Workspace (workspace.h) and says how
// many bytes it takes at T tokens in its *_bytes() function, so one workspace sized at reserve()
// serves every forward of the model (CUDA graphs). docs/adding-a-model.md shows how a new
// architecture is put together from them.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "kv/cache_store.h"
#include "model/weight_spec.h"
#include "model/workspace.h"

namespace syv {

class TpComm;  // backend/tp_comm.h

// Which fused ops the blocks use (all by default). Each can be switched off through the
// environment for A/B timing (SYV_FUSED_QKV=0 etc.), read once when a model is built (not on
// the forward path). Off runs the plain op sequence the fused op stands for.
struct Fusions {
  bool qkv = true;       // one q|k|v linear + qkv_norm_rope_write (off: 3 linears, 2 ops)
  bool norm_qkv = true;  // residual add + RMSNorm fused into the mixer's first linear
  bool norm_mlp = true;  // ... into the gate_up linear (SYV_FUSED_NORM=0|qkv|mlp|1)
  bool silu = true;      // SiLU·mul fused into the gate_up linear (linear_silu_mul)
  bool moe = true;       // a MoE layer after its pre-norm as one op, moe_block (off: its op
                         // sequence, the shared expert's SiLU·mul as `silu` says)
};
Fusions fusions_from_env();

// What every block of one forward shares.
struct BlockContext {
  Backend& backend;
  Workspace& ws;
  const BatchMeta& meta;
  DType act;      // backend.activation_dtype()
  float eps;      // RMSNorm epsilon
  NormKind norm;  // plain (qwen3) or zero-centred (hybrids)
  Fusions fuse;
  // Tensor parallelism (model/tensor_parallel.h): this rank's all-reduce, or null (one rank). The
  // row-parallel linears (attention's o, the MLP's down) all-reduce their partial sums with it.
  TpComm* tp = nullptr;
};
// t += the other ranks' partial sums of it (nothing without tensor parallelism).
void all_reduce_partial(BlockContext& c, Tensor& t);

// The residual stream [T, H]. `pending` (empty at the first layer) is the last block's output,
// not yet added to h: the next pre-norm adds it. Fused norms write the new sum into h_alt and the
// two swap, so h and h_alt must be distinct buffers.
struct Residual {
  Tensor* h = nullptr;
  Tensor* h_alt = nullptr;
  Tensor pending;
};

// x = norm(h += pending) (rmsnorm(h) when nothing is pending); pending is cleared.
void add_norm(BlockContext& c, Residual& r, const Tensor& norm_w, Tensor& x);
// add_norm, then out = x · wᵀ + bias, fused into one op when `fused` and something is pending.
void add_norm_linear(BlockContext& c, Residual& r, const Tensor& norm_w, Tensor& x, const Weight& w,
                     const Tensor& bias, Tensor& out, bool fused);

// ---- attention ---------------------------------------------------------------------------------
// Full attention over the paged KV cache. Plain (Qwen3): out = o(attn). Gated (Qwen3.5 /
// Qwen3-Next): out = o(attn * sigmoid(x · gateᵀ)).
struct AttentionWeights {
  DeviceWeight qkv;             // [(Hq + 2 Hk) * D, H]: q_proj, k_proj, v_proj rows
  DeviceWeight qkv_bias;        // [(Hq + 2 Hk) * D] or empty (attention_bias)
  DeviceWeight gate;            // [Hq * D, H] (gated attention) or empty
  DeviceWeight o;               // [H, Hq * D]
  DeviceWeight o_bias;          // [H] or empty
  DeviceWeight q_norm, k_norm;  // [D]
};
struct AttentionShape {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;  // Hq, Hk, D
  bool gated = false;                               // the weights have a gate
  RopeParams rope;
};
int64_t attention_bytes(const AttentionShape& s, DType act, int64_t T);
// out [T, H] = attention(add_norm(r, norm_w)) with x [T, H] receiving the normed input; writes the
// new tokens' K/V into `kv` at meta.slot_mapping.
void attention_block(BlockContext& c, Residual& r, const Tensor& norm_w, const AttentionWeights& w,
                     const AttentionShape& s, const KvCacheView& kv, Tensor& x, Tensor& out);

// ---- Gated DeltaNet (linear attention) -------------------------------------------------------
// Weights in syv's layout (Qwen3-Next's fused per-key-head-group projections are reordered into
// this at load).
struct GdnWeights {
  DeviceWeight qkv;      // [2*Hk*dk + Hv*dv, H]: all q heads, all k heads, all v heads
  DeviceWeight z;        // [Hv*dv, H]
  DeviceWeight ba;       // [2*Hv, H]: b of every value head, then a
  DeviceWeight conv;     // [conv_dim, K] (checkpoint: [conv_dim, 1, K])
  DeviceWeight a_log;    // [Hv]
  DeviceWeight dt_bias;  // [Hv]
  DeviceWeight norm;     // [dv], plain weight
  DeviceWeight out;      // [H, Hv*dv]
};
int64_t gdn_bytes(const GdnShape& g, DType act, int64_t T);
// out [T, H] = GDN(add_norm(r, norm_w)), advancing the recurrent state in `state`.
void gdn_block(BlockContext& c, Residual& r, const Tensor& norm_w, const GdnWeights& w,
               const GdnShape& g, const CacheStore::StateView& state, Tensor& x, Tensor& out);

// ---- MLP -------------------------------------------------------------------------------------
struct MlpWeights {
  bool moe = false;
  DeviceWeight gate_up;  // dense: [2I, H] (gate rows, then up rows)
  DeviceWeight down;     // dense: [H, I]
  // MoE: top-k routed experts + a sigmoid-gated shared expert
  DeviceWeight router;           // [E, H]
  DeviceWeight experts_gate_up;  // [E, 2Im, H]
  DeviceWeight experts_down;     // [E, H, Im]
  DeviceWeight shared_gate_up;   // [2Is, H]
  DeviceWeight shared_down;      // [H, Is]
  DeviceWeight shared_gate;      // [1, H]
};
struct MoeRouting {
  int32_t top_k = 0;
  bool renormalize = true;  // norm_topk_prob
};
int64_t mlp_bytes(const MlpWeights& w, const MoeRouting& routing, DType act, int64_t T, int64_t H);
// out [T, H] = mlp(add_norm(r, norm_w)); x [T, H] receives the normed input.
void mlp_block(BlockContext& c, Residual& r, const Tensor& norm_w, const MlpWeights& w,
               const MoeRouting& routing, Tensor& x, Tensor& out);

}  // namespace syv
