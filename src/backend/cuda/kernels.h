// Host-side launchers of the CUDA backend's kernels (one family per .cu file). Plain pointers in
// device memory; every launcher enqueues on `stream` and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace syv::cuda {

// embedding.cu -----------------------------------------------------------------------------------
// out[t, :] = table[ids[t], :]; rows of out-of-range ids are written as zeros.
void launch_embedding(const void* table, DType table_t, int64_t vocab, int64_t hidden,
                      const int32_t* ids, int64_t tokens, void* out, DType out_t, cudaStream_t s);
// out[r, :] = x[rows[r], :].
void launch_gather_rows(const void* x, DType t, int64_t row_bytes, const int32_t* rows,
                        int64_t count, void* out, cudaStream_t s);

// norm.cu ----------------------------------------------------------------------------------------
// out = rmsnorm(x) * w (or * (1 + w) when one_plus). When residual != nullptr: residual += x first
// (rounded to the residual's dtype) and the norm is taken of the new residual.
void launch_rmsnorm(const void* x, DType x_t, void* residual, DType res_t, const void* w, DType w_t,
                    float eps, bool one_plus, void* out, DType out_t, int64_t rows, int64_t hidden,
                    cudaStream_t s);
// The same with the residual read from res_in and the new residual written to res_out (which may
// be res_in: then it is launch_rmsnorm with residual = res_in).
void launch_add_rmsnorm(const void* x, DType x_t, const void* res_in, void* res_out, DType res_t,
                        const void* w, DType w_t, float eps, bool one_plus, void* out, DType out_t,
                        int64_t rows, int64_t hidden, cudaStream_t s);
// launch_add_rmsnorm for bf16 x, residual and out (the same bits: its bf16 kernel's sum, rounding
// and output) that also writes out's rows as the fp8 GEMM's activations: e4m3 q [padded, hidden]
// and f32 scales [hidden / 128][padded], launch_quantize_fp8_groups's bits for the same rows
// (fp8_operands.cu; rows [tokens, padded) zero codes, scale 1). For hidden % 128 == 0 up to 8192
// and 16-byte aligned rows; returns false (launching nothing) otherwise.
bool launch_add_rmsnorm_fp8(const void* x, const void* res_in, void* res_out, const void* w,
                            DType w_t, float eps, bool one_plus, void* out, uint8_t* q,
                            float* scales, int64_t tokens, int64_t padded, int64_t hidden,
                            cudaStream_t s);

// elementwise.cu ---------------------------------------------------------------------------------
void launch_silu_mul(const void* gate_up, DType in_t, void* out, DType out_t, int64_t tokens,
                     int64_t inter, cudaStream_t s);
void launch_add(const void* a, DType a_t, const void* b, DType b_t, void* out, DType out_t,
                int64_t n, cudaStream_t s);
// out[t, n] += bias[n] (in place).
void launch_bias_add(void* out, DType out_t, const void* bias, DType bias_t, int64_t tokens,
                     int64_t n, cudaStream_t s);

// rope_kv.cu -------------------------------------------------------------------------------------
// In place on x0 [T, heads0, D] and x1 [T, heads1, D] (q and k; one launch): per-head rmsnorm with
// norm0 / norm1 (skipped when null), then rotate-half RoPE at positions[t] over [0, rotary_dim).
void launch_head_norm_rope(void* x0, int64_t heads0, const void* norm0, void* x1, int64_t heads1,
                           const void* norm1, DType x_t, int64_t tokens, int64_t head_dim,
                           DType norm_t, float eps, bool one_plus, const int32_t* positions,
                           double theta, int32_t rotary_dim, cudaStream_t s);
// A layer's paged KV cache on the device (backend/kv_cache_view.h): float (f32, bf16, f16; no
// scales) or quantized (F8E4M3 bytes with an f32 scale per row, U4X2 bytes with an f16 scale per
// 32-element group: kv_scale_dtype).
struct KvCacheDev {
  void* k = nullptr;
  void* v = nullptr;
  void* k_scales = nullptr;
  void* v_scales = nullptr;
  DType dtype = DType::BF16;
};
// Copies k, v [T, Hk, D] into caches [pages, page_size, Hk, D] at slots[t] (skipped when < 0).
void launch_kv_write(const void* k, const void* v, DType in_t, void* k_cache, void* v_cache,
                     DType cache_t, const int32_t* slots, int64_t tokens, int64_t row_elems,
                     cudaStream_t s);
// The same into a quantized cache (dtype F8E4M3 or U4X2; D % 32 == 0 for U4X2, D <= 512): one warp
// per (token, kv head) row of k or v quantizes it as backend/kv_quant.h does (the same bytes and
// scales from the same f32 inputs) and writes its bytes and scales at slots[t].
void launch_kv_write_quantized(const void* k, const void* v, DType in_t, const KvCacheDev& cache,
                               const int32_t* slots, int64_t tokens, int64_t hk, int64_t head_dim,
                               cudaStream_t s);
// The fused attention prologue (Backend::qkv_norm_rope_write): qkv [T, hq + 2 hk, D] (dtype x_t)
// is split into q [T, hq, D] and k [T, hk, D] (per-head rmsnorm with q_norm / k_norm when not null,
// then RoPE as launch_head_norm_rope) and v [T, hk, D] (copied); k and v also go into the caches
// [pages, page_size, hk, D] at slots[t] (skipped when < 0). One warp per (token, head), one launch.
// A quantized cache (F8E4M3 / U4X2) gets each k and v row quantized in the same warp, from the
// values written to k and v (as launch_kv_write_quantized would from them).
void launch_qkv_norm_rope_write(const void* qkv, DType x_t, int64_t tokens, int64_t hq, int64_t hk,
                                int64_t head_dim, const void* q_norm, const void* k_norm,
                                DType norm_t, float eps, bool one_plus, const int32_t* positions,
                                double theta, int32_t rotary_dim, void* q, void* k, void* v,
                                const KvCacheDev& cache, const int32_t* slots, cudaStream_t s);
