// Per-head q/k RMSNorm + rotate-half RoPE (in place), and the paged K/V write (float caches, and
// the quantized fp8 / int4 caches: one warp per row quantizes it, quant_convert.cuh).
#include <atomic>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

constexpr int kHeadsPerBlock = 4;
constexpr int kMaxHeadDim = 512;

// The rotation of pair `pair` at position `pos`: cos and sin of pos / theta^(2 pair / rotary_dim).
__device__ __forceinline__ void rope_rotation(int pair, float pos, float theta, int32_t rotary_dim,
                                              float& cs, float& sn) {
  const float inv_freq = 1.f / powf(theta, static_cast<float>(2 * pair) / rotary_dim);
  sincosf(pos * inv_freq, &sn, &cs);
}

// The rotated value of an element `self` whose pair partner is `partner` (in the first half of
// the rotary lanes or not): the expression of every kernel here, whether it reads the row from
// shared memory or from registers (the compiler contracts the same expression the same way; the
// GPU tests compare the forms bit for bit).
__device__ __forceinline__ float rope_values(float self, float partner, bool first_half, float cs,
                                             float sn) {
  return first_half ? self * cs - partner * sn : self * cs + partner * sn;
}

// Lane i of a rotate-half RoPE over the normalised head b (shared memory): lanes [0, rotary_dim)
// rotate (i pairs with i +- rotary_dim / 2) by the rotation (cs, sn) of its pair, the rest pass.
__device__ __forceinline__ float rope_apply(const float* b, int64_t i, int32_t rotary_dim, float cs,
                                            float sn) {
  const int half = rotary_dim / 2;
  return rope_values(b[i], i < half ? b[i + half] : b[i - half], i < half, cs, sn);
}

__device__ __forceinline__ int rope_pair(int64_t i, int32_t rotary_dim) {
  const int half = rotary_dim / 2;
  return static_cast<int>(i < half ? i : i - half);
}

// The rotations of every pair at position `pos` into the block's table (a pair a thread); every
// thread of the block calls it (it syncs the block).
__device__ __forceinline__ void fill_rotation_table(float* cs, float* sn, int32_t pos, float theta,
                                                    int32_t rotary_dim) {
  for (int p = threadIdx.x; p < rotary_dim / 2; p += blockDim.x)
    rope_rotation(p, static_cast<float>(pos), theta, rotary_dim, cs[p], sn[p]);
  __syncthreads();
}

// Lane i with its rotation computed here. Both kernels below use the same rotation and rope_apply
// (qkv_norm_rope_write_kernel from a table of the same rope_rotation values), so the fused
// prologue is bit-identical to head_norm_rope + kv_write.
__device__ __forceinline__ float rope_lane(const float* b, int64_t i, float pos, float theta,
                                           int32_t rotary_dim) {
  if (i >= rotary_dim) return b[i];
  float sn, cs;
  rope_rotation(rope_pair(i, rotary_dim), pos, theta, rotary_dim, cs, sn);
  return rope_apply(b, i, rotary_dim, cs, sn);
}

// One warp per (token, head). The normalised head goes through shared memory so that RoPE can pair
// lane i with lane i + rotary_dim / 2 for any rotary_dim.
// Rows [0, tokens * heads0) are heads of x0 (q), the rest heads of x1 (k): one launch for both.
template <typename TX>
__global__ void head_norm_rope_kernel(TX* x0, int64_t heads0, const void* norm0, TX* x1,
                                      int64_t heads1, const void* norm1, int64_t tokens,
                                      int64_t head_dim, DType norm_t, float eps, bool one_plus,
                                      const int32_t* __restrict__ positions, float theta,
                                      int32_t rotary_dim) {
  pdl_wait();
  pdl_trigger();
  __shared__ float buf[kHeadsPerBlock][kMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + warp;
  if (row >= tokens * (heads0 + heads1)) return;
  TX* x = x0;
  int64_t heads = heads0;
  const void* norm_w = norm0;
  if (row >= tokens * heads0) {
    row -= tokens * heads0;
    x = x1;
    heads = heads1;
    norm_w = norm1;
  }
  TX* v = x + row * head_dim;  // row = t * heads + h
  float* b = buf[warp];
  float ss = 0.f;
  for (int64_t i = lane; i < head_dim; i += 32) {
    const float f = to_f32(v[i]);
    b[i] = f;
    ss += f * f;
  }
  if (norm_w != nullptr) {
    const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(head_dim) + eps);
    for (int64_t i = lane; i < head_dim; i += 32) {
      float g = load_any(norm_w, norm_t, i);
      if (one_plus) g += 1.f;
      b[i] = b[i] * rstd * g;
    }
  }
  __syncwarp();
  const float pos = static_cast<float>(positions[row / heads]);
  for (int64_t i = lane; i < head_dim; i += 32) {
    v[i] = from_f32<TX>(rope_lane(b, i, pos, theta, rotary_dim));
  }
}

