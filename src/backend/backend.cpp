#include "backend/backend.h"

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

CopyEvent Backend::copy_async(void* dst, const void* src, size_t bytes) {
  synchronize();
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return CopyEvent();
}

}  // namespace syv