// Its register form (rope_kv.cu qkv_norm_rope_write_rows_kernel: four rows a warp, their loads
// first; bf16 activations, head_dim 64 / 128 / 256, rotary_dim / 2 a multiple of 32; the same
// bits): off by default until measured; SYV_ROPE_ROWS=1 or set_rope_rows_form(true) turns it on.
// rope_rows_launches(): launches that took it since start-up.
void set_rope_rows_form(bool on);
bool rope_rows_form();
uint64_t rope_rows_launches();

// gemv.cu ----------------------------------------------------------------------------------------
// Bandwidth-bound out[t, n] = sum_k x[t, k] * w[n, k] for few tokens. x, w bf16; out bf16 or f32.
// Needs K % 8 == 0 and 16-byte aligned x and w. Returns false (launching nothing) otherwise.
bool launch_gemv_bf16(const void* x, const void* w, void* out, DType out_t, int64_t tokens,
                      int64_t n, int64_t k, cudaStream_t s);
// Two GEMVs of one input x [tokens, k] in one launch: out_big [tokens, n_big] (bf16) = x w_bigᵀ
// and out_small [tokens, n_small] (f32 or bf16) = x w_smallᵀ, each as launch_gemv_bf16 computes
// it (the same sums in the same order). For a few-row projection whose own launch costs more than
// its bytes (the GDN b|a rows beside z). Returns false (launching nothing) where launch_gemv_bf16
// would, or for other output types.
bool launch_gemv_bf16_pair(const void* x, int64_t tokens, int64_t k, const void* w_big,
                           void* out_big, DType big_t, int64_t n_big, const void* w_small,
                           void* out_small, DType small_t, int64_t n_small, cudaStream_t s);
// GEMV launch shapes (warps per block x rows per warp): 0: 8x1, 1: 4x1, 2: 8x2, 3: 4x2, 5: 16x2,
// 6-8: K split over 2 or 4 warps per row pair (gemv.cu), and kGemvAuto (the default): 16x2 for one
// token, 4x2 for more. SYV_GEMV_VARIANT sets the initial one.
constexpr int kGemvVariants = 4;
constexpr int kGemvAuto = 4;
constexpr int kGemv16x2 = 5;
constexpr int kGemvLastVariant = 8;  // 6: 16x2 KS 2, 7: 16x2 KS 4, 8: 8x2 KS 2 (K split over warps)
constexpr int kGemvQkvOneToken = 7;  // the default shape of the norm-folded q|k|v GEMV at one token
constexpr int kGemvQkvOneTokenHalfK = 6;  // the same at K % 4096 != 0, K % 2048 == 0
void set_gemv_variant(int v);
int gemv_variant();
// The launch shape of the fused GEMVs (launch_gemv_fused): a variant as above, or -1 (the
// default) for the plain GEMV's. SYV_GEMV_FUSED_VARIANT sets the initial one (A/B timing).
void set_gemv_fused_variant(int v);
// Whether the norm-prologue GEMVs run as a persistent grid (one prologue per block, tiles walked
// in a loop; k % 1024 == 0). On by default; SYV_GEMV_NORM_PERSIST=0 starts with it off.
void set_gemv_norm_persistent(bool on);
// A GEMV (bf16 in and out, tokens <= 4 per launch, chunked beyond) with its neighbours fused:
//  * norm prologue (res_in != nullptr): the input rows are rmsnorm(res_in + add) * norm_w (as
//    launch_add_rmsnorm computes them; x is ignored); res_out (!= res_in) and normed receive the
//    new residual and the normalised rows. Needs min(tokens, 4) * k * 2 + k * 4 bytes <= 48 KiB.
//  * SiLU epilogue (gate_up != nullptr): w holds 2n rows (gate rows, then up rows); gate_up
//    [T, 2n] receives the bf16 products, out [T, n] silu(gate) * up as launch_silu_mul.
// Needs k % 8 == 0 and 16-byte aligned rows; returns false (launching nothing) otherwise.
struct GemvFused {
  const void* x = nullptr;  // [T, k]
  const void* w = nullptr;  // [n, k] or [2n, k]
  void* out = nullptr;      // [T, n]
  int64_t tokens = 0, n = 0, k = 0;
  const void* res_in = nullptr;
  const void* add = nullptr;
  void* res_out = nullptr;
  void* normed = nullptr;
  const void* norm_w = nullptr;
  DType norm_t = DType::BF16;
  float eps = 1e-6f;
  bool one_plus = false;
  void* gate_up = nullptr;
  // Gated norm prologue (gate_z != nullptr, with res_in; no SiLU epilogue): the input rows are
  // gated_rmsnorm(res_in, gate_z) with norm_w [group] (launch_gated_rmsnorm's values bit for bit);
  // add, res_out, normed unused. Needs k % group == 0.
  const void* gate_z = nullptr;
  int64_t group = 0;
};
bool launch_gemv_fused(const GemvFused& a, cudaStream_t s);
// Any dtypes, any shapes; one warp per output element (slow; for odd dtypes and tests).
void launch_linear_generic(const void* x, DType x_t, const void* w, DType w_t, void* out,
                           DType out_t, int64_t tokens, int64_t n, int64_t k, cudaStream_t s);

