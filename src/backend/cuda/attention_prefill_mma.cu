// Prefill attention on mma.sync (m16n8k16 bf16, fp32 accumulation), FlashAttention-2 style with
// 128-row query tiles: one block of 8 warps x 16 rows per (128-row query tile of one sequence,
// query head). K/V tiles of 64 keys are gathered from the pages with cp.async into a double
// buffer; Q, S, P and O live in registers (the S accumulators become P's A fragments); exp2 with
// scale·log2(e) folded into one FMA; the causal mask only on tiles that cross a row's position;
// warps skip tiles none of their rows can see. The fallback off compute capability 9.0 (the
// default kernel is attention_prefill_wgmma.cu's), and of head_dim 256 (Qwen3.5's gated
// attention) where set_prefill_wgmma_head_dim_256(false) keeps the wgmma kernel from it.
//
// Quantized caches (fp8 / int4; the wgmma kernel does not take them) fill the same bf16 K/V tiles
// through registers instead of cp.async: each thread loads its chunks' bytes and scales, decodes
// them and stores q * scale rounded to bf16 (the cache itself is never dequantized in global
// memory). Up to head_dim 128 the next tile's loads are issued before this tile's matrix work and
// stored after it; at 256 (where registers are short) they are loaded and stored before it.
#include <cuda_runtime.h>

