// The one decoder-only model of the kit: every architecture syv serves is a stack of blocks
// (model/blocks.h) over loaded weights, and this class runs the stack. A family file (qwen3.cpp,
// qwen3_5.cpp, qwen3_next.cpp) only checks its config, declares its cache (CacheSpec) and reads
// its checkpoint's tensors into DecoderWeights; docs/adding-a-model.md walks through it.
//
//   h = embed[ids]
//   per layer: h += mixer(norm1(h)); h += mlp(norm2(h))   mixer: attention (plain / gated) or GDN
//   logits = lm_head(norm(h)) at the batch's logit rows (lm_head = embed when tied)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/blocks.h"
#include "model/model.h"
#include "model/mtp_head.h"

namespace syv {

struct DecoderLayer {
  LayerType type = LayerType::kFullAttention;  // mixer: attention, or Gated DeltaNet
  DeviceWeight input_norm, post_norm;          // [H]
  AttentionWeights attn;                       // full-attention layers
  GdnWeights gdn;                              // linear-attention layers
  MlpWeights mlp;
};

struct DecoderWeights {
  DeviceWeight embed;       // [V, H]
  DeviceWeight final_norm;  // [H]
  DeviceWeight lm_head;     // [V, H]; empty when tied to embed
  std::vector<DecoderLayer> layers;
  // The MTP draft head (LoadOptions::mtp); its K/V is the cache spec's last paged-KV layer.
  std::optional<MtpWeights> mtp;
  int64_t parameters = 0;
  int64_t device_bytes = 0;
};

// What the stack needs beyond the config's sizes.
struct DecoderOptions {
  std::string name;                  // log lines and messages: "qwen3", "qwen3_5", "qwen3_next"
  NormKind norm = NormKind::kPlain;  // every norm but the GDN output norm
  bool gated_attention = false;      // attention layers carry a sigmoid gate
  int32_t rotary_dim = 0;            // RoPE lanes (0: head_dim)
  CacheSpec cache;                   // what cache_spec() returns
  // Tensor parallelism (model/tensor_parallel.h): this rank's all-reduce (not owned), or null.
  TpComm* tp = nullptr;
};

std::unique_ptr<Model> make_decoder_model(const ModelConfig& config, Backend& backend,
                                          DecoderWeights weights, DecoderOptions options);

// The GDN head layout of a config (linear_* fields).
GdnShape gdn_shape(const ModelConfig& c);

}  // namespace syv
