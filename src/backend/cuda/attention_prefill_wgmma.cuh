// Device pieces of the Hopper warpgroup-MMA prefill attention kernels (attention_prefill_wgmma.cu,
// the lockstep kernel; attention_prefill_wgmma_overlap.cu, the softmax under P V): the block's
// work, the Q and K/V tile loads (cp.async gather or TMA boxes) into the 128-byte-swizzle layout, S
// = Q Kᵀ and O += P V on wgmma, the online softmax, the output. sm_90a; the wgmma wrappers compile
// to nothing elsewhere (their kernels trap there and are never launched).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "backend/cuda/attention_prefill.cuh"
#include "backend/cuda/bulk_copy_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace syv::cuda::prefill::wg {

constexpr int kBM = 128, kThreads = 256;
// Keys a K/V tile: 128, or 64 at head_dim 256 (Q's 64 KB and two stages of K and V then fit in
// 193 KB of shared memory; at 128 keys they would take 320 KB).
template <int D>
constexpr int tile_keys() {
  return D == 256 ? 64 : 128;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// m64nNk16, fp32 accumulators d[N / 2] (per thread: rows lane / 4 and + 8 of its warp's 16,
// columns 8 j + 2 (lane % 4) + {0, 1}). _ss (wgmma_ptx.cuh): A and B descriptors (both K-major);
// _rs_tb: A from registers, B MN-major (transposed), always accumulating.
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const uint32_t (&a)[4],
                                                uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
      "%29, %30, %31} "
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs_n128_tb(float (&d)[64], const uint32_t (&a)[4],
                                                 uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
      "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63} "
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 64) {
    wgmma_ss_n64(d, da, db, scale_d);
  } else {
    wgmma_ss_n128(d, da, db, scale_d);
  }
#endif
}
template <int N>
__device__ __forceinline__ void mma_rs_tb(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 64) {
    wgmma_rs_n64_tb(d, a, db);
  } else {
    wgmma_rs_n128_tb(d, a, db);
  }
#endif
}

// What a block and each of its threads work on (K/V tiles of BN keys).
struct Work {
  int head, kh, seq, t0, rows, n_tiles;
  int wg_tiles;  // K/V tiles this warpgroup's rows see (the first ones); 0 without rows
  int tq;        // lane % 4: the thread's column pair in each 8-column block
  int ra;        // the thread's rows of S and O: ra and ra + 8 of the query tile
  int qpa, qpb;  // their positions (-1: past the end of the sequence)
  int qmin;
};
template <int BN>
__device__ __forceinline__ Work work_of(const AttentionArgs& a, const int32_t* tiles) {
  Work w;
  const int tile = blockIdx.x / a.hq;
  w.head = blockIdx.x % a.hq;
  w.kh = w.head / (a.hq / a.hk);
  w.seq = tiles[2 * tile];
  w.t0 = tiles[2 * tile + 1];
  w.rows = min(kBM, a.seq_starts[w.seq + 1] - w.t0);
  const int n_keys = a.positions[w.t0 + w.rows - 1] + 1;  // positions ascend within a sequence
  w.n_tiles = (n_keys + BN - 1) / BN;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int wg_rows = min(w.rows - wg * 64, 64);
  const int wg_last_key = wg_rows > 0 ? a.positions[w.t0 + wg * 64 + wg_rows - 1] : -1;
  w.wg_tiles = wg_rows > 0 ? wg_last_key / BN + 1 : 0;
  w.tq = lane & 3;
  w.ra = wg * 64 + warp * 16 + (lane >> 2);
  w.qpa = w.ra < w.rows ? a.positions[w.t0 + w.ra] : -1;
  w.qpb = w.ra + 8 < w.rows ? a.positions[w.t0 + w.ra + 8] : -1;
  w.qmin = min(w.qpa, w.qpb);
  return w;
}

