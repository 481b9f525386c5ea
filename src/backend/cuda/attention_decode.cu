// Split-KV flash decoding over paged K/V on CUDA cores, GQA-aware, and the dispatch between it and
// the tensor-core kernel (attention_decode_mma.cu, the default where decode_mma_heads_per_block()
// takes the shape: GQA groups >= 2 at head_dim 64 / 128 / 256; both share attention_decode.cuh's
// split and partial layouts and this file's combine kernel). Here: one block per (token, group of
// G query heads sharing one KV head, split of the context). Each K/V row is read once per block
// and used for all G heads. A second kernel merges the splits, or (attention_merged_combine(), off
// by default) the last split block of each (token, group) to finish, found with a per-group
// arrival counter.
//
// The grid's split count depends only on the batch shape (decode_attention_splits()); each block
// derives its key range on the device from its own token's context (split_keys()), so one launch
// shape (one CUDA graph) serves every context at full parallelism. Blocks whose range starts past
// the context do nothing; the merge, which derives the same ranges, reads only the used splits.
//
// Quantized caches (fp8 / int4, backend/kv_cache_view.h) take the same kernel with the same lane
// layout: each lane loads its 8 elements' bytes (8 for fp8, 4 for int4) and their scale, decodes
// them in registers (quant_convert.cuh) and applies the scale to its partial dot product before
// the lanes' sum (one scale per key for fp8, per 32-element group for int4: a lane's 8 elements
// lie in one group), and to the value's probability weight (p * scale, per lane's group for
// int4); the softmax normaliser sums the unscaled p. At G = 1, 2 twice the keys per step are in
// flight (the loads are half or a quarter as wide).
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

using decode::kLog2e;
using decode::split_keys;
using decode::used_splits;

constexpr int kWarps = 4;
constexpr int kCombineBatch = 16;  // splits whose partials the combine kernel loads at once

std::atomic<int> g_split_align{-1};  // -1: not read from SYV_ATTN_SPLIT_ALIGN yet; 0: default

// Keys per split are a multiple of this: by default kDecodeSplitAlignOneToken for a single-token
// batch (batch-1 decode: 64 splits of a short context are mostly empty at 64 keys), else
// kDecodeSplitAlign; SYV_ATTN_SPLIT_ALIGN = 16, 32, 64 or 128 (A/B timing) or
// set_attention_split_align() fix it for every batch. Host-side only and a function of the batch
// shape: passed to the kernels, so a captured graph keeps its value.
int32_t decode_split_align(int32_t tokens) {
  int v = g_split_align.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_ATTN_SPLIT_ALIGN");
    v = e ? std::atoi(e) : 0;
    if (v != 16 && v != 32 && v != 64 && v != 128) v = 0;
    g_split_align.store(v, std::memory_order_relaxed);
  }
  if (v > 0) return v;
  return tokens == 1 ? kDecodeSplitAlignOneToken : kDecodeSplitAlign;
}

