// Which kernel the CUDA backend's prefill attention uses (A/B timing and tests); no CUDA includes,
// so benchmarks and tests built by the host compiler can switch it. Defined in
// attention_prefill.cu. The initial choice comes from SYV_PREFILL_ATTENTION=<name> when set.
//
//   wgmma128  (default) Hopper warpgroup MMA, 128-row query tiles (two warpgroups of 64 rows),
//             128-key K/V tiles by TMA; the softmax of tile j under P V of tile j - 1 with 3
//             K/V stages at head_dim 64 / 128, S / softmax / P V in turn with 2 at 256
//   mma8w     mma.sync, 128-row tiles, 8 warps x 16 rows, 64-key tiles
//
// wgmma128 needs compute capability 9.0 (sm_90a code); elsewhere it falls back to mma8w, and so
// do the quantized (fp8 / int4) KV caches, whatever the variant; head_dim 256 takes wgmma128's
// 64-key K/V tiles unless set_prefill_wgmma_head_dim_256(false) (SYV_PREFILL_WGMMA_256=0) sends
// it to mma8w.
// The variants measured slower were removed from the code: three warp-specialised forms
// (wgmma-ws / wgmma-ws-free / wgmma-ws-ovl, 15-19% slower than wgmma128 at 2K-32K tokens on an
// H200; cuda-backend-notes.md run 11), and wgmma-pipe, wgmma64, mma4w, fa2 and wmma (2026-12-01;
// their measurements stay in cuda-backend-notes.md, their code in git history).
#pragma once

#include <cstdint>
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
// wgmma128 at head_dim 256 (64-key K/V tiles; the default) or mma8w there (false).
void set_prefill_wgmma_head_dim_256(bool on);
// wgmma128's K/V tiles by tensor-map loads (TMA, one thread a block; the default,
// SYV_PREFILL_WGMMA_TMA=0 and SYV_PREFILL_WGMMA_OVERLAP=0 for every thread's cp.async gather):
// bf16 caches whose page size is a power of two from 8, the tiles whose keys all exist (a block's
// last partial tile keeps cp.async).
void set_prefill_wgmma_tma(bool on);
// wgmma128 with the softmax of tile j under P V of tile j - 1 and three K/V stages by TMA (the
// default; SYV_PREFILL_WGMMA_OVERLAP=0 turns it off): head_dim 64 and 128, where the TMA form
// applies.
void set_prefill_wgmma_overlap(bool on);
// The kernel form the latest prefill attention launch ran (tests check that the form they switch
// on is the one that runs: the switches fall back silently where a form does not apply).
enum class PrefillForm : uint8_t { kNone, kMma8w, kWgmma, kWgmmaTma, kWgmmaOverlap };
PrefillForm last_prefill_form();
// Whether wgmma128 can run here (compute capability 9.0, sm_90a code).
bool prefill_wgmma_available();

}  // namespace syv::cuda
