// Decode attention on tensor cores (mma.sync m16n8k16, fp32 accumulation) for grouped query
// heads: the G query heads that share one KV head are the rows of a 16-row MMA tile, so one read
// of a key serves all of them. The CUDA-core kernel (attention_decode.cu) spends ~20 instructions
// per key and head (counted in its inner loop, not profiled) on the dot product's lane shuffles
// and the softmax; at batch 64 and context 8192 it reached 55% of the bandwidth floor (H200, 8B,
// bf16 KV) and an fp8 cache, half the bytes, ran no faster: it was bound by instructions, not
// bytes. Here each warp's 16 keys of a 64-key tile cost D / 4 MMAs (D / 8 for S = Q K^T, D / 8
// for O += P V: 32 at head_dim 128) whatever G is: 88% of the floor on that shape.
//
// One block of 4 warps per (token, G heads, split of the context). Each warp takes 16 keys of
// every 64-key tile with its own running maximum, sum and output (FlashAttention-2's register
// layout, as attention_prefill_mma.cu); the 4 warps' states are merged in shared memory at the
// end into the output or the split's partial state (attention_decode.cuh), which combine_kernel
// merges as it merges the CUDA-core kernel's. Rows past G (zero queries) are computed and dropped.
//  * bf16 caches: K/V tiles go through shared memory in a cp.async double buffer; P is rounded to
//    bf16 for the P V product (2^-9 relative, as the prefill kernel).
//  * fp8: the tiles' bytes and per-key scales go through a 2-stage cp.async pipeline and are
//    converted to f16 (exact, one cvt per pair) in one shared tile; Q is converted to f16
//    (saturated) and the MMAs are f16; S is multiplied by each key's K scale, and each key's V
//    scale (times 256, undone at the merge) is folded into P before its f16 rounding.
//  * int4: the same pipeline, decoded and scaled per 32-element group into a bf16 tile.
// Blocks per SM count (H200, 8B, b = 64, ctx 8192): the quantized forms ran 29.6 ms per step with
// 3 stages (2 blocks per SM by shared memory) and 23.7 ms with 2 stages (3 blocks per SM).
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda::decode {
namespace {

using prefill::ex2;
using prefill::pack_bf16;
using prefill::quad_max;
using prefill::quad_sum;

constexpr int kRows = 16, kBN = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr int kWarpKeys = kBN / kWarps;  // keys of a tile one warp takes
// fp8 caches: P times the key's V scale times this (a power of two: exact, undone at the merge)
// goes into the f16 P V product, so the products of probabilities and scales (amax / 448) stay
// in f16's normal range; a V row's amax would have to pass 1.1e5 to overflow it.
constexpr float kFoldV = 256.f;

__device__ __forceinline__ uint32_t pack_f16_sat(float lo, float hi) {
  const __half2 h =
      __floats2half2_rn(fminf(fmaxf(lo, -65504.f), 65504.f), fminf(fmaxf(hi, -65504.f), 65504.f));
  return *reinterpret_cast<const uint32_t*>(&h);
}
// 8 e4m3 bytes as 8 exact f16 (cvt.rn.f16x2.e4m3x2 on sm_89+; elsewhere through f32).
__device__ __forceinline__ uint4 fp8x8_to_f16x8(uint2 w) {
  uint4 r;
  uint32_t* h = reinterpret_cast<uint32_t*>(&r);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t word = e < 2 ? w.x : w.y;
    const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(word >> (16 * (e & 1))), __NV_E4M3);
    h[e] = static_cast<uint32_t>(raw.x) | (static_cast<uint32_t>(raw.y) << 16);
  }
#else
  float f[8];
  fp8x4_to_f32(w.x, f);
  fp8x4_to_f32(w.y, f + 4);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = pack_f16_sat(f[2 * e], f[2 * e + 1]);
#endif
  return r;
}
static_assert(kWarpKeys == 16, "one k16 step of P V per warp and tile");

