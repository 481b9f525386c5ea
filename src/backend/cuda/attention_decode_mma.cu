// Decode attention on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulation) for grouped
// query heads: the G query heads that share one KV head are the rows of a 16-row MMA tile, so one
// read of a key serves all of them. The CUDA-core kernel (attention_decode.cu) spends ~20
// instructions per key and head on the dot product's lane shuffles and the softmax; at batch 64
// and context 8192 it reached 55% of the bandwidth floor (8B, bf16 KV) and an fp8 cache, half the
// bytes, ran no faster: it was bound by instructions, not bytes. Here a 64-key tile costs 8 MMAs
// per warp for S = Q K^T and 8 for O += P V, whatever G is.
//
// One block of 4 warps per (token, G heads, split of the context). K/V tiles of 64 keys go through
// shared memory in a double buffer (cp.async for bf16; fp8 / int4 are loaded to registers,
// decoded, scaled and stored as bf16, the next tile's loads in flight during this tile's MMAs up
// to head_dim 128); each warp takes 16 keys of every tile with its own running maximum, sum and
// output (FlashAttention-2's register layout, as attention_prefill_mma.cu), and the 4 warps'
// states are merged in shared memory at the end into the output or the split's partial state
// (attention_decode.cuh), which combine_kernel merges as it merges the CUDA-core kernel's.
// Rows past G (zero queries) are computed and dropped. The probabilities are rounded to bf16 for
// the P V product and quantized K/V are dequantized to bf16 (2^-9 relative each, as the prefill
// kernel).
#include <cuda_runtime.h>

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
static_assert(kWarpKeys == 16, "one k16 step of P V per warp and tile");

template <int D>
constexpr int smem_bytes() {
  return (kRows + 4 * kBN) * (D + 8) * 2;  // Q, 2 stages of K + V; rows padded by 16 bytes
}
// The merge area (kWarps x kRows x D floats) reuses the K/V stages.
static_assert(kWarps * kRows * 64 * 4 <= 4 * kBN * (64 + 8) * 2);
static_assert(kWarps * kRows * 256 * 4 <= 4 * kBN * (256 + 8) * 2);

