// Quantized linear (Backend::linear_quantized on CUDA): weight-streaming GEMVs that dequantize in
// registers for few tokens, and a dequantize-to-bf16 kernel that feeds the dense GEMM for more.
//
// The weights stay in backend/weight.h's canonical layouts on the device (no repack at load):
// both are K-contiguous rows, which is the layout a GEMV wants (each lane streams 16-byte vectors
// along its rows), and the dequantization below is cheap on them:
//  * kFp8Block: 16 e4m3 values per vector; converted two at a time (cvt.f16x2.e4m3x2 on sm_89+,
//    the same bits by integer ops on sm_80/86, see quant_convert.cuh), then to f32. The 16 values
//    of a vector share one scale when block_k % 16 == 0; the vector's dot product is scaled once.
//  * kInt4Group: 32 nibbles per vector (8 per 32-bit word, k ascending from the low nibble). Each
//    nibble becomes the float (q - z) * 16^j exactly with one LOP3 and one FADD ("magic number":
//    the nibble is OR-ed into the mantissa of 2^23 at bit 4j, j = 0..3, the upper 4 nibbles after
//    one shift by 16), summed into 4 accumulators by j, which are folded with 16^-j and the
//    group's scale once per vector. No int->float conversions, no per-element scale multiply. A
//    vector lies in one group when group_size % 32 == 0.
// Everything accumulates in fp32. The GEMV takes K % 16 (fp8) / % 32 (int4) == 0, scale tiles /
// groups aligned to the vectors, and no act-order g_idx; anything else (and every call in
// batch-invariant mode, and calls with more tokens) dequantizes the whole weight to bf16 and runs
// the dense linear() on it (the dequantized values rounded to bf16).
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_convert.cuh"

namespace syv::cuda {
namespace {

constexpr int kQWarps = 4;      // warps per block
constexpr int kQRows = 2;       // weight rows per warp
constexpr int kQUnroll = 4;     // 16-byte weight vectors in flight per row and lane
constexpr int kQMaxTokens = 4;  // tokens per launch (more go in chunks, each re-reading weights)

struct QGemvParams {
  QuantWeight w;
  const bf16* x;  // [NT, k]
  void* out;      // [NT, n]
};

template <int FMT>
constexpr int64_t k_per_vector() {
  return FMT == 0 ? 16 : 32;
}

// out[t, n] = sum_k x[t, k] * dequant(w)[n, k] for t < NT. Each warp owns kQRows consecutive rows
// and walks their vectors with its lanes, kQUnroll vectors per row in flight (the next batch is
// loaded before the current one is used; the first before pdl_wait(): weights never change).
// FMT 0: fp8 block-scaled, 1: int4 groups.
template <int NT, typename TO, int FMT>
__global__ void __launch_bounds__(kQWarps * 32) quant_gemv_kernel(const QGemvParams p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kQWarps + warp) * kQRows;
  if (n0 >= N) return;
  constexpr int64_t kPerVec = k_per_vector<FMT>();
  const int64_t kv = K / kPerVec;  // vectors per row
  const int64_t row_bytes = FMT == 0 ? K : K / 2;
  int64_t rows[kQRows];
  const uint4* wr[kQRows];
#pragma unroll
  for (int r = 0; r < kQRows; ++r) {
    rows[r] = min(n0 + r, N - 1);  // clamped: read, never stored
    wr[r] =
        reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + rows[r] * row_bytes);
  }
  uint4 wv[kQRows][kQUnroll];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int r = 0; r < kQRows; ++r)
#pragma unroll
      for (int u = 0; u < kQUnroll; ++u) {
        const int64_t i = base + 32 * u;
        wv[r][u] = i < kv ? __ldcs(wr[r] + i) : make_uint4(0, 0, 0, 0);
      }
  };
  load(lane);
  pdl_wait();
  pdl_trigger();
  float acc[kQRows][NT];
