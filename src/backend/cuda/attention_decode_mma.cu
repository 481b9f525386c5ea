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
//  * fp8: a cp.async pipeline of kFp8Stages stages carries the tiles' stored bytes and per-key
//    scales; the MMA B fragments are converted in registers straight from those bytes (one
//    cvt.rn.f16x2.e4m3x2 per pair, exact), with no 16-bit tile and one barrier per tile. For that
//    the head dimension is permuted: for S = Q K^T each thread reads D / 4 contiguous bytes of a
//    key row (Q's fragments are read in the same order); for O += P V each thread reads D / 8
//    contiguous bytes of 4 keys' V rows and pairs the keys' bytes (byte_perm), so O's columns are
//    permuted, undone when the warps merge in shared memory (qk_col, pv_col). Q is converted to
//    f16 (saturated) and the MMAs are f16; S is multiplied by each key's K scale, and each key's
//    V scale (times 256, undone at the merge) is folded into P before its f16 rounding. At head_dim
//    128 the stages are unpadded and XOR-swizzled (fp8_chunk), 3 of them; wide batches run 4
//    blocks per SM with Q's fragments re-read from shared memory (kFp8WideBlocks).
//    With G <= 8 (every Qwen shape) fp8 runs the key-rows form instead (kKeyRowsMaxHeads):
//    the same fragments with the keys as the MMA's rows and the heads as its columns,
//    S^T = K Q^T and O^T += V^T P^T, half the MMAs and half O's registers.
//  * int4: a 2-stage cp.async pipeline of the bytes and scales, decoded and scaled per 32-element
//    group into a bf16 tile in shared memory, read as the bf16 one.
// Blocks per SM count (H200, 8B, b = 64, ctx 8192, ms per step): the quantized forms, both decoded
// through a shared 16-bit tile then, ran 29.6 with 3 stages (2 blocks per SM by shared memory) and
// 23.6 with 2 stages (3 blocks per SM); fp8 decoded in registers: 22.4 (3 blocks, 3 padded
// stages), 21.9 (3 blocks, 4 swizzled stages), 20.7 (4 blocks, 3 swizzled stages; ncu: 2.1 TB/s,
// SM issue ~57% busy, 6.2 cycles per issued instruction: latency- and instruction-bound), 18.6
// once the tile loads stopped dividing by the page size (paged_row). Two accumulators per S n-tile
// (halving the chain of dependent MMAs) measured 18.9: not kept.
// Key rows then took it to 17.9 (graph), and tile loads by page (tiles_in_pages: one page-table
// read per tile, addresses stepped by constants) to 14.9, 1.59x the bf16 KV step's 23.7.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
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
// The two e4m3 bytes in 16-bit half kHalf of `w` as exact f16 (low byte -> low half):
// cvt.rn.f16x2.e4m3x2 on sm_89+, reading the half in place (a `>> 16` cost a shift per pair);
// elsewhere the bits moved into an f16 (the value / 2^8, normals and subnormals alike:
// quant_convert.cuh's fp8x4_to_f32) and multiplied back, exactly.
template <int kHalf>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t r;
  if constexpr (kHalf == 0) {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, l;\n}"
        : "=r"(r)
        : "r"(w));
  } else {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}"
        : "=r"(r)
        : "r"(w));
  }
  return r;
#else
  // The half's high byte << 24 | its low byte << 8.
  const uint32_t p = __byte_perm(w, 0u, kHalf == 0 ? 0x1404u : 0x3424u);
  const uint32_t bits = ((p >> 1) & 0x3f803f80u) | (p & 0x80008000u);
  const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(256.f));
  return *reinterpret_cast<const uint32_t*>(&h);
#endif
}
static_assert(kWarpKeys == 16, "one k16 step of P V per warp and tile");

// fp8: the MMA fragments come straight from the stored bytes, so the head dimension is permuted
// (the same way for Q and K; undone for V when O is written to shared memory at the merge).
//  * S = Q K^T: thread tq's k positions {2tq, 2tq+1, 2tq+8, 2tq+9} of k-step s are the physical
//    elements qk_col(tq, s) + {0, 1, 2, 3}: each thread reads D / 4 contiguous bytes of a key row
//    in 16-byte chunks (rotated by tq at D = 256 so a row's 4 threads hit distinct banks).
//  * O += P V: column n of n-tile nt is the physical element pv_col(nt, n): thread g (which loads
//    B column n = g) reads D / 8 contiguous bytes of each of its 4 keys' V rows (16-byte chunks
//    rotated by g at D = 256, likewise).
template <int D>
__device__ __forceinline__ int qk_col(int tq, int s) {
  constexpr int NC = D / 64;  // 16-byte chunks per thread and key
  const int rot = D == 256 ? 2 * (tq >> 1) : 0;
  return (D / 4) * tq + 16 * (((s >> 2) + rot) & (NC - 1)) + 4 * (s & 3);
}
template <int D>
__device__ __forceinline__ int pv_col(int nt, int n) {
  constexpr int NC = D >= 128 ? D / 128 : 1;  // 16-byte chunks per thread and key (D = 64: 8 bytes)
  const int rot = D == 256 ? (n & 1) : 0;
  return (D / 8) * n + 16 * (((nt >> 4) + rot) & (NC - 1)) + (nt & 15);
}

