// Sampling on the GPU, so that only token ids cross to the host: greedy argmax, and
// Backend::sample() (penalties, temperature, top-k, top-p, min-p, one seeded draw).
#include <cfloat>
#include <cstdint>

#include "backend/backend.h"

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

// Folds element i's value v into a thread's running (best, best_i): a larger value wins; the
// caller visits its elements in ascending index, so the first maximum a thread sees is its lowest.
__device__ __forceinline__ void argmax_fold(float v, int64_t i, float& best, int32_t& best_i) {
  if (v > best) {
    best = v;
    best_i = static_cast<int32_t>(i);
  }
}

// One block per row. kVec: the row is read in 16-byte vectors (the row start 16-byte aligned and
// vocab a multiple of the vector), kUnroll vectors in flight per thread before they are folded in
// index order: one multiprocessor reads a 152K-token f32 row in 12.7 us instead of ~60 us with one
// 4-byte load in flight per thread (ncu, H200, 2026-12-02). Ties go to the lowest index.
template <typename T, bool kVec>
__global__ void argmax_kernel(const T* __restrict__ logits, int64_t vocab, int32_t* ids) {
  pdl_wait();
  pdl_trigger();
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float best = -INFINITY;
  int32_t best_i = 0x7fffffff;
  if constexpr (kVec) {
    constexpr int kPer = 16 / sizeof(T), kUnroll = 4;
    const int64_t vectors = vocab / kPer, step = static_cast<int64_t>(blockDim.x) * kUnroll;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    for (int64_t base = threadIdx.x; base < vectors; base += step) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t at = base + static_cast<int64_t>(u) * blockDim.x;
        v[u] = at < vectors ? __ldg(xv + at) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t at = base + static_cast<int64_t>(u) * blockDim.x;
        if (at >= vectors) break;
        const T* e = reinterpret_cast<const T*>(&v[u]);
#pragma unroll
        for (int j = 0; j < kPer; ++j) argmax_fold(to_f32(e[j]), at * kPer + j, best, best_i);
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
      argmax_fold(to_f32(x[i]), i, best, best_i);  // strided ascending
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ov > best || (ov == best && oi < best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    best = lane < warps ? sv[lane] : -INFINITY;
    best_i = lane < warps ? si[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (ov > best || (ov == best && oi < best_i)) {
        best = ov;
        best_i = oi;
      }
    }
    if (lane == 0) ids[row] = best_i == 0x7fffffff ? 0 : best_i;
  }
}

// argmax_kernel over `rows` rows, vectorized where the rows allow it.
template <typename T>
void argmax_rows(const T* logits, int64_t rows, int64_t vocab, int32_t* ids, cudaStream_t s) {
  const bool vec = reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                   (vocab * static_cast<int64_t>(sizeof(T))) % 16 == 0;
  if (vec)
    launch_k(argmax_kernel<T, true>, static_cast<unsigned>(rows), 1024, 0, s, logits, vocab, ids);
  else
    launch_k(argmax_kernel<T, false>, static_cast<unsigned>(rows), 1024, 0, s, logits, vocab, ids);
}

}  // namespace

void launch_argmax(const void* logits, DType t, int64_t rows, int64_t vocab, int32_t* ids,
                   cudaStream_t s) {
  if (rows == 0) return;
  SYV_DISPATCH_FLOAT(t, T,
                     [&] { argmax_rows(static_cast<const T*>(logits), rows, vocab, ids, s); });
}

// ---- Backend::sample() ------------------------------------------------------------------------
//
// work = logits with the penalties applied (one block per row; entries are distinct tokens).
// Then one block per non-greedy row: the kept set is the first K tokens of the order
// (logit desc, id asc), K = min(top_k, K_p, K_m), found by radix selects over order-preserving
// 32-bit keys; probability mass is kept in fixed point (2^-40 units, integer atomics) so every
// sum is exact and the result does not depend on the order threads add in (reproducible).
// The draw walks the kept tokens in id order: the same distribution as the CPU sampler's walk in
// sorted order, but not the same token for the same uniform.