#pragma unroll
  for (int r = 0; r < kQRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;

  // One vector (index i) of every row: its dot products with the NT token rows, scaled.
  auto vector_step = [&](const uint4(&cur)[kQRows], int64_t i) {
    const int64_t k0 = i * kPerVec;
    if constexpr (FMT == 0) {
      float dot[kQRows][NT];
#pragma unroll
      for (int r = 0; r < kQRows; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) dot[r][t] = 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // 8 values at a time
        float xf[NT][8];
#pragma unroll
        for (int t = 0; t < NT; ++t)
          unpack8(__ldg(reinterpret_cast<const uint4*>(p.x + t * K + k0 + 8 * h)), xf[t]);
#pragma unroll
        for (int r = 0; r < kQRows; ++r) {
          const uint32_t* words = reinterpret_cast<const uint32_t*>(&cur[r]);
          float wf[8];
          fp8x4_to_f32(words[2 * h], wf);
          fp8x4_to_f32(words[2 * h + 1], wf + 4);
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int j = 0; j < 8; ++j) dot[r][t] = fmaf(wf[j], xf[t][j], dot[r][t]);
        }
      }
#pragma unroll
      for (int r = 0; r < kQRows; ++r) {
        const float s = __ldg(w.scales + (rows[r] / w.block_n) * w.scale_cols + k0 / w.block_k);
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = fmaf(dot[r][t], s, acc[r][t]);
      }
    } else {
      const int64_t g = k0 / w.group_size;
      float c[kQRows][4];
#pragma unroll
      for (int r = 0; r < kQRows; ++r) {
        const float z =
            w.zeros ? static_cast<float>(__ldg(w.zeros + rows[r] * w.scale_cols + g)) : 8.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) c[r][j] = 8388608.f + z * static_cast<float>(1 << (4 * j));
      }
      float cls[kQRows][NT][4];
#pragma unroll
      for (int r = 0; r < kQRows; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int j = 0; j < 4; ++j) cls[r][t][j] = 0.f;
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // 8 values (one word) at a time
        float xf[NT][8];
#pragma unroll
        for (int t = 0; t < NT; ++t)
          unpack8(__ldg(reinterpret_cast<const uint4*>(p.x + t * K + k0 + 8 * q)), xf[t]);
#pragma unroll
        for (int r = 0; r < kQRows; ++r) {
          float wf[8];
          int4x8_to_f32(reinterpret_cast<const uint32_t*>(&cur[r])[q], c[r], wf);
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              cls[r][t][j] = fmaf(wf[j], xf[t][j], cls[r][t][j]);
              cls[r][t][j] = fmaf(wf[4 + j], xf[t][4 + j], cls[r][t][j]);
            }
        }
      }
#pragma unroll
      for (int r = 0; r < kQRows; ++r) {
        const float s = __ldg(w.scales + rows[r] * w.scale_cols + g);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const float v = cls[r][t][0] + cls[r][t][1] * 0.0625f + cls[r][t][2] * (1.f / 256.f) +
                          cls[r][t][3] * (1.f / 4096.f);
          acc[r][t] = fmaf(v, s, acc[r][t]);
        }
      }
    }
  };

  constexpr int64_t kStep = 32 * kQUnroll;
  for (int64_t base = lane; base < kv; base += kStep) {
    uint4 cur[kQUnroll][kQRows];
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kQRows; ++r) cur[u][r] = wv[r][u];
    if (base + kStep < kv) load(base + kStep);
#pragma unroll
    for (int u = 0; u < kQUnroll; ++u)
      if (base + 32 * u < kv) vector_step(cur[u], base + 32 * u);
  }
  TO* out = static_cast<TO*>(p.out);
#pragma unroll
  for (int r = 0; r < kQRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0 && n0 + r < N) out[t * N + n0 + r] = from_f32<TO>(v);
    }
}

