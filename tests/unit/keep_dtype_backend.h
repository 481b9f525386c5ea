// A backend with memory only (ops abort), keeping weights in one chosen dtype whatever the file
// holds, counting the bytes allocated, and answering available_memory() with a set figure: for
// the loader's dtype paths and the start-up memory check.
#pragma once

#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"

namespace syv {

// Ops are not needed by the loader and abort.
[[noreturn]] inline void no_ops() {
  SYV_FATAL() << "KeepDtypeBackend has memory only";
  std::abort();
}
class KeepDtypeBackend final : public Backend {
 public:
  explicit KeepDtypeBackend(DType keep) : cpu_(make_cpu_backend()), keep_(keep) {}
  std::string name() const override { return "keep-" + std::string(dtype_name(keep_)); }
  DType activation_dtype() const override { return DType::F32; }
  DType weight_dtype(DType) const override { return keep_; }
  AvailableMemory available_memory() override { return available_; }
  void set_available_memory(int64_t bytes) { available_ = {bytes, "test memory"}; }
  // Recurrent state dtypes the store may use besides f32 (as CUDA takes bf16).
  bool supports_state_dtype(DType t) const override { return t == DType::F32 || t == state_; }
  void set_state_dtype(DType t) { state_ = t; }
  // Whether prepare_model() lets quantized checkpoints load (their bytes are counted; the ops
  // still abort). Off by default, as on CUDA today.
  bool supports_quantized_weights() const override { return quantized_; }
  void set_quantized_weights(bool on) { quantized_ = on; }
  int64_t allocated_bytes() const { return allocated_; }
  DeviceBuffer allocate(size_t bytes) override {
    allocated_ += static_cast<int64_t>(bytes);
    DeviceBuffer b = cpu_->allocate(bytes);
    void* p = b.data();
    owned_.push_back(std::move(b));
    return DeviceBuffer(this, p, bytes);
  }
  void release(void*) override {}  // owned_ frees them
  void upload(void* dst, const void* src, size_t n) override { cpu_->upload(dst, src, n); }
  void download(void* dst, const void* src, size_t n) override { cpu_->download(dst, src, n); }
  void copy(void* dst, const void* src, size_t n) override { cpu_->copy(dst, src, n); }
  void fill_zero(void* dst, size_t n) override { cpu_->fill_zero(dst, n); }
  void synchronize() override {}
  BatchMeta prepare_batch(const Batch&, int32_t) override { no_ops(); }
  void embedding(const Tensor&, const Tensor&, Tensor&) override { no_ops(); }
  void rmsnorm(const Tensor&, const Tensor&, float, NormKind, Tensor&) override { no_ops(); }
  void add_rmsnorm(Tensor&, const Tensor&, const Tensor&, float, NormKind, Tensor&) override {
    no_ops();
  }
  void linear(const Tensor&, const Tensor&, const Tensor&, Tensor&) override { no_ops(); }
  void silu_mul(const Tensor&, Tensor&) override { no_ops(); }
  void add(const Tensor&, const Tensor&, Tensor&) override { no_ops(); }
  void qk_norm_rope(Tensor&, Tensor&, const Tensor&, const Tensor&, float, NormKind,
                    const RopeParams&, const BatchMeta&) override {
    no_ops();
  }
  void kv_write(const Tensor&, const Tensor&, Tensor&, Tensor&, const BatchMeta&) override {
    no_ops();
  }
  void paged_attention(const Tensor&, const Tensor&, const Tensor&, float, const BatchMeta&,
                       Tensor&) override {
    no_ops();
  }
  void gather_rows(const Tensor&, const BatchMeta&, Tensor&) override { no_ops(); }

 private:
  std::unique_ptr<Backend> cpu_;
  DType keep_;
  std::vector<DeviceBuffer> owned_;
  AvailableMemory available_{-1, "test memory"};
  int64_t allocated_ = 0;
  DType state_ = DType::F32;
  bool quantized_ = false;
};

}  // namespace syv