// The fused attention prologue: one warp per (token, head) of qkv [T, hq + 2 hk, D]. Query and key
// heads get the same arithmetic as head_norm_rope_kernel (so the results are bit-identical to
// linear -> qk_norm_rope -> kv_write); value heads are copied. Keys and values also go to the
// caches at slots[t]: converted per element to TC for a float cache (KT unused), or, for a
// quantized cache (TC uint8_t, KT F8E4M3 or U4X2), the row as written to ko / vo (rounded to TX)
// quantized by the same warp (warp_quantize_kv_row; bytes and scales as kv_write's).
// rope_table: the rotations of the block's first token are computed once by the block (a pair a
// thread) into shared memory, and its rows read them there (the rows of another token, where a
// block spans two, compute theirs per element as before); the same values either way. Before it
// every element computed its own powf and sincosf: a 2,048-token prefill of the Qwen3-8B shape
// spent 155 us a layer in this kernel (H100, ncu, 2026-12-07), as long as its attention.
template <typename TX, typename TC, DType KT>
__global__ void qkv_norm_rope_write_kernel(const TX* __restrict__ qkv, int64_t tokens, int64_t hq,
                                           int64_t hk, int64_t head_dim, const void* q_norm,
                                           const void* k_norm, DType norm_t, float eps,
                                           bool one_plus, const int32_t* __restrict__ positions,
                                           float theta, int32_t rotary_dim, TX* qo, TX* ko, TX* vo,
                                           TC* kc, TC* vc, void* ks, void* vs,
                                           const int32_t* __restrict__ slots, bool rope_table) {
  constexpr int kPerLane = kMaxHeadDim / 32;
  constexpr bool kQuant = kIsQuantKv<KT>;
  __shared__ float buf[kHeadsPerBlock][kMaxHeadDim];
  __shared__ float table_cs[kMaxHeadDim / 2], table_sn[kMaxHeadDim / 2];  // rope_table: by pair
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t heads = hq + 2 * hk;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + warp;
  const bool valid = row < tokens * heads;
  const int64_t t = valid ? row / heads : 0, h = valid ? row - t * heads : 0;
  const bool is_q = h < hq, is_v = h >= hq + hk;
  const void* norm_w = is_v ? nullptr : (is_q ? q_norm : k_norm);
  // The norm weights are weights: read before the dependency wait.
  float g[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    g[j] = 0.f;
    if (valid && norm_w != nullptr && i < head_dim) {
      g[j] = load_any(norm_w, norm_t, i);
      if (one_plus) g[j] += 1.f;
    }
  }
  pdl_wait();
  pdl_trigger();
  // The block's first token (every row of the block, the invalid ones too, before any return).
  const int64_t t0 =
      min(static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock, tokens * heads - 1) / heads;
  if (rope_table) fill_rotation_table(table_cs, table_sn, positions[t0], theta, rotary_dim);
  if (!valid) return;
  const TX* src = qkv + row * head_dim;
  const int32_t slot = slots[t];
  // Quantized caches: row (slot, kv head) of the bytes and scales (warp-uniform). Generic, so
  // that only the quantized instances compile its body.
  auto quantize = [&](const auto& x, int64_t kv_head, TC* cache, void* scales) {
    const int64_t r = static_cast<int64_t>(slot) * hk + kv_head;
    warp_quantize_kv_row<KT>(x, static_cast<int>(head_dim),
                             reinterpret_cast<uint8_t*>(cache) + r * kv_row_bytes<KT>(head_dim),
                             static_cast<KvScale<KT>*>(scales) + r * kv_row_scales<KT>(head_dim));
  };
  if (is_v) {  // value head: copy
    const int64_t hv = h - hq - hk;
    TX* vd = vo + (t * hk + hv) * head_dim;
    if constexpr (kQuant) {
      float x[kPerLane];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t i = lane + 32 * j;
        x[j] = 0.f;
        if (i < head_dim) {
          const TX val = src[i];
          vd[i] = val;
          x[j] = to_f32(val);
        }
      }
      if (slot >= 0) quantize(x, hv, vc, vs);
    } else {
      TC* vcd = slot >= 0 ? vc + (static_cast<int64_t>(slot) * hk + hv) * head_dim : nullptr;
      for (int64_t i = lane; i < head_dim; i += 32) {
        const TX val = src[i];
        vd[i] = val;
        if (vcd) vcd[i] = from_f32<TC>(to_f32(val));
      }
    }
    return;
  }
  const float pos = static_cast<float>(positions[t]);
  float* b = buf[warp];
  float ss = 0.f;
  for (int64_t i = lane; i < head_dim; i += 32) {
    const float f = to_f32(src[i]);
    b[i] = f;
    ss += f * f;
  }
  if (norm_w != nullptr) {
    const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(head_dim) + eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < head_dim) b[i] = b[i] * rstd * g[j];
    }
  }
  __syncwarp();
  const bool tabled = rope_table && t == t0;
  auto rotate = [&](int64_t i) {
    if (!tabled || i >= rotary_dim) return rope_lane(b, i, pos, theta, rotary_dim);
    const int pair = rope_pair(i, rotary_dim);
    return rope_apply(b, i, rotary_dim, table_cs[pair], table_sn[pair]);
  };
  TX* dst = is_q ? qo + (t * hq + h) * head_dim : ko + (t * hk + (h - hq)) * head_dim;
  if constexpr (kQuant) {
    float x[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      x[j] = 0.f;
      if (i < head_dim) {
        const TX r = from_f32<TX>(rotate(i));
        dst[i] = r;
        x[j] = to_f32(r);
      }
    }
    if (!is_q && slot >= 0) quantize(x, h - hq, kc, ks);
  } else {
    TC* cd = (!is_q && slot >= 0) ? kc + (static_cast<int64_t>(slot) * hk + (h - hq)) * head_dim
                                  : nullptr;
    for (int64_t i = lane; i < head_dim; i += 32) {
      const TX r = from_f32<TX>(rotate(i));
      dst[i] = r;
      if (cd) cd[i] = from_f32<TC>(to_f32(r));
    }
  }
}

