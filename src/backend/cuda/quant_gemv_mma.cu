// Tensor-core GEMVs for quantized weights at few tokens (up to 16 per launch): the weight is
// streamed once, dequantized in registers to exact bf16 values and multiplied on mma.sync
// m16n8k16 (bf16 in, fp32 accumulation), the activations as the mma's 8 columns (two such token
// tiles above 8 tokens): the decode of a weight is paid once for all the launch's tokens, where
// quant_linear.cu's SIMT GEMV pays the multiply per token (and re-reads the weight per 4 tokens).
// docs/cuda-backend.md "Quantized weights" has the measured figures.
//
// Shapes taken: K % 128 == 0; int4 groups of a multiple of 128 columns without act-order g_idx;
// fp8 scale tiles a multiple of 128 columns wide (any height). Everything else goes to
// quant_linear.cu's SIMT GEMV or the dequantize path.
//
// Work split. A block owns 16 weight rows (the mma's M) and its 8 warps split the K range in
// chunks of 128 columns (warp w takes chunks w, w + 8, ...), each warp keeping several chunks'
// loads in flight; the warps' partial sums meet in shared memory at the end. A single token whose
// grid of 8-warp blocks would pass one wave of resident blocks runs 4-warp blocks instead (warp w
// takes chunks w, w + 4, ...; twice the blocks an SM). Lane (g, t) =
// (lane / 4, lane % 4) loads 32 consecutive columns [128 c + 32 t, + 32) of rows g and g + 8 (16
// bytes of int4 or 32 of fp8 per row), and the same 32 columns of token g's activations.
//
// The decode of the weights and the pair order of the activations: quant_mma_decode.cuh.
//
// Measured alternatives (H200, docs/cuda-backend-notes.md "Run 14", "Run 15"): blocks
// that stay resident and walk several row tiles, and a cp.async shared-memory ring of 8 KB per
// warp, were both slower than this one-tile-per-block kernel at 1-16 tokens.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/quant_mma_decode.cuh"
#include "core/check.h"

namespace syv::cuda {
namespace {

constexpr int kMmaWarps = 8;       // warps per block, splitting K
constexpr int kMmaRows = 16;       // weight rows per block (the mma's M)
constexpr int kMmaMaxTokens = 16;  // tokens per launch at most (two token tiles of the mma's N)
constexpr int64_t kXsMaxBytes = 96 * 1024;  // the staged activations' shared memory at most

// out[t, n] = sum_k x[t, k] dequant(w)[n, k] for t < nt <= 8 NT. FMT 0: fp8 tiles, 1: int4 groups.
// NT: token tiles of 8 per launch, sharing each decoded weight fragment (2: up to 16 tokens in one
// pass over the weight). XS (NT = 1): the activations staged once per block in shared memory,
// already in the mma's pair order, so each mma reads its two activation words with one LDS.64
// instead of two PRMTs and the warp keeps no activation registers (dynamic shared memory
// K / 2 + 8 words; one token only: every lane reads token 0's); with two chunks in flight per
// warp it fits 3 blocks per SM.
// cdiv: (fp8 block_k or int4 group_size) / 128. W: warps per block, splitting K (8, or 4 for the
// single token's four-warp form: twice the blocks an SM, each warp twice the chunks).
template <int FMT, typename TO, int NT, bool XS, bool SILU, int DEEP = 0, int W = kMmaWarps>
__global__ void __launch_bounds__(W * 32, (NT > 1 ? 1 : (XS && DEEP == 0 ? 3 : 2)) * kMmaWarps / W)
    quant_gemv_mma_kernel(const QuantWeight w, const ChunkDiv cdiv, const bf16* __restrict__ x,
                          TO* __restrict__ out, int nt, void* __restrict__ gate_up) {
  static_assert(!XS || NT == 1, "XS stages one token tile");
  constexpr int V = FMT == 0 ? 2 : 1;  // 16-byte vectors per lane, row and chunk
  // chunks in flight per warp (even: x double-buffered); DEEP > 0: that many (XS only, 2 blocks
  // per SM)
  constexpr int D = DEEP > 0 ? DEEP : (FMT == 0 || XS ? 2 : 4);
  constexpr int64_t kRowChunkBytes = FMT == 0 ? kQuantChunk : kQuantChunk / 2;
  extern __shared__ uint32_t xs[];  // XS: [K / 2 + 8] words, token 0's (nt == 1)
  __shared__ float partial[W][32][NT * 4];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t N = w.n, K = w.k;
  // SILU: the block owns outputs [n0, n0 + 8) of the I = N / 2; its rows g are gate rows n0 + g,
  // its rows g + 8 the up rows I + n0 + g, so one lane's acc holds a gate and its up.
  const int64_t I = N / 2;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (SILU ? kMmaRows / 2 : kMmaRows);
  auto tile_row = [&](int i) -> int64_t {  // the block's weight row i < 16, clamped: never stored
    if constexpr (SILU) return (i < 8 ? 0 : I) + min(n0 + (i & 7), I - 1);
    return min(n0 + i, N - 1);
  };
  const int64_t rows[2] = {tile_row(g), tile_row(g + 8)};
  const int64_t row_bytes = FMT == 0 ? K : K / 2;
  const uint8_t* wrow[2];
  const float* srow[2];    // the rows' scales
  const uint8_t* zrow[2];  // int4: the rows' zero points, or null
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    wrow[r] = static_cast<const uint8_t*>(w.data) + rows[r] * row_bytes + t * 16 * V;
    srow[r] = w.scales + (FMT == 0 ? rows[r] / w.block_n : rows[r]) * w.scale_cols;
    zrow[r] = w.zeros ? w.zeros + rows[r] * w.scale_cols : nullptr;
  }
  const int64_t chunks = K / kQuantChunk;
  const int nc = chunks > warp ? static_cast<int>((chunks - warp + W - 1) / W) : 0;
  bool has_x[NT];  // token g + 8 q exists
  const bf16* xrow[NT];
#pragma unroll
  for (int q = 0; q < NT; ++q) {
    has_x[q] = g + 8 * q < nt;
    xrow[q] = x + static_cast<int64_t>(has_x[q] ? g + 8 * q : 0) * K + t * 32;
  }

