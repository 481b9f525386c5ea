// The multi-token-prediction (MTP) head of Qwen3.5 / Qwen3-Next checkpoints (mtp.* tensors;
// /work/shared/reference/WAVE2-SPECS.md B.2), written once against backend ops through the kit's
// blocks. It drafts the token after next from the target's final hidden state:
//
//   e   = norm_emb(embed[x_{t+1}])          shared embedding, zero-centred norms (1 + w)
//   h   = norm_hid(h_t)                     h_t: the target's post-final-norm hidden state of t
//   u   = fc([e ; h])                       2H -> H, embedding first, no bias
//   u   = decoder layer at position t       gated full attention (own K/V) + MLP or MoE
//   out = norm(u + residual);  logits = lm_head(out)     shared lm_head
//
// For a second draft the same layer runs again on (its own argmax, its own `out`) at t + 1.
//
// Position and K/V slot: the pair (h_t, x_{t+1}) runs at position t and its K/V goes to t's
// slot, as vLLM's eagle proposer does (target positions; B.2 writes "t + 1": the attention
// scores are the same, RoPE being relative, but only slot t leaves no empty slot in front of the
// head's context). The head's K/V is the last paged-KV layer of the model's CacheSpec, so every
// page of a sequence holds the head's K/V of its positions beside the target's.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "kv/cache_store.h"
#include "model/blocks.h"
#include "model/workspace.h"

namespace syv {

// One full decoder layer (mtp.layers.0): input norm, gated attention, post norm, MLP.
struct MtpLayerWeights {
  DeviceWeight input_norm, post_norm;  // [H]
  AttentionWeights attn;
  MlpWeights mlp;
};

struct MtpWeights {
  DeviceWeight fc_embed;     // [H, H]: mtp.fc.weight [H, 2H] columns [0, H) (the embedding half)
  DeviceWeight fc_hidden;    // [H, H]: columns [H, 2H) (the hidden-state half)
  DeviceWeight norm_embed;   // [H] pre_fc_norm_embedding
  DeviceWeight norm_hidden;  // [H] pre_fc_norm_hidden
  DeviceWeight norm;         // [H] mtp.norm (after the layer)
  MtpLayerWeights layer;
};

// Sizes the head runs at (the target's).
struct MtpShape {
  int64_t hidden = 0, vocab = 0;  // H, V
  float eps = 1e-6f;
  AttentionShape attn;  // gated, the target's heads and rotary lanes
  MoeRouting routing;   // Qwen3-Next's MoE MLP
};

class MtpHead {
 public:
  // `weights`, `embed` and `lm_head` ([V, H]; the embedding when tied) must outlive the head.
  // `tp`: a tensor-parallel rank's all-reduce (its layer's o and down projections are
  // row-parallel, as the model's), or null.
  MtpHead(Backend& backend, const MtpWeights& weights, const Weight& embed, const Weight& lm_head,
          const MtpShape& shape, TpComm* tp = nullptr);

  // Row i of `batch` is the pair (token x_{p+1}, hidden[i] = h_p) at position p =
  // batch.positions[i]; the rows of one sequence are consecutive positions ending at its
  // context_len - 1, and the head's K/V of every earlier position is in `kv` (the store's last
  // paged-KV layer). Writes the rows' K/V into `kv` at their slots; fills `logits` (f32 [R, V])
  // and `out` ([R, H], activation dtype: the input of the next draft) at batch.logit_rows, in the
  // head's own workspace (valid until the next forward of the head; the target's outputs are
  // untouched). hidden: [T, H], activation dtype, backend memory.
  void forward(const Batch& batch, int32_t page_size, const Tensor& hidden, const KvCacheView& kv,
               Tensor& logits, Tensor& out);
  // Fixes the workspace at forwards of up to T tokens and R logits rows (Model::reserve_mtp);
  // (0, 0) ends the reservation.
  void reserve(int64_t T, int64_t R) { ws_.reserve(T == 0 && R == 0 ? 0 : workspace_bytes(T, R)); }

 private:
  int64_t workspace_bytes(int64_t T, int64_t R) const;

  Backend& backend_;
  const MtpWeights& w_;
  const Weight& embed_;
  const Weight& lm_head_;
  MtpShape s_;
  TpComm* tp_;
  Fusions fusions_ = fusions_from_env();
  Workspace ws_;
};

}  // namespace syv