// cp.async of the Q tile into its swizzled buffer at sQ (rows past the end zero-filled).
template <int D>
__device__ __forceinline__ void load_q(const AttentionArgs& a, const Work& w, uint32_t sQ) {
  constexpr int CH = D / 8;
  static_assert((kBM * CH) % kThreads == 0);
  const bf16* q = static_cast<const bf16*>(a.q);
#pragma unroll
  for (int i = 0; i < kBM * CH / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / CH, c = idx % CH;
    const bool valid = r < w.rows;
    const bf16* src = valid ? q + (static_cast<int64_t>(w.t0 + r) * a.hq + w.head) * D + c * 8 : q;
    cp_async16_s(sQ + sw128<kBM>(r, c), src, valid);
  }
}
// cp.async of K/V tile j (keys j BN ...) into the swizzled buffers sK and sV, gathered from the
// sequence's pages (keys past the last one zero-filled).
template <int D, int BN>
__device__ __forceinline__ void load_kv(const AttentionArgs& a, const Work& w, int j, uint32_t sK,
                                        uint32_t sV) {
  constexpr int CH = D / 8;
  static_assert((BN * CH) % kThreads == 0);
  const bf16* kc = static_cast<const bf16*>(a.k_cache);
  const bf16* vc = static_cast<const bf16*>(a.v_cache);
  const int32_t* pt = a.page_table + static_cast<int64_t>(w.seq) * a.max_pages_per_seq;
  const int n_keys = a.positions[w.t0 + w.rows - 1] + 1;
#pragma unroll
  for (int i = 0; i < BN * CH / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / CH, c = idx % CH, key = j * BN + r;
    const bool valid = key < n_keys;
    const int64_t off = valid ? kv_row(pt, key, a.page_size, a.hk, w.kh, D) + c * 8 : 0;
    cp_async16_s(sK + sw128<BN>(r, c), kc + off, valid);
    cp_async16_s(sV + sw128<BN>(r, c), vc + off, valid);
  }
}

// K/V tile j (keys j BN ...) by the tensor-memory accelerator, issued by one thread: boxes of
// `rows` keys (one page, or BN keys of a larger page) x 64 columns of head kh from maps mk / mv of
// the caches as [pages * page_size, Hk, D], into the same swizzled panels as load_kv, completing
// on `bar`. Only for tiles whose keys all exist (the pages past a sequence's end may hold
// anything: load_kv zero-fills those keys, which P V multiplies by 0).
template <int D, int BN>
__device__ __forceinline__ void tma_kv(const AttentionArgs& a, const Work& w, int j, uint32_t sK,
                                       uint32_t sV, uint32_t bar, const CUtensorMap* mk,
                                       const CUtensorMap* mv, int rows, int page_shift) {
  const int32_t* pt = a.page_table + static_cast<int64_t>(w.seq) * a.max_pages_per_seq;
  mbar_arrive_expect_tx(bar, 2u * BN * D * 2);
  for (int r = 0; r < BN; r += rows) {
    const int key = j * BN + r;
    const int row = __ldg(pt + (key >> page_shift)) * a.page_size + (key & (a.page_size - 1));
#pragma unroll
    for (int p = 0; p < D / 64; ++p) {
      const uint32_t off = p * (BN * 128) + r * 128;
      tma_load_3d(sK + off, mk, p * 64, w.kh, row, bar);
      tma_load_3d(sV + off, mv, p * 64, w.kh, row, bar);
    }
  }
}

// K/V tile j into sK / sV: by tma_kv (one thread; completing on `bar`) where `tma`, else by every
// thread's load_kv (to be committed and waited by the caller).
template <int D, int BN>
__device__ __forceinline__ void load_tile(const AttentionArgs& a, const Work& w, int j, bool tma,
                                          uint32_t sK, uint32_t sV, uint32_t bar,
                                          const CUtensorMap* mk, const CUtensorMap* mv, int rows,
                                          int page_shift) {
  if (!tma) {
    load_kv<D, BN>(a, w, j, sK, sV);
  } else if (threadIdx.x == 0) {
    tma_kv<D, BN>(a, w, j, sK, sV, bar, mk, mv, rows, page_shift);
  }
}

// S = Q Kᵀ for this warpgroup's 64 rows x BN keys, both from shared memory (issued, not waited).
template <int D, int BN>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], uint32_t sQ, uint32_t sK, int wg) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint64_t da =
        desc(sQ + (kk >> 2) * (kBM * 128) + wg * (64 * 128) + (kk & 3) * 32, 16, 1024);
    const uint64_t db = desc(sK + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
    mma_ss<BN>(s, da, db, kk > 0);
  }
}
// O += P V: V [BN keys][D] is the MN-major B operand; 16 keys = two 8-row groups (2048 bytes),
// the 64-column panels LBO = BN * 128 bytes apart (issued, not waited for). At head_dim 256, two
// m64n128 halves: columns [128 h, 128 h + 128) are panels 2 h and 2 h + 1, and the accumulators
// o[64 h ...] (o[4 i + e] is column 8 i + 2 tq + e % 2 at every width).
template <int D, int BN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&pa)[BN / 16][4],
                                         uint32_t sV) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    if constexpr (D == 256) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mma_rs_tb<128>(reinterpret_cast<float(&)[64]>(o[64 * h]), pa[kk],
                       desc(sV + h * 2 * (BN * 128) + kk * 2048, BN * 128, 1024));
    } else {
      mma_rs_tb<D>(o, pa[kk], desc(sV + kk * 2048, BN * 128, 1024));
    }
  }
}