// KT: the cache dtype (BF16, F8E4M3 or U4X2). G (rows_per_block) <= 16 query heads of KV head
// (blockIdx.y * G) / group.
template <int D, DType KT>
// Blocks per SM: 3 for bf16 up to head_dim 128 (168 registers, 74 KB of shared memory); the
// quantized forms keep the next tile's bytes in registers (245 at 128: a cap for 3 blocks spilled).
__global__ void __launch_bounds__(kThreads, D <= 128 && !kIsQuantKv<KT> ? 3 : 1)
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
  constexpr int LD = D + 8, CH = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [kRows][LD]
  bf16* Ks = Qs + kRows * LD;                // [2][kBN][LD]
  bf16* Vs = Ks + 2 * kBN * LD;              // [2][kBN][LD]
  __shared__ float sm_m[kWarps][kRows], sm_l[kWarps][kRows];
  const int G = rows_per_block;
  const int hq0 = blockIdx.y * G, kh = hq0 / (a.hq / a.hk);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int seq = a.token_seq[t];
  const int k_begin = split * kps, k_end = min(n_keys, k_begin + kps);
  const int n_tiles = (k_end - k_begin + kBN - 1) / kBN;
  const bf16* q = static_cast<const bf16*>(a.q);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;

  for (int idx = tid; idx < kRows * CH; idx += kThreads) {
    const int r = idx / CH, c = idx % CH;
    const bool valid = r < G;
    const bf16* src = valid ? q + (static_cast<int64_t>(t) * a.hq + hq0 + r) * D + c * 8 : q;
    cp_async16(Qs + r * LD + c * 8, src, valid);
  }
  auto load_kv = [&](int j, int buf) {
    bf16* ks = Ks + buf * kBN * LD;
    bf16* vs = Vs + buf * kBN * LD;
#pragma unroll
    for (int i = 0; i < kBN * CH / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH, key = k_begin + j * kBN + r;
      const bool valid = key < k_end;
      const int64_t off = valid ? prefill::kv_row(pt, key, a.page_size, a.hk, kh, D) + c * 8 : 0;
      cp_async16(ks + r * LD + c * 8, kc + off, valid);
      cp_async16(vs + r * LD + c * 8, vc + off, valid);
    }
  };
  // Quantized caches: this thread's chunks of a K/V tile in registers (bytes and scales), then
  // decoded into the tile's bf16 rows; keys past the split are stored as zeros.
  constexpr bool kQuant = kIsQuantKv<KT>;
  constexpr int NCH = kBN * CH / kThreads;
  constexpr bool kPrefetch = D <= 128;
  struct Staged {
    uint2 k[NCH], v[NCH];
    float ks[NCH], vs[NCH];
  };
  auto fetch = [&](int j, Staged& st) {
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH, key = k_begin + j * kBN + r;
      st.k[i] = st.v[i] = make_uint2(0u, 0u);
      st.ks[i] = st.vs[i] = 0.f;
      if (key < k_end) {
        const int page = pt[key / a.page_size];
        const int64_t row =
            (static_cast<int64_t>(page) * a.page_size + key % a.page_size) * a.hk + kh;
        st.k[i] = kv_load8<KT>(static_cast<const uint8_t*>(a.k_cache), row, D, c * 8);
        st.v[i] = kv_load8<KT>(static_cast<const uint8_t*>(a.v_cache), row, D, c * 8);
        st.ks[i] = kv_scale<KT>(a.k_scales, row, D, c * 8);
        st.vs[i] = kv_scale<KT>(a.v_scales, row, D, c * 8);
      }
    }
  };
  auto store = [&](const Staged& st, int buf) {
    bf16* ks = Ks + buf * kBN * LD;
    bf16* vs = Vs + buf * kBN * LD;
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH;
      float f[8];
      kv_unpack8<KT>(st.k[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= st.ks[i];
      *reinterpret_cast<uint4*>(ks + r * LD + c * 8) = pack8(f);
      kv_unpack8<KT>(st.v[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= st.vs[i];
      *reinterpret_cast<uint4*>(vs + r * LD + c * 8) = pack8(f);
    }
  };
  [[maybe_unused]] Staged staged;
  if constexpr (kQuant) {
    fetch(0, staged);
    store(staged, 0);
  } else {
    load_kv(0, 0);
  }
  cp_commit();

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
    // Buffer (it + 1) & 1 was last read in iteration it - 1 (before its closing barrier).
    if constexpr (kQuant) {
      if (it + 1 < n_tiles) {
        fetch(it + 1, staged);
        if constexpr (!kPrefetch) store(staged, (it + 1) & 1);
      }
    } else {
      if (it + 1 < n_tiles) load_kv(it + 1, (it + 1) & 1);
    }
    cp_commit();   // possibly empty: keeps the group count uniform
    cp_wait<1>();  // everything but the newest group: Q and tile `it` have landed
    __syncthreads();
    if (kQInRegisters && it == 0) {
#pragma unroll
      for (int kk = 0; kk < (kQInRegisters ? D / 16 : 0); ++kk)
        ldsm_x4(qa[kk], Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
    }
    const int kb = k_begin + it * kBN + wk;  // this warp's first key
    if (kb < k_end) {                        // warp-uniform
      const bf16* ks = Ks + (it & 1) * kBN * LD;
      const bf16* vs = Vs + (it & 1) * kBN * LD;
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
        mma(sc[0], qf, b[0], b[1]);
        mma(sc[1], qf, b[2], b[3]);
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
        pa[j * 2] = pack_bf16(p0, p1);
        pa[j * 2 + 1] = pack_bf16(p2, p3);
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
        mma(o[2 * dp], pa, b[0], b[1]);
        mma(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    if constexpr (kQuant && kPrefetch) {
      if (it + 1 < n_tiles) store(staged, (it + 1) & 1);
    }
    __syncthreads();  // this buffer is refilled by the load issued in the next iteration
  }

  // Merge the 4 warps' states (rows < G) through shared memory; the K/V stages are free now.
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
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      orow[i * 8] = o[i][2 * h];
      orow[i * 8 + 1] = o[i][2 * h + 1];
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
  constexpr int smem = smem_bytes<D>();
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
