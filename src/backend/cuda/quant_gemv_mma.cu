// Tensor-core GEMVs for quantized weights at few tokens (up to 8 per launch): the weight is
// streamed once, dequantized in registers to exact bf16 values and multiplied on mma.sync
// m16n8k16 (bf16 in, fp32 accumulation), the activations as the mma's 8 columns: the decode of a
// weight is paid once for all 8 tokens, where quant_linear.cu's SIMT GEMV pays the multiply per
// token (and re-reads the weight per 4 tokens). docs/cuda-backend.md "Quantized weights" has the
// measured figures.
//
// Shapes taken: K % 128 == 0; int4 groups of a multiple of 128 columns without act-order g_idx;
// fp8 scale tiles a multiple of 128 columns wide (any height). Everything else goes to
// quant_linear.cu's SIMT GEMV or the dequantize path.
//
// Work split. A block owns 16 weight rows (the mma's M) and its 8 warps split the K range in
// chunks of 128 columns (warp w takes chunks w, w + 8, ...), each warp keeping several chunks'
// loads in flight; the warps' partial sums meet in shared memory at the end. Lane (g, t) =
// (lane / 4, lane % 4) loads 32 consecutive columns [128 c + 32 t, + 32) of rows g and g + 8 (16
// bytes of int4 or 32 of fp8 per row), and the same 32 columns of token g's activations.
//
// The mma sums over k in any order, so the 32 columns a lane holds are assigned to the mma's k
// positions in whatever order makes the decode cheapest, and the activations are permuted the
// same way (one PRMT per bf16 pair):
//  * int4: the pair (nibble j, nibble j + 4) of a 32-bit word is one LOP3 from bf16 pairs
//    128 + q (the nibble OR-ed into the mantissa of 2^7), minus 128 + z by one bf16x2 subtract:
//    q - z exactly. The group's scale multiplies the chunk's fp32 partial sums.
//  * fp8: bytes (b0, b2) and (b1, b3) of a word: one PRMT that also replicates each byte's sign
//    into the byte above, a shift and a mask give the bf16 whose exponent and mantissa fields are
//    the e4m3's (the value times 2^-120, subnormals included), and a bf16x2 multiply by 2^120
//    makes it exact. The scale tile's value multiplies the chunk's partial sums.
//
// Measured alternatives (H200, docs/cuda-backend-notes.md "Run 14"): blocks
// that stay resident and walk several row tiles, and a cp.async shared-memory ring of 8 KB per
// warp, were both slower than this one-tile-per-block kernel at 1-16 tokens.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"

