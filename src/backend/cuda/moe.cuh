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

namespace syv::cuda {

// Backend::moe_topk: logits f32 [T, E]; ids i32 / weights f32 [T, top_k]. E <= kMoeMaxExperts,
// top_k <= 32.
inline constexpr int64_t kMoeMaxExperts = 4096;
void launch_moe_topk(const float* logits, int64_t tokens, int64_t experts, int top_k,
                     bool renormalize, int32_t* ids, float* weights, cudaStream_t s);

struct MoeShape {
  int64_t tokens = 0, top_k = 0, experts = 0, hidden = 0, inter = 0;
};

// Tokens per pass of launch_moe_experts() (the scratch of a pass grows with its tokens: beyond a
// fixed budget the tokens go in passes, each re-reading the experts it routes to).
int64_t moe_pass_tokens(const MoeShape& s);
// Scratch bytes launch_moe_experts() needs for `s` (one pass of moe_pass_tokens(s) tokens).
size_t moe_scratch_bytes(const MoeShape& s);

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

// The small-batch path of launch_moe_experts() (moe_gemv.cu): 1 <= s.tokens <= kMoeGemvMaxTokens,
// top_k <= 32, the same operands; act: bf16 [T * top_k, I] scratch (16-byte aligned). Adds the
// number of distinct valid experts routed to to *routed, as one pass of the tiled path does.
void launch_moe_gemv(const void* x, const int32_t* ids, const float* weights, const void* gate_up,
                     const void* down, void* out, const MoeShape& s, void* act,
                     unsigned long long* routed, cudaStream_t stream);

}  // namespace syv::cuda
