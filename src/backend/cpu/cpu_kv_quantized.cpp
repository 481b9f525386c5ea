// CPU backend: the quantized KV cache (backend/kv_cache_view.h). kv_write quantizes each
// (token, kv head) row with the reference quantizers of backend/kv_quant.h (so these bytes and
// scales are the contract other backends are compared against); paged attention dequantizes one key
// or value row at a time into a D-float scratch and runs the float loop on it
// (cpu::paged_attention_rows), so its result is exactly float attention over the dequantized cache.
#include <array>
#include <cstdint>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_paged_attention.h"
#include "backend/kv_quant.h"

namespace syv {

namespace {

// The view's shapes, checked: k, v [pages, page_size, Hk, D or D / 2] of cache.dtype and
// k_scales, v_scales [pages, page_size, Hk, groups] of kv_scale_dtype(cache.dtype): f32 and 1 group
// for fp8, f16 and D / kKvInt4Group groups for int4.
struct QuantKvShape {
  int64_t slots = 0, Hk = 0, D = 0;
  int64_t row_bytes = 0;        // stored bytes of one (token, kv head) row
  int64_t groups = 0;           // scales of one row
  int64_t scale_row_bytes = 0;  // their bytes
};

QuantKvShape check_quantized_view(const KvCacheView& c, const char* op) {
  SYV_CHECK(c.dtype == DType::F8E4M3 || c.dtype == DType::U4X2)
      << "backend cpu " << op << ": KV cache dtype " << dtype_name(c.dtype)
      << " is not supported (fp8 e4m3 or int4 u4x2 with scales)";
  SYV_CHECK(c.scaled() && !c.v_scales.empty())
      << "backend cpu " << op << ": KV cache dtype " << dtype_name(c.dtype) << " without scales";
  SYV_CHECK(c.k.ndim == 4 && c.v.ndim == 4 && c.k.dtype == c.dtype && c.v.dtype == c.dtype)
      << "backend cpu " << op << ": k/v pages must be 4-d " << dtype_name(c.dtype);
  for (int i = 0; i < 4; ++i) {
    SYV_CHECK_EQ(c.k.dim(i), c.v.dim(i)) << "backend cpu " << op << ": k and v pages differ";
  }
  QuantKvShape s;
  s.slots = c.k.dim(0) * c.k.dim(1);
  s.Hk = c.k.dim(2);
  s.D = c.head_dim();
  s.row_bytes = c.k.dim(3);
  const bool int4 = c.dtype == DType::U4X2;
  SYV_CHECK(!int4 || s.D % kKvInt4Group == 0)
      << "backend cpu " << op << ": int4 KV needs head_dim % " << kKvInt4Group
      << " == 0, found head_dim " << s.D;
  s.groups = int4 ? s.D / kKvInt4Group : 1;
  s.scale_row_bytes = s.groups * static_cast<int64_t>(dtype_size(kv_scale_dtype(c.dtype)));
  const DType scale_t = kv_scale_dtype(c.dtype);
  for (const Tensor* t : {&c.k_scales, &c.v_scales}) {
    SYV_CHECK(t->dtype == scale_t && t->ndim == 4 && t->dim(0) == c.k.dim(0) &&
              t->dim(1) == c.k.dim(1) && t->dim(2) == s.Hk && t->dim(3) == s.groups)
        << "backend cpu " << op << ": KV scales must be " << dtype_name(scale_t) << " ["
        << c.k.dim(0) << ", " << c.k.dim(1) << ", " << s.Hk << ", " << s.groups << "], found "
        << dtype_name(t->dtype) << " of rank " << t->ndim;
  }
  return s;
}

// One (token, kv head) row of D floats -> its stored bytes and scales (backend/kv_quant.h);
// `scales` points at the row's first scale (f32 for fp8, f16 bits for int4).
void quantize_row(DType dtype, const float* x, int64_t D, uint8_t* q, void* scales) {
  if (dtype == DType::F8E4M3) {
    *static_cast<float*>(scales) = kv_quant::quantize_fp8_row(x, D, q);
  } else {
    kv_quant::quantize_int4_row(x, D, q, static_cast<uint16_t*>(scales));
  }
}

// fp8_e4m3_to_f32 of every byte: attention reads each stored row once per query token and head.
const std::array<float, 256>& fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[static_cast<size_t>(b)] = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

// kv_quant.h's dequantizers, value for value (fp8 through the table of the same conversion).
void dequantize_row(DType dtype, const uint8_t* q, const void* scales, int64_t D, float* out) {
  if (dtype == DType::F8E4M3) {
    const std::array<float, 256>& table = fp8_e4m3_table();
    const float scale = *static_cast<const float*>(scales);
    for (int64_t i = 0; i < D; ++i) out[i] = table[q[i]] * scale;
  } else {
    kv_quant::dequantize_int4_row(q, static_cast<const uint16_t*>(scales), D, out);
  }
}

}  // namespace

void CpuBackend::kv_write_quantized(const Tensor& k, const Tensor& v, const KvCacheView& cache,
                                    const BatchMeta& meta) {
  cpu::check_f32(k, "kv_write", "k");
  cpu::check_f32(v, "kv_write", "v");
  const QuantKvShape s = check_quantized_view(cache, "kv_write");
  const int64_t T = meta.slot_mapping.numel();
  SYV_CHECK(k.numel() == T * s.Hk * s.D && v.numel() == T * s.Hk * s.D)
      << "kv_write: k/v not [T, Hk, D] = [" << T << ", " << s.Hk << ", " << s.D << "]";
  const int32_t* slot_mapping = meta.slot_mapping.as<const int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slot_mapping[t];
    SYV_CHECK(slot >= 0 && slot < s.slots) << "kv_write: slot " << slot << " of " << s.slots;
    for (int64_t h = 0; h < s.Hk; ++h) {
      const int64_t row = slot * s.Hk + h;
      const int64_t src = (t * s.Hk + h) * s.D;
      quantize_row(cache.dtype, k.as<const float>() + src, s.D,
                   cache.k.as<uint8_t>() + row * s.row_bytes,
                   cache.k_scales.as<uint8_t>() + row * s.scale_row_bytes);
      quantize_row(cache.dtype, v.as<const float>() + src, s.D,
                   cache.v.as<uint8_t>() + row * s.row_bytes,
                   cache.v_scales.as<uint8_t>() + row * s.scale_row_bytes);
    }
  }
}

void CpuBackend::paged_attention_quantized(const Tensor& q, const KvCacheView& cache, float scale,
                                           const BatchMeta& meta, Tensor& out) {
  cpu::check_f32(q, "paged_attention", "q");
  cpu::check_f32(out, "paged_attention", "out");
  const QuantKvShape s = check_quantized_view(cache, "paged_attention");
  const uint8_t* kv[2] = {cache.k.as<const uint8_t>(), cache.v.as<const uint8_t>()};
  const uint8_t* scales[2] = {cache.k_scales.as<const uint8_t>(),
                              cache.v_scales.as<const uint8_t>()};
  const DType dtype = cache.dtype;
  cpu::paged_attention_rows(q, cache.page_size(), s.Hk, s.D, scale, meta, out,
                            [&](int which, int64_t slot, int64_t kv_head, float* buf) {
                              const int64_t row = slot * s.Hk + kv_head;
                              dequantize_row(dtype, kv[which] + row * s.row_bytes,
                                             scales[which] + row * s.scale_row_bytes, s.D, buf);
                              return static_cast<const float*>(buf);
                            });
}

}  // namespace syv
