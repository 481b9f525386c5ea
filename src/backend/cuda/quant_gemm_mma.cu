// Tensor-core GEMM for quantized weights at tens of tokens (W4A16 and W8A16: the weight
// dequantized in registers, never in memory): where the GEMVs (quant_gemv_mma.cu, up to 16 tokens)
// stop and the dequantize path (the whole weight written to a bf16 scratch, then cuBLASLt) or the
// fp8 tensor-core GEMM would take over. Each weight fragment is decoded once and multiplied by up
// to 64 tokens, so the weight streams once per 64 tokens at the packed size.
//
// Shapes taken: those of quant_gemv_mma.cu (K % 128 == 0; int4 groups a multiple of 128 columns
// without g_idx; fp8 scale tiles a multiple of 128 columns wide); x and the weight 16-byte aligned.
//
// Work split: quant_gemm_tile.cuh's tile, a block per 64 weight rows (blockIdx.x) and 8 NT tokens
// (blockIdx.y); K split across blocks where the grid would not fill the GPU (quant_gemm_tile.cuh's
// split-K: deterministic, but the split count depends on the token count: not for batch-invariant
// mode).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemm_tile.cuh"

namespace syv::cuda {
namespace {

struct GemmArgs {
  QuantWeight w;
  ChunkDiv cdiv;  // chunk -> scale column
  const bf16* x;  // [tokens, K]
  void* out;      // [tokens, N] (TO), or the f32 workspace [splits][tokens][N] when splits > 1
  int64_t tokens;
  int chunks_per_split;
};

// out[t, n] = sum_k x[t, k] dequant(w)[n, k] over the block's K range, for the block's 64 rows
// (blockIdx.x) and 8 NT tokens (blockIdx.y); split blockIdx.z of gridDim.z. TO: the output type
// (float for the workspace). FMT 0: fp8 tiles, 1: int4 groups.
template <int FMT, int NT, typename TO>
__global__ void __launch_bounds__(kQGemmWarps * 32, 2) quant_gemm_mma_kernel(const GemmArgs p) {
  extern __shared__ uint4 smem[];
  const QuantWeight& w = p.w;
  const int64_t N = w.n, K = w.k, T = p.tokens;
  const QGemmBlock b = qgemm_block<NT>(K, p.chunks_per_split);
  float acc[NT][4];
  // Rows past N read the last one, tokens past T are zero-filled (their results are not stored).
  qgemm_tile_mainloop<FMT, NT>(
      w, p.cdiv, b.c_begin, b.nc, [&](int r) { return min(b.n0 + r, N - 1); },
      [&](int r) { return b.t0 + r < T ? p.x + (b.t0 + r) * K : nullptr; }, smem, acc);
  qgemm_store<NT>(static_cast<TO*>(p.out) + static_cast<int64_t>(blockIdx.z) * T * N, acc, b.n0,
                  b.t0, N, T);
}

// SYV_QUANT_GEMM_WAVES=1: K splits chosen by qgemm_chunks_per_split's wave rule from the kernel's
// occupancy (an A/B not yet run on a GPU; read once).
bool wave_splits() {
  static const bool on = [] {
    const char* env = std::getenv("SYV_QUANT_GEMM_WAVES");
    return env != nullptr && std::atoi(env) != 0;
  }();
  return on;
}

// One call at tile width NT: the grid and K splits, then the kernel (and the splits' reduce).
template <int FMT, int NT>
void run_gemm(GemmArgs p, void* out, DType out_t, int sm_count, void* workspace,
              size_t workspace_bytes, cudaStream_t s) {
  const int64_t slots =
      wave_splits() ? int64_t{sm_count} * qgemm_blocks_per_sm<quant_gemm_mma_kernel<FMT, NT, float>,
                                                              qgemm_smem_bytes<FMT, NT>()>()
                    : 0;
  const QGemmGrid g = qgemm_grid(p.w.n, p.w.k, p.tokens, NT, sm_count, workspace_bytes, slots);
  p.chunks_per_split = g.chunks_per_split;
  qgemm_run(g, workspace, out, out_t, p.tokens * p.w.n, s, [&](auto to, void* dst) {
    using TO = decltype(to);
    p.out = dst;
    launch_qgemm<quant_gemm_mma_kernel<FMT, NT, TO>, FMT, NT>(g.grid, s, p);
  });
}

}  // namespace

bool launch_quant_gemm_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, int sm_count, void* workspace, size_t workspace_bytes,
                           cudaStream_t s) {
  if (!quant_mma_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (out_t != DType::BF16 && out_t != DType::F32) return false;
  if (tokens == 0 || w.n == 0) return true;
  // The tile's token width fitted to the step (qgemm_fitted_nt): against 4 columns up to 32
  // tokens and 8 above, 1.25-1.35x faster at 48 and 96 tokens on an H200 (2026-12-05, bench
  // quant-kernels; gate_up int4 95.2 -> 70.4 us at 48, 173.8 -> 135.3 at 96), the same elsewhere.
  const int nt = qgemm_fitted_nt(tokens);
  const GemmArgs p{w, quant_chunk_div(w), static_cast<const bf16*>(x), nullptr, tokens, 0};
  const bool fp8 = w.kind == QuantKind::kFp8Block;
  qgemm_dispatch_nt(nt, [&](auto width) {
    constexpr int NT = decltype(width)::value;
    if (fp8) {
      run_gemm<0, NT>(p, out, out_t, sm_count, workspace, workspace_bytes, s);
    } else {
      run_gemm<1, NT>(p, out, out_t, sm_count, workspace, workspace_bytes, s);
    }
  });
  return true;
}

}  // namespace syv::cuda
