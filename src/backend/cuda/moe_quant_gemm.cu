// Quantized MoE experts on the tiled path (more tokens than moe_quant_gemv.cu's 8): the routed
// experts' packed rows decoded in registers by quant_gemm_tile.cuh's tile, never written out as
// bf16. Per pass, as moe.cu's tiled path: the counting sort and tile list by expert
// (launch_moe_route), the gate/up GEMM with SiLU(gate) * up into act, the down GEMM into y by
// pair, and the weighted combine in ascending expert id (launch_moe_combine).
//
// A block takes one tile of the list (one expert, up to 8 NT of its sorted rows) and 64 weight
// rows of that expert. gate_up: its 4 warps own 8 outputs each, the warp's rows 0-7 the gate rows
// and 8-15 the up rows of those outputs, so one lane holds a gate and its up for the epilogue (as
// quant_gemv_mma.cu's SiLU epilogue); the tile's tokens are x's rows of its pairs' tokens. down:
// 64 hidden rows, the tile's rows of act. The tile height follows the rows each routed expert
// gets (16 at decode, up to 64 at prefill). Each output element is one fp32 sum over K in chunk
// order whatever tile it lands in, so results are run-to-run identical and independent of the
// batch around a token (not the dense tiled path's bits: exact dequantized weights instead of
// bf16-rounded ones).
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/quant_gemm_tile.cuh"
#include "core/check.h"