// quant_linear.cu --------------------------------------------------------------------------------
// A quantized weight in backend/weight.h's canonical layout (the CUDA backend keeps it as loaded):
// kFp8Block: data e4m3 [n, k], scales f32 [ceil(n / block_n), scale_cols = ceil(k / block_k)];
// kInt4Group: data u4x2 [n, k / 2] (k even, low nibble first), scales f32 [n, scale_cols],
// zeros u8 [n, scale_cols] or null (z = 8), g_idx i32 [k] or null (group k / group_size).
enum class QuantKind : uint8_t { kFp8Block, kInt4Group };
struct QuantWeight {
  QuantKind kind = QuantKind::kFp8Block;
  const void* data = nullptr;
  const float* scales = nullptr;
  const uint8_t* zeros = nullptr;
  const int32_t* g_idx = nullptr;
  // Act-order permuted at load (backend/weight.h perm): stored column j holds input column
  // perm[j]. Only launch_quant_dequant_experts() reads it (its dense rows come out in input
  // order); the GEMVs and launch_quant_dequant() work in stored order on x gathered by it.
  const int32_t* perm = nullptr;
  int64_t n = 0, k = 0, scale_cols = 0;
  int32_t block_n = 0, block_k = 0, group_size = 0;
};
// Whether launch_quant_gemv() takes `w`: fp8 with k % 16 == 0 and block_k % 16 == 0; int4 with
// k % 32 == 0, group_size % 32 == 0 and no g_idx; data 16-byte aligned.
bool quant_gemv_supports(const QuantWeight& w);
// out[t, :] = x[t, :] · dequant(w)ᵀ for few tokens (chunks of 4; each chunk streams the packed
// weight once, dequantized in registers, fp32 accumulation). x bf16 [tokens, k], 16-byte aligned;
// out bf16 or f32 [tokens, n]. Returns false (launching nothing) when the shape is not supported.
bool launch_quant_gemv(const QuantWeight& w, const void* x, void* out, DType out_t, int64_t tokens,
                       cudaStream_t s);
// quant_gemv_mma.cu: the same product on tensor cores (mma.sync, exact bf16 weights, fp32
// accumulation), up to 16 tokens per launch: K % 128 == 0, int4 groups of a multiple of 128
// columns without g_idx, fp8 scale tiles a multiple of 128 columns wide; data and x 16-byte
// aligned. Returns false (launching nothing) otherwise.
bool launch_quant_gemv_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, cudaStream_t s);
// launch_quant_gemv_mma with the SiLU·mul in its epilogue: w holds 2n' rows (gate rows, then up
// rows); gate_up bf16 [tokens, 2n'] receives the products, out bf16 [tokens, n'] silu(gate) * up
// as launch_silu_mul computes it. False (launching nothing) where launch_quant_gemv_mma would be.
bool launch_quant_gemv_mma_silu(const QuantWeight& w, const void* x, void* gate_up, void* out,
                                int64_t tokens, cudaStream_t s);
// Whether launch_quant_gemv_mma's single token (and the SiLU one's) may run four-warp blocks where
// the eight-warp grid passes one wave of resident blocks and four-warp ones keep as many warps
// resident (K split four ways a row tile, not eight: another order of the sums): on unless
// SYV_QUANT_GEMV_FOUR_WARPS=0 or set_quant_gemv_four_warps(false).
// four_warp_launches: launches of that form so far in this process (tests).
void set_quant_gemv_four_warps(bool on);
bool quant_gemv_four_warps();
uint64_t quant_gemv_four_warp_launches();
// quant_gemv_bulk.cu: launch_quant_gemv_mma's single token (gate_up null) or
// launch_quant_gemv_mma_silu's (gate_up [1, n], out bf16 [1, n / 2]) with the weight streamed by
// the bulk-copy engine into a ring of shared-memory stages of resident blocks; the same bits.
// Measured on an H100 (2026-12-06): int4 1.2-1.4x slower than the default kernel on every Qwen3-8B
// projection, fp8 within -8% / +7%; off unless SYV_QUANT_GEMV_BULK=1 (anything but 0 / 1
// stops with its name) or set_quant_gemv_bulk(true); compute capability 9.x only. False
// (launching nothing) where it is off or does not take the shape.
bool launch_quant_gemv_bulk(const QuantWeight& w, const void* x, void* out, DType out_t,
                            void* gate_up, cudaStream_t s);
void set_quant_gemv_bulk(bool on);
uint64_t quant_gemv_bulk_launches();  // launches so far in this process (tests)
// quant_gemm_mma.cu: the same product for tens of tokens on tensor cores (the weight decoded in
// registers once per 64 tokens; K split across blocks where the grid would not fill the GPU, the
// splits' f32 partial sums in `workspace` and added in order by a second kernel). The shapes of
// launch_quant_gemv_mma; x and the weight 16-byte aligned; out bf16 or f32 [tokens, n]; each split
// needs tokens x n x 4 bytes of `workspace` (fewer splits where it is short). Returns false
// (launching nothing) otherwise. Not batch-invariant (the split count depends on tokens).
bool launch_quant_gemm_mma(const QuantWeight& w, const void* x, void* out, DType out_t,
                           int64_t tokens, int sm_count, void* workspace, size_t workspace_bytes,
                           cudaStream_t s);
// dense bf16 [n, k] = dequant(w), every format and shape (the prefill path: then a dense GEMM).
// vectorized: 8 columns a thread where the shape allows (K % 8 == 0, scale tiles / groups a
// multiple of 8 wide, no g_idx; the same bf16 values), else one element a thread. Returns whether
// the 8-column kernel ran.
bool launch_quant_dequant(const QuantWeight& w, void* dense, cudaStream_t s, bool vectorized);
// out bf16 [tokens, k] = x bf16 [tokens, k] with its columns gathered by perm i32 [k]
// (out[t, j] = x[t, perm[j]]): the input of an act-order int4 weight permuted at load.
void launch_gather_columns(const void* x, const int32_t* perm, int64_t tokens, int64_t k, void* out,
                           cudaStream_t s);