// Shared memory: Q ([kRows][D + 8] 16-bit), then
//  * bf16 caches: 2 stages of K + V tiles ([kBN][D + 8] bf16 each, rows padded by 16 bytes for
//    ldmatrix);
//  * fp8: kFp8Stages stages of the tiles' stored bytes (K rows kv_ld<D, KT>(false) bytes apart, V
//    rows kv_ld(true): padded at D = 64 / 256, swizzled at 128, so that the fragment loads above
//    are free of bank conflicts) and scales;
//  * int4: kQuantStages stages of the stored bytes and scales (cp.async) and one bf16 K + V tile
//    they are decoded into.
// fp8 stages (ptxas: registers per thread): D = 64: 4 (41 KB a block; 103 registers: 4 blocks per
// SM); D = 128: 3 (4.3 KB of Q + 3 x 16.9 KB = 55 KB; 156 registers: 3 blocks per SM, the wide
// form 128: 4); D = 256: 2 (77 KB; 206 registers: 2 blocks per SM).
template <int D>
constexpr int kFp8Stages = D == 256   ? 2
                           : D == 128 ? 3
                                      : 4;
// fp8 at D = 128: rows unpadded, 16-byte chunk c of row r stored at chunk c ^ (r & 7), which keeps
// both fragment loads free of bank conflicts with 2 KB less per stage than padding (so 4 blocks
// of 3 stages fit an SM).
template <int D>
constexpr bool kFp8Swizzle = D == 128;
template <int D>
__device__ __forceinline__ int fp8_chunk(int r, int c) {  // where chunk c of row r is stored
  return kFp8Swizzle<D> ? c ^ (r & 7) : c;
}
// fp8 at D = 128 runs 4 blocks per SM (the wide form: 3 stages of 16.9 KB + Q = 55 KB each)
// when a split has at least this many blocks (tokens x head groups), else 3. H200, 8B, ctx 8192,
// ms per step: b = 64: 22.4 with 3 blocks, 20.7 with 4; b = 1: 5.07 with 3, 5.58 with 4 (its
// blocks, launched early by PDL, hold every SM's shared memory while they wait for the kernel
// before them: 5.15 without PDL).
constexpr int64_t kFp8WideBlocks = 256;
// At most this many query heads per KV head (every Qwen3 / Qwen3.5 / Qwen3-Next shape: 2 to 8),
// fp8 runs the key-rows form: S^T = K Q^T and O^T += V^T P^T, the keys (and head-dimension
// elements) as the MMA's 16 rows and the heads as its 8 columns. The head-rows form pads G heads
// to 16 rows (a quarter used at G = 4) and issues two MMAs per k-step where this form issues one,
// and its O takes D / 2 registers a lane against D / 4 here. H200, 8B (G = 4), fp8 KV, ctx 8192,
// graph ms per step, head rows -> key rows: b = 2 6.29 -> 6.23, 4 7.07 -> 6.56, 8 7.45 -> 6.85,
// 16 9.07 -> 8.20, 64 19.41 -> 17.91 (eager 19.16 -> 17.20); b = 256 at ctx 2048 22.95 -> 20.92
// (eager); Qwen3.5 9B-class (D = 256) b = 64 ctx 4096 9.72 -> 9.36. At b = 1 (8 blocks) key rows
// was slower, 5.01 -> 5.32 (5.0 without PDL: its blocks, launched early, wait holding the SMs
// the kernel before them runs on), so below kKeyRowsMinBlocks blocks per split head rows
// run. 2 stages and 5 blocks per SM at D = 128 (96 registers) measured the same as 3 and 4.
// bf16 and int4 caches (int4 decoded into the bf16 tiles) have a key-rows form too, K's A
// fragment by ldmatrix and V^T's by ldmatrix.trans (140 against 167 registers at D = 128, 225
// against 255 at 256), by the same rule. Head rows -> key rows, same shapes, graph ms: bf16 8B
// b = 16 10.00 -> 9.98, 64 24.83 -> 24.74 (attention is ~88% of the step's floor already), 9B
// class b = 64 ctx 4096 10.59 -> 10.51; int4 8B b = 16 10.54 -> 10.29, 64 26.27 -> 25.40; b = 1
// equal within 0.1% for both. set_decode_mma_form() forces a form.
constexpr int kKeyRowsMaxHeads = 8;
constexpr int64_t kKeyRowsMinBlocks = 16;
template <int D>
constexpr int kQuantStages = 2;
template <int D>
constexpr int tile_bytes() {
  return kBN * (D + 8) * 2;
}
template <int D, DType KT>
constexpr int kv_ld(bool values) {  // bytes between two rows of a stage
  if constexpr (KT == DType::F8E4M3) return kFp8Swizzle<D> || (D == 64 && !values) ? D : D + 16;
  return static_cast<int>(kv_row_bytes<KT>(D));
}
template <int D, DType KT>
constexpr int raw_bytes() {  // one stage: K and V bytes, then K and V scales
  return kBN * (kv_ld<D, KT>(false) + kv_ld<D, KT>(true)) +
         2 * kBN * static_cast<int>(kv_row_scales<KT>(D) * sizeof(KvScale<KT>));
}
template <int D, DType KT>
constexpr int smem_bytes() {
  if constexpr (KT == DType::F8E4M3) {
    return kRows * (D + 8) * 2 + kFp8Stages<D> * raw_bytes<D, KT>();
  } else if constexpr (kIsQuantKv<KT>) {
    return kRows * (D + 8) * 2 + 2 * tile_bytes<D>() + kQuantStages<D> * raw_bytes<D, KT>();
  } else {
    return kRows * (D + 8) * 2 + 4 * tile_bytes<D>();
  }
}
// The merge area (kWarps x kRows x D floats) reuses the K/V tiles (fp8: the stages).
static_assert(kWarps * kRows * 64 * 4 <= 2 * kBN * (64 + 8) * 2);
static_assert(kWarps * kRows * 256 * 4 <= 2 * kBN * (256 + 8) * 2);
template <int D>
constexpr bool kFp8MergeFits = kWarps* kRows* D * 4 <= kFp8Stages<D>* raw_bytes<D, DType::F8E4M3>();
static_assert(kFp8MergeFits<64> && kFp8MergeFits<128> && kFp8MergeFits<256>);