namespace {

__global__ void penalties_kernel(const float* __restrict__ logits, int64_t vocab,
                                 const SampleRow* __restrict__ rows,
                                 const SamplePenalty* __restrict__ pen, float* work) {
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const float* x = logits + r * vocab;
  float* w = work + r * vocab;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) w[i] = x[i];
  __syncthreads();
  const SampleRow row = rows[r];
  for (int32_t e = row.penalty_begin + static_cast<int32_t>(threadIdx.x); e < row.penalty_end;
       e += static_cast<int32_t>(blockDim.x)) {
    const SamplePenalty p = pen[e];
    if (p.token < 0 || p.token >= vocab) continue;
    float v = w[p.token];
    // Explicit roundings (no FMA contraction): bit-equal to apply_penalties() on the host.
    if (p.repeated)
      v = v > 0 ? __fdiv_rn(v, row.repetition_penalty) : __fmul_rn(v, row.repetition_penalty);
    if (p.output_count > 0)
      v = __fsub_rn(
          v, __fadd_rn(row.presence_penalty,
                       __fmul_rn(row.frequency_penalty, static_cast<float>(p.output_count))));
    w[p.token] = v;
  }
}

constexpr int kSampleThreads = 1024;
constexpr double kMassScale = 1099511627776.0;  // 2^40

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t fixed_mass(float x, float m, float inv_t) {
  const float p = expf((x - m) * inv_t);  // in [0, 1]
  return static_cast<uint64_t>(static_cast<double>(p) * kMassScale);
}

struct SelectState {
  uint32_t prefix, mask;
  uint64_t remaining;    // rank (1-based) or mass still to cover inside the current prefix
  uint32_t count_above;  // tokens with a larger key than the prefix's
  uint64_t mass_above;
  uint32_t count_eq;  // after the last pass: tokens with key == prefix
  uint64_t mass_eq;
};

