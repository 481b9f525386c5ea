// The CUDA backend: bf16 activations and weights, fp32 accumulation, one stream per backend.
// This header has no CUDA includes, so it can be used from code built without nvcc; it is only
// compiled into the build when SYV_HAVE_CUDA is set.
//
// Besides the Backend ops it offers what benchmarks and the memory planner need: device facts and
// free memory, on-device greedy sampling, event timing, the machine's own ceilings (a large device
// copy and a large bf16 GEMM, measured on random data), and CUDA-graph capture of a step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace syv {

struct GpuMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

class CudaBackend : public Backend {
 public:
  virtual int device() const = 0;
  // The stream every op runs on (a cudaStream_t; void* keeps CUDA out of this header), for a
  // library that enqueues its own kernels in order with the ops (NCCL: backend/cuda/
  // nccl_tp_group.h). Valid for the backend's lifetime; work enqueued on it while a graph is
  // being captured (capture_graph) becomes part of the graph.
  virtual void* cuda_stream() const = 0;
  virtual std::string device_name() const = 0;
  virtual int sm_count() const = 0;
  virtual GpuMemoryInfo memory_info() = 0;
  // memory_info()'s free bytes (cudaMemGetInfo), for the start-up weight check.
  AvailableMemory available_memory() override {
    return {static_cast<int64_t>(memory_info().free_bytes),
            "free memory on CUDA device " + std::to_string(device()) + " (" + device_name() + ")"};
  }
  // Its GPU: "cuda", the ordinal, the device's name and cudaMemGetInfo's total bytes.
  DeviceFacts device_facts() override {
    return {"cuda", device(), device_name(), static_cast<int64_t>(memory_info().total_bytes)};
  }
  // Bytes of device memory allocated through allocate() and not yet released (weights, KV,
  // activations) plus the backend's own scratch (GEMM workspace, metadata, attention partials).
  virtual size_t allocated_bytes() const = 0;
  virtual size_t peak_scratch_bytes() const = 0;

  // ids[r] = argmax over the row of logits [R, V] (f32 or bf16), lowest index among ties; ids i32
  // [R] in device memory. Only the ids need to cross to the host.
  virtual void argmax(const Tensor& logits, Tensor& ids) = 0;

  // Runs `step` `warmup` times, then `iters` times with device events around each run; returns the
  // per-run milliseconds.
  virtual std::vector<float> time_ms(const std::function<void()>& step, int warmup, int iters) = 0;

  // The machine's ceilings, measured now on random data: device-to-device copy bandwidth in GB/s
  // (bytes read + bytes written), and a bf16 GEMM (fp32 accumulation) in TFLOP/s.
  virtual double measure_copy_gbps(size_t bytes, int iters) = 0;
  virtual double measure_gemm_tflops(int64_t m, int64_t n, int64_t k, int iters) = 0;

  // Experts the MoE layers have read since the backend started: each moe_experts() call (each
  // pass of it) adds the number of distinct experts its tokens route to. Synchronizes. `syv bench`
  // takes the difference over one step for the floor that counts only the experts routed to.
  virtual uint64_t moe_experts_routed() = 0;

  // CUDA graphs: supports_graphs(), capture_graph(), stage_batch(), replay_graph(),
  // destroy_graph() and set_fixed_max_context() are Backend's (backend.h). Each graph owns the
  // pinned staging + device copy of its step's batch metadata, so eager steps may grow theirs
  // freely; a replay copies the latest staged metadata into the graph's staging first.
  // Programmatic dependent launch (Hopper): each kernel may start while the previous one drains.
  // On by default (SYV_PDL=0 in the environment turns it off); switchable for A/B timing. Applies
  // to launches made (or graphs captured) after the call.
  virtual void set_pdl(bool on) = 0;
  virtual bool pdl() const = 0;