// The register form (set_rope_rows_form / SYV_ROPE_ROWS=1; off by default until measured): each
// warp takes kRowsPerWarp consecutive rows of qkv and issues all their loads before any arithmetic
// (kRowsPerWarp x D x 2 bytes in flight a warp instead of D x 2: the shared-memory kernel above
// waits on memory with ~9 blocks of 4 warps an SM, 116 us a layer at 2,048 tokens of the Qwen3-8B
// shape on an H100, ~6x its bytes at the copy rate). A row lives in registers, element lane + 32 j
// in slot j, so a rotary pair (i, i + rotary_dim / 2) is in one lane: it needs D = 32 DJ and
// rotary_dim / 2 a multiple of 32 (Qwen3's 128 of 128, Qwen3.5's and Qwen3-Next's 64 of 256).
// The arithmetic of qkv_norm_rope_write_kernel in the same order, so the same bits are expected
// (the GPU tests compare the two forms; not yet run on a GPU).
constexpr int kRowsPerWarp = 4;
template <typename TX, typename TC, DType KT, int DJ>
__global__ void qkv_norm_rope_write_rows_kernel(
    const TX* __restrict__ qkv, int64_t tokens, int64_t hq, int64_t hk, const void* q_norm,
    const void* k_norm, DType norm_t, float eps, bool one_plus,
    const int32_t* __restrict__ positions, float theta, int32_t rotary_dim, TX* qo, TX* ko, TX* vo,
    TC* kc, TC* vc, void* ks, void* vs, const int32_t* __restrict__ slots, bool rope_table) {
  constexpr int kPerLane = kMaxHeadDim / 32;
  constexpr int D = 32 * DJ;
  constexpr bool kQuant = kIsQuantKv<KT>;
  __shared__ float table_cs[kMaxHeadDim / 2], table_sn[kMaxHeadDim / 2];  // rope_table: by pair
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t heads = hq + 2 * hk, rows = tokens * heads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock * kRowsPerWarp;
  const int64_t row0 = first + static_cast<int64_t>(warp) * kRowsPerWarp;
  // The norm weights are weights: read before the dependency wait (q's and k's: a warp's rows
  // may be of both).
  float gq[DJ], gk[DJ];
#pragma unroll
  for (int j = 0; j < DJ; ++j) {
    gq[j] = 0.f;
    gk[j] = 0.f;
    if (q_norm != nullptr) {
      gq[j] = load_any(q_norm, norm_t, lane + 32 * j);
      if (one_plus) gq[j] += 1.f;
    }
    if (k_norm != nullptr) {
      gk[j] = load_any(k_norm, norm_t, lane + 32 * j);
      if (one_plus) gk[j] += 1.f;
    }
  }
  pdl_wait();
  pdl_trigger();
  const int64_t t0 = min(first, rows - 1) / heads;  // the block's first token
  if (rope_table) fill_rotation_table(table_cs, table_sn, positions[t0], theta, rotary_dim);
  // Every row's loads first.
  float x[kRowsPerWarp][DJ];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
#pragma unroll
    for (int j = 0; j < DJ; ++j) x[r][j] = row < rows ? to_f32(qkv[row * D + lane + 32 * j]) : 0.f;
  }
  const int half = rotary_dim / 2, half_j = half / 32;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
    if (row >= rows) break;
    const int64_t t = row / heads, h = row - t * heads;
    const bool is_q = h < hq, is_v = h >= hq + hk;
    const int32_t slot = slots[t];
    float out[kPerLane] = {};  // the row as written (TX), element lane + 32 j
    TX* dst = nullptr;
    int64_t kv_head = -1;  // a k or v head: its cache row
    TC* cache = nullptr;
    void* scales = nullptr;
    if (is_v) {  // value head: copy (exact through f32)
      kv_head = h - hq - hk;
      dst = vo + (t * hk + kv_head) * D;
      cache = vc;
      scales = vs;
#pragma unroll
      for (int j = 0; j < DJ; ++j) out[j] = x[r][j];
    } else {
      const bool norm = (is_q ? q_norm : k_norm) != nullptr;
      float b[DJ];
      float ss = 0.f;
#pragma unroll
      for (int j = 0; j < DJ; ++j) {
        b[j] = x[r][j];
        ss += b[j] * b[j];
      }
      if (norm) {
        const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(D) + eps);
#pragma unroll
        for (int j = 0; j < DJ; ++j) b[j] = b[j] * rstd * (is_q ? gq[j] : gk[j]);
      }
      const bool tabled = rope_table && t == t0;
      const float pos = static_cast<float>(positions[t]);
