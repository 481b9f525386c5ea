// The decode shared by the tensor-core kernels for quantized weights (quant_gemv_mma.cu,
// quant_gemm_mma.cu): weight rows as the A operand of mma.sync m16n8k16 (bf16, exact values), the
// activations as its B operand, and the k order inside each mma chosen to make the decode cheap.
//
// A lane (g, t) = (lane / 4, lane % 4) holds 32 consecutive columns [32 t, + 32) of a 128-column
// chunk, of two weight rows (g and g + 8 of a 16-row tile: 16 bytes of int4 or 32 of fp8 each)
// and of its token's activations (64 bytes: four 8-column vectors i). Each of the chunk's 8 mma
// steps (i, h) (h = 0, 1) multiplies 16 of those columns per row; which column sits at which of
// the mma's k positions is the same for both operands, so the sum is the chunk's dot product:
//  * int4: the pair (nibble j, nibble j + 4) of a 32-bit word is one LOP3 from bf16 pairs
//    128 + q (the nibble OR-ed into the mantissa of 2^7), minus 128 + z by one bf16x2 subtract:
//    q - z exactly. Step (i, h) takes word i of each row, pairs (2h, 2h + 4) at k positions
//    2t, 2t + 1 and (2h + 1, 2h + 5) at 2t + 8, 2t + 9; the activations (e_2h, e_2h+4) and
//    (e_2h+1, e_2h+5) of vector i. The group's scale multiplies the chunk's fp32 partial sums.
//  * fp8: bytes (b0, b2) and (b1, b3) of a word: one PRMT that also replicates each byte's sign
//    into the byte above, a shift and a mask give the bf16 whose exponent and mantissa fields are
//    the e4m3's (the value times 2^-120, subnormals included), and a bf16x2 multiply by 2^120
//    makes it exact. Step (i, h) takes word s = 2i + h (columns 4s .. 4s + 3) of each row, bytes
//    (0, 2) at k positions 2t, 2t + 1 and (1, 3) at 2t + 8, 2t + 9; the activations (e_4h,
//    e_4h+2) and (e_4h+1, e_4h+3) of vector i. The scale tile's value multiplies the partials.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace syv::cuda {

