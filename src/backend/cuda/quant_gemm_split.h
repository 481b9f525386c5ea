// Split-K of the quantized tile GEMM (quant_gemm_mma.cu): how many of K's chunks each block of a
// split takes. Plain C++ (no CUDA) so that CPU tests check the rule
// (tests/unit/quant_gemm_split_test).
//
// Where the grid of (n / rows_per_block) x (token tiles) blocks would not fill the GPU, K is split
// across blocks (grid.z), each split writing fp32 partial sums [split][tokens][n] to a workspace
// that a second kernel adds in split order (deterministic, but the split count depends on the
// token count). Every split takes `per` chunks of K but the last, which takes what is left (1 ..
// per): the splits are ceil(chunks / per).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace syv::cuda {

// The kernel's constants the rule needs (quant_gemm_mma.cu passes its own).
struct QGemmSplitShape {
  int64_t rows_per_block = 64;       // weight rows a block computes
  int64_t chunk = 128;               // K columns a chunk (the mainloop's step)
  int64_t stages = 3;                // cp.async ring depth: stages - 1 chunks of fill per block
  int64_t min_chunks_per_split = 4;  // a split's chunks at least (the ring's warm-up)
};

struct QGemmSplit {
  int64_t chunks_per_split = 0;
  int64_t splits = 1;  // ceil(chunks / chunks_per_split)
};

// The K split of an n x k weight times `tokens` tokens in tiles of `tile_tokens`, within
// `workspace_bytes` of fp32 partial sums (splits x tokens x n x 4; one split needs none).
//
// slots > 0 (the blocks the GPU holds at once: SMs x the kernel's blocks per SM, from its
// occupancy), the default since 2026-12-05: the split count minimizes the waves times each block's
// chunks plus the ring's fill, ceil(blocks x splits / slots) x (per + stages - 1), over 1 .. chunks
// / min_chunks_per_split splits within the workspace, the fewest splits on ties. Measured on an
// H200 against the rule below (bench quant-kernels, Qwen3-8B shapes, 24-128 tokens): 1.0-1.37x
// faster, never slower beyond noise (docs/performance.md, 2026-12-05 14:03 UTC).
//
// slots == 0 (SYV_QUANT_GEMM_WAVES=0): two blocks per SM at least where the K range allows, each
// split min_chunks_per_split chunks or more, the splits within the workspace. It ignores the last
// wave: 384 blocks of the 8B's int4 gate_up at 64 tokens on 132 SMs holding 2 blocks each take two
// waves of 32 chunks, the second 45% full.
inline QGemmSplit qgemm_split(const QGemmSplitShape& shape, int64_t n, int64_t k, int64_t tokens,
                              int64_t tile_tokens, int64_t sm_count, size_t workspace_bytes,
                              int64_t slots) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t blocks = ceil_div(n, shape.rows_per_block) * ceil_div(tokens, tile_tokens);
  const int64_t chunks = k / shape.chunk;
  const int64_t max_splits = std::max<int64_t>(1, chunks / shape.min_chunks_per_split);
  auto fits = [&](int64_t splits) {
    return splits == 1 || static_cast<size_t>(splits * tokens * n * 4) <= workspace_bytes;
  };
  int64_t per = chunks;
  if (slots > 0) {
    int64_t best_cost = -1;
    for (int64_t splits = 1; splits <= max_splits; ++splits) {
      const int64_t p = ceil_div(chunks, splits), used = ceil_div(chunks, p);
      if (!fits(used)) break;
      const int64_t cost = ceil_div(blocks * used, slots) * (p + shape.stages - 1);
      if (best_cost < 0 || cost < best_cost) best_cost = cost, per = p;
    }
  } else {
    int64_t splits = std::max<int64_t>(1, ceil_div(2 * sm_count, blocks));
    splits = std::min(splits, max_splits);
    while (!fits(splits)) --splits;
    per = ceil_div(chunks, splits);
  }
  per = std::max<int64_t>(per, 1);
  return {per, ceil_div(chunks, per)};
}

}  // namespace syv::cuda