namespace syv::cuda {
namespace {

struct MoeQArgs {
  QuantWeight w;  // gate_up [E * 2I, H] or down [E * H, I]
  ChunkDiv cdiv{1};
  const bf16* a;     // gate_up: x [T, H]; down: the route's act [P, I] (sorted rows)
  MoeRouting route;  // tiles, sorted pairs; gate_up writes its act, down its y
  int top_k;
  int64_t inter, hidden;
};

template <int FMT, int NT, bool kGateUp>
__global__ void __launch_bounds__(kQGemmWarps * 32, 2) moe_quant_gemm_kernel(const MoeQArgs p) {
  extern __shared__ uint4 smem[];
  __shared__ const bf16* x_rows[8 * NT];
  pdl_wait();  // the tile list comes from the route kernel (the tile's mainloop waits again)
  if (static_cast<int>(blockIdx.x) >= *p.route.num_tiles) return;
  const int4 tile = p.route.tiles[blockIdx.x];
  const int64_t expert = tile.x;
  const int r0 = tile.y, rows = tile.z;
  const int64_t I = p.inter, H = p.hidden, K = p.w.k;
  for (int r = threadIdx.x; r < 8 * NT; r += kQGemmWarps * 32) {  // nullptr: zero-filled
    x_rows[r] = r >= rows ? nullptr
                : kGateUp ? p.a + static_cast<int64_t>(p.route.sorted[r0 + r] / p.top_k) * K
                          : p.a + static_cast<int64_t>(r0 + r) * K;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // gate_up: outputs [o0, o0 + 32), warp w's rows j < 8 the gate rows of outputs o0 + 8 w + j,
  // rows j >= 8 their up rows. down: hidden rows [n0, n0 + 64).
  const int64_t o0 = static_cast<int64_t>(blockIdx.y) * (kGateUp ? kQGemmRows / 2 : kQGemmRows);
  auto weight_row = [&](int r) -> int64_t {
    if constexpr (kGateUp) {
      const int64_t out = min(o0 + 8 * (r >> 4) + (r & 7), I - 1);
      return expert * 2 * I + ((r & 8) ? I : 0) + out;
    }
    return expert * H + min(o0 + r, H - 1);
  };
  float acc[NT][4];
  qgemm_tile_mainloop<FMT, NT>(
      p.w, p.cdiv, 0, static_cast<int>(K / kQuantChunk), weight_row,
      [&](int r) { return x_rows[r]; }, smem, acc);

  // acc[q]: (row g, tokens 8q + 2t, + 1), (row g + 8, the same tokens).
#pragma unroll
  for (int q = 0; q < NT; ++q) {
    if constexpr (kGateUp) {
      const int64_t col = o0 + 8 * warp + g;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = 8 * q + 2 * t + e;
        if (tok >= rows || col >= I) continue;
        const float gate = acc[q][e], up = acc[q][e + 2];
        const float silu = gate / (1.f + expf(-gate));
        static_cast<bf16*>(p.route.act)[static_cast<int64_t>(r0 + tok) * I + col] =
            __float2bfloat16_rn(silu * up);
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = 8 * q + 2 * t + (e & 1);
        const int64_t n = o0 + 16 * warp + g + (e >= 2 ? 8 : 0);
        if (tok < rows && n < H)
          static_cast<bf16*>(p.route.y)[static_cast<int64_t>(p.route.sorted[r0 + tok]) * H + n] =
              __float2bfloat16_rn(acc[q][e]);
      }
    }
  }
}

template <int FMT, int NT, bool kGateUp>
void launch_part(const MoeQArgs& a, int64_t out_rows, cudaStream_t s) {
  const int64_t per_block = kGateUp ? kQGemmRows / 2 : kQGemmRows;
  launch_qgemm<moe_quant_gemm_kernel<FMT, NT, kGateUp>, FMT, NT>(
      dim3(static_cast<unsigned>(a.route.max_tiles), ceil_div(out_rows, per_block)), s, a);
}

template <int FMT, int NT>
void run_pass(const MoeShape& s, int64_t T, const bf16* x, const int32_t* ids, const float* weights,
              const QuantWeight& gate_up, const QuantWeight& down, bf16* out, void* scratch,
              unsigned long long* routed, cudaStream_t st) {
  MoeQArgs a;
  a.route = launch_moe_route(s, T, ids, 8 * NT, scratch, routed, st);
  a.top_k = static_cast<int>(s.top_k);
  a.inter = s.inter;
  a.hidden = s.hidden;
  a.w = gate_up;
  a.cdiv = quant_chunk_div(gate_up);
  a.a = x;
  launch_part<FMT, NT, true>(a, s.inter, st);
  a.w = down;
  a.cdiv = quant_chunk_div(down);
  a.a = static_cast<const bf16*>(a.route.act);
  launch_part<FMT, NT, false>(a, s.hidden, st);
  launch_moe_combine(a.route.y, ids, weights, s, T, out, st);
}

template <int FMT>
void run_pass_rows(const MoeShape& s, int64_t T, const bf16* x, const int32_t* ids,
                   const float* weights, const QuantWeight& gate_up, const QuantWeight& down,
                   bf16* out, void* scratch, unsigned long long* routed, cudaStream_t st) {
  // Rows per routed expert at most T*k / min(E, T*k): the tile height that wastes least.
  const int64_t P = T * s.top_k, rows_per_expert = P / std::min(s.experts, P);
  if (rows_per_expert <= 16) {
    run_pass<FMT, 2>(s, T, x, ids, weights, gate_up, down, out, scratch, routed, st);
  } else if (rows_per_expert <= 32) {
    run_pass<FMT, 4>(s, T, x, ids, weights, gate_up, down, out, scratch, routed, st);
  } else {
    run_pass<FMT, 8>(s, T, x, ids, weights, gate_up, down, out, scratch, routed, st);
  }
}

}  // namespace

bool launch_moe_quant_gemm(const void* x, const int32_t* ids, const float* weights,
                           const QuantWeight& gate_up, const QuantWeight& down, void* out,
                           const MoeShape& s, void* scratch, unsigned long long* routed,
                           cudaStream_t stream) {
  if (gate_up.kind != down.kind || !quant_mma_supports(gate_up) || !quant_mma_supports(down) ||
      gate_up.perm != nullptr || down.perm != nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return false;
  SYV_CHECK(gate_up.n == s.experts * 2 * s.inter && gate_up.k == s.hidden &&
            down.n == s.experts * s.hidden && down.k == s.inter)
      << "moe quantized GEMM: gate_up [" << gate_up.n << ", " << gate_up.k << "], down [" << down.n
      << ", " << down.k << "] for " << s.experts << " experts of I " << s.inter << ", H "
      << s.hidden;
  const int64_t pass = moe_pass_tokens(s), k = s.top_k, H = s.hidden;
  const bool fp8 = gate_up.kind == QuantKind::kFp8Block;
  for (int64_t t0 = 0; t0 < s.tokens; t0 += pass) {
    const int64_t T = std::min(pass, s.tokens - t0);
    const bf16* xp = static_cast<const bf16*>(x) + t0 * H;
    bf16* op = static_cast<bf16*>(out) + t0 * H;
    fp8 ? run_pass_rows<0>(s, T, xp, ids + t0 * k, weights + t0 * k, gate_up, down, op, scratch,
                           routed, stream)
        : run_pass_rows<1>(s, T, xp, ids + t0 * k, weights + t0 * k, gate_up, down, op, scratch,
                           routed, stream);
  }
  return true;
}

}  // namespace syv::cuda