// Quantized MoE experts (Backend::moe_experts_quantized): mask i32 [experts] = 1 for every expert
// among ids[0, count) (i32), 0 for the others; one block.
void launch_moe_expert_mask(const int32_t* ids, int64_t count, int64_t experts, int32_t* mask,
                            cudaStream_t s);
// dense bf16 rows [e * rows_per_expert, (e + 1) * rows_per_expert) = dequant(w) there, in input
// column order (w.perm undone), for each expert e with mask[e] != 0 (w.n = experts *
// rows_per_expert, experts <= 65535); the other experts' rows are not written (the MoE kernels
// read only routed experts).
// vectorized as launch_quant_dequant's (not for act-order permuted rows); returns whether the
// 8-column kernel ran.
bool launch_quant_dequant_experts(const QuantWeight& w, int64_t rows_per_expert, int64_t experts,
                                  const int32_t* mask, void* dense, cudaStream_t s,
                                  bool vectorized);

// moe_quant_gemm.cu: quantized MoE experts on the tiled path (moe.cuh's launch_moe_experts with
// the routed experts' packed rows decoded in registers: quant_gemm_tile.cuh), any token count, in
// passes of moe_pass_tokens(s). Operands as launch_moe_quant_gemv's, `scratch` of
// moe_scratch_bytes(s). Both weights in one format the tile takes (K % 128 == 0, int4 groups /
// fp8 scale tiles a multiple of 128 columns, no g_idx, not act-order permuted). Returns false
// (launching nothing) otherwise.
struct MoeShape;
bool launch_moe_quant_gemm(const void* x, const int32_t* ids, const float* weights,
                           const QuantWeight& gate_up, const QuantWeight& down, void* out,
                           const MoeShape& s, void* scratch, unsigned long long* routed,
                           cudaStream_t stream);

// moe_quant_gemv.cu: quantized MoE experts at small batches, streaming only the routed experts'
// packed rows. x bf16 [tokens, H], ids i32 / weights f32 [tokens, top_k] as moe_topk() writes them
// (an out-of-range id contributes nothing), gate_up [experts * 2I, H] and down [experts * H, I]
// stacked as Backend::moe_experts() takes them (one format; each as launch_quant_gemv() takes it,
// not act-order permuted: moe_quant_gemv_supports()), act bf16 [tokens * top_k, I] scratch, out
// bf16 [tokens, H]. Adds the number of distinct valid experts routed to to *routed (null: not
// counted). Returns false (launching nothing) when the weights or alignments are not supported.
bool moe_quant_gemv_supports(const QuantWeight& gate_up, const QuantWeight& down);
bool launch_moe_quant_gemv(const void* x, const int32_t* ids, const float* weights,
                           const QuantWeight& gate_up, const QuantWeight& down, void* out,
                           int64_t tokens, int top_k, int64_t experts, void* act,
                           unsigned long long* routed, cudaStream_t s);

// fp8_operands.cu: the operands of LtGemm::run_fp8 (docs/cuda-backend.md "fp8 tensor-core GEMMs").
// Scales are in cuBLASLt's VEC128 layout: f32 [k / 128][rows], rows contiguous.
// Whether x (bf16 [tokens, k]) can be quantized: k % 128 == 0, x 8-byte aligned.
bool fp8_activation_groups_supported(int64_t k, const void* x);
// q e4m3 [padded, k] and scales [k / 128][padded]: each (token, 128 columns) group scaled by its
// absolute maximum / 448 (a zero group: scale 1, zero codes), codes rounded to nearest; rows
// [tokens, padded) zero codes with scale 1 (the GEMM takes token counts in multiples of 8).
void launch_quantize_fp8_groups(const void* x, uint8_t* q, float* scales, int64_t tokens,
                                int64_t padded, int64_t k, cudaStream_t s);
// fp8_skinny_gemm.cu: the W8A8 product of launch_quantize_fp8_groups' operands (x e4m3 [>= tokens,
// k], x_scales [k / 128][padded]) and fp8 weight w of 128 x 128 scale tiles, out bf16 or f32
// [tokens, n], at 1 to kFp8SkinnyKernelMaxTokens tokens: thread-block clusters split K and sum in a
// fixed order (deterministic for a given shape). Compute capability 9.x only. Returns false
// (launching nothing) where fp8_skinny_supports() says no or x is not 16-byte aligned. Its kernels
// are sm_90a code: a build's SYV_CUDA_ARCHS must name 90a (the default and the release list do).
constexpr int64_t kFp8SkinnyKernelMaxTokens = 64;
bool fp8_skinny_supports(const QuantWeight& w, int64_t tokens);
bool launch_fp8_skinny_gemm(const QuantWeight& w, const uint8_t* x, const float* x_scales,
                            int64_t padded, void* out, DType out_t, int64_t tokens, int sm_count,
                            cudaStream_t s);