  // Small-batch linear tuning (benchmarks): the GEMV launch shape (0..3, 4 = auto, the default;
  // see kernels.h) and the largest token count that takes the GEMV path instead of cuBLASLt
  // (0: always cuBLASLt).
  virtual void set_gemv_variant(int variant) = 0;
  virtual void set_gemv_max_tokens(int tokens) = 0;
  // Quantized weights (linear_quantized): the largest token count that takes the quantized GEMV
  // (packed weights streamed once per 4 tokens, dequantized in registers) instead of dequantizing
  // the weight to bf16 and running the dense GEMM (0: always that). Default kQuantGemvMaxTokens;
  // SYV_QUANT_GEMV_MAX_TOKENS sets the initial one (A/B timing).
  virtual void set_quant_gemv_max_tokens(int tokens) = 0;
  static constexpr int kQuantGemvMaxTokens = 16;
  // fp8 weights whose calls the fp8 GEMM takes (W8A8: Hopper, fp8 activations, 128x128 tiles):
  // above this many tokens linear_quantized() tries that GEMM before the GEMV, which streams the
  // weight once per 8 tokens (two token tiles from 9 to 16). On the Qwen3-8B shape on an H200
  // (2026-12-05, docs/performance.md) a 16-sequence fp8 decode step took 6.06 ms through the GEMV
  // against 5.00 ms for 32 sequences through the W8A8 GEMM, whose cuBLASLt time is flat from 17
  // to 128 tokens. Default kFp8GemvMaxTokens; SYV_FP8_GEMV_MAX_TOKENS sets the initial one (A/B
  // timing; kQuantGemvMaxTokens or more: the GEMV up to its own limit, as before 2026-12-06).
  virtual void set_fp8_gemv_max_tokens(int tokens) = 0;
  static constexpr int kFp8GemvMaxTokens = 8;
  // fp8 weights past the GEMV's share and up to this many tokens take the tensor-core GEMM
  // (W8A16, quant_gemm_mma.cu) before the fp8 GEMM where that GEMM would be cuBLASLt's and its
  // 128-row weight tiles are fewer than the SMs (ceil(N / 128) < SM count: q|k|v, o_proj and down
  // of the Qwen3-8B shape, not gate_up). On an H100 (2026-12-06, docs/performance.md) at 9-16
  // tokens cuBLASLt's W8A8 took 16.7-23.7 us on o_proj and q|k|v against 11.6-16.2 for the W8A16
  // GEMM. Where syv's own fp8 kernel takes the step (kFp8SkinnyMaxTokens, Hopper) the fp8 GEMM
  // stays first: fp8 steps of 12 / 16 sequences 1.2% / 2.5% faster so (H100, 2026-12-06 11:20).
  // Default kQuantGemmBeforeFp8MaxTokens; SYV_QUANT_GEMM_BEFORE_FP8_MAX_TOKENS sets the initial
  // one (0: the fp8 GEMM first, as before 2026-12-06).
  virtual void set_quant_gemm_before_fp8_max_tokens(int tokens) = 0;
  static constexpr int kQuantGemmBeforeFp8MaxTokens = 16;
  // Whether an add + RMSNorm before an fp8 weight's W8A8 GEMM (add_rmsnorm_linear and its SiLU
  // form, where linear_quantized() tries that GEMM first, in one row chunk of it) writes the
  // GEMM's e4m3 activations itself (cuda::launch_add_rmsnorm_fp8: the same bits), saving its
  // quantization launch: two of the four a layer of an fp8 decode step (the four took 0.47 ms of
  // a 64-sequence step's 7.76 in ncu, H100, 2026-12-06). On by default since it measured faster
  // (fp8 Qwen3-8B steps of 16 / 32 / 64 sequences 5.054 / 5.845 / 7.032 -> 5.024 / 5.798 / 6.964
  // ms, H100, 2026-12-06); SYV_FP8_NORM_QUANT=0 turns it off.
  virtual void set_fp8_norm_quant(bool on) = 0;
  // The W8A8 GEMM's row chunks of at most `tokens` tokens (fp8 weights of 128 x 128 tiles) run on
  // fp8_skinny_gemm.cu's kernel (clusters splitting K over the SMs, warpgroup MMA) instead of
  // cuBLASLt's (128 x 128 tiles: as many blocks as weight row tiles); 0: cuBLASLt's always (at
  // most cuda::kFp8SkinnyKernelMaxTokens, 64). Default kFp8SkinnyMaxTokens = 32: on an H100
  // (2026-12-06, docs/performance.md) fp8 Qwen3-8B decode steps of 16 / 32 sequences 4.887 /
  // 5.708 -> 4.806 / 5.629 ms with it (the default's own run: 4.901 / 5.674 -> 4.820 / 5.650),
  // while at 64 the step was 3% slower (6.786 -> 7.007 ms: cuBLASLt is faster there on q|k|v,
  // gate_up and down; with the kernel's tensor-map loads and pipelining, 0.5% slower: 6.809 ->
  // 6.844, docs/cuda-backend-notes.md "Run 26"). SYV_FP8_SKINNY_MAX_TOKENS sets the initial one.
  virtual void set_fp8_skinny_max_tokens(int tokens) = 0;
  static constexpr int kFp8SkinnyMaxTokens = 32;
  // The algorithm the fp8 GEMM has for T >= 1 tokens of an [N, K] weight (fp8 of 128 x 128
  // tiles, or int4 groups of 128 as e4m3: W4A8), in words, "" for none (benchmarks).
  virtual std::string fp8_gemm_algorithm(int64_t tokens, int64_t n, int64_t k,
                                         bool int4_weights) = 0;
  // Whether the tensor-core quantized GEMV of a gate_up projection runs the SiLU·mul in its
  // epilogue (up to kQuantGemvMaxTokens tokens) instead of silu_mul's own kernel. On by default;
  // SYV_QUANT_FUSE=0 starts with it off (A/B timing, tests).
  virtual void set_quant_fuse(bool on) = 0;
  // Whether the dequantize path (more tokens than the GEMVs take, shapes they do not take,
  // batch-invariant mode; the MoE experts' rows) dequantizes 8 columns a thread where the shape
  // allows instead of one element a thread: the same bf16 values either way, 2.6-3x faster on an
  // H100 (2026-12-05). On by default; SYV_QUANT_DEQUANT_VEC=0 starts with it off (A/B timing).
  virtual void set_quant_dequant_vectorized(bool on) = 0;
  // The largest token count that takes the tensor-core GEMM for quantized weights (the weight
  // decoded in registers, never written out: quant_gemm_mma.cu) for the calls the GEMVs do not
  // take and the fp8 GEMM does not apply to or comes after (kQuantGemmBeforeW4A8MaxTokens,
  // kQuantGemmBeforeFp8MaxTokens), instead of the dequantize path (0: never).
  // kQuantGemmMaxTokens by default (SYV_QUANT_GEMM_MAX_TOKENS sets the initial one). Not in
  // batch-invariant mode.
  virtual void set_quant_gemm_max_tokens(int tokens) = 0;
  // The share of the dequantization scratch of a weight announced at load as one the dequantize
  // path takes in row chunks (Backend::reserve_quantized_scratch; backend/cuda_choices.h: the
  // output projection, an int4 linear outside W4A8): at most this many bytes; a weight larger than
  // the scratch and this dequantizes in row chunks (tests set it small; kCudaDequantRowChunkCap by
  // default).
  virtual void set_dequant_row_chunk_cap(int64_t bytes) = 0;
  // Up to 128 tokens the GEMM beats the vectorized dequantize + cuBLASLt on every projection of
  // the Qwen3-8B shape on an H100; at 192 it loses on some (`syv bench quant-kernels`,
  // docs/performance.md).
  static constexpr int kQuantGemmMaxTokens = 128;
  // int4 weights with fp8 activations (W4A8) take that GEMM (W4A16: exact activations) before the
  // fp8 GEMM up to this many tokens: summed over the 8B shape's four projections on an H100, 1.9x
  // faster than W4A8 at 32 tokens and 1.17x at 64, 1.31x slower at 128 (docs/performance.md).
  static constexpr int kQuantGemmBeforeW4A8MaxTokens = 64;
  // Whether quantized MoE experts above the grouped GEMVs' 8 tokens (outside batch-invariant
  // mode) take the tiled path that decodes the routed experts' packed rows in registers
  // (moe_quant_gemm.cu) instead of dequantizing them to bf16 first: 2.0-2.3x faster than bf16
  // experts at Qwen3-Next's shape, 16-256 tokens, on an H100 (two runs). On by default;
  // SYV_QUANT_MOE_GEMM=0 starts with it off.
  virtual void set_quant_moe_gemm(bool on) = 0;
  // Which of the quantized paths ran, counted since the backend started (tests and benchmarks
  // check that the path they meant did run).
  struct QuantPathCalls {
    uint64_t silu_epilogues = 0;      // GEMVs with the SiLU·mul in their epilogue
    uint64_t gemm = 0;                // linears on the tensor-core GEMM (quant_gemm_mma.cu)
    uint64_t fp8_gemm = 0;            // linears on an fp8 GEMM (W8A8 / W4A8)
    uint64_t dequant_vectorized = 0;  // dequantizations (a linear, an MoE part) 8 columns a thread
    uint64_t moe_tiled = 0;           // MoE layers on the tiled path over packed rows
    uint64_t dequant_row_chunks = 0;  // linears dequantized in row chunks (either form below)
    uint64_t dequant_rows_in_place = 0;  // ... each chunk's GEMM writing its columns of out
    uint64_t fp8_norm_fused = 0;         // fp8 GEMMs on activations the norm before them wrote
    uint64_t fp8_skinny = 0;             // fp8 GEMMs (W8A8) on fp8_skinny_gemm.cu's kernel
  };
  virtual QuantPathCalls quant_path_calls() const = 0;
  // The gated delta rule's split (tests, benchmarks): sequences with at least `tokens` new tokens
  // take the chunked kernel, shorter ones the token-by-token one (0: always token by token).
  // Default kGdnChunkedFrom; batch-invariant mode always runs token by token (bit-identical
  // however a prompt is split into steps).
  virtual void set_gdn_chunked_from(int tokens) = 0;
  static constexpr int kGdnChunkedFrom = 16;
  // The chunked gated delta rule in three phases (gated_delta_phases.cu, the state walk on the
  // tensor cores) or the one-kernel walk of gated_delta_chunked.cu. On by default (a batch of many
  // short sequences takes the one kernel still: memory_plan.h kGdnPhasesSpareChunks);
  // SYV_GDN_PHASES=0 sets the initial state off (A/B timing, tests).
  virtual void set_gdn_phases(bool on) = 0;
  virtual uint64_t gdn_phases_calls() const = 0;  // gated_delta_rule() calls that took them
  // How copy_batch_async() moves a batch between this device and pinned host memory (a host tier
  // hit: one strided op per page, 2 x layers rows of ~128 KiB; backend/cuda/host_copy.h), per
  // copy stream (CopyDir):
  //   kCopyCalls     (the default both ways) one cudaMemcpy2DAsync per op (cudaMemcpyAsync for a
  //                  row): the copy engines move it, no SM is taken from the compute stream, and
  //                  the host pays one call a page
  //   kCopyEngines   one cudaMemcpy3DBatchAsync of all the ops (~2 us a page of host time); falls
  //                  back to the kernel, logged once, where the runtime or driver lacks the call.
  //                  With it a step once waited 44 ms for a write-ahead still in flight
  //   kGatherKernel  one kernel of 8 blocks reading and writing every row through mapped host
  //                  memory (89-94% of one large copy's rate against the engines' 97-98%; its
  //                  blocks slow the compute stream's kernels)
  // Measured on the H200 (docs/cuda-backend.md "Host tier copies"). SYV_HOST_COPY=PATH or IN:OUT
  // (each engines, kernel or calls; split = engines:kernel) sets the initial paths (A/B timing).
  enum class BatchCopyPath : uint8_t { kCopyEngines, kGatherKernel, kCopyCalls };
  virtual void set_batch_copy_path(CopyDir dir, BatchCopyPath path) = 0;
  virtual BatchCopyPath batch_copy_path(CopyDir dir) const = 0;
  // copy_batch_async() batches that went as one batch (one kernel or one cudaMemcpy3DBatchAsync)
  // so far, and those of them the gather kernel took (tests: which path a batch took).
  virtual uint64_t batched_copies() const = 0;
  virtual uint64_t gather_batches() const = 0;
  // Whether defer_copies() defers (Backend::defer_copies(); on by default since 2026-12-05,
  // SYV_DEFER_COPIES=0 clears it at start: docs/cuda-backend.md "Host tier copies"); off issues
  // what is deferred. deferred_copy_calls(): copies deferred so far (tests).
  virtual void set_defer_copies(bool on) = 0;
  virtual uint64_t deferred_copy_calls() const = 0;

