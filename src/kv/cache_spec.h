// What a model needs from the cache, declared by the model (Model::cache_spec()) and turned into
// memory by the engine's CacheStore (kv/cache_store.h). The bytes per token of KV and per sequence
// of recurrent state are computed here and nowhere else: the engine's pool sizing, the memory
// planner, `syv inspect` and the store itself all read them from a CacheSpec.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace syv {

enum class LayerCacheKind : uint8_t {
  kPagedKV,         // full attention: K and V per token, in pages
  kRecurrentState,  // Gated DeltaNet: fixed-size state per sequence (+ conv state)
};

// One full-attention layer's cache: K and V, each [page_size, num_kv_heads, head_dim] per page.
struct KvLayerShape {
  int64_t num_kv_heads = 0;          // Hk
  int64_t head_dim = 0;              // D
  DType dtype = DType::F32;          // the backend's activation dtype
  int64_t bytes_per_token() const {  // K and V
    return 2 * num_kv_heads * head_dim * static_cast<int64_t>(dtype_size(dtype));
  }
};

// One Gated DeltaNet layer's recurrent state per sequence: the causal conv's last inputs
// [conv_rows, conv_channels] and the delta-rule state [heads, k_dim, v_dim], both f32.
struct StateLayerShape {
  int64_t conv_rows = 0;      // K - 1 (conv kernel size minus one)
  int64_t conv_channels = 0;  // q | k | v channels
  int64_t heads = 0;          // Hv
  int64_t k_dim = 0;          // dk
  int64_t v_dim = 0;          // dv
  int64_t conv_bytes() const { return conv_rows * conv_channels * 4; }
  int64_t ssm_bytes() const { return heads * k_dim * v_dim * 4; }
  int64_t bytes() const { return conv_bytes() + ssm_bytes(); }
};

struct CacheSpec {
  std::vector<LayerCacheKind> layer_kinds;    // [num_layers]
  std::vector<KvLayerShape> kv_layers;        // [paged-KV layers], in layer order
  std::vector<StateLayerShape> state_layers;  // [recurrent layers], in layer order
  int64_t kv_bytes_per_token = 0;             // summed over paged-KV layers (K and V)
  int64_t state_bytes_per_seq = 0;            // summed over recurrent layers (0 for dense models)

  // Appends the next layer and adds its bytes to the totals (the only place they are summed).
  void add_kv_layer(const KvLayerShape& shape) {
    layer_kinds.push_back(LayerCacheKind::kPagedKV);
    kv_layers.push_back(shape);
    kv_bytes_per_token += shape.bytes_per_token();
  }
  void add_state_layer(const StateLayerShape& shape) {
    layer_kinds.push_back(LayerCacheKind::kRecurrentState);
    state_layers.push_back(shape);
    state_bytes_per_seq += shape.bytes();
  }
  bool has_recurrent_state() const { return state_bytes_per_seq > 0; }
};

// How much cache the engine builds (in the backend's memory).
struct CacheConfig {
  int32_t page_size = 64;       // tokens per page
  int32_t num_pages = 0;        // paged-KV pool, shared by all paged layers (page id is global);
                                // includes the CUDA graphs' dummy page when the engine adds one
  int32_t num_state_slots = 0;  // live recurrent states (one per running sequence)
  int32_t num_checkpoints = 0;  // stored recurrent-state snapshots for prefix reuse
};

}  // namespace syv