// Lanes per key: D / 8 (8 elements per lane: 16 bytes of bf16, 8 of fp8, 4 of int4); keys per
// warp step: 32 / lanes-per-key. KT: the cache dtype (BF16, F8E4M3 or U4X2).
template <int D, int G, DType KT>
__global__ void __launch_bounds__(kWarps * 32)
    decode_kernel(AttentionArgs a, int32_t splits, int32_t fixed_keys_per_split, int32_t align,
                  float* partial, unsigned* counters) {
  // Batch metadata (positions, page table) is uploaded before a forward's first kernel and no
  // kernel writes it, so it may be read before the dependency wait: blocks past their token's
  // context (no keys, no partial, no arrival) leave before the previous kernel has finished.
  const int t = blockIdx.x, split = blockIdx.z;
  const int n_keys = a.positions[t] + 1;
  const int keys_per_split = split_keys(n_keys, splits, fixed_keys_per_split, align);
  const int used = used_splits(n_keys, splits, keys_per_split);
  if (split >= used) return;
  pdl_wait();
  pdl_trigger();
  constexpr int LPK = D / 8, KPW = 32 / LPK, SUBS = kWarps * KPW;
  __shared__ float sm_m[SUBS][G], sm_l[SUBS][G];
  __shared__ float sm_acc[SUBS][G][D];
  const int group = a.hq / a.hk;
  const int hq0 = blockIdx.y * G, kh = hq0 / group;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sub = lane / LPK, li = lane % LPK;
  const int seq = a.token_seq[t];
  const int k_begin = split * keys_per_split;
  const int k_end = min(n_keys, k_begin + keys_per_split);
  const bf16* q = static_cast<const bf16*>(a.q);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;
  const float qscale = a.scale * kLog2e;
  constexpr bool kQuant = kIsQuantKv<KT>;
  using Raw = std::conditional_t<kQuant, uint2, uint4>;  // one lane's 8 elements of a K/V row

  float qf[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    unpack8(*reinterpret_cast<const uint4*>(q + (static_cast<int64_t>(t) * a.hq + hq0 + g) * D +
                                            li * 8),
            qf[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      qf[g][j] *= qscale;
      acc[g][j] = 0.f;
    }
    m[g] = -INFINITY;
    l[g] = 0.f;
  }

  // Each lane group takes U keys per step (U K/V loads in flight before any use); one softmax
  // rescale per step. Keys of one step: kb + u * KPW + sub.
  // Quantized caches take twice the keys per step at G = 1, 2 (their loads are half or a quarter
  // as wide, and the registers allow it: at most 128, four blocks per SM as bf16); at G = 4, 8 the
  // doubled step took 168 / 255 registers (3 / 2 blocks per SM on sm_90a, ptxas -v), which at
  // batch 64 (one split of 512 blocks on 132 SMs) would leave a second, mostly empty wave.
  constexpr int U = (G >= 8 ? 2 : 4) * (kQuant && G <= 2 ? 2 : 1);
  for (int kb = k_begin + warp * KPW * U; kb < k_end; kb += SUBS * U) {
    Raw kr[U], vr[U];
    float ksc[U], vsc[U];  // quantized caches: this lane's K / V scales
    bool valid[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = kb + u * KPW + sub;
      valid[u] = key < k_end;
      kr[u] = vr[u] = Raw{};
      ksc[u] = vsc[u] = 0.f;
      if (valid[u]) {
        const int64_t row = prefill::paged_row(pt, key, a.page_size, a.hk, kh);
        if constexpr (kQuant) {
          const uint8_t* kq = static_cast<const uint8_t*>(a.k_cache);
          const uint8_t* vq = static_cast<const uint8_t*>(a.v_cache);
          kr[u] = kv_load8<KT>(kq, row, D, li * 8);
          vr[u] = kv_load8<KT>(vq, row, D, li * 8);
          ksc[u] = kv_scale<KT>(a.k_scales, row, D, li * 8);
          vsc[u] = kv_scale<KT>(a.v_scales, row, D, li * 8);
        } else {
          kr[u] = *reinterpret_cast<const uint4*>(kc + row * D + li * 8);
          vr[u] = *reinterpret_cast<const uint4*>(vc + row * D + li * 8);
        }
      }
    }
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      if constexpr (kQuant) {
        kv_unpack8<KT>(kr[u], kf);
      } else {
        unpack8(kr[u], kf);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float d = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) d = fmaf(qf[g][j], kf[j], d);
        if constexpr (kQuant) d *= ksc[u];
#pragma unroll
        for (int o = LPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        s[u][g] = valid[u] ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = s[0][g];
#pragma unroll
      for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][g]);
      const float m_new = fmaxf(m[g], mx);
      if (m_new == -INFINITY) continue;
      const float alpha = exp2f(m[g] - m_new);  // 0 when m[g] is -inf
      l[g] *= alpha;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] *= alpha;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float p = exp2f(s[u][g] - m_new);  // 0 when invalid
        float vf[8];
        float pv = p;  // the weight of this value row: p, times its scale when quantized
        if constexpr (kQuant) {
          kv_unpack8<KT>(vr[u], vf);
          pv *= vsc[u];
        } else {
          unpack8(vr[u], vf);
        }
        l[g] += p;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(pv, vf[j], acc[g][j]);
      }
      m[g] = m_new;
    }
  }

  // Merge the SUBS partial states of this block.
  const int me = warp * KPW + sub;
  if (li == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      sm_m[me][g] = m[g];
      sm_l[me][g] = l[g];
    }
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < SUBS; ++i) mx = fmaxf(mx, sm_m[i][g]);
    const float f = (m[g] == -INFINITY) ? 0.f : exp2f(m[g] - mx);