// dequant(w)[n, k] for every format (g_idx included).
__device__ __forceinline__ float dequant_at(const QuantWeight& w, int64_t n, int64_t k) {
  const auto* q = static_cast<const uint8_t*>(w.data);
  if (w.kind == QuantKind::kFp8Block) {
    float f[4];
    fp8x4_to_f32(q[n * w.k + k], f);
    return f[0] * w.scales[(n / w.block_n) * w.scale_cols + k / w.block_k];
  }
  const int64_t g = w.g_idx ? w.g_idx[k] : k / w.group_size;
  const uint8_t byte = q[n * (w.k / 2) + k / 2];
  const int32_t u = (k & 1) ? byte >> 4 : byte & 0xf;
  const int32_t z = w.zeros ? w.zeros[n * w.scale_cols + g] : 8;
  return static_cast<float>(u - z) * w.scales[n * w.scale_cols + g];
}

// dense[n, k] = bf16(dequant(w)[n, k]) for every format and shape (g_idx included); one thread
// per element, grid-stride.
__global__ void quant_dequant_kernel(const QuantWeight w, bf16* __restrict__ dense) {
  pdl_wait();  // `dense` (scratch) may still be read by the previous GEMM
  pdl_trigger();
  const int64_t K = w.k, total = w.n * K;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = e / K;
    dense[e] = __float2bfloat16_rn(dequant_at(w, n, e - n * K));
  }
}

// Row n of dequant(w) rounded to bf16, 8 columns a thread (one 16-byte store each): the same values
// as dequant_at() (f32 (q - z) * scale, or e4m3 * scale, each rounded once). FMT 0: fp8 (K % 8 ==
// 0, block_k % 8 == 0), 1: int4 (K % 8 == 0, group_size % 8 == 0, no g_idx).
template <int FMT>
__device__ __forceinline__ void dequant_row(const QuantWeight& w, int64_t n,
                                            bf16* __restrict__ dense) {
  const auto* q = static_cast<const uint8_t*>(w.data) + n * (FMT == 0 ? w.k : w.k / 2);
  const float* srow = w.scales + (FMT == 0 ? n / w.block_n : n) * w.scale_cols;
  const uint8_t* zrow = FMT == 1 && w.zeros ? w.zeros + n * w.scale_cols : nullptr;
  const int32_t per_scale = (FMT == 0 ? w.block_k : w.group_size) / 8;  // vectors per scale
  uint4* dst = reinterpret_cast<uint4*>(dense + n * w.k);
  const auto cols8 = static_cast<int32_t>(w.k / 8);
  for (int32_t c = threadIdx.x; c < cols8; c += blockDim.x) {
    const int32_t g = c / per_scale;
    const float s = __ldg(srow + g);
    float f[8];
    if constexpr (FMT == 0) {
      const uint2 v = __ldcs(reinterpret_cast<const uint2*>(q) + c);
      fp8x4_to_f32(v.x, f);
      fp8x4_to_f32(v.y, f + 4);
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = f[j] * s;
    } else {
      const uint32_t v = __ldcs(reinterpret_cast<const uint32_t*>(q) + c);
      const int32_t z = zrow ? __ldg(zrow + g) : 8;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        f[j] = static_cast<float>(static_cast<int32_t>((v >> (4 * j)) & 0xfu) - z) * s;
    }
    uint4 out;
    uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
      o[j] = *reinterpret_cast<const uint32_t*>(&b);
    }
    dst[c] = out;
  }
}

// dense rows of dequant(w) (dequant_row), a block per row at a time, grid-stride over the rows.
// Without a mask: every row of w. With one: the rows [e * rows, (e + 1) * rows) of expert e =
// blockIdx.y where mask[e] != 0 (the other experts' blocks return at once).
template <int FMT>
__global__ void quant_dequant_rows_kernel(const QuantWeight w, int64_t rows,
                                          const int32_t* __restrict__ mask,
                                          bf16* __restrict__ dense) {
  pdl_wait();  // mask from the kernel before; `dense` may still be read by the previous GEMM
  pdl_trigger();
  if (mask && mask[blockIdx.y] == 0) return;
  const int64_t first = mask ? static_cast<int64_t>(blockIdx.y) * rows : 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) dequant_row<FMT>(w, first + r, dense);
}