// Online softmax of one S tile held as wgmma accumulators: s[4 j + e] is row ra (e = 0, 1) or
// ra + 8 (e = 2, 3), key kb + 8 j + 2 tq + e % 2. Masks the keys after each row's position (when
// the tile crosses one), updates the running maxima m (raw units) and this thread's share of the
// row sums l, leaves p = 2^(s·scale·log2(e) - max·scale·log2(e)) in s and returns the factors by
// which O must be rescaled (exactly 1 where a maximum did not move).
// MASK = false: the caller knows every row sees the whole tile (no branch: the softmax may then
// run while a wgmma is in flight, which ptxas serialises around branches).
template <int BN, bool MASK = true>
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 2], int kb, const Work& w, float sl2,
                                             float (&m)[2], float (&l)[2], float (&al)[2]) {
  if (MASK && kb + BN - 1 > w.qmin) {  // the tile crosses a row's position
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = kb + 8 * j + 2 * w.tq + e;
        if (key > w.qpa) s[4 * j + e] = -INFINITY;
        if (key > w.qpb) s[4 * j + 2 + e] = -INFINITY;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = m[h];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = quad_max(mx);
    // Scaled maximum (log2 units); 0 while the row has seen no key, so its p are all 0.
    const float sm = mx == -INFINITY ? 0.f : mx * sl2;
    al[h] = ex2(m[h] * sl2 - sm);  // 0 from -inf
    m[h] = mx;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      s[4 * j + 2 * h] = ex2(fmaf(s[4 * j + 2 * h], sl2, -sm));
      s[4 * j + 2 * h + 1] = ex2(fmaf(s[4 * j + 2 * h + 1], sl2, -sm));
      sum += s[4 * j + 2 * h] + s[4 * j + 2 * h + 1];
    }
    l[h] = l[h] * al[h] + sum;  // this thread's share (quad-summed at the end)
  }
}
// O *= alpha per row (skipped when no row of the warp moved its maximum).
template <int D>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&al)[2]) {
  if (__any_sync(0xffffffffu, al[0] != 1.f || al[1] != 1.f)) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[4 * i] *= al[0];
      o[4 * i + 1] *= al[0];
      o[4 * i + 2] *= al[1];
      o[4 * i + 3] *= al[1];
    }
  }
}
// P as bf16 A fragments of m64nDk16 (16 keys each): the accumulator layout of S maps onto them.
template <int BN>
__device__ __forceinline__ void pack_p(const float (&s)[BN / 2], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    pa[j >> 1][(j & 1) * 2] = pack_bf16(s[4 * j], s[4 * j + 1]);
    pa[j >> 1][(j & 1) * 2 + 1] = pack_bf16(s[4 * j + 2], s[4 * j + 3]);
  }
}
// O / l per row as bf16, rows of the sequence only.
template <int D>
__device__ __forceinline__ void store_o(const AttentionArgs& a, const Work& w,
                                        const float (&o)[D / 2], const float (&l)[2]) {
  bf16* out = static_cast<bf16*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = quad_sum(l[h]);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int r = w.ra + 8 * h;
    if (r >= w.rows) continue;
    bf16* orow = out + (static_cast<int64_t>(w.t0 + r) * a.hq + w.head) * D + 2 * w.tq;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t*>(orow + 8 * i) =
          pack_bf16(o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv);
  }
}

// The overlapped kernel's launch (attention_prefill_wgmma_overlap.cu; D 64 or 128): K/V maps and
// box rows as attention_prefill_wgmma.cu's TMA form.
template <int D>
void launch_overlap(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                    const CUtensorMap& mk, const CUtensorMap& mv, int tma_rows, int page_shift,
                    cudaStream_t s);

}  // namespace syv::cuda::prefill::wg