#pragma unroll
    for (int j = 0; j < 8; ++j) sm_acc[me][g][li * 8 + j] = acc[g][j] * f;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += kWarps * 32) {
    const int g = e / D, d = e % D;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < SUBS; ++i) mx = fmaxf(mx, sm_m[i][g]);
    float sum = 0.f, lsum = 0.f;
#pragma unroll
    for (int i = 0; i < SUBS; ++i) {
      sum += sm_acc[i][g][d];
      lsum += (sm_m[i][g] == -INFINITY) ? 0.f : sm_l[i][g] * exp2f(sm_m[i][g] - mx);
    }
    const int64_t row = static_cast<int64_t>(t) * a.hq + hq0 + g;
    if (used == 1) {  // the merge of one split would give these bits too (weight 1)
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
  if (used == 1 || counters == nullptr) return;

  // Merged combine: the last of the used split blocks of this (token, group) to arrive merges
  // them, with the arithmetic of combine_kernel (so the output is the same bit for bit): per head
  // the split weights exp2(m_s - max) (0 for empty splits) and the weighted sum of l_s first, then
  // each output element as the weighted sum over splits in index order, its loads batched.
  __shared__ float sm_w[G][kMaxMergedSplits];
  __shared__ float sm_lsum[G];
  __shared__ bool is_last;
  __threadfence();  // this block's partials are visible to the block that merges
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* c = counters + static_cast<int64_t>(t) * gridDim.y + blockIdx.y;
    const unsigned arrived = atomicAdd(c, 1u);
    is_last = arrived == static_cast<unsigned>(used - 1);
    if (is_last) *c = 0;  // every block of this group has arrived: ready for the next launch
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const int64_t row0 = static_cast<int64_t>(t) * a.hq + hq0;
  // sm_w: the split maxima, then (one warp per head) the split weights; sm_lsum: sum of w * l.
  for (int e = threadIdx.x; e < G * used; e += kWarps * 32) {
    const int g = e / used, sp = e % used;
    sm_w[g][sp] = __ldcg(partial + ((row0 + g) * splits + sp) * (D + 2) + D);
  }
  __syncthreads();
  for (int g = warp; g < G; g += kWarps) {
    float mx = -INFINITY;
    for (int sp = 0; sp < used; ++sp) mx = fmaxf(mx, sm_w[g][sp]);
    __syncwarp();
    for (int sp = lane; sp < used; sp += 32) {
      const float ms = sm_w[g][sp];
      sm_w[g][sp] = ms == -INFINITY ? 0.f : exp2f(ms - mx);
    }
    __syncwarp();
    if (lane == 0) {
      float lsum = 0.f;
      for (int sp = 0; sp < used; ++sp) {
        const float w = sm_w[g][sp];
        if (w == 0.f) continue;  // combine_kernel skips empty splits
        lsum += w * __ldcg(partial + ((row0 + g) * splits + sp) * (D + 2) + D + 1);
      }
      sm_lsum[g] = lsum;
    }
  }
  __syncthreads();
  constexpr int kThreads = kWarps * 32, kPer = (G * D + kThreads - 1) / kThreads, kBatch = 4;
  float sum[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) sum[j] = 0.f;
  for (int s0 = 0; s0 < used; s0 += kBatch) {
    float val[kPer][kBatch];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = threadIdx.x + j * kThreads, g = e / D, d = e % D;
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        val[j][b] = (e < G * D && s0 + b < used)
                        ? __ldcg(partial + ((row0 + g) * splits + s0 + b) * (D + 2) + d)
                        : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = threadIdx.x + j * kThreads, g = (e / D) % G;
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const float w = s0 + b < used ? sm_w[g][s0 + b] : 0.f;
        if (w != 0.f) sum[j] += w * val[j][b];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = threadIdx.x + j * kThreads, g = e / D, d = e % D;
    if (e >= G * D) continue;
    const float lsum = sm_lsum[g];
    static_cast<bf16*>(a.out)[(row0 + g) * D + d] =
        __float2bfloat16_rn(lsum > 0.f ? sum[j] / lsum : 0.f);
  }
}