  // Benchmarks only: from now on every allocate() is filled with uniform random bf16 values in
  // [-1, 1] (so a KV pool never holds zeros or NaN garbage); seed 0 turns it off.
  virtual void fill_random_on_allocate(uint64_t seed) = 0;
  virtual void reserve_attention_scratch(int64_t tokens, int64_t q_heads, int64_t head_dim,
                                         int64_t max_context) = 0;

  // Whether this backend has kernels for a quantized KV cache of dtype `t` (backend/
  // kv_cache_view.h): F8E4M3 and U4X2, written by kv_write / qkv_norm_rope_write and read by
  // paged_attention (head_dim 64, 128 or 256; int4 needs head_dim % 32 == 0).
  static bool quantized_kv_kernels(DType t) { return t == DType::F8E4M3 || t == DType::U4X2; }
};

// Number of CUDA devices (0 when there is no driver or no device; never aborts).
int cuda_device_count();

// Total memory of `device` in bytes (0 when it cannot be queried); creates no backend.
size_t cuda_device_total_memory(int device);

// The profiler's capture range (cudaProfilerStart / Stop): tools that start profiling off (ncu
// --profile-from-start off, nsys --capture-range=cudaProfilerApi) record only what runs between.
void cuda_profiler_range(bool start);

// Creates the backend on `device`; aborts with the CUDA error when the device cannot be used.
std::unique_ptr<CudaBackend> make_cuda_backend(int device = 0);

}  // namespace syv
