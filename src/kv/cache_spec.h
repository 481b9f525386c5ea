// What a model needs from the cache, declared by the model (Model::cache_spec()) and turned into
// memory by the engine's CacheStore (kv/cache_store.h). The bytes per token of KV and per sequence
// of recurrent state are computed here and nowhere else: the engine's pool sizing, the memory
// planner, `syv inspect` and the store itself all read them from a CacheSpec.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/kv_cache_view.h"
#include "core/dtype.h"

namespace syv {

enum class LayerCacheKind : uint8_t {
  kPagedKV,         // full attention: K and V per token, in pages
  kRecurrentState,  // Gated DeltaNet: fixed-size state per sequence (+ conv state)
};

// Whether KV of this dtype carries scales (backend/kv_cache_view.h): fp8 does, one f32 per
// (token, kv head) for K and for V; int4 (u4x2) does, one f16 per group of 32 elements of a
// (token, kv head) row; float KV (f32, f16, bf16) does not.
constexpr bool kv_dtype_scaled(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2 || t == DType::U4X2;
}

// One full-attention layer's cache: K and V, each [page_size, num_kv_heads, row_elems()] per page
// in `dtype` (plus, for a scaled dtype, scales [page_size, num_kv_heads, scale_groups()] each, in
// kv_scale_dtype(dtype): f32 for fp8, f16 for int4).
struct KvLayerShape {
  int64_t num_kv_heads = 0;  // Hk
  int64_t head_dim = 0;      // D
  DType dtype = DType::F32;  // the KV dtype: float (f32 on the CPU, bf16 on CUDA), fp8 e4m3 or
                             // int4 u4x2 where the backend has kernels (Backend::supports_kv_dtype;
                             // CacheStore::create refuses others)
  // Stored elements of one (token, kv head) row: D, or D / 2 bytes of two nibbles for u4x2.
  int64_t row_elems() const { return dtype == DType::U4X2 ? head_dim / 2 : head_dim; }
  // Scales of one (token, kv head) row: 0 (float KV), 1 (fp8), D / kKvInt4Group (int4).
  int64_t scale_groups() const {
    if (!kv_dtype_scaled(dtype)) return 0;
    return dtype == DType::U4X2 ? head_dim / kKvInt4Group : 1;
  }
  int64_t value_bytes_per_token() const {  // K and V values, without scales
    return 2 * num_kv_heads * row_elems() * static_cast<int64_t>(dtype_size(dtype));
  }
  int64_t scale_bytes_per_token() const {  // K and V scales (0 for float KV)
    return 2 * num_kv_heads * scale_groups() *
           static_cast<int64_t>(dtype_size(kv_scale_dtype(dtype)));
  }
  int64_t bytes_per_token() const {  // K and V, with their scales
    return value_bytes_per_token() + scale_bytes_per_token();
  }
};

// One Gated DeltaNet layer's recurrent state per sequence: the causal conv's last inputs
// [conv_rows, conv_channels] in f32 and the delta-rule state [heads, k_dim, v_dim] in ssm_dtype
// (f32 as models declare it; bf16 with CacheConfig::state_dtype, on backends that support it).
struct StateLayerShape {
  int64_t conv_rows = 0;      // K - 1 (conv kernel size minus one)
  int64_t conv_channels = 0;  // q | k | v channels
  int64_t heads = 0;          // Hv
  int64_t k_dim = 0;          // dk
  int64_t v_dim = 0;          // dv
  DType ssm_dtype = DType::F32;
  int64_t conv_bytes() const { return conv_rows * conv_channels * 4; }
  int64_t ssm_bytes() const {
    return heads * k_dim * v_dim * static_cast<int64_t>(dtype_size(ssm_dtype));
  }
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

  // The same spec with every paged-KV layer stored in `kv_dtype` (CacheConfig::kv_dtype), totals
  // recomputed by the formulas above.
  CacheSpec with_kv_dtype(DType kv_dtype) const { return with_dtypes(kv_dtype, std::nullopt); }
  // The same spec with every delta-rule state in `state_dtype` (CacheConfig::state_dtype).
  CacheSpec with_state_dtype(DType state_dtype) const {
    return with_dtypes(std::nullopt, state_dtype);
  }

 private:
  CacheSpec with_dtypes(std::optional<DType> kv_dtype, std::optional<DType> state_dtype) const {
    CacheSpec out;
    size_t kv = 0, state = 0;
    for (LayerCacheKind kind : layer_kinds) {
      if (kind == LayerCacheKind::kPagedKV) {
        KvLayerShape shape = kv_layers[kv++];
        if (kv_dtype) shape.dtype = *kv_dtype;
        out.add_kv_layer(shape);
      } else {
        StateLayerShape shape = state_layers[state++];
        if (state_dtype) shape.ssm_dtype = *state_dtype;
        out.add_state_layer(shape);
      }
    }
    return out;
  }
};

// How much cache the engine builds (in the backend's memory).
struct CacheConfig {
  int32_t page_size = 64;       // tokens per page
  int32_t num_pages = 0;        // paged-KV pool, shared by all paged layers (page id is global);
                                // includes the CUDA graphs' dummy page when the engine adds one
  int32_t num_state_slots = 0;  // live recurrent states (one per running sequence)
  int32_t num_checkpoints = 0;  // stored recurrent-state snapshots for prefix reuse
  // The dtype K and V are stored in. Unset: the model's CacheSpec as declared (the backend's
  // activation dtype: bf16 on CUDA, f32 on the CPU), as before this field existed. Set: the
  // activation dtype, or a quantized KV dtype (F8E4M3, U4X2 with head_dim % 32 == 0) the backend
  // has kernels for (Backend::supports_kv_dtype); CacheStore::create refuses any other by name.
  std::optional<DType> kv_dtype;
  // The dtype of the delta-rule state (hybrids). Unset: the model's CacheSpec (f32). bf16 halves
  // the state's bytes and traffic; CacheStore::create refuses it on a backend whose hybrid ops
  // keep f32 state (Backend::supports_state_dtype: the CPU), and any other dtype everywhere.
  std::optional<DType> state_dtype;
};

}  // namespace syv