// How launch_fp8_skinny_gemm runs an [n, k] weight: K in `splits` ranges (the cluster size) and
// the ring's stages; `resident`: the clusters the GPU holds at once where the K range is split
// (benchmarks print it; 0 unsplit, where it was not asked).
// Weights of more 128-row tiles than half the SMs: no split, two blocks an SM, 4 stages; else
// one block an SM, 8 stages, the most splits (<= 8, <= SMs / tiles) whose clusters all fit at
// once (cudaOccupancyMaxActiveClusters).
struct Fp8SkinnyPlan {
  int splits, stages, resident;
};
Fp8SkinnyPlan fp8_skinny_plan(int64_t n, int64_t k, int sm_count);
// Whether its weight tiles come by one thread's tensor-map (TMA) loads completing on mbarriers
// instead of every thread's cp.async: the same bytes in the same layout, so the same bits. On
// (faster: every shape 2-14% a call; fp8 decode steps of 16 / 32 sequences 0.1% / 3.1% on an
// H100, 2026-12-06, docs/cuda-backend-notes.md "Run 26") unless SYV_FP8_SKINNY_TMA=0 (anything
// but 0 / 1 stops with its name) or set_fp8_skinny_tma(false).
void set_fp8_skinny_tma(bool on);
bool fp8_skinny_tma();
// Whether, with tensor-map loads, a chunk's wgmmas run while the previous chunk's products are
// scaled into the sums (two sets of products, one stage fewer in flight): the same sums in the
// same order, so the same bits. On (faster: fp8 decode steps of 16 / 32 sequences 1.4% / 2.6%
// on an H100, 2026-12-06) unless SYV_FP8_SKINNY_PIPE=0 or set_fp8_skinny_pipe(false); 33-64
// tokens of an unsplit weight (two blocks an SM) are not pipelined (it would spill registers).
void set_fp8_skinny_pipe(bool on);
bool fp8_skinny_pipe();
// Whether, with the pipelined multiply, a block reads its first 64 weight-tile scales into shared
// memory before its PDL wait instead of each of those chunks' folds loading its scale after the
// chunk's wgmmas (in a decode step the first such load misses L2: a DRAM latency on the critical
// path of every launch); later chunks still load theirs. The same values, so the same bits; a
// kernel form of its own, so the other forms compile as measured. On (the 8B's fp8 step at b = 32
// 0.8-0.9% faster, b = 16 the same, in two calls on an H100, 2026-12-06) unless
// SYV_FP8_SKINNY_STAGE_SCALES=0 or set_fp8_skinny_stage_scales(false).
void set_fp8_skinny_stage_scales(bool on);
bool fp8_skinny_stage_scales();
// Whether launch_int4_to_fp8() takes w: int4 with group_size 128, no g_idx, k % 128 == 0.
bool int4_to_fp8_supported(const QuantWeight& w);
// q e4m3 [n, k] = q - z of each weight (exact), scales [k / 128][n] = the group scales: the same
// weight as w, in the GEMM's operand form (W4A8).
void launch_int4_to_fp8(const QuantWeight& w, uint8_t* q, float* scales, cudaStream_t s);

// attention_decode.cu / attention_prefill.cu
// -------------------------------------------------------
// A quantized cache (cache_t F8E4M3 or U4X2, backend/kv_cache_view.h) also passes its scales;
// the kernels read its bytes and apply the scales in registers (decode: to each key's dot product
// or 32-element partial sum, and folded into each value's probability weight; prefill: K/V tiles
// dequantized to bf16 on their way into shared memory).
struct AttentionArgs {
  const void* q;        // [T, Hq, D]
  const void* k_cache;  // [pages, page_size, Hk, D] (int4: [.., D / 2] bytes)
  const void* v_cache;
  void* out;  // [T, Hq, D]
  DType q_t, cache_t, out_t;
  const void* k_scales;  // quantized caches: f32 [pages, page_size, Hk, 1] (fp8) or
  const void* v_scales;  // f16 [.., D / 32] (int4); else null
  int32_t tokens, hq, hk, head_dim, page_size, max_pages_per_seq;
  int64_t cache_pages;  // the caches' first dimension (prefill attention's tensor maps; 0: unknown)
  float scale;
  const int32_t* positions;   // [T]
  const int32_t* token_seq;   // [T]
  const int32_t* seq_starts;  // [S + 1]
  const int32_t* page_table;  // [S, max_pages_per_seq]
};
// Split-KV flash decoding, one block per (token, group of query heads sharing a kv head, split),
// on one of two kernels: by default tensor cores (attention_decode_mma.cu: the group's query heads
// are the rows of a 16-row MMA tile) where decode_mma_heads_per_block() says the shape allows,
// else CUDA-core lanes (attention_decode.cu: group 1, head_dim other than 64 / 128 / 256, or
// AttentionDecodeKernel::kCudaCores);
// every token attends to positions [0, positions[t]]. `splits` is the grid's split count (for the
// default policy decode_attention_splits(), which depends on the batch shape only). Each block
// takes its key range from its own token's context on the device: keys_per_split when > 0
// (batch-invariant mode: split s holds keys [s * kps, (s + 1) * kps) from key 0), else
// ceil(context / splits) rounded up to a multiple of the split alignment (kDecodeSplitAlignOneToken
// for a one-token batch, kDecodeSplitAlign otherwise, or what set_attention_split_align() fixed);
// splits past the context do nothing and the merge skips them. So one launch shape (a CUDA graph)
// serves every context.
// The cache may be bf16 (any head_dim up to 256) or fp8 / int4 with scales (head_dim 64, 128,
// 256; the same kernel, which decodes in registers and applies the scales per key or group).
// `partial` holds tokens * hq * splits * (head_dim + 2) floats, whatever the context.
// counters: when not null (and splits <= kMaxMergedSplits), tokens * (hq / G) zeroed u32 slots:
// the last used split block of each (token, head group) to finish merges the splits itself (no
// second launch) and sets its slot back to zero. Otherwise (and always on the tensor-core
// kernel) a second kernel merges them.
constexpr int32_t kMaxMergedSplits = 64;
constexpr int32_t kMaxDecodeSplits = 64;
constexpr int32_t kDecodeSplitAlign = 64;  // keys per split: a multiple of this (batches of >= 2)
// ... and for a batch of one token (H200, 8B b=1 ctx 512: 4.442 -> 4.234 ms; at b=8, 32 cost 2%).
constexpr int32_t kDecodeSplitAlignOneToken = 32;
// Fixes the alignment for every batch (SYV_ATTN_SPLIT_ALIGN likewise: 16, 32, 64 or 128); tests and
// A/B timing set it (anything else: back to the default by batch shape). Read at launch: a captured
// graph keeps it.
void set_attention_split_align(int align);
// The default split policy (H200, 8B decode, docs/cuda-backend-notes.md run 10): splits for ~8
// blocks per SM while the batch has fewer (token, head group) blocks than SMs, ~2 from there on
// (so batches of >= 2 x SMs blocks take one split).
constexpr int32_t kDecodeSplitWaves = 8;
constexpr int32_t kDecodeSplitWavesLarge = 2;
void launch_attention_decode(const AttentionArgs& a, int32_t splits, int32_t keys_per_split,
                             float* partial, unsigned* counters, cudaStream_t s);
