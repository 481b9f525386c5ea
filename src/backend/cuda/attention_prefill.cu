// Prefill attention over paged K/V: the dispatcher (which kernel runs, see prefill_attention.h)
// and the two 64-row kernels that came first (kept for A/B timing and checks). The default kernels
// live in attention_prefill_wgmma.cu (Hopper warpgroup MMA) and attention_prefill_mma.cu
// (mma.sync, 128-row tiles). Varlen everywhere: the tile list says which sequence and first token
// each block works on (kPrefillTileRows-row tiles, longest first); causality comes from the
// tokens' positions, so chunked prefill and mixed decode + prefill batches are exact.
//
// The 64-row kernels run two blocks per 128-row tile (the later rows, which see more keys,
// first).
//
// WMMA kernel: FlashAttention-2 style on tensor cores (WMMA bf16, fp32 accumulation): one block
// of 4 warps per (64-row query tile of one sequence, query head); K/V tiles of 64 keys are
// gathered from the sequence's pages; online softmax in fp32. Each warp owns 16 query rows of S, P
// and O, so only the K/V tile loads need block barriers.
#include <mma.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/prefill_attention.h"

namespace syv::cuda {
namespace {

using namespace nvcuda;
using prefill::kLog2e;
static_assert(kPrefillTileRows == 128, "the 64-row kernels run two blocks per tile");

// The 64-row query block a block of the older kernels works on: (sequence, first token, rows);
// rows <= 0 when the tile has no second half.
struct SubTile {
  int seq, t0, rows;
};
__device__ __forceinline__ SubTile sub_tile(const AttentionArgs& a, const int32_t* tiles) {
  const int tile = blockIdx.x >> 1, half = 1 - static_cast<int>(blockIdx.x & 1);
  SubTile t;
  t.seq = tiles[2 * tile];
  t.t0 = tiles[2 * tile + 1] + 64 * half;
  t.rows = min(64, a.seq_starts[t.seq + 1] - t.t0);
  return t;
}

constexpr int BM = 64, BN = 64, kThreads = 128;

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
  pdl_wait();
  pdl_trigger();
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