// The key of the token at rank `target` (by_mass false) or the key where the cumulative mass first
// reaches `target` (by_mass true), in key-descending order. target >= 1 and <= the total.
__device__ void radix_select(const float* x, int64_t vocab, float m, float inv_t, bool by_mass,
                             uint64_t target, uint32_t floor_key, uint32_t* s_cnt,
                             unsigned long long* s_mass, SelectState* st) {
  if (threadIdx.x == 0) *st = SelectState{0u, 0u, target, 0u, 0ull, 0u, 0ull};
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
      s_cnt[b] = 0;
      s_mass[b] = 0;
    }
    __syncthreads();
    const uint32_t prefix = st->prefix, mask = st->mask;
    // Warp-aggregated histogram: lanes with the same bin add once (the first passes put most
    // tokens in a few bins; unaggregated shared atomics serialise on them).
    const int lane = threadIdx.x & 31;
    for (int64_t base = 0; base < vocab; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      bool in = false;
      uint32_t b = 0;
      uint64_t q = 0;
      if (i < vocab) {
        const float v = x[i];
        if (v == v) {
          const uint32_t k = order_key(v);
          if (k >= floor_key && (k & mask) == prefix) {
            in = true;
            b = (k >> shift) & 255u;
            q = fixed_mass(v, m, inv_t);
          }
        }
      }
      const unsigned active = __ballot_sync(0xffffffffu, in);
      if (in) {
        const unsigned grp = __match_any_sync(active, b);
        const uint32_t lo = __reduce_add_sync(grp, static_cast<uint32_t>(q & 0xfffffu));
        const uint32_t hi = __reduce_add_sync(grp, static_cast<uint32_t>(q >> 20));
        if (lane == __ffs(grp) - 1) {
          atomicAdd(&s_cnt[b], static_cast<uint32_t>(__popc(grp)));
          const unsigned long long sum = (static_cast<unsigned long long>(hi) << 20) + lo;
          if (sum) atomicAdd(&s_mass[b], sum);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t cum = 0;
      int sel = -1;
      int last_nonempty = -1;
      for (int b = 255; b >= 0; --b) {
        if (s_cnt[b] == 0) continue;
        last_nonempty = b;
        const uint64_t w = by_mass ? s_mass[b] : s_cnt[b];
        if (cum + w >= st->remaining) {
          sel = b;
          break;
        }
        cum += w;
        st->count_above += s_cnt[b];
        st->mass_above += s_mass[b];
      }
      if (sel < 0) {  // rounding left the target beyond the total: take the last bin
        sel = last_nonempty < 0 ? 0 : last_nonempty;
        if (last_nonempty >= 0) {
          st->count_above -= s_cnt[sel];
          st->mass_above -= s_mass[sel];
          cum -= by_mass ? s_mass[sel] : s_cnt[sel];
        }
      }
      st->remaining -= cum;
      st->prefix |= static_cast<uint32_t>(sel) << shift;
      st->mask |= 255u << shift;
      st->count_eq = s_cnt[sel];
      st->mass_eq = s_mass[sel];
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const float* __restrict__ work, int64_t vocab, const SampleRow* __restrict__ rows,
                  int32_t* ids) {
  pdl_wait();
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const SampleRow row = rows[r];
  if (row.temperature == 0.0f) return;  // argmax already wrote the id
  const float* x = work + r * vocab;
  __shared__ uint32_t s_cnt[256];
  __shared__ unsigned long long s_mass[256];
  __shared__ SelectState st;
  __shared__ float s_red[32];
  __shared__ unsigned long long s_red64[32];
  __shared__ uint32_t s_red32[32];
  __shared__ unsigned long long s_scan[kSampleThreads];
  __shared__ uint32_t s_scan_eq[kSampleThreads];
  __shared__ unsigned long long s_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

  // 1. The maximum.
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = x[i];
    if (v == v) m = fmaxf(m, v);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) s_red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float mm = -INFINITY;
    for (int w = 0; w < warps; ++w) mm = fmaxf(mm, s_red[w]);
    s_red[0] = mm;
  }
  __syncthreads();
  m = s_red[0];
  const float inv_t = 1.0f / row.temperature;

  // 2. Valid tokens, total mass, K_m (tokens with p / p_max >= min_p: a prefix of the order).
  uint32_t valid = 0, n_minp = 0;
  uint64_t total = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = x[i];
    if (v != v) continue;
    ++valid;
    const float p = expf((v - m) * inv_t);
    total += static_cast<uint64_t>(static_cast<double>(p) * kMassScale);
    if (p >= row.min_p) ++n_minp;
  }
  for (int o = 16; o > 0; o >>= 1) {
    valid += __shfl_xor_sync(0xffffffffu, valid, o);
    n_minp += __shfl_xor_sync(0xffffffffu, n_minp, o);
    total += __shfl_xor_sync(0xffffffffu, total, o);
  }
  __syncthreads();
  if (lane == 0) {
    s_red32[warp] = valid;
    s_scan_eq[warp] = n_minp;
    s_red64[warp] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t a = 0, b = 0;
    unsigned long long c = 0;
    for (int w = 0; w < warps; ++w) {
      a += s_red32[w];
      b += s_scan_eq[w];
      c += s_red64[w];
    }
    s_red32[0] = a;
    s_scan_eq[0] = b;
    s_total = c;
  }
  __syncthreads();
  valid = s_red32[0];
  n_minp = row.min_p > 0.0f ? max(s_scan_eq[0], 1u) : valid;
  total = s_total;
  if (valid == 0) {
    if (threadIdx.x == 0) ids[r] = 0;
    return;
  }
  __syncthreads();

  // 3. top-k and its mass (top-p is relative to the top-k set, as on the CPU).
  uint32_t k_k = valid;
  uint64_t total_k = total;
  uint32_t floor_key = 0;
  if (row.top_k > 0 && static_cast<uint32_t>(row.top_k) < valid) {
    k_k = static_cast<uint32_t>(row.top_k);
    radix_select(x, vocab, m, inv_t, false, k_k, 0u, s_cnt, s_mass, &st);
    const uint64_t q = st.count_eq ? st.mass_eq / st.count_eq : 0;
    total_k = st.mass_above + st.remaining * q;
    floor_key = st.prefix;  // later selects stay inside the top-k set (and its boundary ties)
  }
  // 4. top-p: the shortest prefix whose mass reaches top_p of the top-k mass.
  uint32_t k_p = valid;
  if (row.top_p < 1.0f && total_k > 0) {
    double target = ceil(static_cast<double>(row.top_p) * static_cast<double>(total_k));
    uint64_t t = static_cast<uint64_t>(target);
    t = t < 1 ? 1 : (t > total ? total : t);
    __syncthreads();
    radix_select(x, vocab, m, inv_t, true, t, floor_key, s_cnt, s_mass, &st);
    const uint64_t q = st.count_eq ? st.mass_eq / st.count_eq : 0;
    uint64_t j = q ? (st.remaining + q - 1) / q : 1;
    j = j < 1 ? 1 : (j > st.count_eq ? st.count_eq : j);
    k_p = st.count_above + static_cast<uint32_t>(j);
  }
  const uint32_t k = min(k_k, min(k_p, n_minp));

  // 5. The boundary: key t and how many of the tokens with key t (lowest ids first) stay.
  __syncthreads();
  radix_select(x, vocab, m, inv_t, false, k, floor_key, s_cnt, s_mass, &st);
  const uint32_t tkey = st.prefix;
  const uint64_t need = st.remaining;

  // 6. Each thread owns a contiguous id range: ranks among the boundary ties, kept mass, scans.
  const int64_t per = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t lo0 = per * static_cast<int64_t>(threadIdx.x);
  const int64_t lo = lo0 < vocab ? lo0 : vocab, hi = lo + per < vocab ? lo + per : vocab;
  uint32_t eq = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const float v = x[i];
    if (v == v && order_key(v) == tkey) ++eq;
  }
  s_scan_eq[threadIdx.x] = eq;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t run = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const uint32_t c = s_scan_eq[t];
      s_scan_eq[t] = run;
      run += c;
    }
  }
  __syncthreads();
  uint64_t kept = 0;
  {
    uint32_t rank = s_scan_eq[threadIdx.x];
    for (int64_t i = lo; i < hi; ++i) {
      const float v = x[i];
      if (v != v) continue;
      const uint32_t key = order_key(v);
      bool keep = key > tkey;
      if (key == tkey) keep = rank++ < need;
      if (keep) kept += fixed_mass(v, m, inv_t);
    }
  }
  s_scan[threadIdx.x] = kept;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long run = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const unsigned long long c = s_scan[t];
      s_scan[t] = run;
      run += c;
    }
    s_total = run;  // positive: the token with the largest key is always kept
  }
  __syncthreads();
  const uint64_t kept_total = s_total;
  uint64_t u = static_cast<uint64_t>(row.uniform * static_cast<double>(kept_total));
  if (u >= kept_total) u = kept_total - 1;
  const uint64_t base = s_scan[threadIdx.x];
  if (kept > 0 && u >= base && u < base + kept) {
    uint64_t cum = base;
    uint32_t rank = s_scan_eq[threadIdx.x];
    int32_t pick = -1;
    for (int64_t i = lo; i < hi; ++i) {
      const float v = x[i];
      if (v != v) continue;
      const uint32_t key = order_key(v);
      bool keep = key > tkey;
      if (key == tkey) keep = rank++ < need;
      if (!keep) continue;
      cum += fixed_mass(v, m, inv_t);
      pick = static_cast<int32_t>(i);
      if (u < cum) break;
    }
    ids[r] = pick;
  }
}

}  // namespace

void launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleRow* dev_rows,
                   const SamplePenalty* dev_penalties, bool any_penalty, bool any_random,
                   float* work, int32_t* ids, cudaStream_t s) {
  if (rows == 0) return;
  const float* x = logits;
  if (any_penalty) {
    launch_k(penalties_kernel, static_cast<unsigned>(rows), 1024, 0, s, logits, vocab, dev_rows,
             dev_penalties, work);
    x = work;
  }
  argmax_rows(x, rows, vocab, ids, s);
  if (any_random)
    launch_k(sample_kernel, static_cast<unsigned>(rows), kSampleThreads, 0, s, x, vocab, dev_rows,
             ids);
}

}  // namespace syv::cuda
