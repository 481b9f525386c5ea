// Prefill attention over paged K/V, FlashAttention-2 style on tensor cores (WMMA bf16, fp32
// accumulation): one block of 4 warps per (64-row query tile of one sequence, query head); K/V
// tiles of 64 keys are gathered from the sequence's pages; online softmax in fp32. Each warp owns
// 16 query rows of S, P and O, so only the K/V tile loads need block barriers. Varlen: the tile
// list says which sequence and first token each block works on; causality comes from the tokens'
// positions.
#include <mma.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {
namespace {

using namespace nvcuda;

constexpr int BM = 64, BN = 64, kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct Smem {
  static constexpr int LDQ = D + 8, LDS = BN + 4, LDP = BN + 8, LDO = D + 4;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + BM * LDQ * 2;
  static constexpr size_t v = k + BN * LDQ * 2;
  static constexpr size_t s = v + BN * LDQ * 2;
  static constexpr size_t p = s + BM * LDS * 4;
  static constexpr size_t o = p + BM * LDP * 2;
  static constexpr size_t m = o + BM * LDO * 4;
  static constexpr size_t l = m + BM * 4;
  static constexpr size_t pos = l + BM * 4;
  static constexpr size_t total = pos + BM * 4;
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(AttentionArgs a, const int32_t* __restrict__ tiles) {
  using L = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + L::v);
  float* S = reinterpret_cast<float*>(smem + L::s);
  bf16* P = reinterpret_cast<bf16*>(smem + L::p);
  float* O = reinterpret_cast<float*>(smem + L::o);
  float* Mrow = reinterpret_cast<float*>(smem + L::m);
  float* Lrow = reinterpret_cast<float*>(smem + L::l);
  int* Qpos = reinterpret_cast<int*>(smem + L::pos);

  const int seq = tiles[2 * blockIdx.x], t0 = tiles[2 * blockIdx.x + 1];
  const int hq = blockIdx.y, kh = hq / (a.hq / a.hk);
  const int rows = min(BM, a.seq_starts[seq + 1] - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bf16* q = static_cast<const bf16*>(a.q);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;
  constexpr int VPR = D / 8;  // 16-byte vectors per row

  for (int idx = tid; idx < BM * VPR; idx += kThreads) {
    const int r = idx / VPR, c = idx % VPR;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows)
      v = *reinterpret_cast<const uint4*>(q + (static_cast<int64_t>(t0 + r) * a.hq + hq) * D +
                                          c * 8);
    *reinterpret_cast<uint4*>(Qs + r * L::LDQ + c * 8) = v;
  }
  for (int idx = tid; idx < BM * D; idx += kThreads) O[(idx / D) * L::LDO + idx % D] = 0.f;
  if (tid < BM) {
    Qpos[tid] = tid < rows ? a.positions[t0 + tid] : -1;
    Mrow[tid] = -INFINITY;
    Lrow[tid] = 0.f;
  }
  __syncthreads();
  int n_keys = 0;  // keys any row of the tile may see
  for (int r = 0; r < rows; ++r) n_keys = max(n_keys, Qpos[r] + 1);
  const float sl2 = a.scale * kLog2e;

  for (int kb = 0; kb < n_keys; kb += BN) {
    __syncthreads();  // the previous K/V tile is no longer read
    for (int idx = tid; idx < BN * VPR; idx += kThreads) {
      const int r = idx / VPR, c = idx % VPR, key = kb + r;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (key < n_keys) {
        const int page = pt[key / a.page_size];
        const int64_t base =
            ((static_cast<int64_t>(page) * a.page_size + key % a.page_size) * a.hk + kh) * D +
            c * 8;
        kv = *reinterpret_cast<const uint4*>(kc + base);
        vv = *reinterpret_cast<const uint4*>(vc + base);
      }
      *reinterpret_cast<uint4*>(Ks + r * L::LDQ + c * 8) = kv;
      *reinterpret_cast<uint4*>(Vs + r * L::LDQ + c * 8) = vv;
    }
    __syncthreads();

    // S[16 rows of this warp, 64 keys] = Q Kᵀ
    const int r0 = warp * 16;
#pragma unroll
    for (int nb = 0; nb < BN / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, Qs + r0 * L::LDQ + kk * 16, L::LDQ);
        wmma::load_matrix_sync(fb, Ks + nb * 16 * L::LDQ + kk * 16, L::LDQ);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(S + r0 * L::LDS + nb * 16, c, L::LDS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this warp's 16 rows; lane owns keys lane and lane + 32.
    for (int rr = 0; rr < 16; ++rr) {
      const int r = r0 + rr, qp = Qpos[r];
      const int k0 = kb + lane, k1 = kb + lane + 32;
      const float s0 = k0 <= qp ? S[r * L::LDS + lane] * sl2 : -INFINITY;
      const float s1 = k1 <= qp ? S[r * L::LDS + lane + 32] * sl2 : -INFINITY;
      const float m_old = Mrow[r];
      const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
      float alpha = 1.f, p0 = 0.f, p1 = 0.f;
      if (m_new != -INFINITY) {
        alpha = exp2f(m_old - m_new);
        p0 = exp2f(s0 - m_new);
        p1 = exp2f(s1 - m_new);
      }
      const bf16 b0 = __float2bfloat16_rn(p0), b1 = __float2bfloat16_rn(p1);
      P[r * L::LDP + lane] = b0;
      P[r * L::LDP + lane + 32] = b1;
      const float sum = warp_sum(__bfloat162float(b0) + __bfloat162float(b1));
      for (int d = lane; d < D; d += 32) O[r * L::LDO + d] *= alpha;
      __syncwarp();
      if (lane == 0) {
        Mrow[r] = m_new;
        Lrow[r] = Lrow[r] * alpha + sum;
      }
    }
    __syncwarp();

    // O[16 rows, D] += P V
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::load_matrix_sync(c, O + r0 * L::LDO + db * 16, L::LDO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, P + r0 * L::LDP + kk * 16, L::LDP);
        wmma::load_matrix_sync(fb, Vs + kk * 16 * L::LDQ + db * 16, L::LDQ);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(O + r0 * L::LDO + db * 16, c, L::LDO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncthreads();
  bf16* out = static_cast<bf16*>(a.out);
  for (int idx = tid; idx < BM * VPR; idx += kThreads) {
    const int r = idx / VPR, c = idx % VPR;
    if (r >= rows) continue;
    const float inv = Lrow[r] > 0.f ? 1.f / Lrow[r] : 0.f;
    float f[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = O[r * L::LDO + c * 8 + j] * inv;
    *reinterpret_cast<uint4*>(out + (static_cast<int64_t>(t0 + r) * a.hq + hq) * D + c * 8) =
        pack8(f);
  }
}

template <int D>
void launch_d(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  static bool configured = false;  // per template instance; set once per process
  if (!configured) {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(Smem<D>::total)));
    configured = true;
  }
  dim3 grid(num_tiles, a.hq);
  prefill_kernel<D><<<grid, kThreads, Smem<D>::total, s>>>(a, tiles);
  SYV_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool launch_attention_prefill(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                              cudaStream_t s) {
  if (a.q_t != DType::BF16 || a.cache_t != DType::BF16 || a.out_t != DType::BF16) return false;
  if (num_tiles == 0) return true;
  switch (a.head_dim) {
    case 64:
      launch_d<64>(a, tiles, num_tiles, s);
      return true;
    case 128:
      launch_d<128>(a, tiles, num_tiles, s);
      return true;
    default:
      return false;
  }
}

}  // namespace syv::cuda