// The default split count of a decode launch, from the batch shape alone: with B = tokens x head
// groups blocks per split, enough splits for waves x `sms` blocks (waves_large x `sms` when
// B >= sms), at most kMaxDecodeSplits. waves / waves_large: kDecodeSplitWaves /
// kDecodeSplitWavesLarge, or SYV_ATTN_SPLIT_WAVES / SYV_ATTN_SPLIT_WAVES_LARGE /
// set_attention_split_waves() (A/B timing; < 1 = the default). SYV_ATTN_SPLITS /
// set_attention_decode_splits(n > 0) force n splits (tests); 0 returns to the policy.
// On the tensor-core kernel the target is kDecodeMmaBlocksPerSm x `sms` blocks whatever the batch
// (a few waves of 2-3 resident blocks, so the last wave's tail is short), or
// SYV_ATTN_MMA_BLOCKS_PER_SM (A/B timing). H200, 8B, b = 64, ctx 8192, bf16 KV: 4 / 8 / 16 / 32
// per SM: 25.6 / 24.2 / 25.1 / 24.8 ms per step.
// Instances of which an SM holds one block at a time (the CUDA runtime's occupancy,
// decode::mma_resident_blocks(): on the H200 head_dim 256 with a bf16 cache) pay each block's
// pipeline fill and warp merge with nothing to overlap them, and a partial last wave leaves SMs
// idle; they take the most splits whose blocks fit in kDecodeMmaWholeWaves waves of one block per
// SM (at least 1), unless SYV_ATTN_MMA_BLOCKS_PER_SM sets a per-SM target. H200, Qwen3.5 9B-class
// (4 KV heads), graph ms per step, forced split counts: b = 64 ctx 512 7.640 (the 8-per-SM target:
// 5 splits) / 7.400 (1 split, this rule), ctx 4096 9.960 / 9.707; b = 16, ctx 512 / 4096: 17
// splits 5.752 / 6.425, 3 splits (1.5 waves) 5.681 / 6.443, 2 splits (one wave, this rule) 5.632
// / 6.200.
int32_t decode_attention_splits(int64_t tokens, int64_t hq, int64_t hk, int64_t head_dim,
                                DType cache_t, int sms);
constexpr int32_t kDecodeMmaBlocksPerSm = 8;
constexpr int32_t kDecodeMmaWholeWaves = 1;
// Which decode kernel paged attention takes: kAuto (tensor cores where the shape allows) or
// kCudaCores (always the CUDA-core kernel; SYV_ATTN_DECODE=cores starts with it: A/B timing,
// tests of both kernels). Read at launch: a captured graph keeps its kernel.
enum class AttentionDecodeKernel { kAuto = 0, kCudaCores = 1 };
void set_attention_decode_kernel(AttentionDecodeKernel k);
AttentionDecodeKernel attention_decode_kernel();
// Which form of the tensor-core decode kernel runs where a KV head has at most 8 query heads:
// kKeyRows puts the keys on the MMA's rows, kHeadRows the query heads. kAuto (the default) takes
// key rows for fp8 caches from 16 blocks per split (tokens x head groups) and head rows below them
// and for bf16 / int4 caches (their key-rows form is tested, not yet measured;
// attention_decode_mma.cu says why). SYV_DECODE_MMA_FORM=keys|heads starts with a forced form (A/B
// timing; tests force each). Read at launch.
enum class DecodeMmaForm { kAuto = 0, kKeyRows = 1, kHeadRows = 2 };
void set_decode_mma_form(DecodeMmaForm f);
DecodeMmaForm decode_mma_form();
// Query heads per tensor-core decode block for this shape under the current choice; 0: the
// CUDA-core kernel runs it (also where the kernel needs more shared memory than the device has:
// head_dim 256 on sm_86 / 89 / 120).
int decode_mma_heads_per_block(int64_t hq, int64_t hk, int64_t head_dim);
void set_attention_decode_splits(int splits);
void set_attention_split_waves(int waves, int waves_large = -1);
// Whether paged attention merges its splits in the decode kernel instead of a second kernel. Off
// by default (SYV_ATTN_MERGED_COMBINE=1 in the environment starts with it on; switchable for A/B
// timing): on an H200 the 8B attention op alone took 10.0 us merged vs 8.6 us with the combine
// kernel at context 512, 30.6 vs 26.4 us at 8192 (docs/cuda-backend-notes.md, run 10).
void set_attention_merged_combine(bool on);
bool attention_merged_combine();
// Tensor-core tiled prefill: tiles[i] = {seq, first token} of kPrefillTileRows-row query tiles
// (prefill_attention.h; the last tile of a sequence may be shorter), longest first. Returns false
// when the shape is not supported (head_dim not 64/128/256, or q/out not bf16, or the cache not
// bf16, fp8 or int4; 256 and the quantized caches run on the mma.sync kernel whatever the variant)
// or its kernel needs more shared memory than the device has (device_smem_optin(): head_dim 256
// off sm_90, 128 on sm_86 / 89 / 120); the caller then runs the decode kernels.
bool launch_attention_prefill(const AttentionArgs& a, const int32_t* tiles, int32_t num_tiles,
                              cudaStream_t s);

