// The CPU backend: the plain fp32 reference every other backend is tested against.
//
//  * Activations are f32; the KV cache is f32, fp8 or int4 (--kv-cache-dtype). Weights are
//    widened to f32 at load (weight_dtype()), so linear() is OpenBLAS: sgemv per row up to 8
//    rows (each row then equals its one-token row bit for bit), one sgemm above; f16/bf16
//    weights still work (converted per call, slower).
//  * Row-wise ops (norms, RoPE, attention) split rows over ThreadPool::global().
//  * "Device" memory is host memory (64-byte aligned); upload/download are memcpy.
// The op bodies live in files named for their concern: cpu_memory.cpp, cpu_elementwise.cpp,
// cpu_norm.cpp, cpu_linear.cpp, cpu_attention.cpp, cpu_kv_quantized.cpp.
#pragma once

#include <functional>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_hybrid_ops.h"
#include "backend/host_batch_meta.h"

namespace syv {

// Not final: tests/unit/deferred_copy_backend.h derives a copy stream that lands late.
class CpuBackend : public Backend {
 public:
  CpuBackend() = default;
  // keep_float_weights: float weights stay in their file dtype (bf16 / f16) instead of f32, half
  // the memory at the cost of widening each weight per call (the same values and products):
  // `syv quantize --calibration-file`, whose float model may be large.
  explicit CpuBackend(bool keep_float_weights) : keep_float_weights_(keep_float_weights) {}

  std::string name() const override { return "cpu"; }
  bool supports_hybrid_ops() const override { return true; }
  bool supports_moe_ops() const override { return true; }
  bool supports_quantized_weights() const override { return true; }   // cpu_quantized.cpp
  bool keeps_moe_experts_quantized() const override { return true; }  // cpu_quantized.cpp
  bool takes_permuted_act_order() const override { return true; }     // dequantize_rows
  DType activation_dtype() const override { return DType::F32; }
  DType weight_dtype(DType file) const override {
    return keep_float_weights_ && (file == DType::BF16 || file == DType::F16) ? file : DType::F32;
  }
  // f32 KV, and the quantized KV dtypes (fp8 e4m3, int4 u4x2) of cpu_kv_quantized.cpp.
  bool supports_kv_dtype(DType t) const override {
    return t == DType::F32 || t == DType::F8E4M3 || t == DType::U4X2;
  }

  DeviceBuffer allocate(size_t bytes) override;
  void release(void* data) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void synchronize() override {}

  BatchMeta prepare_batch(const Batch& batch, int32_t page_size) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void rmsnorm(const Tensor& x, const Tensor& w, float eps, NormKind kind, Tensor& out) override;
  void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, NormKind kind,
                   Tensor& out) override;
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    NormKind kind, const RopeParams& rope, const BatchMeta& meta) override;
  void kv_write(const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                const BatchMeta& meta) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                       const BatchMeta& meta, Tensor& out) override;
  void gather_rows(const Tensor& x, const BatchMeta& meta, Tensor& out) override;

  // Batch-invariant mode: linear() and the MoE experts take cpu::linear_invariant() at every T
  // (OpenBLAS rows change with T); every other op already computes each row on its own.
  // Called by every dense linear() (and so every fused op built on it) with its input x [T, K]
  // (f32) and weight w [N, K] before the product, and by moe_experts() for each expert with its
  // routed rows and its slice of the stacked weights (cpu::moe_experts): `syv quantize
  // --calibration-file` gathers each weight's input statistics this way. Empty (the default):
  // nothing is called. (moe_experts_quantized() reports nothing: its slices are scratch copies.)
  using LinearObserver = cpu::LinearObserver;
  void set_linear_observer(LinearObserver observer) { linear_observer_ = std::move(observer); }

  void set_batch_invariant(bool on) override { batch_invariant_ = on; }
  bool batch_invariant() const override { return batch_invariant_; }

  // Hybrid ops: thin overrides forwarding to cpu_hybrid_ops.h (bodies in cpu_hybrid_ops.cpp).
  void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& conv_state,
                          Tensor& save_to, const BatchMeta& meta, Tensor& out) override;
  void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log,
                        const Tensor& dt_bias, const GdnShape& shape, Tensor& state,
                        Tensor& save_to, const BatchMeta& meta, Tensor& out) override;
  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Tensor& w, float eps,
                     Tensor& out) override;
  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) override;
  void moe_topk(const Tensor& logits, int32_t top_k, bool renormalize, Tensor& ids,
                Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, Tensor& out) override;

 protected:
  // fp8 block-scaled and int4 group-quantized weights (backend/weight.h): the reference.
  // Dequantizes the weight into f32 row blocks and runs linear() on each (cpu_quantized.cpp).
  void linear_quantized(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& out) override;
  // The experts this call routes to, dequantized to f32 (compacted, ids renumbered) and run
  // through the dense moe_experts(): the same arithmetic as the model on the dequantized weights.
  void moe_experts_quantized(const Tensor& x, const Tensor& ids, const Tensor& weights,
                             const Weight& gate_up, const Weight& down, Tensor& out) override;
  // fp8 and int4 KV (backend/kv_cache_view.h): kv_quant.h's quantizers, and attention dequantizing
  // one key/value row at a time (cpu_kv_quantized.cpp).
  void kv_write_quantized(const Tensor& k, const Tensor& v, const KvCacheView& cache,
                          const BatchMeta& meta) override;
  void paged_attention_quantized(const Tensor& q, const KvCacheView& cache, float scale,
                                 const BatchMeta& meta, Tensor& out) override;

 private:
  Batch batch_copy_;    // the batch of the last prepare_batch() (BatchMeta::host points here)
  HostBatchMeta host_;  // arrays the BatchMeta tensors view
  std::vector<int32_t> token_ids_, positions_, seq_starts_, logit_rows_;
  bool batch_invariant_ = false;
  bool keep_float_weights_ = false;
  LinearObserver linear_observer_;
};

// Small helpers shared by the op files.
namespace cpu {
// Reads element i of a float tensor of dtype f32/f16/bf16 as f32.
float load_f32(const Tensor& t, int64_t i);
// x [..] must be f32 (CPU activations); aborts with the op name otherwise.
void check_f32(const Tensor& t, const char* op, const char* arg);
// y = x * rsqrt(mean(x²) + eps) * (w or 1 + w), one row of n, in fp32. `w` may be any float dtype.
void rmsnorm_row(const float* x, const Tensor& w, float eps, NormKind kind, int64_t n, float* y);
// out[t, n] = sum_k x[t, k] * w[n, k] (x [T, K], w [N, K], out [T, N], f32), every element summed
// in one fixed order whatever T is (batch-invariant mode; cpu_linear_invariant.cpp).
void linear_invariant(const float* x, const float* w, float* out, int64_t T, int64_t N, int64_t K);
}  // namespace cpu

}  // namespace syv