// n / d for 0 <= n < 2^31 by a multiply-high and a shift (d >= 1; CUTLASS's FastDivmod): a
// chunk's scale column, chunk / (group or scale tile width / 128), without a 64-bit division per
// chunk (3% of a gptq decode step at b = 16, docs/cuda-backend-notes.md "Run 15").
struct ChunkDiv {
  uint32_t d = 1, mul = 0, shift = 0;
  explicit ChunkDiv(uint32_t divisor) : d(divisor) {
    if (d > 1) {
      uint32_t l = 0;  // ceil(log2 d)
      while ((uint64_t{1} << l) < d) ++l;
      mul = static_cast<uint32_t>(((uint64_t{1} << (31 + l)) + d - 1) / d);
      shift = l - 1;  // 31 + l - 32
    }
  }
  __device__ __forceinline__ uint32_t operator()(uint32_t n) const {
    return d == 1 ? n : __umulhi(n, mul) >> shift;
  }
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ uint32_t bf16x2_sub(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                             *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                             *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

// bf16 pair (q_j - z, q_{j+4} - z) of the nibbles of `w`; c2 = bf16x2(128 + z).
template <int J>
__device__ __forceinline__ uint32_t int4_pair(uint32_t w, uint32_t c2) {
  return bf16x2_sub(((w >> (4 * J)) & 0x000f000fu) | 0x43004300u, c2);
}

// bf16 pair of two e4m3 bytes of `w`, exact: SEL 0xA280 takes bytes (0, 2), 0xB391 bytes (1, 3)
// (each byte with its sign replicated into the byte above).
template <uint32_t SEL>
__device__ __forceinline__ uint32_t fp8_pair(uint32_t w) {
  const uint32_t p = prmt(w, 0u, SEL);
  return bf16x2_mul((p << 4) & 0x87f087f0u, 0x7b807b80u);  // x 2^120
}

// The mma A fragment of step (i, h) (FMT 0: fp8, 1: int4) from a lane's words of its rows g (lo)
// and g + 8 (hi): 4 words a row for int4, 8 for fp8. zlo / zhi: int4's bf16x2(128 + z) per row.
template <int FMT>
__device__ __forceinline__ void weight_fragment(const uint32_t* lo_w, const uint32_t* hi_w,
                                                uint32_t zlo, uint32_t zhi, int i, int h,
                                                uint32_t (&a)[4]) {
  if constexpr (FMT == 1) {
    const uint32_t lo = lo_w[i], hi = hi_w[i];
    if (h == 0) {
      a[0] = int4_pair<0>(lo, zlo);
      a[1] = int4_pair<0>(hi, zhi);
      a[2] = int4_pair<1>(lo, zlo);
      a[3] = int4_pair<1>(hi, zhi);
    } else {
      a[0] = int4_pair<2>(lo, zlo);
      a[1] = int4_pair<2>(hi, zhi);
      a[2] = int4_pair<3>(lo, zlo);
      a[3] = int4_pair<3>(hi, zhi);
    }
  } else {
    const int s = 2 * i + h;
    const uint32_t lo = lo_w[s], hi = hi_w[s];
    a[0] = fp8_pair<0xA280u>(lo);
    a[1] = fp8_pair<0xA280u>(hi);
    a[2] = fp8_pair<0xB391u>(lo);
    a[3] = fp8_pair<0xB391u>(hi);
  }
}

// The mma B fragment (b0, b1) of half h of one activation vector xw (8 columns: 4 bf16 pairs),
// in the pair order weight_fragment<FMT> puts the weights in: one PRMT per word.
template <int FMT>
__device__ __forceinline__ void activation_fragment(const uint32_t (&xw)[4], int h, uint32_t& b0,
                                                    uint32_t& b1) {
  const uint32_t lo = FMT == 1 ? xw[h] : xw[2 * h];
  const uint32_t hi = FMT == 1 ? xw[h + 2] : xw[2 * h + 1];
  b0 = prmt(lo, hi, 0x5410u);
  b1 = prmt(lo, hi, 0x7632u);
}

// The activations of 32 consecutive columns x32 (16-byte aligned) staged in the pair order the
// mma steps read them: dst[0..3], the words (b0, b1) of step (i, h) at word 2 (2 i + h), so a lane
// reads a step's B fragment with one 8-byte load (the single-token kernels' staging).
template <int FMT>
__device__ __forceinline__ void stage_pair_order(const bf16* x32, uint4* dst) {
  uint4 xv[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) xv[i] = __ldg(reinterpret_cast<const uint4*>(x32) + i);
  const uint32_t(&xw)[4][4] = reinterpret_cast<const uint32_t(&)[4][4]>(xv);
  uint32_t o[16];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      activation_fragment<FMT>(xw[i], h, o[(2 * i + h) * 2], o[(2 * i + h) * 2 + 1]);
#pragma unroll
  for (int q = 0; q < 4; ++q)
    dst[q] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
}

// Columns per chunk: one int4 group, one fp8 scale column (at least).
constexpr int64_t kQuantChunk = 128;

// Whether the tensor-core kernels take w: K % 128 == 0; int4 groups a multiple of 128 columns
// without g_idx; fp8 scale tiles a multiple of 128 columns wide (any height); the data 16-byte
// aligned.
inline bool quant_mma_supports(const QuantWeight& w) {
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || w.k % kQuantChunk != 0) return false;
  if (w.kind == QuantKind::kFp8Block) return w.block_k % kQuantChunk == 0 && w.block_n > 0;
  return w.g_idx == nullptr && w.group_size > 0 && w.group_size % kQuantChunk == 0;
}

// A chunk's scale column for w: chunk / (group or scale tile width / 128).
inline ChunkDiv quant_chunk_div(const QuantWeight& w) {
  return ChunkDiv(static_cast<uint32_t>(
      (w.kind == QuantKind::kFp8Block ? w.block_k : w.group_size) / kQuantChunk));
}

// int4's zero-point word for weight_fragment: bf16x2(128 + z).
__device__ __forceinline__ uint32_t int4_zero_pair(uint32_t z) {
  return (0x4300u + z) * 0x10001u;
}

}  // namespace syv::cuda
