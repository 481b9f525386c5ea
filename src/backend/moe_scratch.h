// The scratch of the CUDA backend's tiled MoE path (cuda/moe.cu launch_moe_experts and the
// quantized experts' moe_quant_gemm.cu) as plain arithmetic, readable without a CUDA build: the
// kernels carve it by moe_scratch_layout(), and the memory plan (cli/kv_pool_plan.cpp
// estimate_step_activation_bytes: serve, bench, inspect) counts moe_scratch_bytes() for a step of
// the batch tokens, which the backend allocates at a MoE model's first long step, after the plan.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace syv::cuda {

struct MoeShape {
  int64_t tokens = 0, top_k = 0, experts = 0, hidden = 0, inter = 0;
};

// The act rows and y rows of one pass at most (bytes); more tokens go in passes, each re-reading
// the experts it routes to.
inline constexpr int64_t kMoePassBudget = int64_t{1} << 30;
// The smallest tile of token rows (sizes the tile list).
inline constexpr int kMoeMinTileRows = 16;

// Tokens per pass of launch_moe_experts(): each of a pass's T * top_k pairs holds an act row (bf16
// [inter]) and a y row (bf16 [hidden]).
inline int64_t moe_pass_tokens(const MoeShape& s) {
  const int64_t per_token = s.top_k * (2 * s.inter + 2 * s.hidden);
  return std::max<int64_t>(1, std::min(s.tokens, kMoePassBudget / std::max<int64_t>(per_token, 1)));
}

// Row tiles of at most bm rows over `pairs` pairs grouped by expert: each expert's last tile may
// be partial.
inline int64_t moe_max_tiles(int64_t pairs, int64_t experts, int bm) {
  return (pairs + bm - 1) / bm + std::min(experts, pairs);
}

// Byte offsets of one pass of `tokens` tokens in the scratch, each part 256-byte aligned: the tile
// count (i32), the tile list (16 bytes a tile), the pairs sorted by expert (i32), act (bf16 [P,
// inter]), y (bf16 [P, hidden]); P = tokens * top_k.
struct MoeScratchLayout {
  size_t num_tiles = 0, tiles = 0, sorted = 0, act = 0, y = 0, total = 0;
};
inline MoeScratchLayout moe_scratch_layout(const MoeShape& s, int64_t tokens) {
  const int64_t P = tokens * s.top_k;
  MoeScratchLayout l;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += (bytes + 255) / 256 * 256;
    return here;
  };
  l.num_tiles = take(sizeof(int32_t));
  l.tiles = take(16 * static_cast<size_t>(moe_max_tiles(P, s.experts, kMoeMinTileRows)));
  l.sorted = take(sizeof(int32_t) * static_cast<size_t>(P));
  l.act = take(2 * static_cast<size_t>(P * s.inter));
  l.y = take(2 * static_cast<size_t>(P * s.hidden));
  l.total = at;
  return l;
}

// Scratch bytes launch_moe_experts() needs for `s` (one pass of moe_pass_tokens(s) tokens).
inline size_t moe_scratch_bytes(const MoeShape& s) {
  return moe_scratch_layout(s, moe_pass_tokens(s)).total;
}

}  // namespace syv::cuda