#pragma unroll
      for (int j = 0; j < DJ; ++j) {
        const int i = lane + 32 * j;
        float v = b[j];
        if (i < rotary_dim) {
          const bool first_half = i < half;
          const int jp = first_half ? j + half_j : j - half_j;  // the partner's slot, same lane
          float partner = 0.f;
#pragma unroll
          for (int k = 0; k < DJ; ++k) partner = k == jp ? b[k] : partner;
          const int pair = first_half ? i : i - half;
          float cs, sn;
          if (tabled) {
            cs = table_cs[pair];
            sn = table_sn[pair];
          } else {
            rope_rotation(pair, pos, theta, rotary_dim, cs, sn);
          }
          v = rope_values(b[j], partner, first_half, cs, sn);
        }
        out[j] = v;
      }
      if (is_q) {
        dst = qo + (t * hq + h) * D;
      } else {
        kv_head = h - hq;
        dst = ko + (t * hk + kv_head) * D;
        cache = kc;
        scales = ks;
      }
    }
    // The row rounded to TX, and a k or v row into its cache row at the slot (a float cache per
    // element, a quantized one by the warp from the rounded values, as the kernel above).
#pragma unroll
    for (int j = 0; j < DJ; ++j) {
      const TX o = from_f32<TX>(out[j]);
      dst[lane + 32 * j] = o;
      out[j] = to_f32(o);
    }
    if (kv_head < 0 || slot < 0) continue;
    const int64_t cache_row = static_cast<int64_t>(slot) * hk + kv_head;
    if constexpr (kQuant) {
      warp_quantize_kv_row<KT>(
          out, D, reinterpret_cast<uint8_t*>(cache) + cache_row * kv_row_bytes<KT>(D),
          static_cast<KvScale<KT>*>(scales) + cache_row * kv_row_scales<KT>(D));
    } else {
      TC* cd = cache + cache_row * D;
#pragma unroll
      for (int j = 0; j < DJ; ++j) cd[lane + 32 * j] = from_f32<TC>(out[j]);
    }
  }
}

