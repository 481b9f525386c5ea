// What a model needs from the cache, declared by the model and sized by the engine's planner.
#pragma once

#include <cstdint>
#include <vector>

namespace syv {

enum class LayerCacheKind : uint8_t {
  kPagedKV,         // full attention: K and V per token, in pages
  kRecurrentState,  // Gated DeltaNet: fixed-size state per sequence (+ conv state)
};

struct CacheSpec {
  std::vector<LayerCacheKind> layer_kinds;  // [num_layers]
  int64_t kv_bytes_per_token = 0;           // summed over paged-KV layers (K and V)
  int64_t state_bytes_per_seq = 0;          // summed over recurrent layers (0 for dense models)
  bool has_recurrent_state() const { return state_bytes_per_seq > 0; }
};

// How much cache the engine asks the model to allocate (in the backend's memory).
struct CacheConfig {
  int32_t page_size = 64;       // tokens per page
  int32_t num_pages = 0;        // paged-KV pool, shared by all paged layers (page id is global)
  int32_t num_state_slots = 0;  // live recurrent states (one per running sequence)
  int32_t num_checkpoints = 0;  // stored recurrent-state snapshots for prefix reuse
};

}  // namespace syv
