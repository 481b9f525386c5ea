#include "model/mtp_head.h"

#include <algorithm>

namespace syv {

MtpHead::MtpHead(Backend& backend, const MtpWeights& weights, const Weight& embed,
                 const Weight& lm_head, const MtpShape& shape, TpComm* tp)
    : backend_(backend),
      w_(weights),
      embed_(embed),
      lm_head_(lm_head),
      s_(shape),
      tp_(tp),
      ws_(backend, "mtp head") {}

int64_t MtpHead::workspace_bytes(int64_t T, int64_t R) const {
  const DType act = backend_.activation_dtype();
  const int64_t rows = std::max<int64_t>(R, 1), H = s_.hidden;
  int64_t bytes = Workspace::bytes(DType::F32, rows * s_.vocab) + Workspace::bytes(act, rows * H);
  if (T == 0) return bytes;
  bytes += 8 * Workspace::bytes(act, T * H);  // e, e_n, h_n, u, fc2, h_alt, x, o
  return bytes +
         std::max(attention_bytes(s_.attn, act, T), mlp_bytes(w_.layer.mlp, s_.routing, act, T, H));
}

void MtpHead::forward(const Batch& batch, int32_t page_size, const Tensor& hidden,
                      const KvCacheView& kv, Tensor& logits, Tensor& out) {
  const int64_t T = batch.num_tokens(), R = static_cast<int64_t>(batch.logit_rows.size());
  const int64_t H = s_.hidden;
  SYV_CHECK(hidden.ndim == 2 && hidden.dim(0) == T && hidden.dim(1) == H)
      << "mtp head: hidden has rank " << hidden.ndim << ", expected [" << T << ", " << H << "]";
  Backend& b = backend_;
  const DType act = b.activation_dtype();
  BatchMeta meta = b.prepare_batch(batch, page_size);
  ws_.begin(workspace_bytes(T, R));
  logits = ws_.take(DType::F32, {std::max<int64_t>(R, 1), s_.vocab}).rows(0, R);
  out = ws_.take(act, {std::max<int64_t>(R, 1), H}).rows(0, R);
  if (T == 0) return;
  Tensor e = ws_.take(act, {T, H});
  Tensor e_n = ws_.take(act, {T, H});
  Tensor h_n = ws_.take(act, {T, H});
  Tensor u = ws_.take(act, {T, H});
  Tensor fc2 = ws_.take(act, {T, H});
  Tensor h_alt = ws_.take(act, {T, H});
  Tensor x = ws_.take(act, {T, H});
  Tensor o = ws_.take(act, {T, H});

  // u = fc([norm_emb(embed[x]) ; norm_hid(h)]) as the sum of the two column halves of fc.
  b.embedding(embed_.tensor, meta.token_ids, e);
  b.rmsnorm(e, w_.norm_embed.tensor, s_.eps, NormKind::kOnePlus, e_n);
  b.rmsnorm(hidden, w_.norm_hidden.tensor, s_.eps, NormKind::kOnePlus, h_n);
  b.linear(e_n, w_.fc_embed, Tensor(), u);
  b.linear(h_n, w_.fc_hidden, Tensor(), fc2);
  b.add(u, fc2, u);

  // The decoder layer on u (residual = u), then norm(u + residual).
  BlockContext c{b, ws_, meta, act, s_.eps, NormKind::kOnePlus, fusions_, tp_};
  Residual res{&u, &h_alt, Tensor()};
  const int64_t mark = ws_.mark();
  attention_block(c, res, w_.layer.input_norm.tensor, w_.layer.attn, s_.attn, kv, x, o);
  res.pending = o;
  ws_.release(mark);
  mlp_block(c, res, w_.layer.post_norm.tensor, w_.layer.mlp, s_.routing, x, o);
  res.pending = o;
  ws_.release(mark);
  add_norm(c, res, w_.norm.tensor, x);
  if (R == 0) return;
  b.gather_rows(x, meta, out);
  b.linear(out, lm_head_, Tensor(), logits);
}

}  // namespace syv