#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda::prefill {
namespace {

constexpr int kBM = 128, kBN = 64, kWarps = 8, kThreads = kWarps * 32;

template <int D>
constexpr int mma_smem_bytes() {
  return (kBM + 4 * kBN) * (D + 8) * 2;  // Q, 2 stages of K + V; rows padded by 16 bytes
}

// KT: the cache dtype (BF16, F8E4M3 or U4X2).
template <int D, DType KT>
__global__ void __launch_bounds__(kThreads, 1)
    mma128_kernel(AttentionArgs a, const int32_t* __restrict__ tiles) {
  constexpr int LD = D + 8, CH = D / 8;
  static_assert(kWarps * 16 == kBM && (kBM * CH) % kThreads == 0 && (kBN * CH) % kThreads == 0);
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [kBM][LD]
  bf16* Ks = Qs + kBM * LD;                  // [2][kBN][LD]
  bf16* Vs = Ks + 2 * kBN * LD;              // [2][kBN][LD]
  pdl_wait();
  pdl_trigger();
  const int tile = blockIdx.x / a.hq, head = blockIdx.x % a.hq;
  const int seq = tiles[2 * tile], t0 = tiles[2 * tile + 1];
  const int kh = head / (a.hq / a.hk);
  const int rows = min(kBM, a.seq_starts[seq + 1] - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const bf16* q = static_cast<const bf16*>(a.q);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(seq) * a.max_pages_per_seq;
  const int n_keys = a.positions[t0 + rows - 1] + 1;  // positions ascend within a sequence
  const int n_tiles = (n_keys + kBN - 1) / kBN;
  const int wr = warp * 16;  // first row of this warp
  const int w_rows = min(rows - wr, 16);
  const int w_last_key = w_rows > 0 ? a.positions[t0 + wr + w_rows - 1] : -1;
  int qp[2];  // positions of this lane's rows wr + g and wr + g + 8 (-1: past the end)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = wr + g + 8 * h;
    qp[h] = r < rows ? a.positions[t0 + r] : -1;
  }
  const int qmin = min(qp[0], qp[1]);

#pragma unroll
  for (int i = 0; i < kBM * CH / kThreads; ++i) {
    const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH;
    const bool valid = r < rows;
    const bf16* src = valid ? q + (static_cast<int64_t>(t0 + r) * a.hq + head) * D + c * 8 : q;
    cp_async16(Qs + r * LD + c * 8, src, valid);
  }
  auto load_kv = [&](int j, int buf) {
    bf16* ks = Ks + buf * kBN * LD;
    bf16* vs = Vs + buf * kBN * LD;
#pragma unroll
    for (int i = 0; i < kBN * CH / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH, key = j * kBN + r;
      const bool valid = key < n_keys;
      const int64_t off = valid ? kv_row(pt, key, a.page_size, a.hk, kh, D) + c * 8 : 0;
      cp_async16(ks + r * LD + c * 8, kc + off, valid);
      cp_async16(vs + r * LD + c * 8, vc + off, valid);
    }
  };
  // Quantized caches: this thread's chunks of a K/V tile in registers (bytes and scales), then
  // decoded into the tile's bf16 rows; keys past the context are stored as zeros.
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
      const int idx = tid + i * kThreads, r = idx / CH, c = idx % CH, key = j * kBN + r;
      st.k[i] = st.v[i] = make_uint2(0u, 0u);
      st.ks[i] = st.vs[i] = 0.f;
      if (key < n_keys) {
        const int64_t row = paged_row(pt, key, a.page_size, a.hk, kh);
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
  // This warp's Q rows stay in registers up to head_dim 128; at 256 they would take 64 of the
  // 255 registers O already crowds, so each K tile re-reads them from shared memory instead.
  constexpr bool kQInRegisters = D <= 128;
  uint32_t qa[kQInRegisters ? D / 16 : 1][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

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
        ldsm_x4(qa[kk], Qs + (wr + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
    }
    const int kb = it * kBN;
    if (kb <= w_last_key) {  // warp-uniform: some row of this warp sees this tile
      const bf16* ks = Ks + (it & 1) * kBN * LD;
      const bf16* vs = Vs + (it & 1) * kBN * LD;
      float sc[kBN / 8][4];
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qs[4];
        if constexpr (!kQInRegisters)
          ldsm_x4(qs, Qs + (wr + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
        const uint32_t(&qf)[4] = kQInRegisters ? qa[kQInRegisters ? kk : 0] : qs;
#pragma unroll
        for (int p = 0; p < kBN / 16; ++p) {
          uint32_t b[4];
          ldsm_x4(b, ks + (p * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
          mma(sc[2 * p], qf, b[0], b[1]);
          mma(sc[2 * p + 1], qf, b[2], b[3]);
        }
      }

      // Online softmax; this lane holds rows g (c0, c1) and g + 8 (c2, c3) of the warp's 16.
      if (kb + kBN - 1 > qmin) {  // the tile crosses a row's position
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = kb + j * 8 + tq * 2 + e;
            if (key > qp[0]) sc[j][e] = -INFINITY;
            if (key > qp[1]) sc[j][2 + e] = -INFINITY;
          }
        }
      }
      float mx0 = m[0], mx1 = m[1];
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
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
      uint32_t pa[kBN / 16][4];
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const float p0 = ex2(fmaf(sc[j][0], sl2, -s0)), p1 = ex2(fmaf(sc[j][1], sl2, -s0));
        const float p2 = ex2(fmaf(sc[j][2], sl2, -s1)), p3 = ex2(fmaf(sc[j][3], sl2, -s1));
        sum0 += p0 + p1;
        sum1 += p2 + p3;
        pa[j >> 1][(j & 1) * 2] = pack_bf16(p0, p1);
        pa[j >> 1][(j & 1) * 2 + 1] = pack_bf16(p2, p3);
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

      // O += P V
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          ldsm_x4_t(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 +
                           (lane >> 4) * 8);
          mma(o[2 * dp], pa[kk], b[0], b[1]);
          mma(o[2 * dp + 1], pa[kk], b[2], b[3]);
        }
      }
    }
    if constexpr (kQuant && kPrefetch) {
      if (it + 1 < n_tiles) store(staged, (it + 1) & 1);
    }
    __syncthreads();  // this buffer is refilled by the load issued in the next iteration
  }

  bf16* out = static_cast<bf16*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float lsum = quad_sum(l[h]);
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
    const int r = wr + g + 8 * h;
    if (r >= rows) continue;
    bf16* orow = out + (static_cast<int64_t>(t0 + r) * a.hq + head) * D + tq * 2;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t*>(orow + i * 8) =
          pack_bf16(o[i][2 * h] * inv, o[i][2 * h + 1] * inv);
  }
}

template <int D, DType KT>
void launch_t(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  constexpr int smem = mma_smem_bytes<D>();
  allow_dynamic_smem(mma128_kernel<D, KT>, smem);
  launch_k(mma128_kernel<D, KT>, dim3(static_cast<unsigned>(num_tiles) * a.hq), kThreads, smem, s,
           a, tiles);
}

template <int D>
void launch_kt(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles, cudaStream_t s) {
  switch (a.cache_t) {
    case DType::F8E4M3:
      return launch_t<D, DType::F8E4M3>(a, tiles, num_tiles, s);
    case DType::U4X2:
      return launch_t<D, DType::U4X2>(a, tiles, num_tiles, s);
    default:
      return launch_t<D, DType::BF16>(a, tiles, num_tiles, s);
  }
}

}  // namespace

bool launch_mma128(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                   cudaStream_t s) {
  // (128 + 4 x 64) rows of head_dim + 8 bf16: 102 KiB at head_dim 128, 198 KiB at 256. Beyond the
  // device's shared memory (99 KiB on sm_86 / 89 / 120, 163 KiB on sm_80) the caller runs the
  // decode kernels over the prefill tokens instead.
  const int smem = a.head_dim == 64    ? mma_smem_bytes<64>()
                   : a.head_dim == 128 ? mma_smem_bytes<128>()
                                       : mma_smem_bytes<256>();
  if (static_cast<size_t>(smem) > device_smem_optin()) return false;
  switch (a.head_dim) {
    case 64:
      launch_kt<64>(a, tiles, num_tiles, s);
      return true;
    case 128:
      launch_kt<128>(a, tiles, num_tiles, s);
      return true;
    case 256:
      launch_kt<256>(a, tiles, num_tiles, s);
      return true;
    default:
      return false;
  }
}

}  // namespace syv::cuda::prefill