// Whether quant_dequant_rows_kernel takes w (in stored column order: w.perm is not undone).
bool dequant_rows_supports(const QuantWeight& w, const void* dense) {
  if (w.k % 8 != 0 || w.k > INT32_MAX || reinterpret_cast<uintptr_t>(dense) % 16 != 0) return false;
  if (w.kind == QuantKind::kFp8Block)
    return w.block_k % 8 == 0 && reinterpret_cast<uintptr_t>(w.data) % 8 == 0;
  return w.g_idx == nullptr && w.group_size % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 4 == 0;
}

void launch_dequant_rows(const QuantWeight& w, int64_t rows, dim3 grid, const int32_t* mask,
                         void* dense, cudaStream_t s) {
  auto* d = static_cast<bf16*>(dense);
  if (w.kind == QuantKind::kFp8Block) {
    launch_k(quant_dequant_rows_kernel<0>, grid, 256, 0, s, w, rows, mask, d);
  } else {
    launch_k(quant_dequant_rows_kernel<1>, grid, 256, 0, s, w, rows, mask, d);
  }
}

// mask[e] = 1 where expert e is among ids[0, count), else 0; one block (the zeroing and the
// marking ordered by its barrier).
__global__ void moe_expert_mask_kernel(const int32_t* __restrict__ ids, int64_t count,
                                       int64_t experts, int32_t* __restrict__ mask) {
  pdl_wait();  // ids come from the router's kernel; mask may still be read by the last dequant
  pdl_trigger();
  for (int64_t e = threadIdx.x; e < experts; e += blockDim.x) mask[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int32_t e = ids[i];
    if (e >= 0 && e < experts) mask[e] = 1;
  }
}

// The rows of the experts `mask` marks: dense rows [e * rows, (e + 1) * rows) of dequant(w) (in
// input column order where w.perm is set), for blockIdx.y = e; an unmarked expert's blocks return
// at once (its rows are left as they were).
__global__ void quant_dequant_experts_kernel(const QuantWeight w, int64_t rows,
                                             const int32_t* __restrict__ mask,
                                             bf16* __restrict__ dense) {
  pdl_wait();  // mask from the kernel before; `dense` may still be read by the previous MoE
  pdl_trigger();
  const int64_t expert = blockIdx.y;
  if (mask[expert] == 0) return;
  const int64_t K = w.k, first = expert * rows * K, count = rows * K;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = first + i, n = e / K, c = e - n * K;  // c: the stored column
    dense[n * K + (w.perm ? w.perm[c] : c)] = __float2bfloat16_rn(dequant_at(w, n, c));
  }
}

// out[t, j] = x[t, perm[j]]: the input of an act-order weight permuted at load (backend/weight.h
// perm), so that its groups are contiguous for the GEMVs.
__global__ void gather_columns_kernel(const bf16* __restrict__ x, const int32_t* __restrict__ perm,
                                      int64_t tokens, int64_t k, bf16* __restrict__ out) {
  pdl_wait();  // x from the kernel before; `out` (scratch) may still be read by the last GEMV
  pdl_trigger();
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < tokens * k;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / k;
    out[e] = x[t * k + perm[e - t * k]];
  }
}

template <int NT, typename TO, int FMT>
void launch_q(const QGemvParams& p, cudaStream_t s) {
  launch_k(quant_gemv_kernel<NT, TO, FMT>, ceil_div(p.w.n, kQWarps * kQRows), kQWarps * 32, 0, s,
           p);
}

template <typename TO, int FMT>
void launch_q_tokens(QGemvParams p, int64_t tokens, cudaStream_t s) {
  const int64_t K = p.w.k, N = p.w.n;
  for (int64_t t0 = 0; t0 < tokens;) {
    const int64_t nt = std::min<int64_t>(tokens - t0, kQMaxTokens);
    QGemvParams c = p;
    c.x = p.x + t0 * K;
    c.out = static_cast<TO*>(p.out) + t0 * N;
    switch (nt) {
      case 4:
        launch_q<4, TO, FMT>(c, s);
        break;
      case 3:
        launch_q<3, TO, FMT>(c, s);
        break;
      case 2:
        launch_q<2, TO, FMT>(c, s);
        break;
      default:
        launch_q<1, TO, FMT>(c, s);
        break;
    }
    t0 += nt;
  }
}

}  // namespace