// KT: the cache dtype (BF16, F8E4M3 or U4X2). G (rows_per_block) <= 16 query heads of KV head
// (blockIdx.y * G) / group.
// kWide (fp8 at D = 128 only): 4 blocks per SM instead of 3, the Q fragments re-read from shared
// memory each tile to fit 128 registers (see kFp8WideBlocks).
// kKeyRows (G <= 8): the keys are the MMA's rows and the heads its columns (see
// kKeyRowsMaxHeads).
template <int D, DType KT, bool kWide = false, bool kKeyRows = false>
// Blocks per SM: 3 up to head_dim 128 (bf16: 168 registers, 74 KB of shared memory); fp8's wide
// and key-rows forms 4 (key rows: 110 registers); at 256, 1 (key rows: 2, 164 registers).
__global__ void __launch_bounds__(kThreads,
                                  D <= 128 ? (kWide || (kKeyRows && KT == DType::F8E4M3) ? 4 : 3)
                                           : (kKeyRows && KT == DType::F8E4M3 ? 2 : 1))
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
  constexpr int S = kFold ? kFp8Stages<D> : kQuant ? kQuantStages<D> : 2;  // pipeline stages
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);  // [kRows][LD] (fp8: f16 bits)
  bf16* Ks = Qs + kRows * LD;                // bf16: [2][kBN][LD]; int4: [kBN][LD]; fp8: none
  bf16* Vs = Ks + (kQuant ? 1 : 2) * kBN * LD;
  unsigned char* raw = kFold ? reinterpret_cast<unsigned char*>(Ks)
                             : reinterpret_cast<unsigned char*>(Vs + (kQuant ? 1 : 2) * kBN * LD);
  __shared__ float sm_m[kWarps][kRows], sm_l[kWarps][kRows];
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
  // fp8: the A fragment of k-step s (rows g, g + 8; physical elements qk_col(tq, s) + {0..3}).
  [[maybe_unused]] auto q_frag = [&](int s, uint32_t(&f)[4]) {
    const int c = qk_col<D>(tq, s);
    const uint2 lo = *reinterpret_cast<const uint2*>(Qs + g * LD + c);
    const uint2 hi = *reinterpret_cast<const uint2*>(Qs + (g + 8) * LD + c);
    f[0] = lo.x;
    f[1] = hi.x;
    f[2] = lo.y;
    f[3] = hi.y;
  };
  // Tiles inside pages: with a power-of-two page size that is a multiple of kBN and a split that
  // starts on a tile boundary (kDecodeSplitAlign keys: every batch of >= 2 tokens), each tile's
  // keys are consecutive rows of one page, hk rows apart. The tile loads then read the page table
  // once per tile and step each thread's source and shared addresses by constants; a per-chunk
  // paged_row() (page-table read, 64-bit row arithmetic, generic-to-shared conversion) was about
  // 40 instructions per 16-byte chunk, ~45% of the fp8 key-rows kernel's instructions (ncu, H200,
  // 8B, b = 64, ctx 8192: 556 warp instructions per warp and tile).
  const bool tiles_in_pages =
      (a.page_size & (a.page_size - 1)) == 0 && a.page_size % kBN == 0 && k_begin % kBN == 0;
  const int page_shift = __ffs(a.page_size) - 1;
  // Tile j's first cache row (tiles_in_pages only).
  auto tile_row = [&](int j) -> int64_t {
    const int k0 = k_begin + j * kBN;
    return (static_cast<int64_t>(pt[k0 >> page_shift]) * a.page_size + (k0 & (a.page_size - 1))) *
               a.hk +
           kh;
  };
  // The cache row of key r of tile j, or -1 past the split (any page size and split start).
  auto cache_row = [&](int j, int r) -> int64_t {
    const int key = k_begin + j * kBN + r;
    return key < k_end ? prefill::paged_row(pt, key, a.page_size, a.hk, kh) : -1;
  };
  // Tile j's K and V rows (kRowBytes each, 16-byte chunks, from caches kc / vc) into shared
  // memory: thread tid copies chunk c0 = tid % (kRowBytes / 16) of rows r0 + i * kRowStep, row r
  // to the shared addresses sk + k_at(r) and sv + v_at(r); rows past the split are zero-filled.
  // kRowBytes: a std::integral_constant; row0: tile_row(j) when tiles_in_pages (else unused).
  auto copy_rows = [&](auto row_bytes, int j, int64_t row0, const void* kc, const void* vc,
                       uint32_t sk, uint32_t sv, auto k_at, auto v_at) {
    constexpr int kRowBytes = decltype(row_bytes)::value, NC = kRowBytes / 16;
    constexpr int kSteps = kBN * NC / kThreads, kRowStep = kThreads / NC;
    static_assert(kThreads % NC == 0 && kBN * NC % kThreads == 0);
    const int r0 = tid / NC, c0 = tid % NC;
    const unsigned char* kb = static_cast<const unsigned char*>(kc);
    const unsigned char* vb = static_cast<const unsigned char*>(vc);
    if (tiles_in_pages) {
      const int n_valid = k_end - (k_begin + j * kBN);  // keys of the tile in the split
      const int64_t off = (row0 + static_cast<int64_t>(r0) * a.hk) * kRowBytes + c0 * 16;
      const int64_t step = static_cast<int64_t>(kRowStep) * a.hk * kRowBytes;
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const int r = r0 + i * kRowStep;
        cp_async16_s(sk + k_at(r), kb + off + i * step, r < n_valid);
        cp_async16_s(sv + v_at(r), vb + off + i * step, r < n_valid);
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int r = r0 + i * kRowStep;
      const int64_t row = cache_row(j, r);
      const int64_t off = row >= 0 ? row * kRowBytes + c0 * 16 : 0;
      cp_async16_s(sk + k_at(r), kb + off, row >= 0);
      cp_async16_s(sv + v_at(r), vb + off, row >= 0);
    }
  };
  // bf16: tile j's K and V rows straight into tile buffer `buf`.
  auto load_kv = [&](int j, int buf) {
    const int c0 = tid % CH;
    const auto at = [&](int r) { return (r * LD + c0 * 8) * 2; };
    copy_rows(std::integral_constant<int, D * 2>{}, j, tiles_in_pages ? tile_row(j) : 0, a.k_cache,
              a.v_cache, smem_u32(Ks + buf * kBN * LD), smem_u32(Vs + buf * kBN * LD), at, at);
  };
  // Quantized: tile j's stored bytes and scales into raw stage `st` (rows past the split zeroed).
  constexpr int RB = static_cast<int>(kv_row_bytes<KT>(D));       // bytes of a row
  constexpr int RS = static_cast<int>(kv_row_scales<KT>(D));      // scales of a row
  constexpr int SB = RS * static_cast<int>(sizeof(KvScale<KT>));  // their bytes (f32 / f16)
  static_assert(!kQuant || SB % 4 == 0, "a row's scales are copied 4 bytes at a time");
  constexpr int KLD = kv_ld<D, KT>(false), VLD = kv_ld<D, KT>(true);  // row strides of a stage
  constexpr int kRawBytes = raw_bytes<D, KT>();                       // one stage
  auto raw_k = [&](int st) { return raw + st * kRawBytes; };
  auto raw_v = [&](int st) { return raw + st * kRawBytes + kBN * KLD; };
  auto raw_ks = [&](int st) {
    return reinterpret_cast<KvScale<KT>*>(raw + st * kRawBytes + kBN * (KLD + VLD));
  };
  auto raw_vs = [&](int st) { return raw_ks(st) + kBN * RS; };
  auto load_raw = [&](int j, int st) {
    constexpr int RC = RB / 16;  // 16-byte chunks of a row
    // fp8's swizzle (chunk c of row r at c ^ (r & 7)) is the same for every row a thread copies:
    // they are kThreads / RC apart.
    static_assert(!kFold || !kFp8Swizzle<D> || (kThreads / RC) % 8 == 0);
    const int cs = kFold ? fp8_chunk<D>(tid / RC, tid % RC) : tid % RC;
    const int64_t row0 = tiles_in_pages ? tile_row(j) : 0;
    copy_rows(
        std::integral_constant<int, RB>{}, j, row0, a.k_cache, a.v_cache, smem_u32(raw_k(st)),
        smem_u32(raw_v(st)), [&](int r) { return r * KLD + cs * 16; },
        [&](int r) { return r * VLD + cs * 16; });
    // The rows' scales (4-byte chunks).
    constexpr int SC = SB / 4;
    const unsigned char* ksq = static_cast<const unsigned char*>(a.k_scales);
    const unsigned char* vsq = static_cast<const unsigned char*>(a.v_scales);
#pragma unroll
    for (int i = 0; i < (kBN * SC + kThreads - 1) / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / SC, c = idx % SC;
      if (idx >= kBN * SC) break;
      const int64_t row = !tiles_in_pages                 ? cache_row(j, r)
                          : k_begin + j * kBN + r < k_end ? row0 + static_cast<int64_t>(r) * a.hk
                                                          : -1;
      const int64_t soff = row >= 0 ? row * SB + c * 4 : 0;
      cp_async4(reinterpret_cast<unsigned char*>(raw_ks(st)) + idx * 4, ksq + soff, row >= 0);
      cp_async4(reinterpret_cast<unsigned char*>(raw_vs(st)) + idx * 4, vsq + soff, row >= 0);
    }
  };
  // int4: raw stage `st` decoded and scaled per 32-element group into the bf16 K and V tiles.
  auto decode_raw = [&](int st) {
    if constexpr (KT == DType::U4X2) {
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
  static_assert(!kWide || (kFold && D == 128), "the wide form is fp8 at head_dim 128");
  static_assert(!kKeyRows || !kWide, "the wide form is a head-rows form");
  constexpr bool kQInRegisters = D <= 128 && !kWide && !kKeyRows;
  uint32_t qa[kQInRegisters ? D / 16 : 1][4];
  // Key rows: Q's B fragments (head g, physical elements qk_col(tq, s) + {0, 1} and + {2, 3}),
  // O^T's tiles (16 head-dimension rows by 8 heads) and m, l of heads 2 tq and 2 tq + 1.
  // Head rows: O's tiles (16 heads by 8 head-dimension columns), m, l of heads g and g + 8.
  uint32_t qb[kKeyRows ? D / 16 : 1][2];
  constexpr int kOTiles = kKeyRows ? D / 16 : D / 8;
  float o[kOTiles][4];
#pragma unroll
  for (int i = 0; i < kOTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int wk = warp * kWarpKeys;  // this warp's first key within a tile

  // fp8 P V: this thread (B column / A row g) reads D / 8 bytes of keys 2tq, 2tq + 1, 2tq + 8,
  // 2tq + 9 of stage `st`'s V rows, chunk c of kVChunks (16 bytes; 8 at D = 64), as x[key][word].
  constexpr int kVChunks = D >= 128 ? D / 128 : 1, kVWords = D == 64 ? 2 : 4;
  [[maybe_unused]] auto load_v_words = [&](int st, int c, uint32_t(&x)[4][kVWords]) {
    const int rot = D == 256 ? (g & 1) : 0;
    const unsigned char* vr = raw_v(st) + (wk + 2 * tq) * VLD;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int off = D == 64 ? 8 * g
                              : 16 * fp8_chunk<D>(2 * tq + (k & 1),
                                                  kVChunks * g + ((c + rot) & (kVChunks - 1)));
      const unsigned char* p = vr + ((k >> 1) * 8 + (k & 1)) * VLD + off;
      if constexpr (kVWords == 2) {
        const uint2 w = *reinterpret_cast<const uint2*>(p);
        x[k][0] = w.x;
        x[k][1] = w.y;
      } else {
        const uint4 w = *reinterpret_cast<const uint4*>(p);
        x[k][0] = w.x;
        x[k][1] = w.y;
        x[k][2] = w.z;
        x[k][3] = w.w;
      }
    }
  };
  // Word w's bytes paired across keys into e4m3x2 (low byte: the lower key): lo0 / hi0 = bytes
  // 0, 1 / 2, 3 of keys 2tq, 2tq + 1; lo1 / hi1 the same of keys 2tq + 8, 2tq + 9.
  struct VPairs {
    uint32_t lo0, hi0, lo1, hi1;
  };
  [[maybe_unused]] auto pair_v_words = [](const uint32_t(&x)[4][kVWords], int w) {
    return VPairs{__byte_perm(x[0][w], x[1][w], 0x5140u), __byte_perm(x[0][w], x[1][w], 0x7362u),
                  __byte_perm(x[2][w], x[3][w], 0x5140u), __byte_perm(x[2][w], x[3][w], 0x7362u)};
  };

  // Key rows: this warp's 16 keys of the tile in stage `st` (fp8) or in tiles ks / vs (bf16, int4
  // decoded); the first is key kb. Described for fp8; bf16 reads the same fragments by ldmatrix.
  //  * S^T = K Q^T: A is the K fragment the head-rows form reads as two B fragments (keys wk + g
  //    and wk + 8 + g), B is Q's (head g): one MMA per k-step instead of two. This lane holds
  //    s4 = S^T of keys wk + g (s4[0], s4[1]) and wk + 8 + g (s4[2], s4[3]) for heads 2 tq, 2 tq
  //    + 1.
  //  * The softmax runs down the columns (over the 8 lanes of one tq).
  //  * O^T += V^T P^T: A is V^T, the head-rows form's B fragments of n-tiles nt and nt + 1 (one
  //    m-tile, 16 physical head-dimension elements: pv_col(nt, g) and pv_col(nt + 1, g)); B is
  //    P^T (keys 2 tq, 2 tq + 1 and 2 tq + 8, 2 tq + 9 of head g), moved from the lanes that
  //    computed it by four shuffles.
  [[maybe_unused]] auto key_rows_tile = [&](int st, int kb, const bf16* ks, const bf16* vs) {
    if constexpr (kKeyRows) {
      float s4[4] = {0.f, 0.f, 0.f, 0.f};
      if constexpr (!kFold) {  // bf16 tiles (int4: decoded into them): K's A fragment by ldmatrix
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t b[4];  // keys 0-7 / dims 0-7, keys 0-7 / 8-15, keys 8-15 / 0-7, 8-15 / 8-15
          ldsm_x4(b, ks + (wk + (lane & 7) + ((lane >> 4) << 3)) * LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
          const uint32_t af[4] = {b[0], b[2], b[1], b[3]};
          mma(s4, af, qb[kKeyRows ? kk : 0][0], qb[kKeyRows ? kk : 0][1]);
        }
      } else {
        constexpr int NC = D / 64;
        const int rot = D == 256 ? 2 * (tq >> 1) : 0;
        const unsigned char* kr0 = raw_k(st) + (wk + g) * KLD;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int off = 16 * fp8_chunk<D>(g, NC * tq + ((c + rot) & (NC - 1)));
          const uint4 w0 = *reinterpret_cast<const uint4*>(kr0 + off);
          const uint4 w1 = *reinterpret_cast<const uint4*>(kr0 + 8 * KLD + off);
          const uint32_t k0[4] = {w0.x, w0.y, w0.z, w0.w}, k1[4] = {w1.x, w1.y, w1.z, w1.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint32_t af[4] = {e4m3x2_to_f16x2<0>(k0[i]), e4m3x2_to_f16x2<0>(k1[i]),
                                    e4m3x2_to_f16x2<1>(k0[i]), e4m3x2_to_f16x2<1>(k1[i])};
            mma_f16(s4, af, qb[kKeyRows ? 4 * c + i : 0][0], qb[kKeyRows ? 4 * c + i : 0][1]);
          }
        }
      }
      float vsc0 = 1.f, vsc1 = 1.f;
      if constexpr (kFold) {
        const float ksc0 = raw_ks(st)[wk + g], ksc1 = raw_ks(st)[wk + 8 + g];
        vsc0 = raw_vs(st)[wk + g] * kFoldV;
        vsc1 = raw_vs(st)[wk + 8 + g] * kFoldV;
        s4[0] *= ksc0;
        s4[1] *= ksc0;
        s4[2] *= ksc1;
        s4[3] *= ksc1;
      }
      if (kb + kWarpKeys > k_end) {  // the split ends inside this warp's keys
        if (kb + g >= k_end) s4[0] = s4[1] = -INFINITY;
        if (kb + 8 + g >= k_end) s4[2] = s4[3] = -INFINITY;
      }
      float al[2], p[2][2];  // p[key half][head]
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float mx = fmaxf(m[e], fmaxf(s4[e], s4[2 + e]));
#pragma unroll
        for (int x = 4; x < 32; x <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
        const float sh = mx == -INFINITY ? 0.f : mx * sl2;
        al[e] = ex2(m[e] * sl2 - sh);
        m[e] = mx;
        p[0][e] = ex2(fmaf(s4[e], sl2, -sh));
        p[1][e] = ex2(fmaf(s4[2 + e], sl2, -sh));
        l[e] = l[e] * al[e] + p[0][e] + p[1][e];
      }
      // key wk + g (u0) and wk + 8 + g (u1), heads 2 tq, 2 tq + 1
      const uint32_t u0 =
          kFold ? pack_f16_sat(p[0][0] * vsc0, p[0][1] * vsc0) : pack_bf16(p[0][0], p[0][1]);
      const uint32_t u1 =
          kFold ? pack_f16_sat(p[1][0] * vsc1, p[1][1] * vsc1) : pack_bf16(p[1][0], p[1][1]);
      // P^T's B fragment: P[key][head g] for keys 2 tq, 2 tq + 1 (b0) and + 8 (b1); key k's heads
      // 2 j, 2 j + 1 are in lane 4 k + j.
      const int src0 = 8 * tq + (g >> 1), src1 = src0 + 4;
      const uint32_t sel = (g & 1) ? 0x7632u : 0x5410u;
      const uint32_t b0 =
          __byte_perm(__shfl_sync(0xffffffffu, u0, src0), __shfl_sync(0xffffffffu, u0, src1), sel);
      const uint32_t b1 =
          __byte_perm(__shfl_sync(0xffffffffu, u1, src0), __shfl_sync(0xffffffffu, u1, src1), sel);
      if (__any_sync(0xffffffffu, al[0] != 1.f || al[1] != 1.f)) {
#pragma unroll
        for (int i = 0; i < kOTiles; ++i) {
          o[i][0] *= al[0];
          o[i][1] *= al[1];
          o[i][2] *= al[0];
          o[i][3] *= al[1];
        }
      }
      if constexpr (!kFold) {  // V^T's A fragment by ldmatrix.trans (dims x keys)
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];  // keys 0-7 / dims 0-7, keys 8-15 / 0-7, keys 0-7 / 8-15, 8-15 / 8-15
          ldsm_x4_t(
              b, vs + (wk + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
          const uint32_t av[4] = {b[0], b[2], b[1], b[3]};
          mma(o[dp], av, b0, b1);
        }
      } else {  // fp8: V^T's A fragment from the stored bytes
#pragma unroll
        for (int c = 0; c < kVChunks; ++c) {
          uint32_t x[4][kVWords];
          load_v_words(st, c, x);
#pragma unroll
          for (int w = 0; w < kVWords; ++w) {
            const int mt = 8 * c + 2 * w;  // n-tiles 2 mt .. 2 mt + 3 of the head-rows form
            const VPairs v = pair_v_words(x, w);
            const uint32_t a0[4] = {e4m3x2_to_f16x2<0>(v.lo0), e4m3x2_to_f16x2<1>(v.lo0),
                                    e4m3x2_to_f16x2<0>(v.lo1), e4m3x2_to_f16x2<1>(v.lo1)};
            const uint32_t a1[4] = {e4m3x2_to_f16x2<0>(v.hi0), e4m3x2_to_f16x2<1>(v.hi0),
                                    e4m3x2_to_f16x2<0>(v.hi1), e4m3x2_to_f16x2<1>(v.hi1)};
            mma_f16(o[mt], a0, b0, b1);
            mma_f16(o[mt + 1], a1, b0, b1);
          }
        }
      }
    }
  };

  for (int it = 0; it < n_tiles; ++it) {
    const bf16* ks = Ks;
    const bf16* vs = Vs;
    [[maybe_unused]] const int st = it % S;  // quantized: this tile's stage
    if constexpr (kFold) {
      cp_wait<S - 2>();  // this thread's copies of Q's group and tile `it` have landed
      __syncthreads();   // ... everyone's; every warp is done with tile it - 1
      // Stage (it + S - 1) % S = (it - 1) % S was last read by tile it - 1.
      if (it + S - 1 < n_tiles) load_raw(it + S - 1, (it + S - 1) % S);
      cp_commit();  // possibly empty: keeps the group count uniform
    } else if constexpr (kQuant) {
      // Stage (it + S - 1) % S was last read by the decode of tile it - 1 (before its barrier).
      if (it + S - 1 < n_tiles) load_raw(it + S - 1, (it + S - 1) % S);
      cp_commit();       // possibly empty: keeps the group count uniform
      cp_wait<S - 1>();  // Q and tile `it`'s bytes have landed
      __syncthreads();   // ... for every thread; every warp is done with tile it - 1
      decode_raw(st);
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
    if (kKeyRows && it == 0) {
#pragma unroll
      for (int kk = 0; kk < (kKeyRows ? D / 16 : 0); ++kk) {
        if constexpr (kFold) {
          const uint2 lo = *reinterpret_cast<const uint2*>(Qs + g * LD + qk_col<D>(tq, kk));
          qb[kk][0] = lo.x;
          qb[kk][1] = lo.y;
        } else {  // Q[head g][16 kk + 2 tq + {0, 1}] and [... + 8 + {0, 1}]
          qb[kk][0] = *reinterpret_cast<const uint32_t*>(Qs + g * LD + kk * 16 + 2 * tq);
          qb[kk][1] = *reinterpret_cast<const uint32_t*>(Qs + g * LD + kk * 16 + 8 + 2 * tq);
        }
      }
    }
    if (kQInRegisters && it == 0) {
#pragma unroll
      for (int kk = 0; kk < (kQInRegisters ? D / 16 : 0); ++kk) {
        if constexpr (kFold) {
          q_frag(kk, qa[kk]);
        } else {
          ldsm_x4(qa[kk], Qs + (lane & 15) * LD + kk * 16 + (lane >> 4) * 8);
        }
      }
    }
    const int kb = k_begin + it * kBN + wk;  // this warp's first key
    if (kKeyRows && kb < k_end) {            // warp-uniform
      key_rows_tile(st, kb, ks, vs);
    } else if (!kKeyRows && kb < k_end) {
      float sc[2][4] = {};
      if constexpr (kFold) {
        // S = Q K^T from the stored bytes: B column g of n-tile j is key wk + 8 j + g, whose
        // physical elements qk_col(tq, s) + {0..3} are word s % 4 of 16-byte chunk s / 4.
        constexpr int NC = D / 64;
        const int rot = D == 256 ? 2 * (tq >> 1) : 0;
        const unsigned char* kr0 = raw_k(st) + (wk + g) * KLD;  // keys wk + g, wk + 8 + g
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int off = 16 * fp8_chunk<D>(g, NC * tq + ((c + rot) & (NC - 1)));
          const uint4 w0 = *reinterpret_cast<const uint4*>(kr0 + off);
          const uint4 w1 = *reinterpret_cast<const uint4*>(kr0 + 8 * KLD + off);
          const uint32_t k0[4] = {w0.x, w0.y, w0.z, w0.w}, k1[4] = {w1.x, w1.y, w1.z, w1.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            uint32_t qs[4];
            if constexpr (!kQInRegisters) q_frag(4 * c + i, qs);
            const uint32_t(&qf)[4] = kQInRegisters ? qa[kQInRegisters ? 4 * c + i : 0] : qs;
            mma_f16(sc[0], qf, e4m3x2_to_f16x2<0>(k0[i]), e4m3x2_to_f16x2<1>(k0[i]));
            mma_f16(sc[1], qf, e4m3x2_to_f16x2<0>(k1[i]), e4m3x2_to_f16x2<1>(k1[i]));
          }
        }
      }
#pragma unroll
      for (int kk = 0; kk < (kFold ? 0 : D / 16); ++kk) {
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
      // fp8: this lane's 4 keys (columns 2 tq, 2 tq + 1 of each 8-key half): S times the key's
      // scale; their V scales (times kFoldV) go into P.
      [[maybe_unused]] float vsc[2][2];
      if constexpr (kFold) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = wk + j * 8 + tq * 2 + e;
            const float ksc = raw_ks(st)[key];
            sc[j][e] *= ksc;
            sc[j][2 + e] *= ksc;
            vsc[j][e] = raw_vs(st)[key] * kFoldV;
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
      if constexpr (kFold) {
        // B[k][n] of n-tile nt is V[key wk + k][pv_col(nt, n)]: this thread (n = g) reads D / 8
        // bytes of keys 2tq, 2tq + 1 (b0) and 2tq + 8, 2tq + 9 (b1); byte nt % 16 of chunk
        // nt / 16 of two keys' rows is paired into one e4m3x2 (low byte: the lower key).
#pragma unroll
        for (int c = 0; c < kVChunks; ++c) {
          uint32_t x[4][kVWords];
          load_v_words(st, c, x);
#pragma unroll
          for (int w = 0; w < kVWords; ++w) {
            const int nt = 16 * c + 4 * w;
            const VPairs v = pair_v_words(x, w);
            mma_f16(o[nt], pa, e4m3x2_to_f16x2<0>(v.lo0), e4m3x2_to_f16x2<0>(v.lo1));
            mma_f16(o[nt + 1], pa, e4m3x2_to_f16x2<1>(v.lo0), e4m3x2_to_f16x2<1>(v.lo1));
            mma_f16(o[nt + 2], pa, e4m3x2_to_f16x2<0>(v.hi0), e4m3x2_to_f16x2<0>(v.hi1));
            mma_f16(o[nt + 3], pa, e4m3x2_to_f16x2<1>(v.hi0), e4m3x2_to_f16x2<1>(v.hi1));
          }
        }
      }
#pragma unroll
      for (int dp = 0; dp < (kFold ? 0 : D / 16); ++dp) {
        uint32_t b[4];
        ldsm_x4_t(b,
                  vs + (wk + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
        mma(o[2 * dp], pa, b[0], b[1]);
        mma(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    if constexpr (!kQuant) __syncthreads();  // this buffer is refilled in the next iteration
  }
  __syncthreads();  // every warp is done with the tiles: the merge area reuses them

  // Merge the 4 warps' states (rows < G) through shared memory.
  float* sm_o = reinterpret_cast<float*>(kFold ? raw : reinterpret_cast<unsigned char*>(Ks));
  // [kWarps][kRows][D], in the physical order of the head dimension
  constexpr float unfold = kFold ? 1.f / kFoldV : 1.f;
#pragma unroll
  for (int e = 0; e < (kKeyRows ? 2 : 0); ++e) {  // key rows: head 2 tq + e
    float lsum = l[e];
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) lsum += __shfl_xor_sync(0xffffffffu, lsum, x);
    const int r = 2 * tq + e;
    if (r >= G) continue;
    if (g == 0) {
      sm_m[warp][r] = m[e] == -INFINITY ? -INFINITY : m[e] * sl2;
      sm_l[warp][r] = lsum;
    }
    float* orow = sm_o + (warp * kRows + r) * D;
#pragma unroll
    for (int i = 0; i < (kKeyRows ? kOTiles : 0); ++i) {
      orow[kFold ? pv_col<D>(2 * i, g) : 16 * i + g] = o[i][e] * unfold;
      orow[kFold ? pv_col<D>(2 * i + 1, g) : 16 * i + 8 + g] = o[i][2 + e] * unfold;
    }
  }
#pragma unroll
  for (int h = 0; h < (kKeyRows ? 0 : 2); ++h) {
    const float lsum = quad_sum(l[h]);
    const int r = g + 8 * h;
    if (r >= G) continue;
    if (tq == 0) {
      sm_m[warp][r] = m[h] == -INFINITY ? -INFINITY : m[h] * sl2;
      sm_l[warp][r] = lsum;
    }
    float* orow = sm_o + (warp * kRows + r) * D;
#pragma unroll
    for (int i = 0; i < (kKeyRows ? 0 : D / 8); ++i) {
#pragma unroll
      for (int e = 0; e < 2; ++e)
        orow[kFold ? pv_col<D>(i, 2 * tq + e) : i * 8 + 2 * tq + e] = o[i][2 * h + e] * unfold;
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

// The instance's kernel with its shared memory allowed (on the current device).
template <int D, DType KT, bool kWide, bool kKeyRows>
auto configured_kernel() {
  constexpr auto kernel = decode_mma_kernel<D, KT, kWide, kKeyRows>;
  allow_dynamic_smem(kernel, smem_bytes<D, KT>());
  return kernel;
}

template <int D, DType KT, bool kWide, bool kKeyRows = false>
void launch_w(const AttentionArgs& a, int32_t rows, int32_t splits, int32_t fixed, int32_t align,
              float* partial, cudaStream_t s) {
  constexpr int smem = smem_bytes<D, KT>();
  const auto kernel = configured_kernel<D, KT, kWide, kKeyRows>();
  const dim3 grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.hq / rows),
                  static_cast<unsigned>(splits));
  launch_k(kernel, grid, kThreads, smem, s, a, rows, splits, fixed, align, partial);
}
template <int D, DType KT>
void launch_t(const AttentionArgs& a, int32_t rows, int32_t splits, int32_t fixed, int32_t align,
              float* partial, cudaStream_t s) {
  const int64_t blocks = static_cast<int64_t>(a.tokens) * (a.hq / rows);
  const DecodeMmaForm form = decode_mma_form();
  // Batch-invariant mode (fixed keys per split) keeps one form whatever the batch: the forms sum
  // in different orders, and a token's row must not depend on the tokens beside it.
  const bool by_batch = fixed == 0;
  if (rows <= kKeyRowsMaxHeads &&
      (form == DecodeMmaForm::kKeyRows ||
       (form == DecodeMmaForm::kAuto && by_batch && blocks >= kKeyRowsMinBlocks))) {
    return launch_w<D, KT, false, true>(a, rows, splits, fixed, align, partial, s);
  }
  if constexpr (KT == DType::F8E4M3 && D == 128) {
    if (by_batch && static_cast<int64_t>(a.tokens) * (a.hq / rows) >= kFp8WideBlocks)
      return launch_w<D, KT, true>(a, rows, splits, fixed, align, partial, s);
  }
  launch_w<D, KT, false>(a, rows, splits, fixed, align, partial, s);
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

int mma_resident_blocks(int64_t head_dim, DType cache_t) {
  // The key-rows instance: what every batch of >= kKeyRowsMinBlocks blocks runs.
  auto of = [](auto d, auto kt) {
    constexpr int D = decltype(d)::value;
    constexpr DType KT = decltype(kt)::value;
    static const int blocks = [] {
      int n = 0;
      SYV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, configured_kernel<D, KT, false, true>(), kThreads, smem_bytes<D, KT>()));
      return n;
    }();
    return blocks;
  };
  auto by_dtype = [&](auto d) {
    switch (cache_t) {
      case DType::F8E4M3:
        return of(d, std::integral_constant<DType, DType::F8E4M3>{});
      case DType::U4X2:
        return of(d, std::integral_constant<DType, DType::U4X2>{});
      default:
        return of(d, std::integral_constant<DType, DType::BF16>{});
    }
  };
  switch (head_dim) {
    case 64:
      return by_dtype(std::integral_constant<int, 64>{});
    case 128:
      return by_dtype(std::integral_constant<int, 128>{});
    default:
      return by_dtype(std::integral_constant<int, 256>{});
  }
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

namespace syv::cuda {
namespace {
std::atomic<int> g_mma_form{-1};  // -1: not read from the environment yet
}  // namespace

DecodeMmaForm decode_mma_form() {
  int v = g_mma_form.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("SYV_DECODE_MMA_FORM");
    const std::string_view f = e != nullptr ? e : "";
    v = static_cast<int>(f == "keys"    ? DecodeMmaForm::kKeyRows
                         : f == "heads" ? DecodeMmaForm::kHeadRows
                                        : DecodeMmaForm::kAuto);
    g_mma_form.store(v, std::memory_order_relaxed);
  }
  return static_cast<DecodeMmaForm>(v);
}
void set_decode_mma_form(DecodeMmaForm f) {
  g_mma_form.store(static_cast<int>(f), std::memory_order_relaxed);
}

}  // namespace syv::cuda