// Merges the used splits' partial states per (token, query head), in split order (empty ones, with
// m = -inf, skipped). One block of D threads per row; rows of one used split were written by the
// decode kernel directly.
template <int D>
__global__ void combine_kernel(const float* __restrict__ partial, int32_t splits,
                               int32_t fixed_keys_per_split, int32_t align,
                               const int32_t* __restrict__ positions, int32_t hq, bf16* out) {
  const int64_t row = blockIdx.x;
  const int n_keys = positions[row / hq] + 1;  // metadata: readable before the wait
  const int used =
      used_splits(n_keys, splits, split_keys(n_keys, splits, fixed_keys_per_split, align));
  if (used == 1) return;
  pdl_wait();
  pdl_trigger();
  const int d = threadIdx.x;
  const float* p = partial + row * splits * (D + 2);
  float mx = -INFINITY, sum = 0.f, lsum = 0.f;
  // One batch of loads for up to kCombineBatch splits (short contexts: one L2 round trip), else
  // two passes in batches; the same arithmetic either way (the maximum over all splits, then the
  // weighted sums in split order).
  if (used <= kCombineBatch) {
    float ms[kCombineBatch], ps[kCombineBatch], ls[kCombineBatch];
#pragma unroll
    for (int s = 0; s < kCombineBatch; ++s) {
      ms[s] = s < used ? p[s * (D + 2) + D] : -INFINITY;
      ps[s] = s < used ? p[s * (D + 2) + d] : 0.f;
      ls[s] = s < used ? p[s * (D + 2) + D + 1] : 0.f;
    }
#pragma unroll
    for (int s = 0; s < kCombineBatch; ++s) mx = fmaxf(mx, ms[s]);
#pragma unroll
    for (int s = 0; s < kCombineBatch; ++s) {
      if (ms[s] == -INFINITY) continue;
      const float w = exp2f(ms[s] - mx);
      sum += w * ps[s];
      lsum += w * ls[s];
    }
  } else {
    for (int s0 = 0; s0 < used; s0 += kCombineBatch) {
      float ms[kCombineBatch];
#pragma unroll
      for (int s = 0; s < kCombineBatch; ++s)
        ms[s] = s0 + s < used ? p[(s0 + s) * (D + 2) + D] : -INFINITY;
#pragma unroll
      for (int s = 0; s < kCombineBatch; ++s) mx = fmaxf(mx, ms[s]);
    }
    for (int s0 = 0; s0 < used; s0 += kCombineBatch) {
      float ms[kCombineBatch], ps[kCombineBatch], ls[kCombineBatch];
#pragma unroll
      for (int s = 0; s < kCombineBatch; ++s) {
        ms[s] = s0 + s < used ? p[(s0 + s) * (D + 2) + D] : -INFINITY;
        ps[s] = s0 + s < used ? p[(s0 + s) * (D + 2) + d] : 0.f;
        ls[s] = s0 + s < used ? p[(s0 + s) * (D + 2) + D + 1] : 0.f;
      }
#pragma unroll
      for (int s = 0; s < kCombineBatch; ++s) {
        if (ms[s] == -INFINITY) continue;
        const float w = exp2f(ms[s] - mx);
        sum += w * ps[s];
        lsum += w * ls[s];
      }
    }
  }
  out[row * D + d] = __float2bfloat16_rn(lsum > 0.f ? sum / lsum : 0.f);
}