namespace syv::cuda {
namespace {

constexpr int kMmaWarps = 8;     // warps per block, splitting K
constexpr int kMmaRows = 16;     // weight rows per block (the mma's M)
constexpr int kMmaTokens = 8;    // tokens per launch (the mma's N)
constexpr int64_t kChunk = 128;  // columns per chunk: one int4 group, one fp8 scale column

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

// out[t, n] = sum_k x[t, k] dequant(w)[n, k] for t < nt <= 8. FMT 0: fp8 tiles, 1: int4 groups.
template <int FMT, typename TO>
__global__ void __launch_bounds__(kMmaWarps * 32, 2)
    quant_gemv_mma_kernel(const QuantWeight w, const bf16* __restrict__ x, TO* __restrict__ out,
                          int nt) {
  constexpr int V = FMT == 0 ? 2 : 1;  // 16-byte vectors per lane, row and chunk
  constexpr int D = FMT == 0 ? 2 : 4;  // chunks in flight per warp (even: x is double-buffered)
  constexpr int64_t kRowChunkBytes = FMT == 0 ? kChunk : kChunk / 2;
  __shared__ float partial[kMmaWarps][32][4];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t N = w.n, K = w.k;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  const int64_t rows[2] = {min(n0 + g, N - 1), min(n0 + g + 8, N - 1)};  // clamped: never stored
  const int64_t row_bytes = FMT == 0 ? K : K / 2;
  const uint8_t* wrow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    wrow[r] = static_cast<const uint8_t*>(w.data) + rows[r] * row_bytes + t * 16 * V;
  const int64_t chunks = K / kChunk;
  const int nc = chunks > warp ? static_cast<int>((chunks - warp + kMmaWarps - 1) / kMmaWarps) : 0;
  const bool has_x = g < nt;
  const bf16* xrow = x + static_cast<int64_t>(has_x ? g : 0) * K + t * 32;

  uint4 wb[D][2][V];
  float sc[D][2];
  uint32_t zc[D][2];  // int4: bf16x2(128 + z)
  auto load_w = [&](int slot, int j) {
    const int64_t c = warp + static_cast<int64_t>(j) * kMmaWarps;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int v = 0; v < V; ++v)
        wb[slot][r][v] = __ldcs(reinterpret_cast<const uint4*>(wrow[r] + c * kRowChunkBytes) + v);
      if constexpr (FMT == 0) {
        sc[slot][r] =
            __ldg(w.scales + (rows[r] / w.block_n) * w.scale_cols + c * kChunk / w.block_k);
      } else {
        const int64_t i = rows[r] * w.scale_cols + c * kChunk / w.group_size;
        sc[slot][r] = __ldg(w.scales + i);
        const uint32_t z = w.zeros ? __ldg(w.zeros + i) : 8u;
        zc[slot][r] = (0x4300u + z) * 0x10001u;
      }
    }
  };
  uint4 xb[2][4];
  auto load_x = [&](int slot, int j) {
    const int64_t c = warp + static_cast<int64_t>(j) * kMmaWarps;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      xb[slot][i] = has_x ? __ldg(reinterpret_cast<const uint4*>(xrow + c * kChunk) + i)
                          : make_uint4(0, 0, 0, 0);
  };

#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < nc) load_w(d, d);
  pdl_wait();
  pdl_trigger();
  if (nc > 0) load_x(0, 0);

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int j0 = 0; j0 < nc; j0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int j = j0 + d;
      if (j >= nc) break;
      if (j + 1 < nc) load_x((d + 1) & 1, j + 1);
      const uint32_t(&xw)[4][4] = reinterpret_cast<const uint32_t(&)[4][4]>(xb[d & 1]);
      float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // activations' vector i: columns 8 i .. 8 i + 7 of the 32
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t a[4], b0, b1;
          if constexpr (FMT == 1) {
            // Word i of each row: pairs (2h, 2h + 4) at k positions 2t, 2t+1; (2h+1, 2h+5) at
            // 2t+8, 2t+9. Activations (e_2h, e_2h+4), (e_2h+1, e_2h+5) of vector i.
            const uint32_t lo = reinterpret_cast<const uint32_t*>(&wb[d][0][0])[i];
            const uint32_t hi = reinterpret_cast<const uint32_t*>(&wb[d][1][0])[i];
            if (h == 0) {
              a[0] = int4_pair<0>(lo, zc[d][0]);
              a[1] = int4_pair<0>(hi, zc[d][1]);
              a[2] = int4_pair<1>(lo, zc[d][0]);
              a[3] = int4_pair<1>(hi, zc[d][1]);
            } else {
              a[0] = int4_pair<2>(lo, zc[d][0]);
              a[1] = int4_pair<2>(hi, zc[d][1]);
              a[2] = int4_pair<3>(lo, zc[d][0]);
              a[3] = int4_pair<3>(hi, zc[d][1]);
            }
            b0 = prmt(xw[i][h], xw[i][h + 2], 0x5410u);
            b1 = prmt(xw[i][h], xw[i][h + 2], 0x7632u);
          } else {
            // Word s = 2i + h (columns 4s .. 4s + 3) of each row: bytes (0, 2) at k positions
            // 2t, 2t+1; (1, 3) at 2t+8, 2t+9. Activations (e_4h, e_4h+2), (e_4h+1, e_4h+3).
            const int s = 2 * i + h;
            const uint32_t lo = reinterpret_cast<const uint32_t*>(&wb[d][0][0])[s];
            const uint32_t hi = reinterpret_cast<const uint32_t*>(&wb[d][1][0])[s];
            a[0] = fp8_pair<0xA280u>(lo);
            a[1] = fp8_pair<0xA280u>(hi);
            a[2] = fp8_pair<0xB391u>(lo);
            a[3] = fp8_pair<0xB391u>(hi);
            b0 = prmt(xw[i][2 * h], xw[i][2 * h + 1], 0x5410u);
            b1 = prmt(xw[i][2 * h], xw[i][2 * h + 1], 0x7632u);
          }
          mma(part, a, b0, b1);
        }
      }
      // part: (row g, tokens 2t, 2t+1), (row g + 8, tokens 2t, 2t+1).
      acc[0] = fmaf(part[0], sc[d][0], acc[0]);
      acc[1] = fmaf(part[1], sc[d][0], acc[1]);
      acc[2] = fmaf(part[2], sc[d][1], acc[2]);
      acc[3] = fmaf(part[3], sc[d][1], acc[3]);
      if (j + D < nc) load_w(d, j + D);
    }
  }

#pragma unroll
  for (int q = 0; q < 4; ++q) partial[warp][lane][q] = acc[q];
  __syncthreads();
  if (threadIdx.x < 128) {
    const int l = threadIdx.x >> 2, q = threadIdx.x & 3;
    float v = 0.f;
#pragma unroll
    for (int wi = 0; wi < kMmaWarps; ++wi) v += partial[wi][l][q];
    const int64_t r = n0 + (l >> 2) + (q >= 2 ? 8 : 0);
    const int tok = 2 * (l & 3) + (q & 1);
    if (tok < nt && r < N) out[static_cast<int64_t>(tok) * N + r] = from_f32<TO>(v);
  }
}

template <int FMT, typename TO>
void launch_mma_tokens(const QuantWeight& w, const bf16* x, TO* out, int64_t tokens,
                       cudaStream_t s) {
  for (int64_t t0 = 0; t0 < tokens; t0 += kMmaTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(tokens - t0, kMmaTokens));
    launch_k(quant_gemv_mma_kernel<FMT, TO>, ceil_div(w.n, kMmaRows), kMmaWarps * 32, 0, s, w,
             x + t0 * w.k, out + t0 * w.n, nt);
  }
}

bool quant_gemv_mma_supports(const QuantWeight& w) {
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || w.k % kChunk != 0) return false;
  if (w.kind == QuantKind::kFp8Block) return w.block_k % kChunk == 0 && w.block_n > 0;
  return w.g_idx == nullptr && w.group_size > 0 && w.group_size % kChunk == 0;
}

}  // namespace

bool launch_quant_gemv_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, cudaStream_t s) {
  if (!quant_gemv_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  const auto* xb = static_cast<const bf16*>(x);
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (out_t == DType::BF16) {
    auto* o = static_cast<bf16*>(out);
    fp8 ? launch_mma_tokens<0>(w, xb, o, tokens, s) : launch_mma_tokens<1>(w, xb, o, tokens, s);
  } else {
    auto* o = static_cast<float*>(out);
    fp8 ? launch_mma_tokens<0>(w, xb, o, tokens, s) : launch_mma_tokens<1>(w, xb, o, tokens, s);
  }
  return true;
}

}  // namespace syv::cuda