  const SubTile st = sub_tile(a, tiles);
  if (st.rows <= 0) return;
  const int seq = st.seq, t0 = st.t0, rows = st.rows;
  const int hq = blockIdx.y, kh = hq / (a.hq / a.hk);
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

// ---- FlashAttention-2 on mma.sync (m16n8k16 bf16, fp32 accumulation) ---------------------------
// One block of 4 warps per (64-row query tile, query head); each warp owns 16 query rows and keeps
// its S, P and O in registers (the S accumulator layout is reused as P's A fragment). K/V tiles of
// 64 keys are gathered from the pages with cp.async into a double buffer, so the next tile loads
// while this one is computed; fragments come from shared memory through ldmatrix.
namespace fa2 {

constexpr int BM = 64, BN = 64, kThreads = 128;

template <int D>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(BM + 4 * BN) * (D + 8) * 2;
}

using prefill::cp_async16;
using prefill::cp_commit;
using prefill::ldsm_x4;
using prefill::ldsm_x4_t;
using prefill::mma;
using prefill::pack_bf16;

template <int D>
__global__ void __launch_bounds__(kThreads)
    fa2_kernel(AttentionArgs a, const int32_t* __restrict__ tiles) {
  constexpr int LD = D + 8, VPR = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [BM][LD]
  bf16* Ks = Qs + BM * LD;                   // [2][BN][LD]
  bf16* Vs = Ks + 2 * BN * LD;               // [2][BN][LD]
  pdl_wait();
  pdl_trigger();
  const SubTile st = sub_tile(a, tiles);
  if (st.rows <= 0) return;
  const int seq = st.seq, t0 = st.t0, rows = st.rows;
  const int hq = blockIdx.y, kh = hq / (a.hq / a.hk);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const bf16* q = static_cast<const bf16*>(a.q);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const int qp0 = r0 < rows ? a.positions[t0 + r0] : -1;
  const int qp1 = r1 < rows ? a.positions[t0 + r1] : -1;
  const int n_keys = a.positions[t0 + rows - 1] + 1;  // positions ascend within a sequence
  const int n_tiles = (n_keys + BN - 1) / BN;

  for (int idx = tid; idx < BM * VPR; idx += kThreads) {
    const int r = idx / VPR, c = idx % VPR;
    const bool valid = r < rows;
    const bf16* src = valid ? q + (static_cast<int64_t>(t0 + r) * a.hq + hq) * D + c * 8 : q;
    cp_async16(Qs + r * LD + c * 8, src, valid);
  }
  auto load_kv = [&](int tile, int buf) {
    bf16* ks = Ks + buf * BN * LD;
    bf16* vs = Vs + buf * BN * LD;
    for (int idx = tid; idx < BN * VPR; idx += kThreads) {
      const int r = idx / VPR, c = idx % VPR, key = tile * BN + r;
      const bool valid = key < n_keys;
      int64_t base = 0;
      if (valid) {
        const int page = pt[key / a.page_size];
        base = ((static_cast<int64_t>(page) * a.page_size + key % a.page_size) * a.hk + kh) * D +
               c * 8;
      }
      cp_async16(ks + r * LD + c * 8, kc + base, valid);
      cp_async16(vs + r * LD + c * 8, vc + base, valid);
    }
  };
  load_kv(0, 0);
  cp_commit();

  const float sl2 = a.scale * kLog2e;
  uint32_t qa[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv(it + 1, (it + 1) & 1);
    cp_commit();            // possibly empty: keeps the group count uniform
    prefill::cp_wait<1>();  // everything but the newest group: Q and tile `it` have landed
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldsm_x4(qa[kk], Qs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
    }
    const bf16* ks = Ks + (it & 1) * BN * LD;
    const bf16* vs = Vs + (it & 1) * BN * LD;

    float sc[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int p = 0; p < BN / 16; ++p) {
        uint32_t b[4];
        ldsm_x4(b, ks + (p * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 +
                       ((lane >> 3) & 1) * 8);
        mma(sc[2 * p], qa[kk], b[0], b[1]);
        mma(sc[2 * p + 1], qa[kk], b[2], b[3]);
      }
    }

    // Online softmax; this lane holds rows r0 (c0, c1) and r1 (c2, c3) of S.
    const int kb = it * BN;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = kb + j * 8 + tq * 2 + e;
        sc[j][e] = key <= qp0 ? sc[j][e] * sl2 : -INFINITY;
        sc[j][2 + e] = key <= qp1 ? sc[j][2 + e] * sl2 : -INFINITY;
        mx0 = fmaxf(mx0, sc[j][e]);
        mx1 = fmaxf(mx1, sc[j][2 + e]);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
    const float al0 = exp2f(m0 - mu0), al1 = exp2f(m1 - mu1);  // 0 while m is -inf
    m0 = mn0;
    m1 = mn1;
    l0 *= al0;
    l1 *= al1;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[j][e] = exp2f(sc[j][e] - mu0);
        sc[j][2 + e] = exp2f(sc[j][2 + e] - mu1);
        l0 += sc[j][e];
        l1 += sc[j][2 + e];
      }
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= al0;
      o[i][1] *= al0;
      o[i][2] *= al1;
      o[i][3] *= al1;
    }

    // O += P V, P taken straight from the S accumulators as bf16 A fragments.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
      pa[1] = pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
      pa[2] = pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      pa[3] = pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldsm_x4_t(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 +
                         (lane >> 4) * 8);
        mma(o[2 * dp], pa, b[0], b[1]);
        mma(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // this buffer is refilled by the load issued in the next iteration
  }

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  bf16* out = static_cast<bf16*>(a.out);
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int col = i * 8 + tq * 2;
    if (r0 < rows)
      *reinterpret_cast<uint32_t*>(out + (static_cast<int64_t>(t0 + r0) * a.hq + hq) * D + col) =
          pack_bf16(o[i][0] * inv0, o[i][1] * inv0);
    if (r1 < rows)
      *reinterpret_cast<uint32_t*>(out + (static_cast<int64_t>(t0 + r1) * a.hq + hq) * D + col) =
          pack_bf16(o[i][2] * inv1, o[i][3] * inv1);
  }
}