// gated_delta.cu / gated_delta_chunked.cu / hybrid_elementwise.cu (hybrid ops of backend.h) -----
// The gated delta rule (Backend::gated_delta_rule). qkv [T, 2 hk dk + hv dv] and out [T, hv dv] in
// the activation dtype, ba [T, 2 hv] of ba_t; state [slots, hv, dk, dv] f32 or bf16; a_log /
// dt_bias [hv] of param_t. Sequences with slot < 0 are skipped (padding). Two kernels share the
// arguments and split the sequences by length: launch_gdn_recurrent (token by token: one block per
// (sequence, value head, 32 state columns) keeps its state slice in registers; dk <= 256) takes
// those with fewer than chunked_from tokens (all of them when chunked_from == 0),
// launch_gdn_chunked (chunks of 64 tokens as small matrix products; dk <= 128) the others.
struct GdnArgs {
  const void* qkv = nullptr;
  const void* ba = nullptr;
  DType ba_t = DType::F32;
  const void* a_log = nullptr;
  const void* dt_bias = nullptr;
  DType param_t = DType::F32;
  void* state = nullptr;
  void* out = nullptr;
  const int32_t* seq_starts = nullptr;  // [S + 1]
  const int32_t* slots = nullptr;       // [S]
  int32_t num_seqs = 0, hk = 0, hv = 0, dk = 0, dv = 0;
  int32_t chunked_from = 0;      // sequences of at least this many tokens go to the chunked kernel
  bool batch_invariant = false;  // one thread layout whatever the batch (GdnRecurrentForm)
  bool early_reads = false;      // set by launch_gdn_recurrent (common.cuh pdl_early_reads())
  // In-pass state saves (StateSaves of backend.h): the state after save_after[i] new tokens of
  // sequence s (save_starts[s] <= i < save_starts[s + 1]) also goes to checkpoint save_dests[i]
  // of `saves` ([checkpoints, hv, dk, dv], the state's dtype). num_saves 0: none.
  void* saves = nullptr;
  const int32_t* save_starts = nullptr;  // [S + 1]
  const int32_t* save_after = nullptr;   // [N]
  const int32_t* save_dests = nullptr;   // [N]
  int32_t num_saves = 0;
};
void launch_gdn_recurrent(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s);
// launch_gdn_recurrent's thread layout (gated_delta.cu): kRows, one block per (sequence, value
// head) reading whole state rows (dv = 128, dk 32 / 64 / 128), or kColumns, one block per
// (sequence, value head, 32 state columns; any shape). kAuto (the default) takes rows where they
// fit and the batch has at least kGdnRowsMinBlocks (sequence, value head) pairs, or always with
// GdnArgs::batch_invariant. SYV_GDN_RECURRENT=rows|columns sets the initial form (A/B timing,
// tests). H200, Qwen3.5 9B-class (Hv 32, dk = dv = 128), us per layer, columns -> rows: 1
// sequence 6.5 -> 7.6, 64: 96.1 -> 81.2 (66% -> 78% of the copy rate), 256: 367.8 -> 286.8 (88%).
constexpr int64_t kGdnRowsMinBlocks = 256;
enum class GdnRecurrentForm { kAuto, kRows, kColumns };
void set_gdn_recurrent_form(GdnRecurrentForm form);
void launch_gdn_chunked(const GdnArgs& a, DType x_t, DType state_t, cudaStream_t s);
// Whether the chunked kernel runs this dk here (dk <= 128, and its 146.5 KiB of shared memory fit
// the device: not on sm_86 / 89 / 120).
bool gdn_chunked_supports(int32_t dk);
// The chunked rule in three phases (gated_delta_phases.cu: U and W per chunk in parallel, the
// state walk, the output per chunk in parallel), instead of launch_gdn_chunked where
// CudaBackend::set_gdn_phases says so: the same sequences (GdnArgs::chunked_from), `chunks` at
// least the batch's chunk count (backend/gdn_chunks.h gdn_chunk_bound), `scratch` at least
// gdn_phases_scratch_bytes(a, chunks) bytes (16-byte aligned). Takes what gdn_chunked_supports()
// takes. The scratch is per chunk (U/Δ and Oq [64][dv], W, Γq and Λk [64][128] f32 a value head):
// a batch whose chunk bound passes ceil(tokens / 64) + kGdnPhasesSpareChunks (memory_plan.h)
// takes launch_gdn_chunked instead, so that the scratch stays within the memory plan's
// estimate_gdn_phases_scratch_bytes().
// The phases' tensor-core forms (gated_delta_phases_mma.cu, 3xTF32 mma.sync), a mask of the phases
// that take them (0: every phase fp32 on the CUDA cores). The default is the walk's alone: on an
// H100 (2026-12-05) it made a layer of 8,192 tokens 3.04 -> 2.53 ms, where phase 1's and phase 3's
// forms made it slower (3.53, 3.70 ms). SYV_GDN_MMA sets the initial mask: "all", "none", or a
// comma list of "wu" (phase 1), "walk" (phase 2), "output" (phase 3); anything else stops with its
// name. Value head dims above 128 keep the CUDA cores in phases 1 and 3.
constexpr unsigned kGdnMmaWu = 1, kGdnMmaWalk = 2, kGdnMmaOutput = 4, kGdnMmaAll = 7;
constexpr unsigned kGdnMmaDefault = kGdnMmaWalk;
void set_gdn_mma(unsigned mask);
// Phase 1 on the CUDA cores: by products (the default: T = (I + A)^-1 by the blocked solve on the
// identity's columns, then U = T β v and W = T β Γ k as register-tiled products:
// gdn_wu_products_kernel; value head dims up to 128, wider ones the blocked solve), the blocked
// solve of (I + A) [U | W] = [β v | β Γ k], or by columns (a thread a column, forward substitution
// in registers: solve_by_columns). Measured on an H100 (2026-12-07, a layer of Qwen3-Next's heads
// at 8K tokens with the walk on the tensor cores): 2,290 us by products, 2,528 blocked; by columns
// 1.2x slower than blocked (2026-12-06). Same results within f32 rounding: the op, hybrid golden
// and engine tests (batching, chunked prefill, prefix hits, graphs, MTP, verify, the host tier)
// passed under it on an H100 (tools/device/gdn_products_check.sh, 2026-12-07 07:56).
// SYV_GDN_WU=products / blocked / columns sets the initial choice; anything else stops with its
// name. The tensor-core phase 1 (kGdnMmaWu) ignores it.
enum class GdnWuForm { kProducts = 0, kBlocked = 1, kColumns = 2 };  // SYV_GDN_WU's order
constexpr GdnWuForm kGdnWuFormDefault = GdnWuForm::kProducts;
void set_gdn_wu_form(GdnWuForm form);
// Phase 3 on the CUDA cores with P Δ as a register-tiled product (gdn_output_products_kernel, the
// default; value head dims up to 128) or gdn_output_kernel's passes of 32 columns: with phase 1
// by products, a layer at 8K tokens 2,267 against 2,290 us (H100, 2026-12-07; tested with phase
// 1's form). SYV_GDN_OUT=products / dots sets the initial choice; anything else stops with its
// name. The tensor-core phase 3 (kGdnMmaOutput) ignores it.
constexpr bool kGdnOutputProductsDefault = true;
void set_gdn_output_products(bool on);
int64_t gdn_phases_scratch_bytes(const GdnArgs& a, int64_t chunks);
void launch_gdn_phases(const GdnArgs& a, DType x_t, DType state_t, int64_t chunks, void* scratch,
                       cudaStream_t s);