bool quant_gemv_supports(const QuantWeight& w) {
  if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.kind == QuantKind::kFp8Block) return w.k % 16 == 0 && w.block_k % 16 == 0;
  return w.g_idx == nullptr && w.k % 32 == 0 && w.group_size > 0 && w.group_size % 32 == 0;
}

bool launch_quant_gemv(const QuantWeight& w, const void* x, void* out, DType out_t, int64_t tokens,
                       cudaStream_t s) {
  if (!quant_gemv_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  QGemvParams p{w, static_cast<const bf16*>(x), out};
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (out_t == DType::BF16) {
    fp8 ? launch_q_tokens<bf16, 0>(p, tokens, s) : launch_q_tokens<bf16, 1>(p, tokens, s);
  } else {
    fp8 ? launch_q_tokens<float, 0>(p, tokens, s) : launch_q_tokens<float, 1>(p, tokens, s);
  }
  return true;
}

bool launch_quant_dequant(const QuantWeight& w, void* dense, cudaStream_t s, bool vectorized) {
  const int64_t total = w.n * w.k;
  if (total == 0) return false;
  if (vectorized && dequant_rows_supports(w, dense)) {
    launch_dequant_rows(w, w.n, dim3(static_cast<unsigned>(std::min<int64_t>(w.n, 65535))), nullptr,
                        dense, s);
    return true;
  }
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, int64_t{1} << 16);
  launch_k(quant_dequant_kernel, static_cast<unsigned>(blocks), 256, 0, s, w,
           static_cast<bf16*>(dense));
  return false;
}

void launch_gather_columns(const void* x, const int32_t* perm, int64_t tokens, int64_t k, void* out,
                           cudaStream_t s) {
  const int64_t total = tokens * k;
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, int64_t{1} << 16);
  launch_k(gather_columns_kernel, static_cast<unsigned>(blocks), 256, 0, s,
           static_cast<const bf16*>(x), perm, tokens, k, static_cast<bf16*>(out));
}

void launch_moe_expert_mask(const int32_t* ids, int64_t count, int64_t experts, int32_t* mask,
                            cudaStream_t s) {
  launch_k(moe_expert_mask_kernel, 1, 1024, 0, s, ids, count, experts, mask);
}

bool launch_quant_dequant_experts(const QuantWeight& w, int64_t rows_per_expert, int64_t experts,
                                  const int32_t* mask, void* dense, cudaStream_t s,
                                  bool vectorized) {
  SYV_CHECK(experts > 0 && experts <= 65535 && w.n == experts * rows_per_expert)
      << "dequantize experts: " << w.n << " rows for " << experts << " experts of "
      << rows_per_expert;
  const int64_t per_expert = rows_per_expert * w.k;
  if (per_expert == 0) return false;
  if (vectorized && w.perm == nullptr && dequant_rows_supports(w, dense)) {
    // Up to 64 blocks an expert, as below: the GPU full when a few experts are marked.
    const auto x = static_cast<unsigned>(std::min<int64_t>(rows_per_expert, 64));
    launch_dequant_rows(w, rows_per_expert, dim3(x, static_cast<unsigned>(experts)), mask, dense,
                        s);
    return true;
  }
  // Enough blocks per expert to fill the GPU when a few experts are marked (decode), few enough
  // that the unmarked ones' early exits cost little.
  const int64_t chunks = std::min<int64_t>((per_expert + 255) / 256, 64);
  launch_k(quant_dequant_experts_kernel,
           dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(experts)), 256, 0, s, w,
           rows_per_expert, mask, static_cast<bf16*>(dense));
  return false;
}

}  // namespace syv::cuda