// Any head_dim up to 256: one warp per (token, query head), one key per step, lane d holds head
// elements d, d + 32, ... (a slow, simple path for shapes the tuned kernels do not cover).
constexpr int kGenericMaxPerLane = 8;
__global__ void __launch_bounds__(128) generic_kernel(AttentionArgs a) {
  pdl_wait();
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + warp;  // t * hq + h
  if (row >= static_cast<int64_t>(a.tokens) * a.hq) return;
  const int t = static_cast<int>(row / a.hq), h = static_cast<int>(row % a.hq);
  const int kh = h / (a.hq / a.hk), D = a.head_dim;
  const bf16* q = static_cast<const bf16*>(a.q) + row * D;
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(a.token_seq[t]) * a.max_pages_per_seq;
  float qf[kGenericMaxPerLane], acc[kGenericMaxPerLane];
#pragma unroll
  for (int i = 0; i < kGenericMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    qf[i] = d < D ? __bfloat162float(q[d]) * a.scale * kLog2e : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int n_keys = a.positions[t] + 1;
  for (int key = 0; key < n_keys; ++key) {
    const int64_t base = prefill::kv_row(pt, key, a.page_size, a.hk, kh, D);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kGenericMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) s += qf[i] * __bfloat162float(kc[base + d]);
    }
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
    l = l * alpha + p;
#pragma unroll
    for (int i = 0; i < kGenericMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) acc[i] = acc[i] * alpha + p * __bfloat162float(vc[base + d]);
    }
    m = m_new;
  }
  bf16* out = static_cast<bf16*>(a.out) + row * D;
#pragma unroll
  for (int i = 0; i < kGenericMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[d] = __float2bfloat16_rn(l > 0.f ? acc[i] / l : 0.f);
  }
}

template <int D, int G, DType KT>
void launch_dg(const AttentionArgs& a, int32_t splits, int32_t keys_per_split, float* partial,
               unsigned* counters, cudaStream_t s) {
  dim3 grid(a.tokens, a.hq / G, splits);
  if (splits > kMaxMergedSplits) counters = nullptr;
  const int32_t align = decode_split_align(a.tokens);
  launch_k(decode_kernel<D, G, KT>, grid, kWarps * 32, 0, s, a, splits, keys_per_split, align,
           partial, counters);
  if (splits > 1 && counters == nullptr) {
    launch_k(combine_kernel<D>, a.tokens * a.hq, D, 0, s, partial, splits, keys_per_split, align,
             a.positions, a.hq, static_cast<bf16*>(a.out));
  }
}

template <int D, DType KT>
void launch_d(const AttentionArgs& a, int32_t splits, int32_t keys_per_split, float* partial,
              unsigned* counters, cudaStream_t s) {
  switch (a.hq / a.hk) {
    case 8:
      return launch_dg<D, 8, KT>(a, splits, keys_per_split, partial, counters, s);
    case 4:
      return launch_dg<D, 4, KT>(a, splits, keys_per_split, partial, counters, s);
    case 2:
      return launch_dg<D, 2, KT>(a, splits, keys_per_split, partial, counters, s);
    default:  // any group size
      return launch_dg<D, 1, KT>(a, splits, keys_per_split, partial, counters, s);
  }
}

std::atomic<int> g_merged_combine{-1};  // -1: not read from the environment yet
std::atomic<int> g_split_waves{-1};     // -1: not read from SYV_ATTN_SPLIT_WAVES yet
std::atomic<int> g_large_waves{-1};     // -1: not read from SYV_ATTN_SPLIT_WAVES_LARGE yet
std::atomic<int> g_forced_splits{-1};   // -1: not read from SYV_ATTN_SPLITS yet
std::atomic<int> g_decode_kernel{-1};   // -1: not read from SYV_ATTN_DECODE yet
std::atomic<int> g_mma_blocks{-1};      // -1: not read from SYV_ATTN_MMA_BLOCKS_PER_SM yet

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return (e && e[0]) ? std::atoi(e) : fallback;
}

}  // namespace