// Causal depthwise conv1d + SiLU over each sequence's new tokens (Backend::causal_conv1d_silu):
// x, out [T, C] in the activation dtype; weight [C, K] (any float dtype); state f32
// [slots, K - 1, C]. Batches whose longest sequence has at most kConvSequentialMaxTokens new
// tokens take one thread per (sequence, channel) walking its tokens; longer ones one thread per
// (token, channel), then a window update. 2 <= K <= 8; sequences with slot < 0 are skipped.
constexpr int32_t kConvSequentialMaxTokens = 16;
struct ConvArgs {
  const void* x = nullptr;
  const void* weight = nullptr;
  DType weight_t = DType::BF16;
  float* state = nullptr;
  void* out = nullptr;
  const int32_t* seq_starts = nullptr;  // [S + 1]
  const int32_t* token_seq = nullptr;   // [T]
  const int32_t* slots = nullptr;       // [S]
  int32_t tokens = 0, num_seqs = 0, channels = 0, kernel = 0;
  // In-pass state saves, as GdnArgs: the window after save_after[i] new tokens goes to checkpoint
  // save_dests[i] of `saves` (f32 [checkpoints, K - 1, C]).
  float* saves = nullptr;
  const int32_t* save_starts = nullptr;
  const int32_t* save_after = nullptr;
  const int32_t* save_dests = nullptr;
  int32_t num_saves = 0;
  // Set by launch_conv1d_silu (pdl_early_reads()): the sequential kernel reads its weights, the
  // batch metadata and the windows before its dependency wait.
  bool early_reads = false;
};
void launch_conv1d_silu(const ConvArgs& a, DType x_t, int32_t max_seq_len, cudaStream_t s);

// out = x * rsqrt(mean(x^2) + eps) * w * silu(z) over rows of D (Backend::gated_rmsnorm).
void launch_gated_rmsnorm(const void* x, const void* z, DType x_t, const void* w, DType w_t,
                          float eps, void* out, int64_t rows, int64_t D, cudaStream_t s);
// out[i] = x[i] * sigmoid(gate[broadcast ? i / row : i]) over n elements.
void launch_sigmoid_mul(const void* x, const void* gate, DType x_t, void* out, int64_t n,
                        int64_t row, bool broadcast, cudaStream_t s);

// sampling.cu -------------------------------------------------------------------------------------
// ids[r] = argmax_v logits[r, v] (lowest index among ties). logits f32 or bf16 [R, V].
void launch_argmax(const void* logits, DType t, int64_t rows, int64_t vocab, int32_t* ids,
                   cudaStream_t s);

}  // namespace syv::cuda
namespace syv {
struct SampleRow;
struct SamplePenalty;
}  // namespace syv
namespace syv::cuda {

// Backend::sample() on the device: penalties into `work` (f32 [R, V]) when any_penalty, argmax of
// every row into ids, then the stochastic rows (temperature > 0) when any_random. dev_rows [R] and
// dev_penalties in device memory.
void launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleRow* dev_rows,
                   const SamplePenalty* dev_penalties, bool any_penalty, bool any_random,
                   float* work, int32_t* ids, cudaStream_t s);

}  // namespace syv::cuda

namespace syv::cuda {
// elementwise.cu: p[i] = uniform(-scale, scale) from a counter hash of (seed, i) (f32/bf16/f16).
// Programmatic dependent launch on/off for every launch that follows (see common.cuh).
void set_pdl_enabled(bool on);
bool pdl_enabled();
void launch_fill_random(void* p, DType t, int64_t n, uint64_t seed, float scale, cudaStream_t s);
// Test support: fills the shared memory of a block on every SM with ones (NaN bit patterns), so
// that a kernel launched next which reads shared memory before storing it (a missing barrier)
// sees NaN rather than whatever the previous kernel left.
void launch_poison_shared_memory(cudaStream_t s);
}  // namespace syv::cuda