template <int D>
void launch(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  static bool configured = false;
  if (!configured) {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(fa2_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem_bytes<D>())));
    configured = true;
  }
  launch_k(fa2_kernel<D>, dim3(2 * num_tiles, a.hq), kThreads, smem_bytes<D>(), s, a, tiles);
}

}  // namespace fa2

template <int D>
void launch_d(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  static bool configured = false;  // per template instance; set once per process
  if (!configured) {
    SYV_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(Smem<D>::total)));
    configured = true;
  }
  dim3 grid(2 * num_tiles, a.hq);
  launch_k(prefill_kernel<D>, grid, kThreads, Smem<D>::total, s, a, tiles);
}

}  // namespace

// ---- variants ----------------------------------------------------------------------------------
namespace {

enum Variant { kWgmmaPipe, kWgmma128, kWgmma64, kMma8w, kMma4w, kFa2, kWmma, kVariants };
constexpr const char* kVariantNames[kVariants] = {"wgmma-pipe", "wgmma128", "wgmma64", "mma8w",
                                                  "mma4w",      "fa2",      "wmma"};
constexpr int kDefaultVariant = kWgmma128;  // fastest measured on an H200 (cuda-backend-notes)

int initial_variant() {
  const char* e = std::getenv("SYV_PREFILL_ATTENTION");
  if (!e || !*e) return kDefaultVariant;
  const int v = find_prefill_attention_variant(e);
  if (v < 0) {
    std::string names;
    for (const char* n : kVariantNames) names += std::string(names.empty() ? "" : ", ") + n;
    cuda_fail(
        __FILE__, __LINE__, "SYV_PREFILL_ATTENTION",
        ("unknown prefill attention kernel \"" + std::string(e) + "\"; expected one of " + names)
            .c_str());
  }
  return v;
}
int& current_variant() {
  static int v = initial_variant();
  return v;
}

}  // namespace

int prefill_attention_variant_count() {
  return kVariants;
}
const char* prefill_attention_variant_name(int v) {
  return v >= 0 && v < kVariants ? kVariantNames[v] : "";
}
int find_prefill_attention_variant(std::string_view name) {
  for (int v = 0; v < kVariants; ++v)
    if (name == kVariantNames[v]) return v;
  return -1;
}
int default_prefill_attention_variant() {
  return kDefaultVariant;
}
void set_prefill_attention_variant(int v) {
  if (v < 0 || v >= kVariants)
    cuda_fail(
        __FILE__, __LINE__, "set_prefill_attention_variant",
        ("variant " + std::to_string(v) + " out of range [0, " + std::to_string(kVariants) + ")")
            .c_str());
  current_variant() = v;
}
int prefill_attention_variant() {
  return current_variant();
}

bool launch_attention_prefill(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                              cudaStream_t s) {
  if (a.q_t != DType::BF16 || a.cache_t != DType::BF16 || a.out_t != DType::BF16) return false;
  if (a.head_dim != 64 && a.head_dim != 128) return false;
  if (num_tiles == 0) return true;
  const int v = current_variant();
  switch (v) {
    case kWgmmaPipe:
    case kWgmma128:
    case kWgmma64: {
      using prefill::WgmmaKind;
      const WgmmaKind kind = v == kWgmmaPipe  ? WgmmaKind::kBn128Pipelined
                             : v == kWgmma128 ? WgmmaKind::kBn128
                                              : WgmmaKind::kBn64;
      return prefill::launch_wgmma(a, tiles, num_tiles, kind, s) ||
             prefill::launch_mma128(a, tiles, num_tiles, 8, s);
    }
    case kMma8w:
      return prefill::launch_mma128(a, tiles, num_tiles, 8, s);
    case kMma4w:
      return prefill::launch_mma128(a, tiles, num_tiles, 4, s);
    case kFa2:
      a.head_dim == 64 ? fa2::launch<64>(a, tiles, num_tiles, s)
                       : fa2::launch<128>(a, tiles, num_tiles, s);
      return true;
    default:
      a.head_dim == 64 ? launch_d<64>(a, tiles, num_tiles, s)
                       : launch_d<128>(a, tiles, num_tiles, s);
      return true;
  }
}

}  // namespace syv::cuda
