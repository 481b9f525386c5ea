// The CUDA bulk uploader: kSlots pinned staging buffers of kChunk bytes used in turn. For each
// chunk the host waits until its slot's previous copy is done, fills it on the global thread pool
// (produce_in_parallel) and enqueues an async host-to-device copy on the uploader's own stream, so
// filling chunk k + 1 overlaps copying chunk k. finish() waits for the stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/bulk_upload.h"
#include "backend/cuda/cuda_check.h"

namespace syv {
namespace {

constexpr size_t kChunk = size_t{16} << 20;
constexpr int kSlots = 4;

class CudaBulkUploader final : public BulkUploader {
 public:
  explicit CudaBulkUploader(int device) {
    SYV_CUDA_CHECK(cudaSetDevice(device));
    SYV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (Slot& s : slots_) {
      SYV_CUDA_CHECK(cudaMallocHost(&s.host, kChunk));
      SYV_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    }
  }
  ~CudaBulkUploader() override {
    cudaStreamSynchronize(stream_);
    for (Slot& s : slots_) {
      cudaFreeHost(s.host);
      cudaEventDestroy(s.done);
    }
    cudaStreamDestroy(stream_);
  }
  CudaBulkUploader(const CudaBulkUploader&) = delete;
  CudaBulkUploader& operator=(const CudaBulkUploader&) = delete;

  void write(void* dst, size_t bytes, const Produce& produce) override {
    for (size_t off = 0; off < bytes; off += kChunk) {
      Slot& s = slots_[next_];
      next_ = (next_ + 1) % kSlots;
      const size_t n = std::min(kChunk, bytes - off);
      SYV_CUDA_CHECK(cudaEventSynchronize(s.done));  // its previous copy has drained
      produce_in_parallel(produce, off, n, s.host);
      // cudaMemcpyDefault: dst may be host-resident (Backend::allocate_host_resident).
      SYV_CUDA_CHECK(
          cudaMemcpyAsync(static_cast<uint8_t*>(dst) + off, s.host, n, cudaMemcpyDefault, stream_));
      SYV_CUDA_CHECK(cudaEventRecord(s.done, stream_));
    }
  }
  void finish() override { SYV_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  struct Slot {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
  };
  cudaStream_t stream_ = nullptr;
  Slot slots_[kSlots];
  int next_ = 0;
};

}  // namespace

std::unique_ptr<BulkUploader> make_cuda_bulk_uploader(int device) {
  return std::make_unique<CudaBulkUploader>(device);
}

}  // namespace syv