// Shared memory: Q ([kRows][D + 8] 16-bit), then for bf16 caches 2 stages of K + V tiles
// ([kBN][D + 8] bf16 each, rows padded by 16 bytes for ldmatrix), for quantized ones kQuantStages
// stages of the tiles' stored bytes and scales (cp.async) and one 16-bit K + V tile they are
// decoded into.
template <int D>
constexpr int kQuantStages = 2;
template <int D>
constexpr int tile_bytes() {
  return kBN * (D + 8) * 2;
}
template <int D, DType KT>
constexpr int raw_bytes() {  // one stage: K and V bytes, then K and V scales
  return 2 * kBN * static_cast<int>(kv_row_bytes<KT>(D)) +
         2 * kBN * static_cast<int>(kv_row_scales<KT>(D) * sizeof(KvScale<KT>));
}
template <int D, DType KT>
constexpr int smem_bytes() {
  if constexpr (kIsQuantKv<KT>) {
    return kRows * (D + 8) * 2 + 2 * tile_bytes<D>() + kQuantStages<D> * raw_bytes<D, KT>();
  } else {
    return kRows * (D + 8) * 2 + 4 * tile_bytes<D>();
  }
}
// The merge area (kWarps x kRows x D floats) reuses the K/V tiles.
static_assert(kWarps * kRows * 64 * 4 <= 2 * kBN * (64 + 8) * 2);
static_assert(kWarps * kRows * 256 * 4 <= 2 * kBN * (256 + 8) * 2);