  uint4 wb[D][2][V];
  float sc[D][2];
  uint32_t zc[D][2];  // int4: bf16x2(128 + z)
  auto load_w = [&](int slot, int j) {
    const int64_t c = warp + static_cast<int64_t>(j) * W;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int v = 0; v < V; ++v)
        wb[slot][r][v] = __ldcs(reinterpret_cast<const uint4*>(wrow[r] + c * kRowChunkBytes) + v);
      const uint32_t col = cdiv(static_cast<uint32_t>(c));
      sc[slot][r] = __ldg(srow[r] + col);
      if constexpr (FMT == 1) {
        const uint32_t z = zrow[r] ? __ldg(zrow[r] + col) : 8u;
        zc[slot][r] = int4_zero_pair(z);
      }
    }
  };
  uint4 xb[2][NT][4];
  auto load_x = [&](int slot, int j) {
    const int64_t c = warp + static_cast<int64_t>(j) * W;
#pragma unroll
    for (int q = 0; q < NT; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        xb[slot][q][i] = has_x[q]
                             ? __ldg(reinterpret_cast<const uint4*>(xrow[q] + c * kQuantChunk) + i)
                             : make_uint4(0, 0, 0, 0);
  };
  // The activation pair words of vector i, half h of a lane's 32 columns.
  auto pair_words = [](const uint32_t(&xw)[4][4], int i, int h, uint32_t& b0, uint32_t& b1) {
    activation_fragment<FMT>(xw[i], h, b0, b1);
  };

#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < nc) load_w(d, d);
  pdl_wait();
  pdl_trigger();
  const int64_t xs_row = K / 2 + 8;  // XS: words per token (8 of padding: other tokens' banks)
  if constexpr (XS) {
    // Segment = 32 columns of one token: 16 words, the pairs (b0, b1) of its 8 (i, h) steps.
    // (quant_mma_decode.cuh's stage_pair_order() does the same; written out here because calling
    // it moved the int4 SiLU kernel from 72 to 78 registers with nvcc 13, untimed.)
    const int64_t segs = K / 32;
    for (int64_t sg = threadIdx.x; sg < nt * segs; sg += blockDim.x) {
      const int64_t tok = sg / segs, s32 = sg - tok * segs;
      uint4 xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        xv[i] = __ldg(reinterpret_cast<const uint4*>(x + tok * K + s32 * 32) + i);
      const uint32_t(&xw)[4][4] = reinterpret_cast<const uint32_t(&)[4][4]>(xv);
      uint32_t o[16];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          pair_words(xw, i, h, o[(2 * i + h) * 2], o[(2 * i + h) * 2 + 1]);
      uint4* dst = reinterpret_cast<uint4*>(xs + tok * xs_row + s32 * 16);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        dst[q] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
    }
    __syncthreads();
  } else {
    if (nc > 0) load_x(0, 0);
  }

  float acc[NT][4] = {};
  for (int j0 = 0; j0 < nc; j0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int j = j0 + d;
      if (j >= nc) break;
      if (!XS && j + 1 < nc) load_x((d + 1) & 1, j + 1);
      const int64_t cj = warp + static_cast<int64_t>(j) * W;  // this chunk
      // XS: the lane's pair words of token 0 in this chunk. Every lane reads token 0's, also those
      // of the mma's columns g >= 1 (tokens a single-token launch does not have): those columns'
      // sums are never stored and each column of the mma is its own dot product, so column 0 is
      // the same, and the reads need no branch and one address a chunk (a branch and 64-bit
      // address arithmetic every mma step made ~35 instructions a step, ncu: 277 a chunk).
      const uint32_t* xs_chunk = xs + static_cast<int>(cj) * 64 + t * 16;
      float part[NT][4] = {};
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // activations' vector i: columns 8 i .. 8 i + 7 of the 32
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t b[NT][2];
          if constexpr (XS) {
            const uint2 v = *reinterpret_cast<const uint2*>(xs_chunk + (2 * i + h) * 2);
            b[0][0] = v.x;
            b[0][1] = v.y;
          } else {
#pragma unroll
            for (int q = 0; q < NT; ++q)
              pair_words(reinterpret_cast<const uint32_t(&)[4][4]>(xb[d & 1][q]), i, h, b[q][0],
                         b[q][1]);
          }
          uint32_t a[4];
          weight_fragment<FMT>(reinterpret_cast<const uint32_t*>(&wb[d][0][0]),
                               reinterpret_cast<const uint32_t*>(&wb[d][1][0]),
                               FMT == 1 ? zc[d][0] : 0u, FMT == 1 ? zc[d][1] : 0u, i, h, a);
#pragma unroll
          for (int q = 0; q < NT; ++q) mma(part[q], a, b[q][0], b[q][1]);
        }
      }
      // part[q]: (row g, tokens 8q + 2t, + 1), (row g + 8, the same tokens).
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[q][e] = fmaf(part[q][e], sc[d][e >> 1], acc[q][e]);
      if (j + D < nc) load_w(d, j + D);
    }
  }

