// Mixture-of-experts kernels (moe.cu): the router's softmax + top-k, and the routed SwiGLU experts
// as a grouped GEMM over the tokens each expert received, or for a few tokens outside
// batch-invariant mode as two weight-streaming GEMVs (moe_gemv.cu). Everything stays on the device:
// the token-to-expert grouping is a counting sort in one kernel (the GEMVs need none), the launch
// shapes depend only on the token count (so a decode step is captured in a CUDA graph as is), and
// the results are run-to-run identical (no floating-point atomics; docs/hybrid-models.md "On
// CUDA").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/moe_scratch.h"

namespace syv::cuda {

// Backend::moe_topk: logits f32 [T, E]; ids i32 / weights f32 [T, top_k]. E <= kMoeMaxExperts,
// top_k <= 32.
inline constexpr int64_t kMoeMaxExperts = 4096;
void launch_moe_topk(const float* logits, int64_t tokens, int64_t experts, int top_k,
                     bool renormalize, int32_t* ids, float* weights, cudaStream_t s);

// MoeShape, moe_pass_tokens() and moe_scratch_bytes(): backend/moe_scratch.h.

// The tiled path's block tile where the experts get more than 16 rows each (prefill). The results
// do not depend on it (gemm_tile.cuh: one fp32 accumulator an element, in K order). kAuto, the
// default: kWide, or kLarge from 128 rows an expert on average (where moe_wgmma_supports(), outside
// batch-invariant mode, the warpgroup-MMA GEMMs below instead). The others force one (A/B timing,
// tests): rows x weight rows, K step, stages, warps of rows x weight rows:
//   kWide 64 x 128, 64, 4, 8 of 32 x 32      kLarge 128 x 128, 64, 3, 8 of 64 x 32
//   kLargeK32 128 x 128, 32, 4, 8 of 64 x 32  kWarp64 128 x 128, 32, 4, 4 of 64 x 64
//   kWarp64K64 128 x 128, 64, 3, 4 of 64 x 64 kTall 128 x 256, 32, 3, 8 of 64 x 64
// Each falls back to 64 x 64 of 4 warps where the device has less shared memory a block than it
// needs (sm_86 / 89 / 120: 99 KB). SYV_MOE_TILE sets the initial choice by moe_tile_name();
// anything else stops with its name.
enum class MoeTile { kAuto, kWide, kLarge, kLargeK32, kWarp64, kWarp64K64, kTall };
inline constexpr MoeTile kMoeTiles[] = {MoeTile::kAuto,     MoeTile::kWide,   MoeTile::kLarge,
                                        MoeTile::kLargeK32, MoeTile::kWarp64, MoeTile::kWarp64K64,
                                        MoeTile::kTall};
const char* moe_tile_name(MoeTile t);  // "auto", "wide", "large", "large-k32", "warp64", ...
void set_moe_tile(MoeTile t);

// The small-batch path: outside batch-invariant mode, launch_moe_experts() runs up to this many
// tokens through launch_moe_gemv() (weight-streaming GEMVs, 2 launches) instead of the routing
// sort + tiled tensor-core GEMMs + combine (4 launches, 16-row tiles of which a decode token fills
// one row). 8: the GEMV reads a batch's shared experts once per token group, and beyond 8 tokens
// the tiled path's tiles start to fill (64 tokens: 84% of the copy rate). Measured on an H200 at
// Qwen3-Next's shape (gpu_cuda_moe_ops_test QwenNextExpertsTiming, 2026-12-02): the GEMVs stream
// the routed experts at 51 / 63 / 73 / 76% of the copy rate at 1 / 2 / 4 / 8 tokens, the tiled
// path at 30 / 45 / 52 / 66%: still ahead at 8, so the crossover lies above it.
inline constexpr int64_t kMoeGemvMaxTokens = 8;

// Backend::moe_experts with bf16 x, out, gate_up [E, 2I, H] and down [E, H, I]; ids i32 and weights
// f32 [T, top_k] as moe_topk() writes them (an out-of-range id contributes nothing). Needs H and I
// multiples of 8, 16-byte aligned x and weights, and `scratch` of moe_scratch_bytes(s). Adds the
// number of distinct experts each pass routes to to *routed (device memory).
// batch_invariant: every T takes the tiled path, whose rows are bit-identical at every T; otherwise
// T <= kMoeGemvMaxTokens takes launch_moe_gemv() (run-to-run identical, not the tiled path's bits).
void launch_moe_experts(const void* x, const int32_t* ids, const float* weights,
                        const void* gate_up, const void* down, void* out, const MoeShape& s,
                        bool batch_invariant, void* scratch, unsigned long long* routed,
                        cudaStream_t stream);

// The tiled path's first and last launches, shared with the quantized experts' tiled path
// (moe_quant_gemm.cu). launch_moe_route: one pass's counting sort of its T * k (token, slot) pairs
// by expert into `scratch` (moe_scratch_bytes of a shape of at least T tokens) and its list of row
// tiles of at most bm >= 16 rows; adds the experts it routes to to *routed. The launches after it
// read the tile list's first *num_tiles entries of max_tiles (the grid is sized for max_tiles:
// blocks past the count exit). launch_moe_combine: out bf16 [T, H] = each token's sum over its
// slots, in ascending expert id, of weight * y[pair] (f32 sums of the bf16 y).
struct MoeRouting {
  int32_t* sorted = nullptr;     // [T * k] pair ids grouped by expert
  int4* tiles = nullptr;         // (expert, first sorted row, rows, 0)
  int32_t* num_tiles = nullptr;  // device
  void* act = nullptr;           // bf16 [T * k, I] (sorted rows): gate_up's output
  void* y = nullptr;             // bf16 [T * k, H] (by pair): down's output, rounded
  int64_t max_tiles = 0;
};
MoeRouting launch_moe_route(const MoeShape& s, int64_t T, const int32_t* ids, int bm, void* scratch,
                            unsigned long long* routed, cudaStream_t st);
void launch_moe_combine(const void* y, const int32_t* ids, const float* weights, const MoeShape& s,
                        int64_t T, void* out, cudaStream_t st);

// The tiled path's two GEMMs on Hopper's warpgroup MMA (moe_wgmma.cu), between launch_moe_route
// (bm = tile_rows: 32, 64 or 128) and launch_moe_combine. launch_moe_experts() takes them outside
// batch-invariant mode where moe_wgmma_supports(s) (an sm_90 device with the shared memory, H and I
// multiples of 8, SYV_MOE_WGMMA not 0); else moe_gemm_kernel (mma.sync, moe.cu), whose bits batch-
// invariant mode keeps. Both compute each element as one f32 sum over K in K order; they may
// differ in rounding (the tensor cores' within a 16-wide k step). a and w 16-byte aligned.
struct MoeWgmmaGemm {
  bool gate_up = false;     // gate_up: act = SiLU(gate) * up; else down: y by pair
  const void* a = nullptr;  // bf16; gate_up: x [T, H]; down: act [P, I] (sorted rows)
  const void* w = nullptr;  // bf16; gate_up [E, 2I, H] or down [E, H, I]
  const int4* tiles = nullptr;
  const int32_t* num_tiles = nullptr;
  const int32_t* sorted = nullptr;
  int top_k = 0;
  bool y_vec4 = false;                           // set by the launch: y's rows take 8-byte stores
  int64_t experts = 0, n = 0, k = 0, inter = 0;  // n: the weight's rows (2I or H), k: H or I
  void* act = nullptr;                           // bf16 [P, I]: gate_up's output, down's a
  void* y = nullptr;                             // bf16 [P, H]: down's output, rounded
};
bool moe_wgmma_supports(const MoeShape& s);
void launch_moe_wgmma(const MoeWgmmaGemm& g, int tile_rows, int64_t max_tiles, cudaStream_t s);
// launch_moe_experts() takes them where MoeTile is kAuto (a forced tile is moe_gemm_kernel's), in
// tiles of 64 token rows (the fastest at 2K and 8K tokens: moe.cu); set_moe_wgmma_rows(rows)
// forces 32, 64 or 128 (0: 64; SYV_MOE_WGMMA_ROWS sets the initial choice).
bool moe_wgmma_enabled();  // SYV_MOE_WGMMA (default on) or set_moe_wgmma()
void set_moe_wgmma(bool on);
void set_moe_wgmma_rows(int rows);

// A shared expert run beside the routed ones by launch_moe_gemv(): bf16 gate_up [2Is, H] and down
// [H, Is] (Is = inter, a multiple of 8, may differ from the routed experts' I), its output added
// to each token's sum gated by sigmoid(gate[t]) (gate: f32 [T] logits, device memory, written
// before the launch: launch_moe_router_topk()'s gate_logit), rounded as Backend::moe_block's op
// sequence rounds.
struct MoeSharedExpert {
  const void* gate_up = nullptr;
  const void* down = nullptr;
  const float* gate = nullptr;
  int64_t inter = 0;
};

// The small-batch path of launch_moe_experts() (moe_gemv.cu): 1 <= s.tokens <= kMoeGemvMaxTokens,
// top_k <= 32, the same operands; act: bf16 [T * top_k, I] scratch (16-byte aligned), then [T, Is]
// more with a shared expert. Adds the number of distinct valid routed experts to *routed, as
// one pass of the tiled path does (the shared expert is not counted). shared (may be null): out
// += gate[t] * shared(x[t]) in the same pass, after the routed slots (one more "expert" of the
// same two launches: its gate/up rows read once for all T tokens).
void launch_moe_gemv(const void* x, const int32_t* ids, const float* weights, const void* gate_up,
                     const void* down, void* out, const MoeShape& s, void* act,
                     unsigned long long* routed, cudaStream_t stream,
                     const MoeSharedExpert* shared = nullptr);

// ---- the MoE block's small-batch path (moe_block.cu; Backend::moe_block) ----
// Outside batch-invariant mode, a MoE layer of 1..kMoeBlockMaxTokens tokens after its pre-norm in 3
// launches instead of 9 (the router's linear, top-k, the routed experts' two GEMVs, the shared
// expert's gate/up + SiLU and down linears, the shared gate's linear, sigmoid_mul, add):
//   1. launch_moe_router_topk(): the router logits and the shared expert's gate, then softmax +
//      top-k in the grid's last block;
//   2./3. launch_moe_gemv() with the shared expert as one more expert.
// E <= kMoeBlockMaxExperts (the top-k keeps a token's probabilities in a warp's registers).
// kMoeBlockMaxTokens: where it was measured faster than the sequence (H200, 2026-12-03,
// gpu_cuda_moe_ops_test QwenNextExpertsTiming, eager, Qwen3-Next's shape: 43.0 against 46.2 us at
// 1 token, 62.8 against 64.4 at 2, but 109.3 against 105.1 at 4 and 202.3 against 190.0 at 8; the
// whole decode step at b=1 2.251 against 2.338 ms in a graph); more tokens run the sequence.
inline constexpr int64_t kMoeBlockMaxExperts = 1024;
inline constexpr int64_t kMoeBlockMaxTokens = 2;

// x bf16 [T, H]; router bf16 [E, H]; shared_gate bf16 [1, H] (16-byte aligned, H % 8 == 0);
// 1 <= T <= kMoeBlockMaxTokens, E <= kMoeBlockMaxExperts, 1 <= top_k <= min(E, 32). Writes
// logits f32 [T, E] (each a warp's lane-strided fp32 dot product and warp sum: the bits of
// launch_gemv_bf16() with f32 output, which linear() takes up to its GEMV token limit),
// gate_logit f32 [T] = bf16(x · shared_gate) (rounded as linear() into bf16 activations rounds
// it), and ids / weights [T, top_k] exactly as launch_moe_topk() would from those logits. ticket:
// one device counter, 0 between launches (the grid's last block resets it, so a CUDA graph replays
// it as is); launches sharing it must be stream-ordered.
void launch_moe_router_topk(const void* x, const void* router, const void* shared_gate,
                            int64_t tokens, int64_t experts, int64_t hidden, int top_k,
                            bool renormalize, float* logits, int32_t* ids, float* weights,
                            float* gate_logit, unsigned* ticket, cudaStream_t stream);

// The whole block (the three launches above): s as launch_moe_experts() takes it (1 <= T <=
// kMoeBlockMaxTokens), shared gate_up bf16 [2Is, H] and down [H, Is] (Is % 8 == 0), scratch of
// moe_block_scratch_bytes(s, Is) (256-byte aligned); logits / ids / weights as
// launch_moe_router_topk() writes them; out bf16 [T, H] = sum_j weights[t, j] expert_ids[t, j](x)
// + sigmoid(x · shared_gate) shared(x) with the op sequence's roundings: bit for bit what
// Backend::moe_block's sequence gives where its linears take the GEMV (T <= linear()'s GEMV limit).
size_t moe_block_scratch_bytes(const MoeShape& s, int64_t shared_inter);
void launch_moe_block(const void* x, const void* router, const void* shared_gate,
                      const void* gate_up, const void* down, const void* shared_gate_up,
                      const void* shared_down, int64_t shared_inter, bool renormalize,
                      float* logits, int32_t* ids, float* weights, void* out, const MoeShape& s,
                      void* scratch, unsigned* ticket, unsigned long long* routed,
                      cudaStream_t stream);

}  // namespace syv::cuda