AttentionDecodeKernel attention_decode_kernel() {
  int v = g_decode_kernel.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_ATTN_DECODE");
    v = (e && std::string_view(e) == "cores") ? static_cast<int>(AttentionDecodeKernel::kCudaCores)
                                              : static_cast<int>(AttentionDecodeKernel::kAuto);
    g_decode_kernel.store(v, std::memory_order_relaxed);
  }
  return static_cast<AttentionDecodeKernel>(v);
}
void set_attention_decode_kernel(AttentionDecodeKernel k) {
  g_decode_kernel.store(static_cast<int>(k), std::memory_order_relaxed);
}

int decode_mma_heads_per_block(int64_t hq, int64_t hk, int64_t head_dim) {
  if (attention_decode_kernel() == AttentionDecodeKernel::kCudaCores) return 0;
  return decode::mma_heads_per_block(hq, hk, head_dim);
}

int32_t decode_attention_splits(int64_t tokens, int64_t hq, int64_t hk, int64_t head_dim,
                                DType cache_t, int sms) {
  int forced = g_forced_splits.load(std::memory_order_relaxed);
  if (forced < 0) {
    forced = std::max(0, env_int("SYV_ATTN_SPLITS", 0));
    g_forced_splits.store(forced, std::memory_order_relaxed);
  }
  if (forced > 0) return std::min(forced, kMaxDecodeSplits);
  if (const int rows = decode_mma_heads_per_block(hq, hk, head_dim); rows > 0) {
    int per_sm = g_mma_blocks.load(std::memory_order_relaxed);
    if (per_sm < 0) {  // 0: not set, the policy below
      per_sm = std::max(0, env_int("SYV_ATTN_MMA_BLOCKS_PER_SM", 0));
      g_mma_blocks.store(per_sm, std::memory_order_relaxed);
    }
    const int64_t blocks = std::max<int64_t>(1, tokens * (hq / rows));  // per split
    if (per_sm == 0 && decode::mma_resident_blocks(head_dim, cache_t) == 1) {
      // One resident block per SM: whole waves (see kDecodeMmaWholeWaves).
      return static_cast<int32_t>(
          std::clamp<int64_t>(int64_t{kDecodeMmaWholeWaves} * sms / blocks, 1, kMaxDecodeSplits));
    }
    const int64_t target = int64_t{per_sm > 0 ? per_sm : kDecodeMmaBlocksPerSm} * sms;
    return static_cast<int32_t>(
        std::clamp<int64_t>((target + blocks - 1) / blocks, 1, kMaxDecodeSplits));
  }
  int waves = g_split_waves.load(std::memory_order_relaxed);
  if (waves < 0) {
    waves = env_int("SYV_ATTN_SPLIT_WAVES", kDecodeSplitWaves);
    if (waves < 1) waves = kDecodeSplitWaves;
    g_split_waves.store(waves, std::memory_order_relaxed);
  }
  int large = g_large_waves.load(std::memory_order_relaxed);
  if (large < 0) {
    large = env_int("SYV_ATTN_SPLIT_WAVES_LARGE", kDecodeSplitWavesLarge);
    if (large < 1) large = kDecodeSplitWavesLarge;
    g_large_waves.store(large, std::memory_order_relaxed);
  }
  const int64_t group = hk > 0 ? hq / hk : 1;
  const int64_t g = (group == 2 || group == 4 || group == 8) ? group : 1;
  const int64_t blocks = std::max<int64_t>(1, tokens * (hq / g));  // per split
  const int64_t target = int64_t{blocks < sms ? waves : large} * sms;
  return static_cast<int32_t>(
      std::clamp<int64_t>((target + blocks - 1) / blocks, 1, kMaxDecodeSplits));
}
void set_attention_split_align(int align) {
  g_split_align.store(align == 16 || align == 32 || align == 64 || align == 128 ? align : 0,
                      std::memory_order_relaxed);
}
void set_attention_decode_splits(int splits) {
  g_forced_splits.store(std::max(0, splits), std::memory_order_relaxed);
}
void set_attention_split_waves(int waves, int waves_large) {
  g_split_waves.store(waves >= 1 ? waves : kDecodeSplitWaves, std::memory_order_relaxed);
  g_large_waves.store(waves_large >= 1 ? waves_large : kDecodeSplitWavesLarge,
                      std::memory_order_relaxed);
}