#pragma unroll
  for (int q = 0; q < NT; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][lane][q * 4 + e] = acc[q][e];
  __syncthreads();
  if constexpr (SILU) {
    // linear() then silu_mul(): gate and up rounded to bf16 (and stored to gate_up), the
    // activation rounded to bf16 before the product.
    for (int o = threadIdx.x; o < 32 * NT * 2; o += W * 32) {
      const int l = o / (NT * 2), q = (o % (NT * 2)) / 2, e = o % 2;
      float gv = 0.f, uv = 0.f;
#pragma unroll
      for (int wi = 0; wi < W; ++wi) {
        gv += partial[wi][l][q * 4 + e];
        uv += partial[wi][l][q * 4 + e + 2];
      }
      const int64_t col = n0 + (l >> 2);
      const int tok = 8 * q + 2 * (l & 3) + e;
      if (tok < nt && col < I) {
        const bf16 gb = __float2bfloat16_rn(gv), ub = __float2bfloat16_rn(uv);
        bf16* gu = static_cast<bf16*>(gate_up) + static_cast<int64_t>(tok) * N;
        gu[col] = gb;
        gu[I + col] = ub;
        const float gf = __bfloat162float(gb);
        const float act = __bfloat162float(__float2bfloat16_rn(gf / (1.f + __expf(-gf))));
        out[static_cast<int64_t>(tok) * I + col] = from_f32<TO>(act * __bfloat162float(ub));
      }
    }
  } else {
    for (int o = threadIdx.x; o < 32 * NT * 4; o += W * 32) {
      const int l = o / (NT * 4), rest = o % (NT * 4), q = rest / 4, e = rest % 4;
      float v = 0.f;
#pragma unroll
      for (int wi = 0; wi < W; ++wi) v += partial[wi][l][rest];
      const int64_t r = n0 + (l >> 2) + (e >= 2 ? 8 : 0);
      const int tok = 8 * q + 2 * (l & 3) + (e & 1);
      if (tok < nt && r < N) out[static_cast<int64_t>(tok) * N + r] = from_f32<TO>(v);
    }
  }
}

