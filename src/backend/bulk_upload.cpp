// make_bulk_uploader(): the CUDA uploader (backend/cuda/bulk_upload_cuda.cpp) for a CudaBackend,
// otherwise a host-staged one that goes through Backend::upload().
#include "backend/bulk_upload.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#ifdef SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace syv {

#ifdef SYV_HAVE_CUDA
std::unique_ptr<BulkUploader> make_cuda_bulk_uploader(int device);  // bulk_upload_cuda.cpp
#endif

void produce_in_parallel(const BulkUploader::Produce& produce, size_t offset, size_t n,
                         void* host) {
  constexpr size_t kUnit = 64;
  const auto units = static_cast<int64_t>((n + kUnit - 1) / kUnit);
  ThreadPool::global().parallel_for(
      units,
      [&](int64_t begin, int64_t end) {
        const size_t b = static_cast<size_t>(begin) * kUnit;
        const size_t e = std::min(n, static_cast<size_t>(end) * kUnit);
        produce(offset + b, e - b, static_cast<uint8_t*>(host) + b);
      },
      int64_t{(1 << 20) / kUnit});  // at least 1 MiB per task
}

namespace {

// Any backend: chunks produced into one host buffer and handed to Backend::upload().
class HostStagedUploader final : public BulkUploader {
 public:
  explicit HostStagedUploader(Backend& backend) : backend_(backend) {}
  void write(void* dst, size_t bytes, const Produce& produce) override {
    constexpr size_t kChunk = size_t{16} << 20;
    if (staging_.size() < std::min(bytes, kChunk)) staging_.resize(std::min(bytes, kChunk));
    for (size_t off = 0; off < bytes; off += kChunk) {
      const size_t n = std::min(kChunk, bytes - off);
      produce_in_parallel(produce, off, n, staging_.data());
      backend_.upload(static_cast<uint8_t*>(dst) + off, staging_.data(), n);
    }
  }
  void finish() override { backend_.synchronize(); }

 private:
  Backend& backend_;
  std::vector<uint8_t> staging_;
};

}  // namespace

std::unique_ptr<BulkUploader> make_bulk_uploader(Backend& backend) {
#ifdef SYV_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) {
    return make_cuda_bulk_uploader(cuda->device());
  }
#endif
  return std::make_unique<HostStagedUploader>(backend);
}

}  // namespace syv