bool attention_merged_combine() {
  int v = g_merged_combine.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_ATTN_MERGED_COMBINE");
    v = (e && e[0] == '1') ? 1 : 0;
    g_merged_combine.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}
void set_attention_merged_combine(bool on) {
  g_merged_combine.store(on ? 1 : 0, std::memory_order_relaxed);
}

void launch_attention_decode(const AttentionArgs& a, int32_t splits, int32_t keys_per_split,
                             float* partial, unsigned* counters, cudaStream_t s) {
  if (!attention_merged_combine()) counters = nullptr;
  if (a.tokens == 0) return;
  if (a.q_t != DType::BF16 || a.out_t != DType::BF16 ||
      (a.cache_t != DType::BF16 && a.cache_t != DType::F8E4M3 && a.cache_t != DType::U4X2))
    cuda_fail(__FILE__, __LINE__, "attention dtypes",
              "CUDA paged attention needs bf16 q/out and a bf16, fp8 or int4 cache");
  const bool quant = a.cache_t != DType::BF16;
  if (quant && ((a.k_scales == nullptr || a.v_scales == nullptr) ||
                (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256)))
    cuda_fail(__FILE__, __LINE__, "quantized KV attention",
              "CUDA paged attention on an fp8 / int4 cache needs its scales and head_dim 64, 128 "
              "or 256");
  if (const int rows = decode_mma_heads_per_block(a.hq, a.hk, a.head_dim); rows > 0) {
    const int32_t align = decode_split_align(a.tokens);
    decode::launch_decode_mma(a, rows, splits, keys_per_split, align, partial, s);
    if (splits > 1) {
      auto combine = [&](auto d) {
        constexpr int D = decltype(d)::value;
        launch_k(combine_kernel<D>, a.tokens * a.hq, D, 0, s, partial, splits, keys_per_split,
                 align, a.positions, a.hq, static_cast<bf16*>(a.out));
      };
      if (a.head_dim == 64) combine(std::integral_constant<int, 64>{});
      if (a.head_dim == 128) combine(std::integral_constant<int, 128>{});
      if (a.head_dim == 256) combine(std::integral_constant<int, 256>{});
    }
    return;
  }
  auto by_dtype = [&](auto d) {
    constexpr int D = decltype(d)::value;
    switch (a.cache_t) {
      case DType::F8E4M3:
        return launch_d<D, DType::F8E4M3>(a, splits, keys_per_split, partial, counters, s);
      case DType::U4X2:
        return launch_d<D, DType::U4X2>(a, splits, keys_per_split, partial, counters, s);
      default:
        return launch_d<D, DType::BF16>(a, splits, keys_per_split, partial, counters, s);
    }
  };
  switch (a.head_dim) {
    case 64:
      return by_dtype(std::integral_constant<int, 64>{});
    case 128:
      return by_dtype(std::integral_constant<int, 128>{});
    case 256:
      return by_dtype(std::integral_constant<int, 256>{});
    default:
      if (a.head_dim > 32 * kGenericMaxPerLane)
        cuda_fail(__FILE__, __LINE__, "head_dim", "CUDA paged attention supports head_dim <= 256");
      launch_k(generic_kernel, ceil_div(int64_t{a.tokens} * a.hq, 4), 128, 0, s, a);
  }
}

}  // namespace syv::cuda
