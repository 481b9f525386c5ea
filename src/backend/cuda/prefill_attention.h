// Which kernel the CUDA backend's prefill attention uses (A/B timing and tests); no CUDA includes,
// so benchmarks and tests built by the host compiler can switch it. Defined in
// attention_prefill.cu. The initial choice comes from SYV_PREFILL_ATTENTION=<name> when set.
//
//   wgmma128    (default) Hopper warpgroup MMA, 128-row query tiles (two warpgroups of 64 rows),
//               128-key K/V tiles, S / softmax / P V in turn, 2 K/V stages
//   wgmma-pipe  the same with the softmax of one tile overlapping P V of the previous one on the
//               tiles below the diagonal, 3 K/V stages
//   wgmma64     64-key K/V tiles, 2 stages
//   mma8w       mma.sync, 128-row tiles, 8 warps x 16 rows, 64-key tiles
//   mma4w       mma.sync, 128-row tiles, 4 warps x 32 rows, 64-key tiles
//   fa2         mma.sync, 64-row tiles, 4 warps x 16 rows (the kernel before the 128-row ones)
//   wmma        the first WMMA kernel (S, P, O through shared memory)
//
// The wgmma kernels need compute capability 9.0 (sm_90a code); elsewhere they fall back to mma8w.
// (Three warp-specialised forms, wgmma-ws / wgmma-ws-free / wgmma-ws-ovl, measured 15-19% slower
// than wgmma128 at 2K-32K tokens on an H200 and were removed; cuda-backend-notes.md run 11.)
#pragma once

#include <string_view>

namespace syv::cuda {

// Rows of the query tiles in the tile list the backend builds for launch_attention_prefill().
constexpr int kPrefillTileRows = 128;

int prefill_attention_variant_count();
// Name of variant v (0 <= v < count), or "" when out of range.
const char* prefill_attention_variant_name(int v);
// Index of the variant called `name`, or -1.
int find_prefill_attention_variant(std::string_view name);
// The default variant (what runs when SYV_PREFILL_ATTENTION is unset).
int default_prefill_attention_variant();
// Applies to launches made (or graphs captured) after the call; aborts on an unknown index.
void set_prefill_attention_variant(int v);
int prefill_attention_variant();

}  // namespace syv::cuda