// KT: the cache dtype (BF16, F8E4M3 or U4X2). G (rows_per_block) <= 16 query heads of KV head
// (blockIdx.y * G) / group.
template <int D, DType KT>
// Blocks per SM: 3 up to head_dim 128 (bf16: 168 registers, 74 KB of shared memory).
__global__ void __launch_bounds__(kThreads, D <= 128 ? 3 : 1)
    decode_mma_kernel(AttentionArgs a, int32_t rows_per_block, int32_t splits,
                      int32_t fixed_keys_per_split, int32_t align, float* partial) {
  // Batch metadata is uploaded before a forward's first kernel and never written by one, so it
  // is read before the dependency wait (blocks past their token's context leave at once).
  const int t = blockIdx.x, split = blockIdx.z;
  const int n_keys = a.positions[t] + 1;
  const int kps = split_keys(n_keys, splits, fixed_keys_per_split, align);
  const int used = used_splits(n_keys, splits, kps);
  if (split >= used) return;
  pdl_wait();
  pdl_trigger();
  constexpr bool kQuant = kIsQuantKv<KT>;
  // fp8: f16 tiles and MMAs, the per-key scales applied to S (K) and folded into P (V).
  constexpr bool kFold = KT == DType::F8E4M3;
  constexpr int LD = D + 8, CH = D / 8;
  constexpr int S = kQuant ? kQuantStages<D> : 2;  // pipeline stages
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [kRows][LD]
  bf16* Ks = Qs + kRows * LD;                // bf16: [2][kBN][LD]; quantized: [kBN][LD]
  bf16* Vs = Ks + (kQuant ? 1 : 2) * kBN * LD;
  unsigned char* raw = reinterpret_cast<unsigned char*>(Vs + (kQuant ? 1 : 2) * kBN * LD);
  __shared__ float sm_m[kWarps][kRows], sm_l[kWarps][kRows];
  __shared__ float sk[kFold ? kBN : 1], sv[kFold ? kBN : 1];  // fp8: this tile's K / V scales
  const int G = rows_per_block;
  const int hq0 = blockIdx.y * G, kh = hq0 / (a.hq / a.hk);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int seq = a.token_seq[t];
  const int k_begin = split * kps, k_end = min(n_keys, k_begin + kps);
  const int n_tiles = (k_end - k_begin + kBN - 1) / kBN;
  const bf16* q = static_cast<const bf16*>(a.q);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;

  for (int idx = tid; idx < kRows * CH; idx += kThreads) {
    const int r = idx / CH, c = idx % CH;
    const bool valid = r < G;
    const bf16* src = valid ? q + (static_cast<int64_t>(t) * a.hq + hq0 + r) * D + c * 8 : q;
    if constexpr (kFold) {  // f16 (saturated: the fp8 tiles' MMAs are f16), stored synchronously
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (valid) {
        float f[8];
        unpack8(*reinterpret_cast<const uint4*>(src), f);
        uint32_t* h = reinterpret_cast<uint32_t*>(&w);
#pragma unroll
        for (int e = 0; e < 4; ++e) h[e] = pack_f16_sat(f[2 * e], f[2 * e + 1]);
      }
      *reinterpret_cast<uint4*>(Qs + r * LD + c * 8) = w;
    } else {
      cp_async16(Qs + r * LD + c * 8, src, valid);
    }
  }
  // The cache row of key `key` (page table lookup), or -1 past the split.
  auto cache_row = [&](int key) -> int64_t {
    if (key >= k_end) return -1;
    const int page = pt[key / a.page_size];
    return (static_cast<int64_t>(page) * a.page_size + key % a.page_size) * a.hk + kh;
  };
  // bf16: tile j's K and V rows straight into tile buffer `buf`.
  auto load_kv = [&](int j, int buf) {
    bf16* ks = Ks + buf * kBN * LD;
    bf16* vs = Vs + buf * kBN * LD;
    const bf16* kc = static_cast<const bf16*>(a.k_cache);
    const bf16* vc = static_cast<const bf16*>(a.v_cache);
#pragma unroll
    for (int i = 0; i < kBN * CH / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH;
      const int64_t row = cache_row(k_begin + j * kBN + r);
      const int64_t off = row >= 0 ? row * D + c * 8 : 0;
      cp_async16(ks + r * LD + c * 8, kc + off, row >= 0);
      cp_async16(vs + r * LD + c * 8, vc + off, row >= 0);
    }
  };
  // Quantized: tile j's stored bytes and scales into raw stage `st` (rows past the split zeroed).
  constexpr int RB = static_cast<int>(kv_row_bytes<KT>(D));       // bytes of a row
  constexpr int RS = static_cast<int>(kv_row_scales<KT>(D));      // scales of a row
  constexpr int SB = RS * static_cast<int>(sizeof(KvScale<KT>));  // their bytes (f32 / f16)
  static_assert(!kQuant || SB % 4 == 0, "a row's scales are copied 4 bytes at a time");
  constexpr int kRawBytes = 2 * kBN * RB + 2 * kBN * SB;  // one stage
  auto raw_k = [&](int st) { return raw + st * kRawBytes; };
  auto raw_v = [&](int st) { return raw + st * kRawBytes + kBN * RB; };
  auto raw_ks = [&](int st) {
    return reinterpret_cast<KvScale<KT>*>(raw + st * kRawBytes + 2 * kBN * RB);
  };
  auto raw_vs = [&](int st) { return raw_ks(st) + kBN * RS; };
  auto load_raw = [&](int j, int st) {
    const uint8_t* kq = static_cast<const uint8_t*>(a.k_cache);
    const uint8_t* vq = static_cast<const uint8_t*>(a.v_cache);
    constexpr int RC = RB / 16;  // 16-byte chunks of a row
    for (int idx = tid; idx < kBN * RC; idx += kThreads) {
      const int r = idx / RC, c = idx % RC;
      const int64_t row = cache_row(k_begin + j * kBN + r);
      const int64_t off = row >= 0 ? row * RB + c * 16 : 0;
      cp_async16(raw_k(st) + r * RB + c * 16, kq + off, row >= 0);
      cp_async16(raw_v(st) + r * RB + c * 16, vq + off, row >= 0);
    }
    constexpr int SC = SB / 4;  // 4-byte chunks of a row's scales
    const unsigned char* ksq = static_cast<const unsigned char*>(a.k_scales);
    const unsigned char* vsq = static_cast<const unsigned char*>(a.v_scales);
    for (int idx = tid; idx < kBN * SC; idx += kThreads) {
      const int r = idx / SC, c = idx % SC;
      const int64_t row = cache_row(k_begin + j * kBN + r);
      const int64_t off = row >= 0 ? row * SB + c * 4 : 0;
      cp_async4(reinterpret_cast<unsigned char*>(raw_ks(st)) + idx * 4, ksq + off, row >= 0);
      cp_async4(reinterpret_cast<unsigned char*>(raw_vs(st)) + idx * 4, vsq + off, row >= 0);
    }
  };
  // Quantized: raw stage `st` decoded into the K and V tiles.
  auto decode_raw = [&](int st) {
    if constexpr (kFold) {
      // fp8: the bytes as exact f16 (one cvt per pair); the scales to sk / sv for the MMAs.
#pragma unroll
      for (int i = 0; i < kBN * CH / kThreads; ++i) {
        const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH;
        *reinterpret_cast<uint4*>(Ks + r * LD + c * 8) =
            fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(raw_k(st) + r * RB + c * 8));
        *reinterpret_cast<uint4*>(Vs + r * LD + c * 8) =
            fp8x8_to_f16x8(*reinterpret_cast<const uint2*>(raw_v(st) + r * RB + c * 8));
      }
      if (tid < kBN) {
        sk[tid] = raw_ks(st)[tid];
        sv[tid] = raw_vs(st)[tid] * kFoldV;
      }
    } else {  // int4: decoded and scaled per 32-element group into bf16
#pragma unroll
      for (int i = 0; i < kBN * CH / kThreads; ++i) {
        const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH;
        float f[8];
        const int sc = r * RS + c * 8 / kKvInt4Group;  // this chunk's group scale
        kv_unpack8<KT>(
            make_uint2(*reinterpret_cast<const uint32_t*>(raw_k(st) + r * RB + c * 4), 0u), f);
        const float ksc = kv_scale_f32(raw_ks(st)[sc]);
#pragma unroll
        for (int e = 0; e < 8; ++e) f[e] *= ksc;
        *reinterpret_cast<uint4*>(Ks + r * LD + c * 8) = pack8(f);
        kv_unpack8<KT>(
            make_uint2(*reinterpret_cast<const uint32_t*>(raw_v(st) + r * RB + c * 4), 0u), f);
        const float vsc = kv_scale_f32(raw_vs(st)[sc]);
#pragma unroll
        for (int e = 0; e < 8; ++e) f[e] *= vsc;
        *reinterpret_cast<uint4*>(Vs + r * LD + c * 8) = pack8(f);
      }
    }
  };

  if constexpr (kQuant) {
#pragma unroll
    for (int j = 0; j < S - 1; ++j) {
      if (j < n_tiles) load_raw(j, j);
      cp_commit();  // the first group also holds Q
    }
  } else {
    load_kv(0, 0);
    cp_commit();
  }

  const float sl2 = a.scale * kLog2e;
  // The Q fragments stay in registers up to head_dim 128; at 256 (O alone takes 128 registers)
  // each tile re-reads them from shared memory.
  constexpr bool kQInRegisters = D <= 128;
  uint32_t qa[kQInRegisters ? D / 16 : 1][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int wk = warp * kWarpKeys;  // this warp's first key within a tile

  for (int it = 0; it < n_tiles; ++it) {
    const bf16* ks = Ks;
    const bf16* vs = Vs;
    if constexpr (kQuant) {
      // Stage (it + S - 1) % S was last read by the decode of tile it - 1 (before its barrier).
      if (it + S - 1 < n_tiles) load_raw(it + S - 1, (it + S - 1) % S);
      cp_commit();       // possibly empty: keeps the group count uniform
      cp_wait<S - 1>();  // Q and tile `it`'s bytes have landed
      __syncthreads();   // ... for every thread; every warp is done with tile it - 1
      decode_raw(it % S);
      __syncthreads();
    } else {
      // Buffer (it + 1) & 1 was last read in iteration it - 1 (before its closing barrier).
      if (it + 1 < n_tiles) load_kv(it + 1, (it + 1) & 1);
      cp_commit();   // possibly empty: keeps the group count uniform
      cp_wait<1>();  // everything but the newest group: Q and tile `it` have landed
      __syncthreads();
      ks += (it & 1) * kBN * LD;
      vs += (it & 1) * kBN * LD;
    }
    if (kQInRegisters && it == 0) {
#pragma unroll
      for (int kk = 0; kk < (kQInRegisters ? D / 16 : 0); ++kk)
        ldsm_x4(qa[kk], Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
    }
    const int kb = k_begin + it * kBN + wk;  // this warp's first key
    if (kb < k_end) {                        // warp-uniform
      float sc[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qs[4];
        if constexpr (!kQInRegisters)
          ldsm_x4(qs, Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
        const uint32_t(&qf)[4] = kQInRegisters ? qa[kQInRegisters ? kk : 0] : qs;
        uint32_t b[4];
        ldsm_x4(b,
                ks + (wk + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
        if constexpr (kFold) {
          mma_f16(sc[0], qf, b[0], b[1]);
          mma_f16(sc[1], qf, b[2], b[3]);
        } else {
          mma(sc[0], qf, b[0], b[1]);
          mma(sc[1], qf, b[2], b[3]);
        }
      }
      // fp8: this lane's 4 keys (columns 2 tq, 2 tq + 1 of each 8-key half): S times the key's
      // scale; their V scales (times kFoldV) go into P.
      [[maybe_unused]] float vsc[2][2];
      if constexpr (kFold) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = wk + j * 8 + tq * 2 + e;
            const float ksc = sk[key];
            sc[j][e] *= ksc;
            sc[j][2 + e] *= ksc;
            vsc[j][e] = sv[key];
          }
        }
      }
      if (kb + kWarpKeys > k_end) {  // the split ends inside this warp's keys
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (kb + j * 8 + tq * 2 + e >= k_end) sc[j][e] = sc[j][2 + e] = -INFINITY;
          }
        }
      }
      // Online softmax; this lane holds rows g (c0, c1) and g + 8 (c2, c3).
      float mx0 = m[0], mx1 = m[1];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        mx0 = fmaxf(mx0, fmaxf(sc[j][0], sc[j][1]));
        mx1 = fmaxf(mx1, fmaxf(sc[j][2], sc[j][3]));
      }
      mx0 = quad_max(mx0);
      mx1 = quad_max(mx1);
      const float s0 = mx0 == -INFINITY ? 0.f : mx0 * sl2;
      const float s1 = mx1 == -INFINITY ? 0.f : mx1 * sl2;
      const float al0 = ex2(m[0] * sl2 - s0), al1 = ex2(m[1] * sl2 - s1);
      m[0] = mx0;
      m[1] = mx1;
      uint32_t pa[4];
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float p0 = ex2(fmaf(sc[j][0], sl2, -s0)), p1 = ex2(fmaf(sc[j][1], sl2, -s0));
        const float p2 = ex2(fmaf(sc[j][2], sl2, -s1)), p3 = ex2(fmaf(sc[j][3], sl2, -s1));
        sum0 += p0 + p1;
        sum1 += p2 + p3;
        if constexpr (kFold) {
          pa[j * 2] = pack_f16_sat(p0 * vsc[j][0], p1 * vsc[j][1]);
          pa[j * 2 + 1] = pack_f16_sat(p2 * vsc[j][0], p3 * vsc[j][1]);
        } else {
          pa[j * 2] = pack_bf16(p0, p1);
          pa[j * 2 + 1] = pack_bf16(p2, p3);
        }
      }
      l[0] = l[0] * al0 + sum0;
      l[1] = l[1] * al1 + sum1;
      if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          o[i][0] *= al0;
          o[i][1] *= al0;
          o[i][2] *= al1;
          o[i][3] *= al1;
        }
      }
      // O += P V over this warp's 16 keys.
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldsm_x4_t(b,
                  vs + (wk + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
        if constexpr (kFold) {
          mma_f16(o[2 * dp], pa, b[0], b[1]);
          mma_f16(o[2 * dp + 1], pa, b[2], b[3]);
        } else {
          mma(o[2 * dp], pa, b[0], b[1]);
          mma(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    if constexpr (!kQuant) __syncthreads();  // this buffer is refilled in the next iteration
  }
  __syncthreads();  // every warp is done with the tiles: the merge area reuses them

  // Merge the 4 warps' states (rows < G) through shared memory.
  float* sm_o = reinterpret_cast<float*>(Ks);  // [kWarps][kRows][D]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float lsum = quad_sum(l[h]);
    const int r = g + 8 * h;
    if (r >= G) continue;
    if (tq == 0) {
      sm_m[warp][r] = m[h] == -INFINITY ? -INFINITY : m[h] * sl2;
      sm_l[warp][r] = lsum;
    }
    float* orow = sm_o + (warp * kRows + r) * D + tq * 2;
    constexpr float unfold = kFold ? 1.f / kFoldV : 1.f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      orow[i * 8] = o[i][2 * h] * unfold;
      orow[i * 8 + 1] = o[i][2 * h + 1] * unfold;
    }
  }
  __syncthreads();
  for (int e = tid; e < G * D; e += kThreads) {
    const int r = e / D, d = e % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w][r]);
    float sum = 0.f, lsum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (sm_m[w][r] == -INFINITY) continue;  // a warp that saw no key of this split
      const float f = exp2f(sm_m[w][r] - mx);
      sum += f * sm_o[(w * kRows + r) * D + d];
      lsum += f * sm_l[w][r];
    }
    const int64_t row = static_cast<int64_t>(t) * a.hq + hq0 + r;
    if (used == 1) {
      static_cast<bf16*>(a.out)[row * D + d] = __float2bfloat16_rn(lsum > 0.f ? sum / lsum : 0.f);
    } else {
      float* p = partial + (row * splits + split) * (D + 2);
      p[d] = sum;
      if (d == 0) {
        p[D] = mx;
        p[D + 1] = lsum;
      }
    }
  }
}