// Quantized kv_write: one warp per row of k or v (rows [0, tokens * hk) of k, then those of v),
// quantized into its cache row at slots[t] (warp_quantize_kv_row).
template <typename TI, DType KT>
__global__ void kv_write_quantized_kernel(const TI* __restrict__ k, const TI* __restrict__ v,
                                          uint8_t* kc, uint8_t* vc, void* ks, void* vs,
                                          const int32_t* __restrict__ slots, int64_t tokens,
                                          int64_t hk, int64_t head_dim) {
  constexpr int kPerLane = kMaxHeadDim / 32;
  pdl_wait();
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + warp;  // t * hk + h
  if (row >= 2 * tokens * hk) return;
  const bool is_v = row >= tokens * hk;
  if (is_v) row -= tokens * hk;
  const int32_t slot = slots[row / hk];
  if (slot < 0) return;
  const TI* src = (is_v ? v : k) + row * head_dim;
  float x[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    x[j] = i < head_dim ? to_f32(src[i]) : 0.f;
  }
  const int64_t r = static_cast<int64_t>(slot) * hk + row % hk;
  warp_quantize_kv_row<KT>(
      x, static_cast<int>(head_dim), (is_v ? vc : kc) + r * kv_row_bytes<KT>(head_dim),
      static_cast<KvScale<KT>*>(is_v ? vs : ks) + r * kv_row_scales<KT>(head_dim));
}

// One 16-byte (or 4-byte) chunk per thread: row_elems elements per token (Hk * D).
template <typename TI, typename TC>
__global__ void kv_write_kernel(const TI* __restrict__ k, const TI* __restrict__ v, TC* kc, TC* vc,
                                const int32_t* __restrict__ slots, int64_t tokens,
                                int64_t row_elems) {
  pdl_wait();
  pdl_trigger();
  const int64_t total = tokens * row_elems;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / row_elems, e = i - t * row_elems;
    const int32_t slot = slots[t];
    if (slot < 0) continue;
    kc[slot * row_elems + e] = from_f32<TC>(to_f32(k[i]));
    vc[slot * row_elems + e] = from_f32<TC>(to_f32(v[i]));
  }
}

__global__ void kv_write_vec_kernel(const uint4* __restrict__ k, const uint4* __restrict__ v,
                                    uint4* kc, uint4* vc, const int32_t* __restrict__ slots,
                                    int64_t tokens, int64_t row_vecs) {
  pdl_wait();
  pdl_trigger();
  const int64_t total = tokens * row_vecs;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / row_vecs, e = i - t * row_vecs;
    const int32_t slot = slots[t];
    if (slot < 0) continue;
    kc[slot * row_vecs + e] = k[i];
    vc[slot * row_vecs + e] = v[i];
  }
}

}  // namespace

void launch_head_norm_rope(void* x0, int64_t heads0, const void* norm0, void* x1, int64_t heads1,
                           const void* norm1, DType x_t, int64_t tokens, int64_t head_dim,
                           DType norm_t, float eps, bool one_plus, const int32_t* positions,
                           double theta, int32_t rotary_dim, cudaStream_t s) {
  const int64_t rows = tokens * (heads0 + heads1);
  if (rows == 0) return;
  if (head_dim > kMaxHeadDim || rotary_dim > head_dim || rotary_dim % 2 != 0)
    cuda_fail(__FILE__, __LINE__, "head_dim/rotary_dim", "head_dim > 512 or bad rotary_dim");
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    launch_k(head_norm_rope_kernel<TX>, ceil_div(rows, kHeadsPerBlock), 32 * kHeadsPerBlock, 0, s,
             static_cast<TX*>(x0), heads0, norm0, static_cast<TX*>(x1), heads1, norm1, tokens,
             head_dim, norm_t, eps, one_plus, positions, static_cast<float>(theta), rotary_dim);
  });
}