template <int FMT, typename TO, int NT, bool XS, bool SILU, int DEEP = 0, int W = kMmaWarps>
void launch_tile(const QuantWeight& w, const bf16* x, TO* out, int nt, void* gate_up,
                 cudaStream_t s) {
  auto* kernel = quant_gemv_mma_kernel<FMT, TO, NT, XS, SILU, DEEP, W>;
  size_t smem = 0;
  if constexpr (XS) {
    SYV_CHECK(nt == 1) << "the staged-activation GEMV takes one token (it reads token 0's)";
    allow_dynamic_smem(kernel, kXsMaxBytes);
    smem = static_cast<size_t>(w.k / 2 + 8) * 4;
  }
  const unsigned grid = SILU ? ceil_div(w.n / 2, kMmaRows / 2) : ceil_div(w.n, kMmaRows);
  launch_k(kernel, grid, W * 32, smem, s, w, quant_chunk_div(w), x, out, nt, gate_up);
}

// The single token's four-warp blocks (set_quant_gemv_four_warps; unset: the environment's
// SYV_QUANT_GEMV_FOUR_WARPS, default 1).
std::atomic<int> g_four_warps{-1};
std::atomic<uint64_t> g_four_warp_launches{0};

bool four_warps_now() {
  return env_switch(g_four_warps, "SYV_QUANT_GEMV_FOUR_WARPS", true);
}

// Rows up to which a single token's plain launch keeps four chunks in flight a warp (two blocks an
// SM); wider launches keep two (three blocks an SM). launch_mma_tokens.
constexpr int64_t kDeepMaxRows = 8192;

// How the plain single-token kernel <FMT, DEEP> fits a GPU at K columns (its blocks stage the whole
// row: at large K shared memory, not registers, may bound them): the eight-warp blocks the GPU
// holds at once, and whether four-warp blocks keep at least as many warps resident
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), cached per device and K.
struct OneTokenFit {
  int64_t eight_warp_slots = 0;
  bool four_fits = false;
};
template <int FMT, int DEEP>
OneTokenFit one_token_fit(int64_t k) {
  static std::mutex mu;
  static std::map<std::pair<int, int64_t>, OneTokenFit> cache;  // (device, K)
  int dev = 0;
  SYV_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = cache.try_emplace({dev, k});
  if (fresh) {
    const size_t smem = static_cast<size_t>(k / 2 + 8) * 4;
    auto resident = [&](auto* kernel, int warps) {
      int blocks = 0;
      allow_dynamic_smem(kernel, kXsMaxBytes);
      SYV_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, warps * 32, smem));
      return blocks;
    };
    const int r8 = resident(quant_gemv_mma_kernel<FMT, bf16, 1, true, false, DEEP>, kMmaWarps);
    const int r4 = resident(quant_gemv_mma_kernel<FMT, bf16, 1, true, false, DEEP, 4>, 4);
    it->second = {int64_t{r8} * device_sm_count(), 4 * r4 >= kMmaWarps * r8};
  }
  return it->second;
}

// Whether a single token of `w` runs four-warp blocks: where the plain launch's eight-warp grid
// (ceil(n / 16) blocks; the SiLU epilogue's launch has as many) passes one wave of resident blocks
// and four-warp blocks keep as many warps resident. Decided from the plain launch's kernels for
// the SiLU launch too, so that a fused gate_up and linear() + silu_mul() sum in the same order
// (the same bits). The 8B's q|k|v (384 blocks on 264 two-a-SM slots) and gate_up (1,536 on 396)
// take them; its b = 1 step, H100, graph ms: gptq 2.828 -> 2.737 and 2.823 -> 2.797, fp8 3.613 ->
// 3.548 and 3.667 -> 3.602 (two calls, 2026-12-06; docs/cuda-backend-notes.md "Run 27").
template <int FMT>
bool one_token_four_warps(const QuantWeight& w) {
  if (!four_warps_now()) return false;
  const OneTokenFit fit =
      w.n <= kDeepMaxRows ? one_token_fit<FMT, 4>(w.k) : one_token_fit<FMT, 0>(w.k);
  return fit.four_fits && ceil_div(w.n, kMmaRows) > fit.eight_warp_slots;
}

// One token (the XS kernel) with DEEP chunks in flight, in four-warp blocks where
// one_token_four_warps() says so.
template <int FMT, typename TO, bool SILU, int DEEP>
void launch_one_token(const QuantWeight& w, const bf16* x, TO* out, void* gate_up, cudaStream_t s) {
  if (one_token_four_warps<FMT>(w)) {
    g_four_warp_launches.fetch_add(1, std::memory_order_relaxed);
    launch_tile<FMT, TO, 1, true, SILU, DEEP, 4>(w, x, out, 1, gate_up, s);
  } else {
    launch_tile<FMT, TO, 1, true, SILU, DEEP>(w, x, out, 1, gate_up, s);
  }
}