template <int D, DType KT>
void launch_t(const AttentionArgs& a, int32_t rows, int32_t splits, int32_t fixed, int32_t align,
              float* partial, cudaStream_t s) {
  constexpr int smem = smem_bytes<D, KT>();
  static bool configured = false;  // per template instance; set once per process
  if (!configured) {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(decode_mma_kernel<D, KT>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.hq / rows),
                  static_cast<unsigned>(splits));
  launch_k(decode_mma_kernel<D, KT>, grid, kThreads, smem, s, a, rows, splits, fixed, align,
           partial);
}

template <int D>
void launch_kt(const AttentionArgs& a, int32_t rows, int32_t splits, int32_t fixed, int32_t align,
               float* partial, cudaStream_t s) {
  switch (a.cache_t) {
    case DType::F8E4M3:
      return launch_t<D, DType::F8E4M3>(a, rows, splits, fixed, align, partial, s);
    case DType::U4X2:
      return launch_t<D, DType::U4X2>(a, rows, splits, fixed, align, partial, s);
    default:
      return launch_t<D, DType::BF16>(a, rows, splits, fixed, align, partial, s);
  }
}

}  // namespace

int mma_heads_per_block(int64_t hq, int64_t hk, int64_t head_dim) {
  if (hk <= 0 || hq % hk != 0) return 0;
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) return 0;
  // The largest of the head_dim's instances (bf16, fp8, int4 caches) must fit the device's shared
  // memory: head_dim 256 takes 140 KiB, beyond the 99 KiB of sm_86 / 89 / 120 (the CUDA-core kernel
  // runs there instead).
  auto largest = [](auto d) {
    constexpr int D = decltype(d)::value;
    return std::max({smem_bytes<D, DType::BF16>(), smem_bytes<D, DType::F8E4M3>(),
                     smem_bytes<D, DType::U4X2>()});
  };
  const int smem = head_dim == 64    ? largest(std::integral_constant<int, 64>{})
                   : head_dim == 128 ? largest(std::integral_constant<int, 128>{})
                                     : largest(std::integral_constant<int, 256>{});
  if (static_cast<size_t>(smem) > device_smem_optin()) return 0;
  const int64_t group = hq / hk;
  if (group < 2) return 0;
  if (group <= kRows) return static_cast<int>(group);
  return group % kRows == 0 ? kRows : 0;
}

void launch_decode_mma(const AttentionArgs& a, int32_t heads_per_block, int32_t splits,
                       int32_t fixed_keys_per_split, int32_t align, float* partial,
                       cudaStream_t s) {
  switch (a.head_dim) {
    case 64:
      return launch_kt<64>(a, heads_per_block, splits, fixed_keys_per_split, align, partial, s);
    case 128:
      return launch_kt<128>(a, heads_per_block, splits, fixed_keys_per_split, align, partial, s);
    default:
      return launch_kt<256>(a, heads_per_block, splits, fixed_keys_per_split, align, partial, s);
  }
}

}  // namespace syv::cuda::decode