void launch_kv_write(const void* k, const void* v, DType in_t, void* k_cache, void* v_cache,
                     DType cache_t, const int32_t* slots, int64_t tokens, int64_t row_elems,
                     cudaStream_t s) {
  if (tokens == 0) return;
  const size_t esz = dtype_size(in_t);
  const bool aligned =
      (reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v) |
       reinterpret_cast<uintptr_t>(k_cache) | reinterpret_cast<uintptr_t>(v_cache)) %
          16 ==
      0;
  if (in_t == cache_t && (row_elems * esz) % 16 == 0 && aligned) {
    const int64_t row_vecs = row_elems * static_cast<int64_t>(esz) / 16;
    const int64_t total = tokens * row_vecs;
    launch_k(kv_write_vec_kernel, ceil_div(total, 256), 256, 0, s, static_cast<const uint4*>(k),
             static_cast<const uint4*>(v), static_cast<uint4*>(k_cache),
             static_cast<uint4*>(v_cache), slots, tokens, row_vecs);
    return;
  }
  SYV_DISPATCH_FLOAT(in_t, TI, [&] {
    SYV_DISPATCH_FLOAT(cache_t, TC, [&] {
      launch_k(kv_write_kernel<TI, TC>, ceil_div(tokens * row_elems, 256), 256, 0, s,
               static_cast<const TI*>(k), static_cast<const TI*>(v), static_cast<TC*>(k_cache),
               static_cast<TC*>(v_cache), slots, tokens, row_elems);
    });
  });
}

namespace {

// The head_dim checks of the quantized writes.
void check_quantized_kv(DType t, int64_t head_dim) {
  if (t != DType::F8E4M3 && t != DType::U4X2)
    cuda_fail(__FILE__, __LINE__, "KV cache dtype", "quantized KV caches are F8E4M3 or U4X2");
  if (head_dim > kMaxHeadDim || (t == DType::U4X2 && head_dim % kKvInt4Group != 0) ||
      (t == DType::F8E4M3 && head_dim % 8 != 0))
    cuda_fail(__FILE__, __LINE__, "head_dim",
              "quantized KV needs head_dim <= 512, a multiple of 32 (int4) or of 8 (fp8)");
}

// SYV_ROPE_TABLE=0: every row of qkv_norm_rope_write_kernel computes its rotations per element (the
// form before 2026-12-07), for A/B runs; on by default.
std::atomic<int> g_rope_table{-1};
bool rope_table_now() {
  return env_switch(g_rope_table, "SYV_ROPE_TABLE", true);
}

// A type as a value (std::type_identity is C++20; the CUDA sources build as C++17).
template <typename T>
struct TypeTag {
  using type = T;
};

// SYV_ROPE_ROWS=1 or set_rope_rows_form(true): qkv_norm_rope_write_rows_kernel where it applies.
std::atomic<int> g_rope_rows{-1};
std::atomic<uint64_t> g_rope_rows_launches{0};

// Calls BODY with `constexpr DType KT` bound to a quantized KV dtype (F8E4M3, U4X2).
template <typename F>
void dispatch_quantized_kv(DType t, F&& body) {
  if (t == DType::F8E4M3) {
    body(std::integral_constant<DType, DType::F8E4M3>{});
  } else {
    body(std::integral_constant<DType, DType::U4X2>{});
  }
}

}  // namespace

void launch_kv_write_quantized(const void* k, const void* v, DType in_t, const KvCacheDev& cache,
                               const int32_t* slots, int64_t tokens, int64_t hk, int64_t head_dim,
                               cudaStream_t s) {
  if (tokens == 0) return;
  check_quantized_kv(cache.dtype, head_dim);
  const int64_t rows = 2 * tokens * hk;
  SYV_DISPATCH_FLOAT(in_t, TI, [&] {
    dispatch_quantized_kv(cache.dtype, [&](auto kt) {
      launch_k(kv_write_quantized_kernel<TI, decltype(kt)::value>, ceil_div(rows, kHeadsPerBlock),
               32 * kHeadsPerBlock, 0, s, static_cast<const TI*>(k), static_cast<const TI*>(v),
               static_cast<uint8_t*>(cache.k), static_cast<uint8_t*>(cache.v), cache.k_scales,
               cache.v_scales, slots, tokens, hk, head_dim);
    });
  });
}