// Launches of up to 16 tokens: one token tile up to 8, two above (one pass over the weight for
// 16 tokens: 5.63 ms a step against 6.33 for two launches on the Qwen3-8B shape, gptq). A single
// token takes the staged-activation kernel at 3 blocks per SM (fp8 3.12 ms a step against 3.51,
// int4 2.73 against 2.82, each against the unstaged kernel in the same run); at 2-8 tokens it was
// slower (docs/cuda-backend-notes.md "Run 15"). SILU: gate_up [tokens, w.n], out [tokens, w.n / 2].
template <int FMT, typename TO, bool SILU>
void launch_mma_tokens(const QuantWeight& w, const bf16* x, TO* out, int64_t tokens, bf16* gate_up,
                       cudaStream_t s) {
  if (tokens == 1 &&
      launch_quant_gemv_bulk(w, x, out, std::is_same_v<TO, float> ? DType::F32 : DType::BF16,
                             SILU ? gate_up : nullptr, s))
    return;  // the bulk-copy form (quant_gemv_bulk.cu), where switched on
  if (tokens == 1 && (w.k / 2 + 8) * 4 <= kXsMaxBytes) {
    // Up to 8192 rows (the o, q|k|v and down projections: a grid of at most 512 blocks), four
    // chunks in flight per warp at 2 blocks per SM: Qwen3-8B gptq 2.85 -> 2.65 ms a step, fp8
    // 3.05 -> 3.03 (docs/cuda-backend-notes.md "Run 17"); wider launches (gate_up) keep two at 3.
    if constexpr (!SILU) {
      if (w.n <= kDeepMaxRows) {
        launch_one_token<FMT, TO, SILU, 4>(w, x, out, gate_up, s);
        return;
      }
    }
    launch_one_token<FMT, TO, SILU, 0>(w, x, out, gate_up, s);
    return;
  }
  const int64_t out_cols = SILU ? w.n / 2 : w.n;
  for (int64_t t0 = 0; t0 < tokens; t0 += kMmaMaxTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(tokens - t0, kMmaMaxTokens));
    bf16* gu = SILU ? gate_up + t0 * w.n : nullptr;
    if (nt > 8) {
      launch_tile<FMT, TO, 2, false, SILU>(w, x + t0 * w.k, out + t0 * out_cols, nt, gu, s);
    } else {
      launch_tile<FMT, TO, 1, false, SILU>(w, x + t0 * w.k, out + t0 * out_cols, nt, gu, s);
    }
  }
}

}  // namespace

bool launch_quant_gemv_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, cudaStream_t s) {
  if (!quant_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  const auto* xb = static_cast<const bf16*>(x);
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  if (out_t == DType::BF16) {
    auto* o = static_cast<bf16*>(out);
    fp8 ? launch_mma_tokens<0, bf16, false>(w, xb, o, tokens, nullptr, s)
        : launch_mma_tokens<1, bf16, false>(w, xb, o, tokens, nullptr, s);
  } else {
    auto* o = static_cast<float*>(out);
    fp8 ? launch_mma_tokens<0, float, false>(w, xb, o, tokens, nullptr, s)
        : launch_mma_tokens<1, float, false>(w, xb, o, tokens, nullptr, s);
  }
  return true;
}

bool launch_quant_gemv_mma_silu(const QuantWeight& w, const void* x, void* gate_up, void* out,
                                int64_t tokens, cudaStream_t s) {
  if (!quant_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0 || w.n % 2 != 0)
    return false;
  if (tokens == 0 || w.n == 0) return true;
  const auto* xb = static_cast<const bf16*>(x);
  auto* o = static_cast<bf16*>(out);
  auto* gu = static_cast<bf16*>(gate_up);
  w.kind == QuantKind::kFp8Block ? launch_mma_tokens<0, bf16, true>(w, xb, o, tokens, gu, s)
                                 : launch_mma_tokens<1, bf16, true>(w, xb, o, tokens, gu, s);
  return true;
}

void set_quant_gemv_four_warps(bool on) {
  g_four_warps.store(on ? 1 : 0, std::memory_order_relaxed);
}
bool quant_gemv_four_warps() {
  return four_warps_now();
}
uint64_t quant_gemv_four_warp_launches() {
  return g_four_warp_launches.load(std::memory_order_relaxed);
}

}  // namespace syv::cuda
