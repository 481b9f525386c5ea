#include "backend/backend.h"

#include <cstdlib>
#include <cstring>

namespace syv {

DeviceBuffer::~DeviceBuffer() {
  if (backend_ && data_) backend_->release(data_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (backend_ && data_) backend_->release(data_);
    backend_ = other.backend_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.backend_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

AvailableMemory Backend::available_memory() {
  return host_available_memory();
}

DeviceFacts Backend::device_facts() {
  DeviceFacts facts = host_device_facts();
  facts.backend = name();
  return facts;
}

CopyEvent Backend::copy_async(void* dst, const void* src, size_t bytes, CopyDir dir) {
  (void)dir;  // synchronous: both directions are the same "stream"
  synchronize();
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return CopyEvent();
}

CopyEvent Backend::copy_batch_async(const std::vector<CopyOp>& ops, CopyDir dir) {
  CopyEvent last;
  for (const CopyOp& op : ops)
    for (size_t r = 0; r < op.rows; ++r)
      last = copy_async(op.row_dst(r), op.row_src(r), op.bytes, dir);
  return last;
}

Result<PinnedBuffer> Backend::allocate_pinned(size_t bytes) {
  if (bytes == 0) return PinnedBuffer();
  void* data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (data == nullptr) {
    return Status::Error("host memory: cannot allocate " + std::to_string(bytes >> 20) +
                         " MiB for the host tier");
  }
  return PinnedBuffer(data, bytes, [](void* p) { std::free(p); });
}

Result<PinnedBuffer> Backend::pin_host_pages(HostPages pages) {
  const size_t bytes = pages.bytes();
  return PinnedBuffer(pages.release(), bytes, [bytes](void* p) { free_host_pages(p, bytes); });
}

}  // namespace syv

namespace syv {

void Backend::linear_quantized(const Tensor& x, const Weight& w, const Tensor& bias, Tensor& out) {
  (void)x, (void)bias, (void)out;
  refuse_weight("linear", w);
}

void Backend::moe_experts_quantized(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                    const Weight& gate_up, const Weight& down, Tensor& out) {
  (void)x, (void)ids, (void)weights, (void)out;
  refuse_weight("moe_experts", gate_up.format != WeightFormat::kDense ? gate_up : down);
}

void Backend::refuse_weight(const char* op, const Weight& w) const {
  SYV_FATAL() << "backend " << name() << " " << op << ": " << w.describe()
              << " are not supported yet";
  std::abort();
}

void Backend::refuse_kv(const char* op, const KvCacheView& cache) const {
  SYV_FATAL() << "backend " << name() << " " << op << ": KV cache dtype " << dtype_name(cache.dtype)
              << (cache.k_scales.empty() ? "" : " with scales") << " is not supported yet";
  std::abort();
}

void Backend::kv_write_quantized(const Tensor&, const Tensor&, const KvCacheView& cache,
                                 const BatchMeta&) {
  refuse_kv("kv_write", cache);
}

void Backend::paged_attention_quantized(const Tensor&, const KvCacheView& cache, float,
                                        const BatchMeta&, Tensor&) {
  refuse_kv("paged_attention", cache);
}

}  // namespace syv