void launch_qkv_norm_rope_write(const void* qkv, DType x_t, int64_t tokens, int64_t hq, int64_t hk,
                                int64_t head_dim, const void* q_norm, const void* k_norm,
                                DType norm_t, float eps, bool one_plus, const int32_t* positions,
                                double theta, int32_t rotary_dim, void* q, void* k, void* v,
                                const KvCacheDev& cache, const int32_t* slots, cudaStream_t s) {
  const int64_t rows = tokens * (hq + 2 * hk);
  if (rows == 0) return;
  if (head_dim > kMaxHeadDim || rotary_dim > head_dim || rotary_dim % 2 != 0)
    cuda_fail(__FILE__, __LINE__, "head_dim/rotary_dim", "head_dim > 512 or bad rotary_dim");
  const bool quant = cache.dtype == DType::F8E4M3 || cache.dtype == DType::U4X2;
  if (quant) check_quantized_kv(cache.dtype, head_dim);
  // The register form: bf16 activations (CUDA's), head_dim 64, 128 or 256, rotary pairs in one
  // lane.
  const bool rows_form = rope_rows_form() && x_t == DType::BF16 &&
                         (head_dim == 64 || head_dim == 128 || head_dim == 256) &&
                         (rotary_dim / 2) % 32 == 0;
  if (rows_form) {
    g_rope_rows_launches.fetch_add(1, std::memory_order_relaxed);
    auto go = [&](auto kernel, auto* kc, auto* vc) {
      launch_k(kernel, ceil_div(rows, kHeadsPerBlock * kRowsPerWarp), 32 * kHeadsPerBlock, 0, s,
               static_cast<const bf16*>(qkv), tokens, hq, hk, q_norm, k_norm, norm_t, eps, one_plus,
               positions, static_cast<float>(theta), rotary_dim, static_cast<bf16*>(q),
               static_cast<bf16*>(k), static_cast<bf16*>(v), kc, vc, cache.k_scales, cache.v_scales,
               slots, rope_table_now());
    };
    auto by_width = [&](auto tc, auto kt, auto* kc, auto* vc) {
      using TC = typename decltype(tc)::type;
      constexpr DType KT = decltype(kt)::value;
      if (head_dim == 64) {
        go(qkv_norm_rope_write_rows_kernel<bf16, TC, KT, 2>, kc, vc);
      } else if (head_dim == 128) {
        go(qkv_norm_rope_write_rows_kernel<bf16, TC, KT, 4>, kc, vc);
      } else {
        go(qkv_norm_rope_write_rows_kernel<bf16, TC, KT, 8>, kc, vc);
      }
    };
    if (quant) {
      dispatch_quantized_kv(cache.dtype, [&](auto kt) {
        by_width(TypeTag<uint8_t>{}, kt, static_cast<uint8_t*>(cache.k),
                 static_cast<uint8_t*>(cache.v));
      });
    } else {
      SYV_DISPATCH_FLOAT(cache.dtype, TC, [&] {
        by_width(TypeTag<TC>{}, std::integral_constant<DType, DType::F32>{},
                 static_cast<TC*>(cache.k), static_cast<TC*>(cache.v));
      });
    }
    return;
  }
  SYV_DISPATCH_FLOAT(x_t, TX, [&] {
    auto go = [&](auto kernel, auto* kc, auto* vc) {
      launch_k(kernel, ceil_div(rows, kHeadsPerBlock), 32 * kHeadsPerBlock, 0, s,
               static_cast<const TX*>(qkv), tokens, hq, hk, head_dim, q_norm, k_norm, norm_t, eps,
               one_plus, positions, static_cast<float>(theta), rotary_dim, static_cast<TX*>(q),
               static_cast<TX*>(k), static_cast<TX*>(v), kc, vc, cache.k_scales, cache.v_scales,
               slots, rope_table_now());
    };
    if (quant) {
      dispatch_quantized_kv(cache.dtype, [&](auto kt) {
        go(qkv_norm_rope_write_kernel<TX, uint8_t, decltype(kt)::value>,
           static_cast<uint8_t*>(cache.k), static_cast<uint8_t*>(cache.v));
      });
    } else {
      SYV_DISPATCH_FLOAT(cache.dtype, TC, [&] {
        go(qkv_norm_rope_write_kernel<TX, TC, DType::F32>, static_cast<TC*>(cache.k),
           static_cast<TC*>(cache.v));
      });
    }
  });
}

void set_rope_rows_form(bool on) {
  g_rope_rows.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool rope_rows_form() {
  return env_switch(g_rope_rows, "SYV_ROPE_ROWS", false);
}
uint64_t rope_rows_launches() {
  return g_rope_rows_launches.load(std::memory_order_relaxed);
}

}  // namespace syv::cuda
