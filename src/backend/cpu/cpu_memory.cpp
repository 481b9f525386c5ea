// CPU backend: memory, batch metadata, and the factory.
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend.h"

namespace syv {

DeviceBuffer CpuBackend::allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer(this, nullptr, 0);
  size_t rounded = (bytes + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded);
  SYV_CHECK(data != nullptr) << "CPU backend: out of memory allocating " << bytes << " bytes";
  return DeviceBuffer(this, data, bytes);
}

void CpuBackend::release(void* data) {
  std::free(data);
}

void CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}
void CpuBackend::fill_zero(void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

BatchMeta CpuBackend::prepare_batch(const Batch& batch, int32_t page_size) {
  host_ = build_host_batch_meta(batch, page_size);
  batch_copy_ = batch;
  token_ids_ = batch.token_ids;
  positions_ = batch.positions;
  seq_starts_ = batch.seq_starts.empty() ? std::vector<int32_t>{0} : batch.seq_starts;
  logit_rows_ = batch.logit_rows;
  const int64_t T = batch.num_tokens();
  const int64_t S = batch.num_seqs();
  auto i32 = [](std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
    return Tensor(v.data(), DType::I32, dims);
  };
  BatchMeta meta;
  meta.host = &batch_copy_;
  meta.token_ids = i32(token_ids_, {T});
  meta.positions = i32(positions_, {T});
  meta.seq_starts = i32(seq_starts_, {S + 1});
  meta.context_lens = i32(host_.context_lens, {S});
  meta.page_table = i32(host_.page_table,
                        {static_cast<int64_t>(host_.page_table.size()) / host_.max_pages_per_seq,
                         host_.max_pages_per_seq});
  meta.slot_mapping = i32(host_.slot_mapping, {T});
  meta.token_seq = i32(host_.token_seq, {T});
  meta.logit_rows = i32(logit_rows_, {static_cast<int64_t>(logit_rows_.size())});
  meta.state_slots = i32(host_.state_slots, {S});
  meta.state_saves = i32(host_.state_saves, {static_cast<int64_t>(host_.state_saves.size())});
  meta.num_state_saves = batch.num_state_saves();
  meta.page_size = page_size;
  meta.max_seq_len = host_.max_seq_len;
  meta.max_context_len = host_.max_context_len;
  return meta;
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

namespace cpu {

float load_f32(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32:
      return t.as<const float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.as<const uint16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.as<const uint16_t>()[i]);
    default:
      SYV_FATAL() << "CPU backend: expected a float tensor, found " << dtype_name(t.dtype);
  }
}

void check_f32(const Tensor& t, const char* op, const char* arg) {
  SYV_CHECK(t.dtype == DType::F32)
      << "CPU backend " << op << ": " << arg << " must be f32, found " << dtype_name(t.dtype);
}

}  // namespace cpu

}  // namespace syv
